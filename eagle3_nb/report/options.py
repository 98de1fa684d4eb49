"""The report's inputs: its options, every check they pass before anything is written (bad
input raises Eagle3NbError: exit 2, nothing written), and the rules for its output folder (what
an --overwrite may replace, and nothing else)."""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from eagle3_nb.checks.options import AcceptanceOptions
from eagle3_nb.checks.target_match import preflight
from eagle3_nb.config import draft_marker, token_id_list
from eagle3_nb.engines import resolve_engines
from eagle3_nb.errors import Eagle3NbError, OutputExistsError
from eagle3_nb.io.checkpoint import Checkpoint, iter_jsonl, load_target_info, open_once, read_json
from eagle3_nb.io.resources import notebooks_dir
from eagle3_nb.observed.metrics import parse_observed
from eagle3_nb.report.notebooks import PATH_PARAMETERS, SUMMARY_NAME, notebook_parameters
from eagle3_nb.vocab import load_tokenizer, read_corpus

MARKER = ".eagle3-nb-report"


FAIL_ON = ("error", "warning", "never")


# Parameters the report sets from its own arguments (a -p for them would bypass the checks,
# the skip rules or the one-folder-per-notebook layout).
OWN_OPTIONS = {"checkpoint": "the CHECKPOINT argument", "output_dir": "--out",
               "target": "--target", "hidden_states": "--hidden-states", "engine": "--engine",
               "target_config": "--target-config", "tokenizer": "--tokenizer",
               "corpus": "--corpus", "prompts": "--prompts", "observed": "--observed",
               "device": "--device", "num_steps": "--num-steps", "wiring": "--wiring",
               "launch": "--launch", "topk": "--topk", "num_draft_tokens": "--num-draft-tokens",
               "log": "--log", "inspection": "the report's own inspection.json"}


# What --overwrite may delete: only what a report writes (and an older notebook-01-only demo).
_REPORT_ENTRY = re.compile(r"^(index\.html|summary\.json|inspection\.json|\.eagle3-nb-report|"
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


def resolve_options(opts: ReportOptions) -> ReportOptions:
    """Absolute paths, implied files (--target DIR -> its config.json and tokenizer.json), and
    every check that can fail before anything is written."""
    ckpt = open_once(opts.checkpoint)  # CheckpointError: bad input, exit 2
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
        from eagle3_nb.checks.drafting import drafting_of_run
        drafting_of_run(o.checkpoint, o.target, AcceptanceOptions(
            num_steps=o.num_steps, topk=o.topk, num_draft_tokens=o.num_draft_tokens,
            launch=o.launch, observed=o.observed, engines=o.engines or None))
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
    if o.observed and not is_number(o.observed):
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


def is_number(text: str) -> bool:
    try:
        float(text)
        return True
    except ValueError:
        return False


def _observed(value: str | None) -> str | None:
    """A number (an engine's reported accept length) or a metrics file (made absolute)."""
    if value is None or value == "":
        return None
    if is_number(value):
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


def make_parent(out: Path) -> None:
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
