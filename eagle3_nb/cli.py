"""`eagle3-nb` command line. Bad input: one line on stderr, exit 2, no traceback.

Imports stay lazy: `eagle3-nb inspect` on a safetensors checkpoint never imports torch,
plotly or transformers.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from eagle3_nb.defaults import (DEFAULT_MAX_NEW_TOKENS, DEFAULT_N_SAMPLES, DEFAULT_NUM_STEPS,
                                THREADS_VARIABLE)
from eagle3_nb.engines import wiring_name
from eagle3_nb.engines.advice import with_advice
from eagle3_nb.engines.registry import engines, setting_names
from eagle3_nb.errors import Eagle3NbError
from eagle3_nb.io.files import json_text
from eagle3_nb.io.resources import samples_dir

EXIT_OK, EXIT_FINDINGS, EXIT_BAD_INPUT = 0, 1, 2
THREADS_HELP = ("torch threads for the simulation (default: OMP_NUM_THREADS if set, else one for "
                "a model under 50M parameters, else every core)")
# --engine's grammar (engines.split_spec): the notebooks' form first, as they document it
ENGINE_METAVAR = "NAME:VERSION"
ENGINE_FORMS = "NAME:VERSION or NAME==VERSION; a bare NAME: its newest releases"


def _size(text: str) -> int:
    units = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
    t = text.strip().lower().rstrip("b")
    try:
        n = int(float(t[:-1]) * units[t[-1]]) if t and t[-1] in units else int(t)
    except (ValueError, OverflowError):  # "x", "infG", "nanM", 5000 digits
        n = -1
    if n < 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a byte count (e.g. 1G, 500M)")
    return n


def _positive(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of at least 1")
    return n


class _Version(argparse.Action):
    """--version: read from the installed package's metadata only when asked."""

    def __init__(self, option_strings, dest, help=None):
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        print(f"eagle3-nb {kit_version()}")
        parser.exit()


def kit_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("eagle3_nb")
    except PackageNotFoundError:  # run from a checkout that was never installed
        return "unknown (not installed: pip install -e . from the checkout)"


def _finite(text: str, low: float, high: float, what: str) -> float:
    try:
        x = float(text)
    except ValueError:
        x = float("nan")
    if not low <= x <= high:  # NaN and inf fail here too
        raise argparse.ArgumentTypeError(f"{text!r} is not {what}")
    return x


def _temperature(text: str) -> float:
    return _finite(text, 0.0, 1e6, "a temperature from 0 to 1e6")


def _seconds(text: str) -> float:
    seconds = _finite(text, 0.0, 86400.0, "a number of seconds above 0, at most a day")
    if seconds == 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds above 0")
    return seconds


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="eagle3-nb", description="Debug EAGLE-3 draft checkpoints.")
    parser.add_argument("--version", action=_Version, help="the kit's version (package metadata)")
    sub = parser.add_subparsers(dest="command", required=True)

    ins = sub.add_parser("inspect", help="will each engine load this draft, and how?")
    ins.add_argument("path", help="draft checkpoint directory")
    ins.add_argument("--engine", action="append", metavar=ENGINE_METAVAR,
                     help=f"engine release ({ENGINE_FORMS}; repeatable); default: each "
                          "engine's newest releases; all: every release range")
    ins.add_argument("--target-config", metavar="CONFIG_JSON",
                     help="the target model's config.json (resolves layer ids, context length)")
    ins.add_argument("--no-stats", action="store_true", help="headers only: skip tensor statistics")
    ins.add_argument("--launch", metavar="COMMAND_OR_FILE",
                     help="the serving command as you run it, or a file holding it: its "
                          "speculative settings are checked against the draft")
    ins.add_argument("--log", metavar="FILE",
                     help="the engine's server log or a traceback: its release (when --engine is "
                          "not given), arguments and exceptions join the answer")
    ins.add_argument("--stats-budget", type=_size, default="1G", metavar="BYTES",
                     help="bytes of tensor data the statistics scan may read (default 1G)")
    ins.add_argument("--json", action="store_true", help="one JSON object on stdout")
    ins.set_defaults(func=cmd_inspect)

    conv = sub.add_parser("convert", help="write a converted copy (never touches SRC)")
    conv.add_argument("src")
    conv.add_argument("dst")
    conv.add_argument("--to", choices=["eagle", "speculators"])
    conv.add_argument("--engine", metavar=ENGINE_METAVAR,
                      help=f"pick the layout this engine version loads ({ENGINE_FORMS})")
    conv.add_argument("--fix-d2t", action="store_true",
                      help="rewrite d2t as offsets, only when the evidence decides (never on a guess)")
    conv.add_argument("--target-config", metavar="TARGET_CONFIG",
                      help="the target's config.json (or directory): the copy's verdicts are "
                           "then checked against it; without it none is printed as ok")
    conv.add_argument("--json", action="store_true")
    conv.set_defaults(func=cmd_convert)

    voc = sub.add_parser("vocab", help="is the d2t/t2d vocabulary mapping right?")
    voc.add_argument("path", help="draft checkpoint directory")
    voc.add_argument("--tokenizer", metavar="TOKENIZER_JSON_OR_DIR",
                     help="the target's tokenizer.json, to show token strings and read text corpora")
    voc.add_argument("--corpus", metavar="FILE",
                     help="JSON Lines (input_ids [+loss_mask], or text) or plain text: coverage")
    voc.add_argument("--engine", action="append", metavar=ENGINE_METAVAR,
                     help=f"engine release ({ENGINE_FORMS}; repeatable)")
    voc.add_argument("--json", action="store_true")
    voc.set_defaults(func=cmd_vocab)
    _add_data_parser(sub)

    acc = sub.add_parser("accept", help="simulate speculative decoding on a local target")
    acc.add_argument("checkpoint", nargs="?", help="draft checkpoint directory")
    acc.add_argument("--target", metavar="DIR", help="target model directory (transformers)")
    acc.add_argument("--hidden-states", metavar="DIR",
                     help="speculators hs_*.safetensors or SpecForge .ckpt dumps: teacher-forced "
                          "scoring (--target then only lends embeddings)")
    acc.add_argument("--prompts", metavar="FILE", help="JSON Lines: prompt or input_ids "
                     "(default: data_samples/prompts.jsonl)")
    acc.add_argument("--num-steps", type=_positive, default=None, metavar="K",
                     help=f"draft depth ({setting_names('num_steps')}); default: as --launch or "
                          f"the engine's log states, else {DEFAULT_NUM_STEPS}")
    acc.add_argument("--topk", type=_positive, default=None, metavar="K",
                     help=f"{setting_names('topk')}: above 1 drafts a tree as the engine does")
    acc.add_argument("--num-draft-tokens", type=_positive, default=None, metavar="N",
                     help=f"{setting_names('num_draft_tokens')}: the tree's size, root included")
    acc.add_argument("--launch", metavar="COMMAND_OR_FILE",
                     help="the serving command: its drafting settings are simulated")
    acc.add_argument("--temperature", type=_temperature, default=0.0, metavar="T",
                     help="above 0: the target samples, and drafts are verified by target-only "
                          "rejection sampling as the engines do by default (default: greedy)")
    acc.add_argument("--max-new-tokens", type=_positive, default=DEFAULT_MAX_NEW_TOKENS,
                     metavar="N")
    acc.add_argument("--n-samples", type=_positive, default=DEFAULT_N_SAMPLES, metavar="N",
                     help=f"prompts to simulate (default {DEFAULT_N_SAMPLES})")
    acc.add_argument("--batch-size", type=int, default=8, metavar="B",
                     help="prompts decoded together (the tokens do not depend on it)")
    acc.add_argument("--engine", action="append", default=None, metavar=ENGINE_METAVAR,
                     help=f"engine releases whose wirings to simulate ({ENGINE_FORMS}; "
                          "repeatable); default: each engine's newest; a --wiring "
                          f"{ENGINE_METAVAR} adds its own")
    acc.add_argument("--wiring", default="trained")
    acc.add_argument("--list-wirings", action="store_true")
    acc.add_argument("--what-if", action="store_true",
                     help="simulate every wiring and rank them against --observed")
    acc.add_argument("--observed", metavar="FILE_OR_NUMBER",
                     help="what the engine reported: an accept length, its log, Prometheus text "
                          "or JSON (implies --what-if)")
    acc.add_argument("--stop-at-eos", action="store_true",
                     help="end a prompt at the target's EOS (off: runs stay comparable)")
    acc.add_argument("--device", choices=["cpu", "cuda"])
    acc.add_argument("--threads", type=_positive, metavar="N", help=THREADS_HELP)
    acc.add_argument("--json", action="store_true")
    acc.set_defaults(func=cmd_accept)

    rep = sub.add_parser("report", help="run every notebook headless: offline HTML pages, "
                         "index.html and summary.json")
    rep.add_argument("checkpoint", help="draft checkpoint directory")
    rep.add_argument("--target", metavar="DIR", help="target model directory (transformers); "
                     "also supplies --target-config and --tokenizer when those are not given")
    rep.add_argument("--hidden-states", metavar="DIR", help="the engine's hidden-state dumps "
                     "(speculators hs_*.safetensors or SpecForge .ckpt)")
    rep.add_argument("--engine", action="append", default=[], metavar=ENGINE_METAVAR,
                     help=f"engine release ({ENGINE_FORMS}; repeatable); default: each "
                          "engine's newest releases; all: every release range")
    rep.add_argument("--observed", metavar="FILE_OR_NUMBER",
                     help="what the engine reported: an accept length, or its log/metrics file")
    rep.add_argument("--launch", metavar="COMMAND_OR_FILE",
                     help="the serving command as you run it, or a file holding it: its settings "
                          "are checked against the draft (notebook 00)")
    rep.add_argument("--log", metavar="FILE",
                     help="the engine's server log or a traceback: its release answers when "
                          "--engine is not given; notebook 00 explains its exceptions")
    rep.add_argument("--device", choices=["cpu", "cuda"])
    rep.add_argument("--threads", type=_positive, metavar="N", help=THREADS_HELP)
    rep.add_argument("--out", metavar="DIR", help="output directory (default reports/<checkpoint "
                     "dir name>); must not exist or be empty")
    rep.add_argument("--overwrite", action="store_true",
                     help="replace an earlier report in --out: only the files it lists; any "
                          "other file there refuses the run (nothing else is ever deleted)")
    rep.add_argument("--fail-on", choices=["error", "warning", "never"], default="error",
                     help="exit 1 on error findings or a failed notebook (default), also on "
                          "warnings, or never")
    rep.add_argument("--target-config", metavar="CONFIG_JSON")
    rep.add_argument("--tokenizer", metavar="TOKENIZER_JSON")
    rep.add_argument("--corpus", metavar="FILE", help="JSON Lines or text: vocabulary coverage")
    rep.add_argument("--prompts", metavar="FILE", help="JSON Lines: prompt or input_ids")
    rep.add_argument("--train-data", metavar="PATH", help="the draft's training data (JSONL or the "
                     "trainer's directory): notebook 05; -p chat_template FILE, -p "
                     "serve_thinking on|off")
    rep.add_argument("--num-steps", type=int, metavar="K", help="draft depth to simulate "
                     "(default: as --launch or --observed states, else the kit's chain of "
                     f"{DEFAULT_NUM_STEPS})")
    rep.add_argument("--topk", type=int, metavar="K", help=f"{setting_names('topk')}: above 1, "
                     "notebook 04 drafts a tree as the engine does")
    rep.add_argument("--num-draft-tokens", type=int, metavar="N",
                     help=f"{setting_names('num_draft_tokens')} (the tree's size)")
    rep.add_argument("--wiring", help="wiring to simulate (eagle3-nb accept --list-wirings)")
    rep.add_argument("-p", "--parameter", nargs=2, action="append", default=[],
                     metavar=("NAME", "VALUE"), help="any other notebook parameter (repeatable)")
    rep.add_argument("--redact-paths", action="store_true",
                     help="to share the report: every path it writes relative to the draft's "
                          "parent directory, inputs elsewhere as TARGET_DIR, DUMPS_DIR, ..., no "
                          "home or user name; input hashes kept")
    rep.add_argument("--markdown", action="store_true",
                     help="also write summary.md beside index.html: the front page in Markdown, "
                          "to paste into a GitHub issue")
    rep.set_defaults(func=cmd_report)

    demo = sub.add_parser("demo", help="the full report on a bundled broken draft served against "
                          "the bundled tiny target, into reports/demo")
    demo.add_argument("--out", default="reports/demo",
                      help="output directory (default reports/demo; an earlier report there is "
                           "replaced)")
    demo.set_defaults(func=cmd_demo)

    observed = [n for n, e in engines().items() if e.observe]
    obs = sub.add_parser("observe", help="measure a running engine server: send prompts, read "
                         "back its speculative-decoding figures")
    obs.add_argument("engine", choices=observed, help="the engine serving at URL")
    obs.add_argument("url", help="the server's base URL, e.g. http://127.0.0.1:30000")
    obs.add_argument("--prompts", default=None,
                     help="JSON Lines with prompt or input_ids (default: the bundled prompts)")
    obs.add_argument("--n-samples", type=_positive, default=8, help="prompts to send (default 8)")
    obs.add_argument("--max-new-tokens", type=_positive, default=64)
    for option, (engine, text) in _observe_options().items():
        obs.add_argument(f"--{option}", default=None, help=f"{engine}: {text}")
    obs.add_argument("--timeout", type=_seconds, default=120.0,
                     help="seconds each request may take in all, its answer included")
    obs.add_argument("--out", default=None,
                     help="also write the figures as JSON, for --observed of accept and report "
                          "(a new file)")
    obs.add_argument("--overwrite", action="store_true",
                     help="let --out replace an earlier `eagle3-nb observe` output (nothing else)")
    obs.add_argument("--json", action="store_true", help="print the figures as JSON")
    obs.set_defaults(func=cmd_observe)

    lg = sub.add_parser("log", help="what the engine's own log or traceback says: its release, "
                        "its resolved arguments, its exceptions explained or said to be unknown")
    lg.add_argument("file", help="the server's log, or a saved traceback")
    lg.add_argument("--engine", metavar=ENGINE_METAVAR,
                    help="the engine (and release) when the log does not name them")
    lg.add_argument("--json", action="store_true", help="one JSON object on stdout")
    lg.set_defaults(func=cmd_log)

    nbs = sub.add_parser("notebooks", help="copy the six notebooks into a new directory, to open "
                         "in Jupyter (their default paths still name the bundled samples)")
    nbs.add_argument("dir", help="a directory that does not exist yet")
    nbs.set_defaults(func=cmd_notebooks)

    eng = sub.add_parser("engines", help="list the engine profiles and the versions they cover")
    eng.set_defaults(func=cmd_engines)

    dif = sub.add_parser("diff", help="a draft against a known-good one: keys, config, d2t, "
                         "statistics and engine verdicts side by side")
    dif.add_argument("good", help="the draft that worked")
    dif.add_argument("other", help="the draft to explain")
    dif.add_argument("--engine", action="append", metavar=ENGINE_METAVAR,
                     help=f"engine release ({ENGINE_FORMS}; repeatable)")
    dif.add_argument("--target-config", metavar="CONFIG_JSON")
    dif.add_argument("--json", action="store_true")
    dif.set_defaults(func=cmd_diff)

    prb = sub.add_parser("probe", help="run the INSTALLED engine's own draft loader on DRAFT and "
                         "compare it with the engine's profile (needs the engine: make engine-env)")
    prb.add_argument("draft", help="draft checkpoint directory")
    prb.add_argument("--engine", required=True, choices=[n for n, e in engines().items() if e.probe],
                     help="the engine to import (whatever release this Python has)")
    prb.add_argument("--target-config", default=None,
                     help="target config.json or directory (an engine may build the draft "
                          "against it)")
    prb.add_argument("--json", action="store_true", help="print the result as JSON")
    prb.set_defaults(func=cmd_probe)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)  # recorded by `report`
    if getattr(args, "threads", None):  # read where the models load, here or in a notebook
        os.environ[THREADS_VARIABLE] = str(args.threads)
    try:
        return args.func(args)
    except Eagle3NbError as exc:
        print(f"eagle3-nb: error: {exc.one_line()}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except PermissionError as exc:  # wherever it happens: one line naming the file
        print(f"eagle3-nb: error: {exc.filename or 'a file'}: permission denied (inputs must "
              "be readable, --out writable; check the mode and owner)", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `eagle3-nb ... | head`: the reader left; say nothing more
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_FINDINGS


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
                         "unchecked": after["unchecked"]}}
    if args.json:
        sys.stdout.write(json_text(summary) + "\n")
    else:
        fixed = " but the repaired d2t" if "d2t_after" in result.checks else ""
        print(f"wrote {result.dst} ({len(result.renames)} keys renamed); copy "
              + (f"verified: every tensor byte-identical{fixed}" if result.verified
                 else "NOT verified"))
        for w in result.warnings:
            print(f"  warning: {w}")
        print(f"the converted draft, inspected: {'errors' if errors else after['overall']}"
              + (f" ({', '.join(errors)}: eagle3-nb inspect {result.dst})" if errors else ""))
        # "ok" only knowing the target: its layers, class and context can still fail (#25)
        unknown = "" if args.target_config else " as far as checked (no --target-config)"
        for profile, verdict in summary["inspect"].items():
            print(f"  {profile:<16} {verdict}{unknown if verdict == 'ok' else ''}")
    return EXIT_OK if result.verified and not errors else EXIT_FINDINGS


def cmd_vocab(args) -> int:
    from eagle3_nb.checks.vocab import check_vocab

    from eagle3_nb.viz.text import vocab_text

    return _emit(args, check_vocab(args.path, args.tokenizer, args.corpus, args.engine),
                 vocab_text)


def _add_data_parser(sub) -> None:
    dat = sub.add_parser("data", help="was the draft trained on what it is served? (training "
                                      "JSONL, token rows, configs, vocab mapping, dumps)")
    dat.add_argument("path", help="training JSONL or the directory that holds the trainer's files")
    dat.add_argument("--tokenizer", metavar="TOKENIZER_JSON_OR_DIR",
                     help="the target's tokenizer.json (its tokenizer_config.json chat_template "
                          "is the served template)")
    dat.add_argument("--template", metavar="NAME",
                     help="the trainer's registered template (SpecForge data.chat_template), to "
                          "tokenise conversations as the trainer did; default: the config's")
    dat.add_argument("--chat-template", metavar="FILE", help="the served chat template (.jinja)")
    dat.add_argument("--serve-thinking", choices=("on", "off"),
                     help="the served enable_thinking (chat_template_kwargs); default: the "
                          "template's own default")
    dat.add_argument("--draft", metavar="DRAFT", help="the draft checkpoint (its t2d, "
                                                      "max_position_embeddings)")
    dat.add_argument("--target", metavar="TARGET_DIR", help="the target model directory "
                                                            "(serving context; tokenizer)")
    dat.add_argument("--config", metavar="YAML", help="the training config (default: the YAML "
                                                      "found under PATH)")
    dat.add_argument("--prompts", metavar="FILE", help="serving prompts (JSONL prompt|text): "
                                                       "domain check")
    dat.add_argument("--max-length", type=int, metavar="N",
                     help="the training max_length when no config says it")
    dat.add_argument("--serve-context", type=int, metavar="N",
                     help="the serving context length (default: the target's)")
    dat.add_argument("--max-rows", type=int, metavar="N", help="read at most N rows")
    dat.add_argument("--hidden-states", metavar="DUMPS",
                     help="the training hidden-state dumps (hs_*.safetensors or .ckpt), one per "
                          "row: checks 9 and, with --target, 6 (imports torch)")
    dat.add_argument("--run-target", action="store_true",
                     help="check 6 by running the (small, local) --target on the rows")
    dat.add_argument("--no-progress", action="store_true", help="no progress bar")
    dat.add_argument("--json", action="store_true")
    dat.set_defaults(func=cmd_data)


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
    return _emit(args, data, data_text)


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
    from eagle3_nb.checks.acceptance import measure_acceptance
    from eagle3_nb.session import named_wirings

    if not args.checkpoint or not (args.target or args.hidden_states):
        raise Eagle3NbError("accept needs CHECKPOINT and --target DIR or --hidden-states DIR",
                            "accept", "for example: eagle3-nb accept DRAFT --target TARGET_DIR")
    args.wiring = wiring_name(args.wiring)
    if args.hidden_states:
        return _accept_on_dumps(args)
    if args.list_wirings:
        for name, w in named_wirings(args.checkpoint, args.target, args.engine).presets.items():
            print(f"{name:<30} {w.note}")
        return EXIT_OK
    prompts = args.prompts or str(samples_dir() / "prompts.jsonl")
    if args.what_if or args.observed is not None:
        return _accept_what_if(args, prompts)
    if args.engine and args.wiring == "trained":  # the named releases beside the trained figure
        from eagle3_nb.engines import resolve_engine

        named = dict.fromkeys(resolve_engine(e).key for e in args.engine)
        return _accept_what_if(args, prompts, ["trained", *named])
    result = measure_acceptance(args.checkpoint, args.target, prompts, args.wiring,
                                args.num_steps, args.max_new_tokens, args.n_samples, args.device,
                                stop_at_eos=args.stop_at_eos, batch_size=args.batch_size,
                                topk=args.topk, num_draft_tokens=args.num_draft_tokens,
                                launch=args.launch, temperature=args.temperature)
    stats = result.stats()
    if args.json:
        sys.stdout.write(json_text(stats) + "\n")
    else:
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


def _accept_what_if(args, prompts: str, wirings: list[str] | None = None) -> int:
    from eagle3_nb.checks.acceptance import what_if

    report = what_if(args.checkpoint, args.target, prompts, args.observed, args.num_steps,
                     args.max_new_tokens, args.n_samples, args.device, wirings=wirings,
                     batch_size=args.batch_size, engines=args.engine, topk=args.topk,
                     num_draft_tokens=args.num_draft_tokens, launch=args.launch,
                     temperature=args.temperature)
    if args.json:
        sys.stdout.write(json_text(report) + "\n")
        return EXIT_OK
    print(report["evidence"])
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


def _accept_on_dumps(args) -> int:
    """No target head: teacher-forced scoring against the recorded tokens, labelled as such."""
    from eagle3_nb.checks.acceptance import score_on_dumps

    result = score_on_dumps(args.checkpoint, args.hidden_states,
                            args.num_steps or DEFAULT_NUM_STEPS, [args.wiring],
                            args.n_samples, args.device, args.target)[0]
    if result.get("error") or result.get("unmeasured"):
        raise Eagle3NbError(f"wiring {args.wiring}: {result.get('error') or result['unmeasured']}",
                            "--wiring", "on dumps: a wiring whose layers the dump holds "
                            "(trained, single_layer, the engines that capture them)")
    if args.json:
        sys.stdout.write(json_text(result) + "\n")
    else:
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

    print("eagle3-nb report data_samples/drafts/layers0-flat --target data_samples/target "
          f"--out {args.out} ...", file=sys.stderr, flush=True)
    summary = run_demo(Path(args.out))
    _print_report(summary)
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
    from eagle3_nb.observed.client import measure_server, read_prompt_file

    out = Path(args.out) if args.out else None
    if out is not None:
        _check_observe_out(out, args.overwrite)   # before the server is asked anything
    prompts = read_prompt_file(args.prompts or samples_dir() / "prompts.jsonl", args.n_samples)
    extra = {o: getattr(args, o) for o in engines()[args.engine].observe.OPTIONS}
    obs = measure_server(args.engine, args.url, prompts, args.max_new_tokens,
                         timeout=args.timeout, **extra)
    if out is not None:
        _write_observe_out(out, obs, args.overwrite)
    if args.json:
        print(obs.to_json())
    else:
        print(obs.headline())
        if obs.details.get("settings"):
            print(f"  server settings: {obs.details['settings']} (for simulations)")
        for note in obs.notes:
            print(f"  note: {note}")
        if args.out:
            print(f"written to {args.out} (eagle3-nb accept/report --observed {args.out})")
    return EXIT_OK


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


def _observe_options() -> dict[str, tuple[str, str]]:
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

    result = probe_checkpoint(args.draft, args.engine, args.target_config)
    print(json_text(with_advice(result.to_json(), _inputs(args), args.draft)) if args.json
          else result.summary())
    return EXIT_OK if result.agrees else EXIT_FINDINGS

if __name__ == "__main__":
    sys.exit(main())
