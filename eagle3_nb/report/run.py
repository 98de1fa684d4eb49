"""The triage report: every notebook run headless on one checkpoint, each rendered to offline
HTML, then one `index.html` (verdict, findings of every notebook by severity, key figures,
links) and one `summary.json` (the same, plus versions, input hashes and the command line) for
CI and post-mortems. Also what notebook 00 shows: the top findings with the next thing to try,
and the engine flags to check by hand.

The parts: `options` (inputs, checks, the output folder's rules), `steps` (which notebook
runs with what), `summary` (summary.json), this module (running and writing).

    summary = run_report(ReportOptions(checkpoint=Path("my/draft"), out=Path("reports/x"),
                                       target=Path("my/target")))
    summary["exit_code"]  # follows fail_on

Layout of the output directory:

    index.html  summary.json  .eagle3-nb-report  (summary.md with --markdown)
    00_triage/00_triage.ipynb  00_triage/00_triage.html  00_triage/summary.json
    01_checkpoint_keys/...     (one folder per notebook, skipped ones absent)
"""

from __future__ import annotations

import contextlib
import json
import shutil
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

from eagle3_nb.checks.load import inspect_checkpoint
from eagle3_nb.engines import engines, parse_engines
from eagle3_nb.errors import Eagle3NbError
from eagle3_nb.findings import SUMMARY_KINDS, SUMMARY_VERSION, part_kind
from eagle3_nb.io.files import (OWNER_NAME, atomic_write_text, json_text, cleanup_on_signals,
                                directory_lock, remove_stale_staging, staging_dir, swap_in)
from eagle3_nb.io.resources import samples_dir
from eagle3_nb.report.markdown import summary_markdown
from eagle3_nb.report.kernel import ReportKernel
from eagle3_nb.report.notebooks import (SUMMARY_NAME, ReportError, notebook_parameters,
                                        render_html, run_notebook)
from eagle3_nb.report.options import (MARKER, ReportOptions, check_out, make_parent, report_files,
                                      resolve_options)
from eagle3_nb.report.redact import PathRedactor, report_redactor
from eagle3_nb.report.relay import relayed_progress
from eagle3_nb.report.steps import (Step, coerce, observed_floor_note, plan_steps,
                                    skipped_takers, unused_options)
from eagle3_nb.report.summary import build_summary, group_findings, input_hashes
from eagle3_nb.viz.triage import index_html

MARKDOWN_NAME = "summary.md"
INSPECTION_NAME = "inspection.json"  # the inspection notebooks 00 and 01 show, made once


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
            + skipped_takers(flag, steps))
    observed = observed_floor_note(opts.observed)
    if observed:
        say(f"note: {observed}")
    make_parent(opts.out)
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
    shared = share_inspection(opts, steps, build)
    with relayed_progress(say) as relay, ReportKernel(kernel_name) as kernel:
        for i, step in enumerate(steps, 1):
            line = f"[{i}/{len(steps)}] {step.name} ..."
            if step.status != "skipped":
                say(line)  # a line as it starts, its progress under it, a line as it ends
            word = run_step(step, build, published=opts.out, redact=redact, kernel=kernel)
            relay.drain()
            say(f"{line} {word}")
    if shared is not None:
        _publish_inspection(shared, opts.out, steps, redact)
    return build_summary(opts, steps, hashes, started, build)


def share_inspection(opts: ReportOptions, steps: list[Step], build: Path) -> Path | None:
    """The inspection every notebook that declares `inspection` shows (00 and 01), made once
    here and written to the report's inspection.json. When it raises, the notebooks are left
    to inspect on their own, and fail there with the error on their page."""
    takers = [s for s in steps if s.status != "skipped"
              and "inspection" in notebook_parameters(s.notebook)]
    if not takers:
        return None
    try:
        data = inspect_checkpoint(
            opts.checkpoint, engines=parse_engines(",".join(opts.engines)),
            target_config=opts.target_config, launch=opts.launch, log=opts.log,
            stats=coerce(opts.extra.get("stats", True), "bool", "stats")).to_json()
    except Exception:  # noqa: BLE001 - each notebook then shows the error itself
        return None
    path = build / INSPECTION_NAME
    atomic_write_text(path, json_text(data) + "\n")
    for step in takers:
        step.parameters["inspection"] = str(path)
    return path


def _publish_inspection(path: Path, published: Path, steps: list[Step],
                        redact: PathRedactor | None) -> None:
    """The steps' parameters name inspection.json where the report is published; with
    --redact-paths its paths are redacted as every other file's."""
    for step in steps:
        if "inspection" in step.parameters:
            step.parameters["inspection"] = str(published / INSPECTION_NAME)
    if redact is not None:
        atomic_write_text(path, json_text(redact.data(json.loads(path.read_text()))) + "\n")


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
             published: Path | None = None, redact: PathRedactor | None = None,
             kernel: ReportKernel | None = None) -> str:
    """Execute and render one notebook; never raises for a notebook that fails. Returns the
    progress word. `published`: where `out` will be renamed to; the executed notebook then
    names that folder, not the staging one it ran in. `redact`: rewrites every path in the
    notebook's files before its page is rendered (--redact-paths). `kernel`: the report's
    shared kernel (else the notebook gets one of its own, KERNEL_NAME)."""
    if step.status == "skipped":
        return f"skipped ({step.reason})"
    folder = out / step.name
    t0 = time.monotonic()
    try:
        run_notebook(step.notebook, folder, step.parameters, kernel_name=kernel_name,
                     kernel=kernel)
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
    step.summary = _read_part(step, folder / SUMMARY_NAME)
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


def _read_part(step: Step, path: Path) -> dict[str, Any] | None:
    """The notebook's summary.json, read only when it declares its kind (findings.part_kind): a
    part the report cannot place fails its step rather than being guessed at from its keys."""
    part = _read_json(path)
    if part is None or part_kind(part) is not None:
        return part
    step.status = "failed"
    step.error = step.error or (f"{SUMMARY_NAME} declares no kind the report reads "
                                f"(kind {part.get('kind')!r}, summary_version "
                                f"{part.get('summary_version')!r}; expected one of "
                                f"{', '.join(SUMMARY_KINDS)}, version {SUMMARY_VERSION})")
    return None


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def demo_engines() -> list[str]:
    """The releases the demo answers for: each engine's `demo_releases` (the release whose loader
    drops layers0-flat's `layers.0.*` keys silently, the story the demo tells), then its newest."""
    return [f"{e.name}=={r}" for e in engines().values()
            for r in dict.fromkeys((*e.demo_releases, e.newest))]


def run_demo(out: Path = Path("reports/demo"), progress: Callable[[str], None] | None = None,
             kernel_name: str | None = None, redact_paths: bool = False,
             markdown: bool = False) -> dict[str, Any]:
    """The full report on the bundled layers0-flat draft (its keys SGLang 0.5.9 drops silently)
    served against the bundled tiny target, small enough for two CPU cores. redact_paths and
    markdown: as the report's (--redact-paths, --markdown)."""
    samples = samples_dir()
    draft = samples / "drafts" / "layers0-flat"
    if not draft.is_dir() or not (samples / "target" / "config.json").is_file():
        raise Eagle3NbError("bundled samples not found", str(samples),
                            "run `make samples` (python -m eagle3_nb.samples)")
    flags = [f for f, on in (("--redact-paths", redact_paths), ("--markdown", markdown)) if on]
    opts = ReportOptions(checkpoint=draft, out=Path(out), target=samples / "target",
                         engines=demo_engines(), overwrite=True, fail_on="never",
                         command=["eagle3-nb", "demo", "--out", str(out), *flags],
                         redact_paths=redact_paths, markdown=markdown)
    return run_report(opts, progress, kernel_name)
