"""The triage report: every notebook run headless on one checkpoint, each rendered to offline
HTML, then one `index.html` (verdict, findings of every notebook by severity, key figures,
links) and one `summary.json` (the same, plus versions, input hashes and the command line) for
CI and post-mortems. Also what notebook 00 shows: the top findings with the next thing to try,
and the engine flags to check by hand.

    summary = run_report(ReportOptions(checkpoint=Path("my/draft"), out=Path("reports/x"),
                                       target=Path("my/target")))
    summary["exit_code"]  # follows fail_on

Layout of the output directory:

    index.html  summary.json  .eagle3-nb-report  (summary.md with --markdown)
    00_triage/00_triage.ipynb  00_triage/00_triage.html  00_triage/summary.json
    01_checkpoint_keys/...     (one folder per notebook, skipped ones absent)
"""

from __future__ import annotations

import ast
import contextlib
import importlib.metadata
import json
import os
import platform
import re
import shutil
import sys
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

from eagle3_nb.errors import Eagle3NbError, OutputExistsError
from eagle3_nb.engines import engines, resolve_engines
from eagle3_nb.checks.target_match import preflight
from eagle3_nb.engines.advice import next_step, with_advice
from eagle3_nb.findings import CODES, SEVERITY_ORDER, SUMMARY_VERSION
from eagle3_nb.config import draft_marker, token_id_list
from eagle3_nb.io.checkpoint import (PARTIAL_HASH_BYTES, Checkpoint, iter_jsonl, load_target_info,
                                     read_json, sha256_file)
from eagle3_nb.observed.metrics import parse_observed
from eagle3_nb.vocab import load_tokenizer, read_corpus
from eagle3_nb.io.files import (OWNER_NAME, atomic_write_text, json_text, cleanup_on_signals, directory_lock,
                                remove_stale_staging, staging_dir, swap_in)
from eagle3_nb.io.resources import notebooks_dir, samples_dir
from eagle3_nb.report.notebooks import (PATH_PARAMETERS, SUMMARY_NAME, ReportError,
                                        notebook_parameters, render_html, run_notebook)
from eagle3_nb.report.markdown import summary_markdown
from eagle3_nb.report.redact import PathRedactor, report_redactor
from eagle3_nb.viz.triage import index_html

MARKER = ".eagle3-nb-report"
MARKDOWN_NAME = "summary.md"
FAIL_ON = ("error", "warning", "never")
PACKAGES = ("eagle3_nb", "torch", "transformers", "safetensors", "numpy", "papermill",
            "nbconvert", "plotly")
# Parameters the report sets from its own arguments (a -p for them would bypass the checks,
# the skip rules or the one-folder-per-notebook layout).
OWN_OPTIONS = {"checkpoint": "the CHECKPOINT argument", "output_dir": "--out",
               "target": "--target", "hidden_states": "--hidden-states", "engine": "--engine",
               "target_config": "--target-config", "tokenizer": "--tokenizer",
               "corpus": "--corpus", "prompts": "--prompts", "observed": "--observed",
               "device": "--device", "num_steps": "--num-steps", "wiring": "--wiring",
               "launch": "--launch", "topk": "--topk", "num_draft_tokens": "--num-draft-tokens",
               "log": "--log"}
HASHED_PARAMETERS = ("target_config", "tokenizer", "prompts", "corpus", "observed")
HASH_BUDGET_BYTES = 4 << 30  # checkpoint bytes hashed before the report starts; the rest partly
# What --overwrite may delete: only what a report writes (and an older notebook-01-only demo).
_REPORT_ENTRY = re.compile(r"^(index\.html|summary\.json|\.eagle3-nb-report|"
                           r"\d\d_[\w-]+(\.ipynb|\.html)?)$")
_NOTEBOOK_DIR = re.compile(r"^\d\d_[\w-]+$")


@dataclass
class ReportOptions:
    checkpoint: Path
    out: Path | None = None               # default reports/<checkpoint dir name>
    target: Path | None = None
    hidden_states: Path | None = None
    engines: list[str] = field(default_factory=list)   # NAME==VERSION
    target_config: Path | None = None
    tokenizer: Path | None = None
    corpus: Path | None = None
    train_data: Path | None = None        # the training data (notebook 05)
    prompts: Path | None = None
    observed: str | None = None           # a metrics file or a number
    launch: str | None = None             # the serving command, or a file holding it
    log: Path | None = None               # the engine's server log or a traceback
    device: str | None = None
    num_steps: int | None = None
    topk: int | None = None               # SGLang --speculative-eagle-topk (above 1: a tree)
    num_draft_tokens: int | None = None   # SGLang --speculative-num-draft-tokens
    wiring: str | None = None
    extra: dict[str, str] = field(default_factory=dict)  # -p NAME VALUE
    fail_on: str = "error"
    overwrite: bool = False
    command: list[str] = field(default_factory=list)
    notebooks: list[Path] | None = None   # default: notebooks/[0-9][0-9]_*.ipynb
    redact_paths: bool = False            # every path written relative / as a placeholder
    markdown: bool = False                # also summary.md, the front page for an issue


@dataclass
class Step:
    """One notebook of the report: what it was given, and what came of it."""
    name: str
    notebook: Path
    parameters: dict[str, Any]
    status: str = "pending"               # ok | failed | skipped
    reason: str | None = None             # skipped: why, and how to enable it
    enable: str | None = None
    seconds: float | None = None
    error: str | None = None
    cell: int | None = None
    exception: str | None = None
    summary: dict[str, Any] | None = None

    def files(self) -> dict[str, str | None]:
        """Paths relative to the report directory, None when the file is not there."""
        return {kind: f"{self.name}/{fname}" for kind, fname in
                (("html", f"{self.name}.html"), ("ipynb", f"{self.name}.ipynb"),
                 ("summary", SUMMARY_NAME))}

    def to_json(self, out: Path) -> dict[str, Any]:
        files = {k: (v if (out / v).is_file() else None) for k, v in self.files().items()}
        return {"notebook": self.name, "status": self.status, "seconds": self.seconds,
                "error": self.error, "cell": self.cell, "exception": self.exception,
                "reason": self.reason, "enable": self.enable, "parameters": self.parameters,
                **files}


# ----------------------------------------------------------------------------- running

def run_report(opts: ReportOptions, progress: Callable[[str], None] | None = None,
               kernel_name: str | None = None) -> dict[str, Any]:
    """Validate everything first (bad input raises Eagle3NbError and writes nothing), then run
    each notebook into its own folder of opts.out, render it, and write index.html and
    summary.json. A failing notebook is recorded and the run goes on. Returns the summary."""
    say = progress or (lambda line: print(line, file=sys.stderr, flush=True))
    started = datetime.now(timezone.utc)
    opts = resolve_options(opts)
    steps = plan_steps(opts)
    hashes = input_hashes(opts, steps)
    unused = unused_options(opts, steps)
    for flag in unused:
        say(f"note: no notebook that runs takes {flag}; it is not used"
            + _skipped_takers(flag, steps))
    observed = observed_floor_note(opts.observed)
    if observed:
        say(f"note: {observed}")
    _make_parent(opts.out)
    with directory_lock(opts.out), cleanup_on_signals():
        for line in remove_stale_staging(opts.out):
            say(f"note: {line}")
        check_out(opts.out, opts.overwrite)  # again: the lock now keeps it as checked
        build = staging_dir(opts.out, "eagle3-nb report")
        try:
            redact = report_redactor(opts, build) if opts.redact_paths else None
            summary = _build_report(opts, steps, hashes, started, build, say, kernel_name,
                                    redact)
            summary["unused_options"] = unused
            summary["observed_note"] = observed
            _write_report_files(build, summary, redact, opts.markdown)
            old = swap_in(build, opts.out)
        except BaseException:
            shutil.rmtree(build, ignore_errors=True)
            raise
        if old is not None:
            kept = _clear_previous(old)
            if kept:
                say(f"note: the previous report held files it did not write; kept in {old}: "
                    + ", ".join(kept[:5]))
    return summary


def _build_report(opts: ReportOptions, steps: list[Step], hashes: dict[str, Any],
                  started: datetime, build: Path, say: Callable[[str], None],
                  kernel_name: str | None, redact: PathRedactor | None = None) -> dict[str, Any]:
    for i, step in enumerate(steps, 1):
        say(f"[{i}/{len(steps)}] {step.name} ... "
            + run_step(step, build, kernel_name, published=opts.out, redact=redact))
    return build_summary(opts, steps, hashes, started, build)


def _write_report_files(build: Path, summary: dict[str, Any], redact: PathRedactor | None = None,
                        markdown: bool = False) -> None:
    """summary.json, index.html (summary.md with MARKDOWN; every path redacted with REDACT)
    and, last, the marker that lists every file of the report (what a later --overwrite may
    remove, and nothing else)."""
    if redact is not None:
        summary = {**redact.data(summary), "redacted_paths": redact.describe()}
    atomic_write_text(build / SUMMARY_NAME, json_text(summary) + "\n")
    groups = group_findings(summary["findings"], summary["checkpoint"])
    atomic_write_text(build / "index.html", index_html(summary, groups))
    if markdown:
        atomic_write_text(build / MARKDOWN_NAME, summary_markdown(summary, groups))
    files = sorted(p.relative_to(build).as_posix() for p in build.rglob("*")
                   if p.is_file() and p.name != OWNER_NAME)
    atomic_write_text(build / MARKER, json.dumps({"written_by": "eagle3-nb report",
                                                  "files": [*files, MARKER]}, indent=1) + "\n")


def _clear_previous(old: Path) -> list[str]:
    """Remove the replaced report's own files; returns what it did not write (then kept)."""
    previous = old / "previous"
    present = {p.relative_to(previous).as_posix() for p in previous.rglob("*")
               if p.is_file() or p.is_symlink()}
    for rel in present & report_files(previous):  # a name listed but not present is never joined
        (previous / rel).unlink()
    for d in sorted((p for p in previous.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)):
        with contextlib.suppress(OSError):
            d.rmdir()
    left = sorted(p.relative_to(previous).as_posix() for p in previous.rglob("*") if p.is_file())
    if left:
        (old / OWNER_NAME).unlink(missing_ok=True)  # never stale: these are the user's
        return left
    shutil.rmtree(old, ignore_errors=True)
    return []


def run_step(step: Step, out: Path, kernel_name: str | None = None,
             published: Path | None = None, redact: PathRedactor | None = None) -> str:
    """Execute and render one notebook; never raises for a notebook that fails. Returns the
    progress word. `published`: where `out` will be renamed to; the executed notebook then
    names that folder, not the staging one it ran in. `redact`: rewrites every path in the
    notebook's files before its page is rendered (--redact-paths)."""
    if step.status == "skipped":
        return f"skipped ({step.reason})"
    folder = out / step.name
    t0 = time.monotonic()
    try:
        run_notebook(step.notebook, folder, step.parameters, kernel_name=kernel_name)
        step.status = "ok"
    except OSError as exc:  # the report itself cannot be written: stop, the previous one stays
        raise _cannot_write(exc, folder) from None
    except Exception as exc:  # noqa: BLE001 - recorded in the report, the run goes on
        _record_failure(step, exc)
    executed = folder / step.notebook.name
    if executed.is_file() and published is not None:
        _name_published_folder(executed, out, published)
    if redact is not None and folder.is_dir():
        try:
            redact.tree(folder)
        except OSError as exc:
            raise _cannot_write(exc, folder) from None
    if executed.is_file():  # papermill leaves the partly executed copy of a failed run
        try:
            render_html(executed, folder / f"{step.name}.html")
        except OSError as exc:
            raise _cannot_write(exc, folder) from None
        except Exception as exc:  # noqa: BLE001
            step.status, step.error = "failed", step.error or f"HTML rendering failed: {exc}"
    step.seconds = round(time.monotonic() - t0, 2)
    step.summary = _read_json(folder / SUMMARY_NAME)
    if step.status == "ok":
        return f"ok ({step.seconds:.1f} s)"
    return f"FAILED ({step.seconds:.1f} s): {step.error}"


def _name_published_folder(executed: Path, staging: Path, published: Path) -> None:
    """Replace the staging folder's path in an executed notebook (its injected parameters and
    printed lines) with the folder the report is renamed to."""
    text = executed.read_text(encoding="utf-8")
    staged, final = json.dumps(str(staging.resolve()))[1:-1], json.dumps(str(published))[1:-1]
    if staged in text:
        try:
            atomic_write_text(executed, text.replace(staged, final))
        except OSError as exc:
            raise _cannot_write(exc, executed.parent) from None


def _cannot_write(exc: OSError, where: Path) -> Eagle3NbError:
    return Eagle3NbError(f"cannot write the report ({exc.strerror or exc})", str(where),
                         "free some space (or fix the permissions) and run it again; an earlier "
                         "report in --out is kept as it was")


def _record_failure(step: Step, exc: Exception) -> None:
    step.status = "failed"
    if isinstance(exc, ReportError) and exc.ename:
        step.cell, step.exception = exc.cell, exc.ename
        step.error = f"cell [{exc.cell}] raised {exc.ename}: {_first_line(exc.evalue)}"
    else:
        step.exception = type(exc).__name__
        step.error = f"{type(exc).__name__}: {_first_line(str(exc))}"


def _first_line(text: str | None, limit: int = 300) -> str:
    line = (text or "").strip().splitlines()[0] if (text or "").strip() else ""
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


# ----------------------------------------------------------------------------- input checks

def resolve_options(opts: ReportOptions) -> ReportOptions:
    """Absolute paths, implied files (--target DIR -> its config.json and tokenizer.json), and
    every check that can fail before anything is written."""
    ckpt = Checkpoint.open(opts.checkpoint)  # CheckpointError: bad input, exit 2
    o = ReportOptions(**{**opts.__dict__})
    o.checkpoint = ckpt.path
    o.out = _output_path(Path(opts.out or Path("reports") / ckpt.path.name))
    if o.target is not None:
        o.target = _existing(o.target, "--target", "a transformers model directory", dir_=True)
        if not (o.target / "config.json").is_file():
            raise Eagle3NbError("no config.json in the target directory", str(o.target),
                                "pass the target model's directory (config.json, weights)")
        draft = draft_marker(read_json(o.target, "config.json"))
        if draft:
            raise Eagle3NbError(f"--target is an EAGLE-3 draft's directory, not a target model "
                                f"({draft})", str(o.target), "pass the target model's directory "
                                "(the model the draft speculates for)")
        o.target_config = o.target_config or o.target / "config.json"
        if o.tokenizer is None and (o.target / "tokenizer.json").is_file():
            o.tokenizer = o.target / "tokenizer.json"
    if o.hidden_states is not None:
        o.hidden_states = _existing(o.hidden_states, "--hidden-states", "hidden-state dumps")
    for name in ("target_config", "tokenizer", "corpus", "prompts"):
        value = getattr(o, name)
        if value is not None:
            setattr(o, name, _existing(value, f"--{name.replace('_', '-')}", "a file"))
    o.observed = _observed(o.observed)
    o.launch = _launch(o.launch)
    if o.log is not None:
        o.log = _existing(o.log, "--log", "a file")
        if not o.engines:  # the release the log names answers for every notebook
            from eagle3_nb.checks.log import check_log

            reading = check_log(o.log)
            o.engines = [reading.profile] if reading.profile else []
    if o.fail_on not in FAIL_ON:
        raise Eagle3NbError(f"--fail-on {o.fail_on!r}", "--fail-on", f"one of {FAIL_ON}")
    if o.device:
        from eagle3_nb.session import pick_device  # imports torch: only when a device is named
        pick_device(o.device)                  # the check every run does, with its error
    for flag, value in (("--num-steps", o.num_steps), ("--topk", o.topk),
                        ("--num-draft-tokens", o.num_draft_tokens)):
        if value is not None and value < 1:
            raise Eagle3NbError(f"{flag} {value}", flag, "a count >= 1")
    resolve_engines(o.engines or None)  # EngineSpecError names the known profiles
    o.extra = _path_parameters(o.extra)
    _keep_apart(o)
    if o.target is not None or o.hidden_states is not None:  # notebooks 03 and 04 run the draft
        preflight(ckpt, o.target_config)
    _read_inputs(o, ckpt)
    if o.target is not None and (o.launch or o.observed):
        # notebook 04 simulates what the launch command or the engine's figure states: settings
        # it cannot afford are refused here, not as a failed notebook (imports torch)
        from eagle3_nb.checks.acceptance import drafting_of_run
        drafting_of_run(o.checkpoint, o.target, o.num_steps, o.topk, o.num_draft_tokens,
                        o.launch, o.observed, o.engines or None)
    o.notebooks = [Path(p).resolve() for p in (o.notebooks or _default_notebooks(o))]
    if not o.notebooks:
        raise Eagle3NbError("no notebooks found", str(notebooks_dir()), "notebooks/NN_name.ipynb")
    _embeddings_for_dumps(o, ckpt)
    check_out(o.out, o.overwrite)
    return o


def _embeddings_for_dumps(o: ReportOptions, ckpt: Checkpoint) -> None:
    """On --hidden-states alone, the notebooks that take dumps run the draft without a target:
    a draft with no embed_tokens of its own (most) has none to run with."""
    if o.hidden_states is None or o.target is not None \
            or "embed_tokens.weight" in ckpt.canonical_keys:
        return
    takers = [nb.stem for nb in o.notebooks if "hidden_states" in notebook_parameters(nb)]
    if takers:
        raise Eagle3NbError(
            f"the draft has no embed_tokens, and {', '.join(takers)} run it on --hidden-states "
            "with the target's", str(ckpt.path),
            "add --target TARGET_DIR, the target model's directory (only its embed_tokens are "
            "read; the target is never run on dumps)")


def _output_path(out: Path) -> Path:
    """--out with '..' and every link in it resolved, so it is compared with the inputs as the
    file system will see it; --out itself may not be a link (the report replaces what it
    names) and its nearest existing ancestor must be a directory."""
    if out.is_symlink():
        raise OutputExistsError("is a symbolic link", str(out),
                                "pass the directory it points to, or another --out")
    resolved = out.resolve()
    ancestor = next(p for p in (resolved, *resolved.parents) if os.path.lexists(p))
    if ancestor != resolved and not ancestor.is_dir():
        raise Eagle3NbError(f"{ancestor} is a file, not a directory", str(out),
                            "pick an --out under a directory")
    return resolved


def _path_parameters(extra: dict[str, str]) -> dict[str, str]:
    """-p NAME PATH for the notebooks' path parameters the report does not set itself (e.g.
    compare_to, a known-good draft): it must exist, and goes on made absolute."""
    out = dict(extra)
    for name in PATH_PARAMETERS:
        if name in OWN_OPTIONS or not out.get(name):
            continue
        out[name] = str(_existing(Path(out[name]), f"-p {name}", "an existing path"))
    return out


def _keep_apart(o: ReportOptions) -> None:
    """The report never lands inside an input directory (nor replaces one, nor a directory
    that holds an input: an --overwrite would move it away)."""
    from eagle3_nb.engines.launch import names_a_file

    inputs = {"the checkpoint": o.checkpoint, "--target": o.target,
              "--hidden-states": o.hidden_states, "--target-config": o.target_config,
              "--tokenizer": o.tokenizer, "--corpus": o.corpus, "--prompts": o.prompts,
              "--observed": Path(o.observed) if o.observed and Path(o.observed).exists() else None,
              "--launch": Path(o.launch) if o.launch and names_a_file(o.launch) else None,
              "--log": o.log,
              **{f"-p {name}": Path(o.extra[name]) for name in PATH_PARAMETERS
                 if name not in OWN_OPTIONS and o.extra.get(name)}}
    for what, path in inputs.items():
        if path is None:
            continue
        p = Path(path).resolve()
        if p.is_dir() and (o.out == p or p in o.out.parents):
            raise Eagle3NbError(f"the report would be written inside {what}", str(o.out),
                                f"pick an --out outside {p}")
        if o.out in p.parents:
            raise Eagle3NbError(f"{what} ({p}) is inside --out, which the report replaces",
                                str(o.out), "pick an --out that holds none of the inputs")


def _existing(path: Path, flag: str, what: str, dir_: bool = False) -> Path:
    p = Path(path)
    if not p.exists() or (dir_ and not p.is_dir()):
        raise Eagle3NbError("not found" if not p.exists() else "not a directory", str(p),
                            f"{flag} takes {what}")
    return p.resolve()


def _read_inputs(o: ReportOptions, ckpt: Checkpoint) -> None:
    """Read every input file the notebooks will read, the way they read it, before any runs: a
    broken one is bad input (exit 2, nothing written), not a report of failed notebooks."""
    vocab = ckpt.config.vocab_size                        # ConfigError for a broken config.json
    if o.target_config:
        info = load_target_info(o.target_config)
        vocab = info.vocab_size or vocab
    tokenizer = load_tokenizer(o.tokenizer) if o.tokenizer else None
    if o.prompts:
        for n, row in iter_jsonl(o.prompts):
            if isinstance(row.get("input_ids"), list):
                token_id_list(row["input_ids"], f"line {n} input_ids", str(o.prompts), vocab)
            elif not isinstance(row.get("prompt"), str):
                raise Eagle3NbError(f"line {n} has neither prompt nor input_ids", str(o.prompts),
                                    "one JSON object per line")
    if o.corpus:
        read_corpus(o.corpus, tokenizer, vocab)
    if o.observed and not _is_number(o.observed):
        parse_observed(Path(o.observed))
    if o.hidden_states:
        from eagle3_nb.target import check_dump_headers  # imports torch: only when dumps are given

        check_dump_headers(o.hidden_states)


def _launch(value: str | None) -> str | None:
    """The serving command, read now (a bad one is exit 2 with nothing written); a file holding
    it is made absolute, since the notebooks run in another folder."""
    if not value:
        return None
    from eagle3_nb.engines.launch import names_a_file, read_launch

    read_launch(value)                   # ConfigError names --launch and how to quote it
    return str(Path(value).resolve()) if names_a_file(value) else value


def _is_number(text: str) -> bool:
    try:
        float(text)
        return True
    except ValueError:
        return False


def _observed(value: str | None) -> str | None:
    """A number (an engine's reported accept length) or a metrics file (made absolute)."""
    if value is None or value == "":
        return None
    if _is_number(value):
        return str(value)
    return str(_existing(Path(value), "--observed", "a number or a metrics/log file"))


def check_out(out: Path, overwrite: bool) -> None:
    """An existing non-empty --out is refused; with overwrite, only when every file in it is one
    an earlier report wrote (its marker's list, or the report layout for older reports): the
    kit never deletes anything else."""
    if os.path.islink(out):
        raise OutputExistsError("is a symbolic link", str(out),
                                "pass the directory it points to, or another --out")
    if out.exists() and not out.is_dir():
        raise OutputExistsError("exists and is a file", str(out), "pick another --out")
    entries = sorted(p.name for p in out.iterdir()) if out.is_dir() else []
    if not entries:
        return
    if not overwrite:
        raise OutputExistsError("exists and is not empty", str(out),
                                "pick another --out, or pass --overwrite to replace an earlier "
                                "report there")
    known = report_files(out)
    files = (p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file() or p.is_symlink())
    foreign = sorted(rel for rel in files if rel not in known)
    if foreign:
        raise OutputExistsError(f"holds files that are not report output "
                                f"({', '.join(foreign[:4])})", str(out),
                                "--overwrite only replaces an earlier report: move those files "
                                "or pick another --out")


def report_files(out: Path) -> set[str]:
    """The files an earlier report wrote in `out`: its marker's list; for a report older than
    the list (or the notebook-01-only demo), whatever matches the report layout."""
    marker = out / MARKER
    try:
        listed = json.loads(marker.read_text(encoding="utf-8"))["files"]
        if isinstance(listed, list) and all(isinstance(f, str) for f in listed):
            return set(listed)
    except (OSError, ValueError, KeyError, TypeError):
        pass
    return {p.relative_to(out).as_posix() for p in out.rglob("*")
            if p.is_file() and not p.is_symlink() and _in_report_layout(p.relative_to(out))}


def _in_report_layout(rel: Path) -> bool:
    if len(rel.parts) == 1:
        return bool(_REPORT_ENTRY.match(rel.name))
    folder, name = rel.parts[0], rel.parts[-1]
    return len(rel.parts) == 2 and bool(_NOTEBOOK_DIR.match(folder)) and name in (
        f"{folder}.ipynb", f"{folder}.html", SUMMARY_NAME)


def _make_parent(out: Path) -> None:
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise Eagle3NbError(f"cannot create the parent of --out ({exc.strerror})", str(out),
                            "pick an --out under a writable directory") from None


def _default_notebooks(o: ReportOptions) -> list[Path]:
    return discover_notebooks(train_data=o.train_data is not None)


def discover_notebooks(folder: Path | None = None, train_data: bool = False) -> list[Path]:
    """The notebooks a report runs by default: every one, less the training-data one (05)
    unless --train-data is given (it answers about other evidence than the checkpoint, so it is
    not listed as skipped either)."""
    return [nb for nb in sorted((folder or notebooks_dir()).glob("[0-9][0-9]_*.ipynb"))
            if train_data or "train_data" not in notebook_parameters(nb)]


# ----------------------------------------------------------------------------- parameters

def plan_steps(opts: ReportOptions) -> list[Step]:
    """Each notebook's parameters (only those it declares), or why it is skipped. Raises on a
    -p NAME no notebook declares, or a value that is not of the declared type."""
    for name in opts.extra:
        if name in OWN_OPTIONS:
            raise Eagle3NbError(f"-p {name} is set by the report itself", "-p",
                                f"use {OWN_OPTIONS[name]} instead")
    declared = {nb: notebook_parameters(nb) for nb in opts.notebooks}
    unknown = sorted(set(opts.extra) - {n for d in declared.values() for n in d})
    if unknown:
        names = sorted({n for d in declared.values() for n in d})
        raise Eagle3NbError(f"no notebook declares parameter(s) {unknown}", "-p",
                            f"declared: {', '.join(names)}")
    return [_plan_step(nb, declared[nb], opts) for nb in opts.notebooks]


def _plan_step(nb: Path, declared: dict[str, dict], opts: ReportOptions) -> Step:
    step = Step(nb.stem, nb, {})
    skip = skip_reason(declared, opts)
    if skip:
        step.status, (step.reason, step.enable) = "skipped", skip
    values = {**report_values(opts), **opts.extra}
    for name, value in values.items():
        if name in declared and value is not None:
            step.parameters[name] = coerce(value, declared[name]["inferred_type_name"], name)
    return step


def unused_options(opts: ReportOptions, steps: list[Step] | None = None) -> list[str]:
    """Options given on the command line that no notebook that runs declares (e.g. --observed
    while notebook 04 is absent, or skipped for want of a target)."""
    running = [s.notebook for s in steps if s.status != "skipped"] if steps is not None \
        else opts.notebooks
    declared = {n for nb in running for n in notebook_parameters(nb)}
    return [f"--{name.replace('_', '-')}" for name in ("observed", "num_steps", "topk",
                                                        "num_draft_tokens", "wiring",
                                                        "device", "corpus", "prompts",
                                                        "hidden_states", "launch", "log")
            if getattr(opts, name) is not None and name not in declared]


def _skipped_takers(flag: str, steps: list[Step]) -> str:
    name = flag[2:].replace("-", "_")
    takers = [s for s in steps if s.status == "skipped" and name in notebook_parameters(s.notebook)]
    return "".join(f" ({s.name} takes it but is skipped: {s.reason}; {s.enable})" for s in takers)


def observed_floor_note(observed: str | None) -> str:
    """What an observed accept length says on its own: at 1.0 the engine accepts no draft token
    at all, which points at structure (the draft's weights, layers or vocab map as served), not
    at a draft that is merely weak."""
    if observed is None or not _is_number(observed):
        return ""
    value = float(observed)
    if value > 1.05:
        return ""
    return (f"the observed accept length {value:g} means almost no draft token is ever accepted: "
            "a structural failure (keys dropped, the wrong layers captured, d2t misread, an "
            "untrained or NaN head), not a weak draft; notebook 01's errors are the first "
            "suspects")


def report_values(opts: ReportOptions) -> dict[str, Any]:
    """What the report passes for each parameter a notebook may declare. Paths the user did not
    give are passed empty, never left at a notebook default: those point at the bundled tiny
    target, which would describe another model than the user's."""
    def path(p):
        return "" if p is None else str(p)
    return {"checkpoint": str(opts.checkpoint),
            "engine": ",".join(opts.engines),
            "target_config": path(opts.target_config), "tokenizer": path(opts.tokenizer),
            "target": path(opts.target), "hidden_states": path(opts.hidden_states),
            "corpus": path(opts.corpus),
            "prompts": None if opts.prompts is None else str(opts.prompts),
            "train_data": path(opts.train_data), "target_model": path(opts.target),
            "chat_template": "", "serve_thinking": "",
            "observed": opts.observed, "launch": opts.launch or "", "log": path(opts.log),
            "device": opts.device, "num_steps": opts.num_steps, "topk": opts.topk,
            "num_draft_tokens": opts.num_draft_tokens,
            "wiring": opts.wiring, "interactive": False}


def skip_reason(declared: dict[str, dict], opts: ReportOptions) -> tuple[str, str] | None:
    """(why, how to enable) for a notebook that needs a target model (or the training data) and
    has none."""
    if "train_data" in declared:
        return None if opts.train_data else (
            "needs the training data: no --train-data given",
            "pass --train-data PATH (the training JSONL or the trainer's directory)")
    if "hidden_states" in declared and opts.hidden_states:
        return None
    if "target" not in declared or opts.target:
        return None
    how = "pass --target DIR (the target model's transformers directory)"
    if "hidden_states" in declared:
        how += " or --hidden-states DIR (the engine's hidden-state dumps)"
    why = ("needs a live target model; --hidden-states alone is not enough for it"
           if opts.hidden_states else "needs the target model: no --target given")
    return why, how


def coerce(value: Any, type_name: str, name: str) -> Any:
    """A CLI string (or option value) -> the type the notebook declares."""
    if not isinstance(value, str):
        return str(value) if type_name == "str" else value
    try:
        if type_name == "bool":
            return {"true": True, "1": True, "yes": True, "false": False, "0": False,
                    "no": False}[value.strip().lower()]
        if type_name == "int":
            return int(value)
        if type_name == "float":
            return float(value)
    except (KeyError, ValueError):
        raise Eagle3NbError(f"{value!r} is not of type {type_name}", name,
                            f"the notebooks declare {name} as {type_name}") from None
    return value


def effective_parameters(step: Step) -> dict[str, Any]:
    """The values the notebook ran with: given ones, else its defaults (relative paths resolved
    against the notebook folder, as the kernel sees them)."""
    out = {}
    for name, p in notebook_parameters(step.notebook).items():
        if name in step.parameters:
            out[name] = step.parameters[name]
            continue
        try:
            value = ast.literal_eval(p["default"])
        except (ValueError, SyntaxError):
            value = p["default"]
        if isinstance(value, str) and value.startswith(("./", "../")):
            value = str((step.notebook.parent / value).resolve())
        out[name] = value
    return out


# ----------------------------------------------------------------------------- provenance

def versions() -> dict[str, str | None]:
    """The kit's and its dependencies' versions from package metadata (imports nothing)."""
    out: dict[str, str | None] = {"python": platform.python_version()}
    for name in PACKAGES:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = None
    return out


def input_hashes(opts: ReportOptions, steps: list[Step]) -> dict[str, Any]:
    """sha256 of the checkpoint's config.json and weights, and of every input file a notebook
    that runs reads (target config, tokenizer, prompts, corpus, observed metrics), defaults
    included. Target weights and hidden-state dumps are not hashed (they may be terabytes)."""
    ckpt = Checkpoint.open(opts.checkpoint)
    files: dict[str, dict[str, str]] = {}
    for step in steps:
        if step.status == "skipped":
            continue
        for name, value in effective_parameters(step).items():
            if name in HASHED_PARAMETERS and isinstance(value, str) and value \
                    and Path(value).is_file():
                path = Path(value)
                files.setdefault(name, {})[value] = (
                    sha256_file(path) if path.stat().st_size <= PARTIAL_HASH_BYTES
                    else f"sha256 of the first {PARTIAL_HASH_BYTES} bytes: "
                         f"{sha256_file(path, PARTIAL_HASH_BYTES)}")
    hashed, partial = ckpt.hash_files_within(HASH_BUDGET_BYTES)
    return {"checkpoint": {"path": str(ckpt.path), "files": hashed, "partially_hashed": partial},
            "files": files,
            "not_hashed": {k: str(v) for k, v in (("target", opts.target),
                                                   ("hidden_states", opts.hidden_states)) if v}}


# ----------------------------------------------------------------------------- merging

def merge_findings(steps: list[Step], checkpoint: str | None = None,
                   inputs: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """Every notebook's findings, one entry per (code, severity, engine, message) with the
    notebooks that found it, its next step and command (as every command's findings carry
    them: engines.advice.with_advice, INPUTS filling the command); errors first, then
    warnings, then info, stable otherwise."""
    merged: dict[tuple, dict[str, Any]] = {}
    for step in steps:
        for f in (step.summary or {}).get("findings") or []:
            key = (f.get("code"), f.get("severity"), f.get("engine"), f.get("message"))
            entry = merged.setdefault(key, {
                **{k: f.get(k) for k in ("code", "severity", "engine", "message", "evidence")},
                "meaning": CODES.get(f.get("code"), ""),
                "todo": next_step(f.get("code"), [f.get("engine")], checkpoint),
                "notebooks": []})
            if step.name not in entry["notebooks"]:
                entry["notebooks"].append(step.name)
    findings = with_advice({"findings": list(merged.values())}, inputs, checkpoint)["findings"]
    for f in findings:  # a step the finding brings itself (with_advice) wins over its code's
        f["todo"] = f.get("next_step") or f["todo"]
    return sorted(findings, key=lambda f: SEVERITY_ORDER.get(f["severity"], 3))


def advice_inputs(opts: ReportOptions) -> dict[str, str]:
    """The report's inputs a finding's command may name (findings.next_command)."""
    given = {"TARGET_DIR": opts.target, "TARGET_CONFIG": opts.target_config, "LOG": opts.log,
             "TOKENIZER": opts.tokenizer, "DUMPS_DIR": opts.hidden_states,
             "OBSERVED": opts.observed}
    return {k: str(v) for k, v in given.items() if v is not None and v != ""}


def group_findings(findings: list[dict[str, Any]], checkpoint: str | None = None
                   ) -> list[dict[str, Any]]:
    """Merged findings for reading: identical ones of several engines once, with the engines,
    the notebooks that found them and the next step (and command) for the group. Severity
    order kept."""
    groups: dict[tuple, dict[str, Any]] = {}
    for f in findings:
        g = groups.setdefault((f["code"], f["severity"], f["message"]),
                              {**f, "engines": [], "notebooks": []})
        if f.get("engine"):
            g["engines"].append(f["engine"])
            g["command"] = f.get("command")  # the last engine's, as the step names it
        g["notebooks"] += [n for n in f["notebooks"] if n not in g["notebooks"]]
    for g in groups.values():
        g.pop("engine", None)
        g["todo"] = g.get("next_step") or next_step(g["code"], g["engines"], checkpoint)
    return list(groups.values())


def key_figures(steps: list[Step]) -> dict[str, Any]:
    """The numbers a reader looks for first, recognised by what each summary holds."""
    out: dict[str, Any] = {}
    for step in steps:
        s = step.summary or {}
        if "verdicts" in s and "verdicts" not in out:
            out.update(verdicts=s["verdicts"], verdict_line=s.get("verdict_line"),
                       layout=s.get("layout"), format=s.get("format"),
                       unchecked=[u.get("what") for u in s.get("unchecked") or []],
                       evidence=s.get("evidence"),
                       aux_layers={p: {"captured": e.get("aux_captured"),
                                       "trained": e.get("aux_trained"),
                                       "source": e.get("aux_source")}
                                   for p, e in (s.get("engines") or {}).items()})
        if "valid" in s and "t2d_agrees" in s:
            out["d2t"] = {"format": s.get("format"), "valid": s.get("valid"),
                          "codes": s.get("codes"), "coverage": s.get("coverage")}
        if "wirings" in s:
            out["first_step_accuracy"] = {
                r["wiring"]["name"]: {"accuracy": r.get("accuracy"), "width": r.get("width"),
                                      "fc_applied": r.get("fc_applied"), "error": r.get("error"),
                                      "unmeasured": r.get("unmeasured")}
                for r in s["wirings"]}
            out["first_step_reference"] = s.get("reference") or "the target's greedy tokens"
        if "headline" in s or "what_if" in s:
            out["acceptance"] = acceptance_figures(s)
    return out


def acceptance_figures(s: dict[str, Any]) -> dict[str, Any]:
    """Notebook 04's numbers: the simulated accept length as trained, the compared wiring, what
    the engine reported, and each what-if wiring's accept length and whether it matches."""
    def as_dict(x):
        return x if isinstance(x, dict) else {}
    head, comp, what = as_dict(s.get("headline")), as_dict(s.get("compare")), \
        as_dict(s.get("what_if"))
    rows = [r for r in what.get("rows") or [] if isinstance(r, dict) and "wiring" in r]
    return {"wiring": head.get("wiring"), "mean_accept_length": head.get("mean_accept_length"),
            "mean_accept_length_se": head.get("mean_accept_length_se"),
            "per_position_acceptance": head.get("per_position_acceptance"),
            "compare": ({k: comp.get(k) for k in ("wiring", "mean_accept_length",
                                                  "mean_accept_length_se")} if comp else None),
            "settings": s.get("settings"), "evidence": s.get("evidence"),
            "observed": what.get("observed_accept_length"), "explanation": what.get("explanation"),
            "what_if": {r["wiring"]: {k: r.get(k) for k in ("mean_accept_length", "standard_error",
                                                            "vs_trained", "consistent", "error")}
                        for r in rows},
            "teacher_forced": s.get("teacher_forced")}


def overall_verdict(findings: list[dict], steps: list[Step], figures: dict) -> dict[str, Any]:
    """Worst severity, counts (one per finding and engine), the codes per severity, failed and
    skipped notebooks, and one line of text saying all that."""
    counts = {s: sum(f["severity"] == s for f in findings) for s in SEVERITY_ORDER}
    codes = {s: list(dict.fromkeys(f["code"] for f in findings if f["severity"] == s))
             for s in SEVERITY_ORDER}
    failed = [s.name for s in steps if s.status == "failed"]
    skipped = [s.name for s in steps if s.status == "skipped"]
    worst = next((s for s in SEVERITY_ORDER if counts[s]), "ok")
    parts = [f"{s}s {', '.join(codes[s])}" for s in ("error", "warning") if codes[s]]
    text = (f"{worst.upper()}: {'; '.join(parts) or 'no errors or warnings'} "
            f"({len(steps) - len(failed) - len(skipped)} of {len(steps)} notebooks ran)")
    if failed:
        text += f"; FAILED: {', '.join(failed)}"
    if skipped:
        text += f"; skipped: {', '.join(skipped)}"
    unchecked = figures.get("unchecked") or []
    if unchecked:  # never a bare ok about what the inspection did not look at
        text += f"; not checked: {', '.join(unchecked)} (see notebook 01)"
    return {"worst_severity": worst, "counts": counts, "codes": codes, "failed": failed,
            "skipped": skipped, "text": text, "line": figures.get("verdict_line")}


def exit_code(verdict: dict[str, Any], fail_on: str) -> int:
    """1 when --fail-on says the report failed, else 0 (bad input never gets this far: 2)."""
    if fail_on == "never":
        return 0
    if verdict["failed"] or verdict["counts"]["error"]:
        return 1
    return 1 if fail_on == "warning" and verdict["counts"]["warning"] else 0


def build_summary(opts: ReportOptions, steps: list[Step], hashes: dict[str, Any],
                  started: datetime, built_in: Path | None = None) -> dict[str, Any]:
    """built_in: where the notebooks' files are now (the staging dir, until it is swapped in)."""
    findings = merge_findings(steps, str(opts.checkpoint), advice_inputs(opts))
    figures = key_figures(steps)
    verdict = overall_verdict(findings, steps, figures)
    return {"summary_version": SUMMARY_VERSION, "kind": "eagle3-nb report",
            "checkpoint": str(opts.checkpoint), "out": str(opts.out),
            "verdict": verdict, "exit_code": exit_code(verdict, opts.fail_on),
            "fail_on": opts.fail_on, "findings": findings, "key_figures": figures,
            "notebooks": [s.to_json(built_in or opts.out) for s in steps],
            "versions": versions(), "inputs": hashes,
            "command": opts.command, "cwd": os.getcwd(),
            "started": started.isoformat(timespec="seconds"),
            "finished": datetime.now(timezone.utc).isoformat(timespec="seconds")}


# ----------------------------------------------------------------------------- demo

def demo_engines() -> list[str]:
    """The releases the demo answers for: each engine's `demo_releases` (the release whose loader
    drops layers0-flat's `layers.0.*` keys silently, the story the demo tells), then its newest."""
    return [f"{e.name}=={r}" for e in engines().values()
            for r in dict.fromkeys((*e.demo_releases, e.newest))]


def run_demo(out: Path = Path("reports/demo"), progress: Callable[[str], None] | None = None,
             kernel_name: str | None = None) -> dict[str, Any]:
    """The full report on the bundled layers0-flat draft (its keys SGLang 0.5.9 drops silently)
    served against the bundled tiny target, small enough for two CPU cores."""
    samples = samples_dir()
    draft = samples / "drafts" / "layers0-flat"
    if not draft.is_dir() or not (samples / "target" / "config.json").is_file():
        raise Eagle3NbError("bundled samples not found", str(samples),
                            "run `make samples` (python -m eagle3_nb.samples)")
    opts = ReportOptions(checkpoint=draft, out=Path(out), target=samples / "target",
                         engines=demo_engines(), overwrite=True, fail_on="never",
                         command=["eagle3-nb", "demo", "--out", str(out)])
    return run_report(opts, progress, kernel_name)

