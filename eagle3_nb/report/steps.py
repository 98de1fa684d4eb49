"""The report's steps: which notebooks run, each with the parameters it declares (set from the
report's options), or why it is skipped and how to enable it."""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from eagle3_nb.errors import Eagle3NbError
from eagle3_nb.report.notebooks import SUMMARY_NAME, notebook_parameters
from eagle3_nb.report.options import OWN_OPTIONS, ReportOptions, is_number

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


def skipped_takers(flag: str, steps: list[Step]) -> str:
    name = flag[2:].replace("-", "_")
    takers = [s for s in steps if s.status == "skipped" and name in notebook_parameters(s.notebook)]
    return "".join(f" ({s.name} takes it but is skipped: {s.reason}; {s.enable})" for s in takers)


def observed_floor_note(observed: str | None) -> str:
    """What an observed accept length says on its own: at 1.0 the engine accepts no draft token
    at all, which points at structure (the draft's weights, layers or vocab map as served), not
    at a draft that is merely weak."""
    if observed is None or not is_number(observed):
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
