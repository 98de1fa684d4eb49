"""The `eagle3-nb` subcommands: each takes the parsed arguments and returns the exit code
(0 ok, 1 findings that fail, 2 bad input: cli.main turns Eagle3NbError into that). Imports
stay lazy, so `inspect` never imports torch, plotly or transformers."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from eagle3_nb.defaults import DEFAULT_NUM_STEPS
from eagle3_nb.engines import wiring_name
from eagle3_nb.engines.advice import with_advice
from eagle3_nb.engines.registry import engines
from eagle3_nb.errors import Eagle3NbError
from eagle3_nb.io.files import json_text

EXIT_OK, EXIT_FINDINGS, EXIT_BAD_INPUT = 0, 1, 2


def _inputs(args) -> dict[str, str]:
    """What a finding's command may fill in from this command's own arguments."""
    given = {"TARGET_CONFIG": getattr(args, "target_config", None),
             "TARGET_DIR": getattr(args, "target", None), "LOG": getattr(args, "log", None),
             "TOKENIZER": getattr(args, "tokenizer", None),
             "OBSERVED": getattr(args, "observed", None)}
    if given["TARGET_CONFIG"] and not given["TARGET_DIR"]:
        folder = Path(given["TARGET_CONFIG"])
        folder = folder if folder.is_dir() else folder.parent
        if next(folder.glob("*.safetensors"), None):  # its weights are there: a target dir
            given["TARGET_DIR"] = str(folder)
    if given["TARGET_DIR"] and not given["TARGET_CONFIG"]:
        given["TARGET_CONFIG"] = str(Path(given["TARGET_DIR"]) / "config.json")
    return {k: str(v) for k, v in given.items() if v}


def cmd_inspect(args) -> int:
    from eagle3_nb.checks.load import inspect_checkpoint

    result = inspect_checkpoint(args.path, args.engine, args.target_config,
                                stats=not args.no_stats, stats_budget=args.stats_budget,
                                launch=args.launch, log=args.log)
    data = with_advice(result.to_json(), _inputs(args))
    if args.json:
        sys.stdout.write(json_text(data) + "\n")
    else:
        from eagle3_nb.viz.text import inspection_table
        print(inspection_table(data))
    return EXIT_FINDINGS if result.has_errors else EXIT_OK


def cmd_convert(args) -> int:
    from eagle3_nb.convert import convert_checkpoint
    from eagle3_nb.checks.load import inspect_checkpoint
    from eagle3_nb.viz.text import evidence_lines

    result = convert_checkpoint(args.src, args.dst, to=args.to, engine=args.engine,
                                fix_d2t=args.fix_d2t)
    # the copy proof says the bytes arrived; whether the draft is any good is inspect's answer
    after = inspect_checkpoint(result.dst, [args.engine] if args.engine else None,
                               args.target_config).to_json()
    # the draft's own errors, and the named engine's; without --engine, what the newest
    # releases make of the new layout is shown, not held against it
    errors = sorted({f["code"] for f in after["findings"] if f["severity"] == "error"
                     and (f["engine"] is None or args.engine)})
    summary = {"dst": str(result.dst), "verified": result.verified, "renames": result.renames,
               "config_changes": result.config_changes, "warnings": result.warnings,
               "inspect": {e["profile"]: e["verdict"] for e in after["engines"]},
               "draft": {"overall": after["overall"], "errors": errors,
                         "unchecked": after["unchecked"]},
               "had": _convert_evidence(after)}
    if args.json:
        sys.stdout.write(json_text(summary) + "\n")
    else:
        fixed = " but the repaired d2t" if "d2t_after" in result.checks else ""
        print(f"wrote {result.dst} ({len(result.renames)} keys renamed); copy "
              + (f"verified: every tensor byte-identical{fixed}" if result.verified
                 else "NOT verified"))
        print("\n".join(evidence_lines(summary["had"])))
        for w in result.warnings:
            print(f"  warning: {w}")
        print(f"the converted draft, inspected: {'errors' if errors else after['overall']}"
              + (f" ({', '.join(errors)}: eagle3-nb inspect {result.dst})" if errors else ""))
        # "ok" only knowing the target: its layers, class and context can still fail (#25)
        unknown = "" if args.target_config else " as far as checked (no --target-config)"
        for profile, verdict in summary["inspect"].items():
            print(f"  {profile:<16} {verdict}{unknown if verdict == 'ok' else ''}")
    return EXIT_OK if result.verified and not errors else EXIT_FINDINGS


def _convert_evidence(after: dict) -> dict[str, str]:
    """What the copy's verdicts rest on (findings.evidence_line): inspect's evidence on the
    copy, less the launch command and the log, which convert takes no flag for."""
    had = after.get("evidence") or {}
    return {k: had[k] for k in ("checkpoint", "target config", "target weights", "engine release")
            if k in had}


def cmd_vocab(args) -> int:
    from eagle3_nb.checks.vocab import check_vocab

    from eagle3_nb.viz.text import vocab_text

    return _emit(args, check_vocab(args.path, args.tokenizer, args.corpus,
                                   args.engine).to_json(), vocab_text)


def cmd_data(args) -> int:
    from eagle3_nb.checks.data import check_data
    from eagle3_nb.viz.data import data_text

    for flag, value in (("--max-rows", args.max_rows), ("--max-length", args.max_length),
                        ("--serve-context", args.serve_context)):
        if value is not None and value < 1:
            raise Eagle3NbError(f"{flag} must be at least 1", flag, "pass a positive count")
    thinking = {"on": True, "off": False, None: None}[args.serve_thinking]
    data = check_data(args.path, args.tokenizer, args.template, args.chat_template, thinking,
                      args.draft, args.target, args.prompts, args.max_rows, args.max_length,
                      args.serve_context, args.config,
                      progress=not args.no_progress and sys.stderr.isatty(),
                      hidden_states=args.hidden_states, run_target=args.run_target)
    return _emit(args, data.to_json(), data_text)


def _emit(args, data: dict, render, checkpoint: str | None = None) -> int:
    """A check's JSON with --json, else its text, each finding with its next step and command;
    exit 1 on an error finding."""
    data = with_advice(data, _inputs(args), checkpoint)
    if args.json:
        sys.stdout.write(json_text(data) + "\n")
    else:
        print(render(data))
    return EXIT_FINDINGS if any(f["severity"] == "error" for f in data["findings"]) else EXIT_OK


def cmd_log(args) -> int:
    from eagle3_nb.checks.log import check_log
    from eagle3_nb.viz.text import log_text

    return _emit(args, check_log(args.file, args.engine).to_json(), log_text)


def cmd_accept(args) -> int:
    from eagle3_nb.checks.acceptance import acceptance_evidence, measure_acceptance
    from eagle3_nb.checks.options import AcceptanceOptions
    from eagle3_nb.io.resources import samples_dir
    from eagle3_nb.session import named_wirings
    from eagle3_nb.viz.text import evidence_lines

    if not args.checkpoint or not (args.target or args.hidden_states):
        raise Eagle3NbError("accept needs CHECKPOINT and --target DIR or --hidden-states DIR",
                            "accept", "for example: eagle3-nb accept DRAFT --target TARGET_DIR")
    options = AcceptanceOptions.from_args(args)
    if options.hidden_states:
        return _accept_on_dumps(args, options)
    if args.list_wirings:
        for name, w in named_wirings(args.checkpoint, args.target, args.engine).presets.items():
            print(f"{name:<30} {w.note}")
        return EXIT_OK
    prompts = args.prompts or str(samples_dir() / "prompts.jsonl")
    if options.what_if:
        return _accept_what_if(args, options, prompts)
    if options.engines and options.wiring == "trained":  # the named releases beside trained
        from eagle3_nb.engines import resolve_engine

        named = dict.fromkeys(resolve_engine(e).key for e in options.engines)
        return _accept_what_if(args, options, prompts, ["trained", *named])
    result = measure_acceptance(args.checkpoint, args.target, prompts, options)
    stats = {**result.stats(), "had": acceptance_evidence(args.target, prompts, options)}
    if args.json:
        sys.stdout.write(json_text(stats) + "\n")
    else:
        print("\n".join(evidence_lines(stats["had"])))
        print(f"wiring {stats['wiring']}: mean accept length {stats['mean_accept_length']:.3f}"
              f"{_se(stats['mean_accept_length_se'])} ({stats['drafting']['label']}, from "
              f"{stats['drafting']['source']}; {stats['n_verify_steps']} verify steps, "
              f"{stats['n_samples']} prompts, {args.max_new_tokens} new tokens each; "
              f"{stats.get('threads', 'torch default threads')})")
        print("per-position acceptance: " + ", ".join(
            f"{a:.3f}{_se(se)}" for a, se in zip(stats["per_position_acceptance"],
                                                 stats["per_position_acceptance_se"])))
    return EXIT_OK


def _se(se: float | None) -> str:
    return f" ± {se:.3f}" if se is not None else ""


def _accept_what_if(args, options, prompts: str, wirings: list[str] | None = None) -> int:
    from eagle3_nb.checks.acceptance import what_if
    from eagle3_nb.viz.text import evidence_lines

    report = what_if(args.checkpoint, args.target, prompts, options, wirings)
    if args.json:
        sys.stdout.write(json_text(report) + "\n")
        return EXIT_OK
    print("\n".join([report["evidence"], *evidence_lines(report["had"])]))
    print(f"{report['drafting']['label']} (from {report['drafting']['source']}), "
          f"{report['n_samples'] or 'every'} prompts, {report['max_new_tokens']} new tokens each; "
          f"{report['threads']}; ± one standard error by prompt")
    print(f"{'wiring':<30} {'accept len':>10} {'± se':>6} {'vs trained':>17} {'vs observed':>11}"
          "  note")
    for row in report["rows"]:
        mal = "crashes" if row["error"] else f"{row['mean_accept_length']:.3f}"
        se = f"{row['standard_error']:.3f}" if row["standard_error"] is not None else ""
        versus = (row["vs_trained"] or {}).get("verdict") or ""
        mark = "ruled out" if row["ruled_out"] else \
            {True: "consistent", False: "", None: ""}[row["consistent"]]
        print(f"{row['wiring']:<30} {mal:>10} {se:>6} {versus:>17} {mark:>11}  "
              f"{row['ruled_out'] or row['error'] or row['note']}")
    print(report["explanation"])
    return EXIT_OK


def _accept_on_dumps(args, options) -> int:
    """No target head: teacher-forced scoring against the recorded tokens, labelled as such."""
    from eagle3_nb.checks.acceptance import acceptance_evidence, score_on_dumps
    from eagle3_nb.viz.text import evidence_lines

    result = score_on_dumps(args.checkpoint, options.hidden_states,
                            options.num_steps or DEFAULT_NUM_STEPS, [options.wiring],
                            options.n_samples, options.device, args.target)[0]
    result = {**result, "had": acceptance_evidence(args.target, None, options)}
    if result.get("error") or result.get("unmeasured"):
        why = result.get("error") or result["unmeasured"]
        raise Eagle3NbError(f"wiring {options.wiring}: {why}", "--wiring",
                            "on dumps: a wiring whose layers the dump holds (trained, "
                            "single_layer, the engines that capture them)")
    if args.json:
        sys.stdout.write(json_text(result) + "\n")
    else:
        print("\n".join(evidence_lines(result["had"])))
        print(f"{result['metric']}, wiring {result['wiring']}, {result['n_samples']} dumps: "
              + ", ".join(f"step {j}: {a:.3f}" for j, a in enumerate(result["per_step_accuracy"])))
    return EXIT_OK


def cmd_report(args) -> int:
    from eagle3_nb.report.options import ReportOptions
    from eagle3_nb.report.run import run_report

    def path(p):
        return None if p is None else Path(p)
    _report_drafting(args)
    opts = ReportOptions(
        checkpoint=Path(args.checkpoint), out=path(args.out), target=path(args.target),
        hidden_states=path(args.hidden_states), engines=args.engine,
        target_config=path(args.target_config), tokenizer=path(args.tokenizer),
        corpus=path(args.corpus), prompts=path(args.prompts), observed=args.observed,
        train_data=path(args.train_data),
        launch=args.launch, log=path(args.log), device=args.device, num_steps=args.num_steps,
        topk=args.topk,
        num_draft_tokens=args.num_draft_tokens,
        wiring=wiring_name(args.wiring) if args.wiring else args.wiring,
        extra=dict(args.parameter), fail_on=args.fail_on, overwrite=args.overwrite,
        command=["eagle3-nb", *args.argv], redact_paths=args.redact_paths,
        markdown=args.markdown)
    summary = run_report(opts)
    _print_report(summary)
    if args.markdown:
        print(f"markdown: {Path(summary['out']) / 'summary.md'}")
    return summary["exit_code"]


def _report_drafting(args) -> None:
    """Drafting flags notebook 04 could not simulate are refused before the report starts (at
    the kit's batch and length; counts below 1 are the preflight's to refuse)."""
    from eagle3_nb.config import SETTINGS_ENGINES_RUN, drafting_problem

    given = (args.num_steps, args.topk, args.num_draft_tokens)
    if all(v is None for v in given) or any(v is not None and v < 1 for v in given):
        return
    problem = drafting_problem(args.num_steps or DEFAULT_NUM_STEPS, args.topk or 1,
                               args.num_draft_tokens)
    if problem:
        raise Eagle3NbError(f"cannot simulate these drafting settings: {problem}",
                            "--num-steps / --topk / --num-draft-tokens",
                            SETTINGS_ENGINES_RUN)


def _print_report(summary: dict) -> None:
    out = Path(summary["out"])
    print(f"verdict: {summary['verdict']['text']}")
    if summary["verdict"].get("line"):
        print(f"engines: {summary['verdict']['line']}")
    print(f"report:  {out / 'index.html'}")
    print(f"summary: {out / 'summary.json'}")


def cmd_demo(args) -> int:
    from eagle3_nb.report.run import run_demo

    flags = " --redact-paths" * args.redact_paths + " --markdown" * args.markdown
    print("eagle3-nb report data_samples/drafts/layers0-flat --target data_samples/target "
          f"--out {args.out}{flags} ...", file=sys.stderr, flush=True)
    summary = run_demo(Path(args.out), redact_paths=args.redact_paths, markdown=args.markdown)
    _print_report(summary)
    if args.markdown:
        print(f"markdown: {Path(summary['out']) / 'summary.md'}")
    return EXIT_FINDINGS if summary["verdict"]["failed"] else EXIT_OK


def cmd_notebooks(args) -> int:
    """The packaged notebooks into DIR, which must not exist yet: staged beside it, then renamed
    (never a half-written DIR, never a file of someone else's overwritten)."""
    import shutil

    from eagle3_nb.io.files import OWNER_NAME, remove_stale_staging, rename_noreplace, staging_dir
    from eagle3_nb.io.resources import notebooks_dir

    dest = Path(args.dir).absolute()
    if os.path.lexists(dest):
        raise Eagle3NbError("the destination exists", str(dest), "name a new directory")
    if not dest.parent.is_dir():
        raise Eagle3NbError("its parent directory does not exist", str(dest.parent),
                            "create it first, or name a directory inside an existing one")
    _outside_the_kit(dest)
    for line in remove_stale_staging(dest, kinds=("tmp",)):
        print(f"note: {line}", file=sys.stderr)
    tmp = staging_dir(dest, "notebooks")
    try:
        for notebook in sorted(notebooks_dir().glob("[0-9][0-9]_*.ipynb")):
            shutil.copyfile(notebook, tmp / notebook.name)
        (tmp / OWNER_NAME).unlink(missing_ok=True)
        rename_noreplace(tmp, dest)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    print(f"notebooks: {dest}  (jupyter lab {dest}; the kernel is eagle3-nb where `make setup` "
          "registered it, else this Python)")
    return EXIT_OK


def _outside_the_kit(dest: Path) -> None:
    """The kit's own folders (its package, the notebooks and samples it ships) are never
    written into, whichever link leads there."""
    import eagle3_nb
    from eagle3_nb.io.resources import notebooks_dir, samples_dir

    package = Path(eagle3_nb.__file__).parent
    own = {package.absolute(), package.resolve(), notebooks_dir(), samples_dir()}
    where = {dest, dest.parent.resolve() / dest.name}
    for folder in own:
        if any(p == folder or folder in p.parents for p in where):
            raise Eagle3NbError(f"is inside the kit's own folder {folder}", str(dest),
                                "name a directory of your own, outside the installed eagle3_nb")


def cmd_observe(args) -> int:
    from eagle3_nb.io.resources import samples_dir
    from eagle3_nb.observed.client import measure_server, read_prompt_file
    from eagle3_nb.viz.text import evidence_lines

    out = Path(args.out) if args.out else None
    if out is not None:
        _check_observe_out(out, args.overwrite)   # before the server is asked anything
    prompts = read_prompt_file(args.prompts or samples_dir() / "prompts.jsonl", args.n_samples)
    extra = {o: getattr(args, o) for o in engines()[args.engine].observe.OPTIONS}
    obs = measure_server(args.engine, args.url, prompts, args.max_new_tokens,
                         timeout=args.timeout, **extra)
    # in details, where --out keeps it and --observed reads it back (findings.evidence_line)
    obs.details["had"] = _observe_evidence(args, extra, obs)
    if out is not None:
        _write_observe_out(out, obs, args.overwrite)
    if args.json:
        print(obs.to_json())
    else:
        print("\n".join([obs.headline(), *evidence_lines(obs.details["had"])]))
        if obs.details.get("settings"):
            print(f"  server settings: {obs.details['settings']} (for simulations)")
        for note in obs.notes:
            print(f"  note: {note}")
        if args.out:
            print(f"written to {args.out} (eagle3-nb accept/report --observed {args.out})")
    return EXIT_OK


def _observe_evidence(args, options: dict, obs) -> dict[str, str]:
    """What the figures rest on: the prompts sent, the release whose field names were read,
    and whether the server showed its own arguments; the flag of each one that was not given."""
    from eagle3_nb.findings import given

    release = obs.version_detected or obs.details.get("server_version")
    had = {"server": "given",
           "prompts": given(args.prompts, "--prompts", "not given, the bundled ones sent"),
           "engine release": "named (--version)" if options.get("version") else
           "from the server" if release else
           "not known (--version)" if "version" in options else "not shown by the server"}
    for option, value in options.items():
        if option != "version":
            had[option] = given(value, f"--{option}", "not given, the server's default used")
    had["server arguments"] = ("from the server" if obs.details.get("server_args") else
                               "not shown (eagle3-nb inspect DRAFT --launch COMMAND)")
    return had


def _check_observe_out(out: Path, overwrite: bool) -> None:
    """observe --out writes a new file; an existing one only with --overwrite, and only when
    it is an earlier observe output (a regular file: a link is never replaced)."""
    from eagle3_nb.errors import OutputExistsError
    from eagle3_nb.observed.metrics import is_saved_observation

    if not out.parent.is_dir():
        raise Eagle3NbError("its directory does not exist", str(out),
                            "create it first, or name a file in an existing directory")
    if not os.path.lexists(out):
        return
    if out.is_symlink() or not out.is_file():
        kind = "a symbolic link" if out.is_symlink() else "not a regular file"
        raise OutputExistsError(f"exists and is {kind}", str(out), "name a new file for --out")
    if not overwrite:
        raise OutputExistsError("exists", str(out), "name a new file, or pass --overwrite to "
                                "replace an earlier eagle3-nb observe output")
    if not is_saved_observation(out):
        raise OutputExistsError("exists and is not an eagle3-nb observe output", str(out),
                                "--overwrite only replaces what observe wrote: name a new file")


def _write_observe_out(out: Path, obs, overwrite: bool) -> None:
    from eagle3_nb.io.files import atomic_write_text, create_text
    from eagle3_nb.observed.metrics import saved_text

    if overwrite and os.path.lexists(out):
        _check_observe_out(out, overwrite)   # again: the measurement took a while
        atomic_write_text(out, saved_text(obs))
    else:
        create_text(out, saved_text(obs))


def observe_options() -> dict[str, tuple[str, str]]:
    """`observe` option -> (the engines that take it, what it is)."""
    out: dict[str, tuple[str, str]] = {}
    for e in engines().values():
        for option, text in (e.observe.OPTIONS.items() if e.observe else ()):
            who = f"{out[option][0]}, {e.title}" if option in out else e.title
            out[option] = (who, text)
    return out


def cmd_engines(args) -> int:
    from eagle3_nb.engines import PROFILES, range_changes, releases_in
    from eagle3_nb.engines.bugs import bugs_in

    for e in engines().values():
        newer = "" if e.read[0] == e.newest else f" (newest published: {e.newest})"
        print(f"{e.title}: code read up to {e.read[0]} on {e.read[1]}{newer}; facts and "
              f"citations in eagle3_nb/engines/{e.name}/")
    for p in PROFILES:
        changed = range_changes(p)
        what = ("changes: " + ", ".join(changed)) if changed else "first release with EAGLE-3"
        n = len(releases_in(p))
        print(f"{p.range_text():<34} {n:>3} release{'s' if n != 1 else ' '}  {what}")
        bugs = bugs_in(p)
        if bugs:
            print(f"{'':<48}known bugs: {', '.join(b.id for b in bugs)}")
    print("A release newer than the code read answers with the nearest range and a warning.")
    return EXIT_OK


def cmd_diff(args) -> int:
    from eagle3_nb.checks.diff import diff_drafts

    from eagle3_nb.viz.text import diff_text

    data = diff_drafts(args.good, args.other, args.engine, args.target_config)
    return _emit(args, data, diff_text, data["other"])


def cmd_probe(args) -> int:
    """Exit 0 when the installed engine agrees with its profile, 1 when it differs."""
    from eagle3_nb.probe import probe_checkpoint
    from eagle3_nb.viz.text import evidence_lines

    result = probe_checkpoint(args.draft, args.engine, args.target_config)
    had = _probe_evidence(args, result.version)
    if args.json:
        print(json_text(with_advice({**result.to_json(), "had": had}, _inputs(args), args.draft)))
    else:
        head, _, rest = result.summary().partition("\n")
        print("\n".join([head, *evidence_lines(had), *([rest] if rest else [])]))
    return EXIT_OK if result.agrees else EXIT_FINDINGS


def _probe_evidence(args, version: str) -> dict[str, str]:
    """What the probe had (findings.evidence_line): the release is whichever this Python has
    installed, so another release is another environment, not a flag."""
    from eagle3_nb.findings import given

    return {"checkpoint": "given",
            "engine release": f"the installed {version} (another: its own environment, make "
                              f"engine-env ENGINE={args.engine} VERSION=V)",
            "target config": given(args.target_config, "--target-config")}
