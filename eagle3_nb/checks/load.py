"""Inspection: will each engine load this draft, and what will it do with it?

path -> Checkpoint -> DraftConfig -> LoadPlan per engine (+ schema diff, tensor statistics)
-> findings. Headers and JSON only unless statistics are asked for; never imports torch for a
safetensors checkpoint.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from eagle3_nb.config import DraftConfig, TargetInfo, aux_id_faults
from eagle3_nb.errors import ConfigError, Eagle3NbError
from eagle3_nb.engines import resolve_engines
from eagle3_nb.engines.registry import engine as registered
from eagle3_nb.engines.facts import CHECKS
from eagle3_nb.engines.planner import NEEDS, LoadPlan, plan_load
from eagle3_nb.findings import (ERROR, INFO, NEXT_COMMANDS, WARNING, Finding,
                                engine_codes, given, has_errors, release_given, sort_findings,
                                verdict_line, verdicts)
from eagle3_nb.io.checkpoint import Checkpoint, load_target_info, open_once, read_json
from eagle3_nb.checks.result import CheckResult, JsonResult
from eagle3_nb.checks.target_match import (NOT_A_DRAFT_TODO, embedding_findings, not_a_draft,
                                           not_a_draft_finding, target_findings)
from eagle3_nb.layouts import Layout, SchemaRow, detect_layout, schema_diff

DEFAULT_STATS_BUDGET = 1 << 30


@dataclass
class Inspection(CheckResult):
    """The answer of `eagle3-nb inspect` and notebook 01; to_json() is what --json prints and
    what a report writes to its inspection.json (SavedInspection reads it back)."""
    kind = "inspection"
    notebook = "01_checkpoint_keys"

    checkpoint: Checkpoint
    config: DraftConfig
    layout: Layout
    target: TargetInfo | None
    plans: list[LoadPlan]
    schema: list[SchemaRow]
    stats: Any | None            # stats.StatsResult when statistics were scanned
    global_findings: list[Finding]
    vocab: Any | None = None     # vocab.VocabMapping when tensor data was read
    compared_embeddings: bool = False  # the target's weights were at hand for embed_tokens
    launch: Any | None = None    # engines.launch.LaunchSettings when a command was given
    log: Any | None = None       # checks.log.LogReading when a server log was given
    release_from: str = ""       # where the engine releases answered for came from
    not_a_draft: Finding | None = None  # a target model given as the draft: the only finding

    @property
    def findings(self) -> list[Finding]:
        if self.not_a_draft is not None:  # the rest describes a target read as a draft
            return [self.not_a_draft]
        out = list(self.global_findings)
        for plan in self.plans:
            out.extend(plan.findings)
        return sort_findings(out)

    @property
    def has_errors(self) -> bool:
        return has_errors(self.findings)

    def to_json(self) -> dict[str, Any]:
        ckpt = self.checkpoint
        return {
            "kind": "inspection",
            "checkpoint": str(ckpt.path),
            "format": ckpt.format,
            "layout": self.layout.name,
            "layout_prefixes": list(self.layout.prefixes),
            "config": self.config.to_json(),
            "target": None if self.target is None else {
                "num_hidden_layers": self.target.num_hidden_layers,
                "hidden_size": self.target.hidden_size, "vocab_size": self.target.vocab_size,
                "max_position_embeddings": self.target.max_position_embeddings,
                "family": self.target.family},
            "tensors": [{"name": t.name, "shape": list(t.shape), "dtype": t.dtype, "file": t.file}
                        for t in ckpt.tensors.values()],
            "schema": [_schema_row_json(r) for r in self.schema],
            "stats": None if self.stats is None else self.stats.to_json(),
            "vocab": None if self.vocab is None else {
                "format": self.vocab.format, "evidence": self.vocab.evidence,
                "problems": self.vocab.problems, "t2d_agrees": self.vocab.t2d_agrees,
                "engines": self.vocab.engine_view(p.profile for p in self.plans)},
            "engines": [p.to_json(self.beyond_plan(p)) for p in self.plans],
            "findings": [f.to_json() for f in self.findings],
            "launch": None if self.launch is None else self.launch.to_json(),
            "log": None if self.log is None else self.log.to_json(),
            "evidence": self.evidence(),
            "unchecked": self.unchecked(),
            "overall": self.overall(),
        }

    def summary_body(self) -> dict[str, Any]:
        return inspection_digest(self.to_json())

    def evidence(self) -> dict[str, str]:
        """What this answer had to go on, and the flag that supplies what it did not."""
        return {"checkpoint": "given",
                "target config": given(self.target, "--target-config"),
                "target weights": given(self.compared_embeddings, "--target-config TARGET_DIR"),
                "engine release": self.release_from,
                "launch command": ("given" if self.launch is not None and self.log is None
                                   else "from the log" if self.launch is not None
                                   else "not given (--launch)"),
                "log": given(self.log is not None, "--log")}

    def beyond_plan(self, plan: LoadPlan) -> list[Finding]:
        """The findings outside the plan that hold for its release: the draft's own (no
        engine) and those tagged with it. A finding tagged with another release never touches
        this one's verdict."""
        return [f for f in self.global_findings if f.engine in (None, plan.profile.key)]

    def unchecked(self) -> list[dict[str, str]]:
        """What this inspection did not look at, each with how to look: a verdict is only as
        good as what was checked."""
        out: list[dict[str, str]] = []
        if self.not_a_draft is not None:  # nothing about a draft was checked, nor needs to be
            return out
        if self.stats is None:
            out.append(_item("tensor values", "not scanned (--no-stats): NaN/Inf or untrained "
                             "tensors go unnoticed", "drop --no-stats"))
        elif self.stats.skipped:
            out.append(_item("tensor values", f"{len(self.stats.skipped)} tensor(s) beyond the "
                             "statistics budget were scanned only in part",
                             "raise --stats-budget"))
        if self.vocab is None and self.checkpoint.key_map.has("d2t"):
            out.append(_item("d2t values", "not read (--no-stats): offsets vs absolute ids, "
                             "range and injectivity unchecked", "drop --no-stats, or eagle3-nb vocab"))
        own_embed = self.checkpoint.key_map.has("embed_tokens.weight")
        if own_embed and (self.stats is None or not self.compared_embeddings):
            out.append(_item("embed_tokens", CHECKS["own_embed"],
                             "pass the target directory as --target-config, stats on"))
        if self.target is None:
            out.append(_item("the target", "no target config: the captured layers, the target "
                             "class's capture and the context length are not checked",
                             "pass --target-config TARGET/config.json"))
        return out

    def overall(self) -> str:
        """One word for the whole inspection: an engine verdict other than ok wins; else "ok"
        only when nothing was left unchecked."""
        if self.not_a_draft is not None:
            return "load_error"
        verdicts = {p.verdict_with(self.beyond_plan(p)) for p in self.plans}
        if has_errors([f for f in self.global_findings if f.engine is None]) and \
                verdicts <= {"ok"}:
            verdicts = {"silent_failure"}
        for worst in ("load_error", "silent_failure"):
            if worst in verdicts:
                return worst
        return "ok_as_far_as_checked" if self.unchecked() else "ok"


def _launch_settings(launch: str | None, reading):
    """The serving command's settings: the launch given, else the log's server arguments."""
    from_log = reading is not None and reading.server_args
    if not launch and not from_log:
        return None
    from eagle3_nb.engines.launch import launch_from_args, read_launch

    settings = read_launch(launch) if launch else None
    return settings if settings is not None or not from_log else \
        launch_from_args(reading.server_args)


def inspect_checkpoint(path: str | Path, engines: list[str] | None = None,
                       target_config: str | Path | None = None, stats: bool = True,
                       stats_budget: int = DEFAULT_STATS_BUDGET,
                       launch: str | None = None, log: str | Path | None = None) -> Inspection:
    """What each engine release does with the draft at PATH. LOG (the engine's server log or a
    traceback) names the release when ENGINES does not, and its exceptions are explained."""
    ckpt = open_once(path)
    why = not_a_draft(ckpt)
    cfg = _draft_config(ckpt, why)
    stats = stats and not why  # a target's tensors say nothing about a draft
    target = load_target_info(target_config) if target_config else None
    reading = None
    if log:  # the log, launch and statistics readers load only when asked for (start-up, #26)
        from eagle3_nb.checks.log import check_log

        reading = check_log(log, engines[0] if engines and len(engines) == 1 else None,
                            launch_checks=False)
    release_from = release_given(engines)
    if reading is not None and not engines and reading.profile:
        engines, release_from = [reading.profile], "from the log"
    profiles = resolve_engines(engines)
    settings = _launch_settings(launch, reading)
    served = getattr(settings, "draft", None) or ""
    shapes = {name: t.shape for name, t in ckpt.tensors.items()}
    plans = [plan_load(p, cfg, shapes, target, key_map=ckpt.key_map, served_path=served)
             for p in profiles]
    if not why:
        _settle_convert_advice(ckpt, plans, target)
    schema = schema_diff(cfg, shapes, ckpt.key_map)
    findings = checkpoint_findings(ckpt, cfg, schema)
    if target is not None:
        findings += target_findings(cfg, target)
    stats_result = vocab = None
    if stats:  # the only steps that read tensor data
        from eagle3_nb.stats import scan_stats, stats_findings

        stats_result = scan_stats(ckpt, stats_budget)
        findings += stats_findings(stats_result, ckpt)
        from eagle3_nb.vocab import VocabMapping  # numpy: only when d2t values are read

        vocab = VocabMapping.from_checkpoint(ckpt, cfg)
        findings += vocab.findings()
    else:
        findings += _vocab_presence_findings(ckpt, cfg)
    if settings is not None:
        from eagle3_nb.engines.launch import launch_findings

        findings += launch_findings(settings, cfg, [p.profile for p in plans],
                                    target.num_hidden_layers if target else None)
        _settle_launch_conditions(plans, settings)
    if reading is not None:
        findings += reading.findings
    findings += path_findings(served or str(ckpt.path), ckpt.path, plans)
    findings = _settle_d2t_advice(ckpt, findings)
    weights_at = _target_weights_dir(target_config)
    if stats and weights_at is not None:
        findings += embedding_findings(ckpt, weights_at, plans)
    return Inspection(ckpt, cfg, detect_layout(ckpt.key_map), target, plans, schema,
                      stats_result, findings, vocab, compared_embeddings=weights_at is not None,
                      launch=settings, log=reading, release_from=release_from,
                      not_a_draft=not_a_draft_finding(why) if why else None)


def path_findings(path: str, files_at: Path, plans) -> list[Finding]:
    """Engines that misread the draft's path by its words (Engine.path_misread), per release:
    PATH as served, FILES_AT the draft's folder here."""
    out = []
    for plan in plans:
        message = registered(plan.profile.name).path_misread(path, plan.profile.version,
                                                             files_at)
        if message:
            out.append(Finding("ENGINE_MISREADS_PATH", ERROR, message, {"path": path},
                               plan.profile.key))
    return out


def _draft_config(ckpt: Checkpoint, not_a_draft: str) -> DraftConfig:
    """The draft's parsed config; a target's config that does not parse as a draft's says
    what the directory is instead of what its config lacks."""
    try:
        return ckpt.config
    except ConfigError as exc:
        if not_a_draft:
            raise ConfigError(not_a_draft, str(ckpt.path), NOT_A_DRAFT_TODO) from exc
        raise


# the next step of a finding the engine's converted copy would still have (its code's step
# names the conversion, findings.NEXT_COMMANDS): what is left once converting is ruled out
NO_CONVERSION_STEP = ("converting a copy for {engine} does not remove this (the kit planned "
                      "the copy: {engine} still reports it); serve with a release whose verdict "
                      "is ok, or fix what the message names where the draft was exported")


def _settle_convert_advice(ckpt: Checkpoint, plans: list[LoadPlan], target) -> None:
    """Findings whose way out is `eagle3-nb convert ... --engine` (#25: advice checked by
    following it): the copy that command writes is planned from headers (convert.preview) and,
    where the engine reports the same code for it, the finding brings its own step and no
    command instead of advice that changes nothing."""
    from eagle3_nb.convert import preview   # the same layer; only for drafts with such findings

    convert = NEXT_COMMANDS.get("KEYS_DROPPED")
    for plan in plans:
        if not any(NEXT_COMMANDS.get(f.code) == convert for f in plan.findings):
            continue
        copy = preview(ckpt, plan.profile)
        left = ({f.code for f in plan_load(plan.profile, copy[0], copy[1], target).findings}
                if copy is not None else {f.code for f in plan.findings})
        plan.findings[:] = [
            replace(f, evidence={**f.evidence, "command": None, "next_step":
                                 NO_CONVERSION_STEP.format(engine=plan.profile.key)})
            if NEXT_COMMANDS.get(f.code) == convert and f.code in left else f
            for f in plan.findings]


def _settle_d2t_advice(ckpt: Checkpoint, findings: list[Finding]) -> list[Finding]:
    """A missing d2t is rebuilt by `convert --fix-d2t` only from a t2d the checkpoint ships:
    without one, the command would be refused, so the finding brings the step that is left."""
    if ckpt.key_map.has("t2d"):
        return findings
    step = ("no t2d in the checkpoint to rebuild d2t from (convert --fix-d2t needs one): "
            "rebuild d2t from the trainer's vocab mapping or token counts, in a copy")
    return [replace(f, evidence={**f.evidence, "command": None, "next_step": step})
            if f.code == "D2T_MISSING" else f for f in findings]


def _settle_launch_conditions(plans: list[LoadPlan], settings) -> None:
    """Known bugs whose condition is the serving command's: with the command at hand, a bug
    that needs an unset method goes when the command names one, and is a warning when not. The
    plan's defaulted aux ids, and the fc width it builds for their default count, go where the
    command itself gives the ids."""
    for plan in plans:
        kept = []
        for f in plan.findings:
            if f.code in ("AUX_LAYERS_DEFAULTED", "AUX_COUNT_MISMATCH") \
                    and getattr(settings, "aux_ids", None) is not None \
                    and settings.engine == plan.profile.name:
                continue  # the command names the ids: its own check judges them and their count
            if f.evidence.get("needs") == "launch_method_unset":
                if settings.method:
                    continue
                f = replace(f, severity=WARNING, message=f.message.replace(
                    NEEDS["launch_method_unset"], "the serving command names no method: "))
            kept.append(f)
        plan.findings[:] = kept


def _target_weights_dir(target_config: str | Path | None) -> Path | None:
    """The target's directory when its weights sit next to the given config."""
    if target_config is None:
        return None
    path = Path(target_config)
    folder = path if path.is_dir() else path.parent
    return folder if next(folder.glob("*.safetensors"), None) else None


def checkpoint_findings(ckpt: Checkpoint, cfg: DraftConfig, schema: list[SchemaRow]) -> list[Finding]:
    """Findings that hold whatever engine serves the draft."""
    out: list[Finding] = []
    if ckpt.code_files:
        out.append(Finding("REMOTE_CODE", INFO, "the checkpoint ships code "
                           f"({', '.join(ckpt.code_files)}); the kit never executes it and neither "
                           "should your engine (no --trust-remote-code)",
                           {"files": ckpt.code_files, "auto_map": ckpt.auto_map}))
    elif cfg.has_auto_map:
        out.append(Finding("REMOTE_CODE", INFO, "config.json names custom code (auto_map) that "
                           "the directory does not ship: with --trust-remote-code an engine "
                           "would fetch or fail to find it; without it, the auto_map is ignored",
                           {"files": [], "auto_map": ckpt.auto_map}))
    mismatched = [r for r in schema if r.status == "shape_mismatch"]
    if mismatched:
        out.append(Finding("SHAPE_MISMATCH", ERROR, "tensor shapes differ from what config.json "
                           "promises: " + "; ".join(f"{r.checkpoint_key} {list(r.actual_shape)} != "
                                                     f"{list(r.expected_shape)}" for r in mismatched[:4]),
                           {r.checkpoint_key: {"actual": list(r.actual_shape),
                                               "expected": list(r.expected_shape)}
                            for r in mismatched}))
    out += _aux_id_findings(cfg) + _aux_count_findings(ckpt, cfg)
    return out


def _aux_id_findings(cfg: DraftConfig) -> list[Finding]:
    ids, where = cfg.aux_layer_ids.value, cfg.aux_layer_ids.source
    faults = aux_id_faults(ids)
    if not faults:
        return []
    return [Finding("AUX_IDS_INVALID", ERROR, f"the aux layer ids {ids} ({where}) are not a "
                    f"list of distinct layers: {faults}. A hidden_states index is 0 or more "
                    "and each captured layer is listed once, so no convention reads these: "
                    "which layers training captured cannot be told from them, and no engine "
                    "captures them as written",
                    {"ids": ids, "declared_at": where, "faults": faults})]


def _aux_count_findings(ckpt: Checkpoint, cfg: DraftConfig) -> list[Finding]:
    keys = ckpt.key_map
    fc = next((t for n, t in ckpt.tensors.items() if keys.canonical(n) == "fc.weight"), None)
    ids = cfg.aux_layer_ids.value
    if fc is None or len(fc.shape) != 2 or not ids or fc.shape[1] % cfg.Ht:
        return []
    chunks = fc.shape[1] // cfg.Ht
    if chunks == len(ids):
        return []
    return [Finding("AUX_COUNT_MISMATCH", ERROR, f"fc takes {chunks} aux states of width {cfg.Ht} "
                    f"but the config declares {len(ids)} layer ids {ids}",
                    {"fc_width": fc.shape[1], "ids": ids})]


def _item(what: str, why: str, how: str) -> dict[str, str]:
    return {"what": what, "why": why, "how": how}


def _vocab_presence_findings(ckpt: Checkpoint, cfg: DraftConfig) -> list[Finding]:
    """Header-only vocab check (--no-stats): the full one reads d2t/t2d (eagle3_nb.vocab)."""
    if cfg.pruned_vocab and not ckpt.key_map.has("d2t"):
        return [Finding("D2T_MISSING", ERROR, f"draft vocab {cfg.Vd} < target vocab "
                        f"{cfg.vocab_size} but there is no d2t table: every engine uses draft ids "
                        "as target ids (silent garbage); rebuild d2t from the training token "
                        "counts", {"draft_vocab_size": cfg.Vd, "vocab_size": cfg.vocab_size})]
    return []


def _schema_row_json(row: SchemaRow) -> dict[str, Any]:
    return {"name": row.name, "checkpoint_key": row.checkpoint_key,
            "expected_shape": None if row.expected_shape is None else list(row.expected_shape),
            "actual_shape": None if row.actual_shape is None else list(row.actual_shape),
            "status": row.status, "note": row.note}


# ----------------------------------------------------------------------------- summary.json

@dataclass(frozen=True)
class SavedInspection(JsonResult):
    """An inspection a report already made, read back from its inspection.json
    (Inspection.to_json): notebooks 00 and 01 show it rather than inspecting again."""
    kind = "inspection"
    notebook = "01_checkpoint_keys"

    def summary_body(self) -> dict[str, Any]:
        return inspection_digest(self.data)


def read_inspection(path: str | Path, checkpoint: str | Path) -> SavedInspection:
    """The inspection of CHECKPOINT that a report already made and wrote to PATH."""
    where = Path(path)
    data = read_json(where.parent, where.name)
    if data.get("kind") != "inspection":
        raise Eagle3NbError("not an inspection written by the kit", str(where),
                            "pass the inspection.json of a report, or leave `inspection` empty "
                            "to inspect the checkpoint here")
    if Path(str(data.get("checkpoint"))).resolve() != Path(checkpoint).resolve():
        raise Eagle3NbError(f"an inspection of {data.get('checkpoint')}, not of {checkpoint}",
                            str(where), "leave `inspection` empty to inspect this checkpoint")
    return SavedInspection(data)


def inspection_of(checkpoint: str | Path, inspection: str | Path = "",
                  **options: Any) -> Inspection | SavedInspection:
    """What notebooks 00 and 01 show: the report's inspection when INSPECTION names its
    inspection.json, else CHECKPOINT inspected here (inspect_checkpoint with OPTIONS)."""
    if inspection:
        return read_inspection(inspection, checkpoint)
    return inspect_checkpoint(checkpoint, **options)


def inspection_digest(data: dict[str, Any]) -> dict[str, Any]:
    """What an inspection's summary.json part holds (notebook 01's, and the inspection part of
    notebook 00's), from its JSON form."""
    findings = data.get("findings", [])
    count = {s: sum(f["severity"] == s for f in findings) for s in ("error", "warning", "info")}
    stats = data.get("stats")
    out: dict[str, Any] = {
        "checkpoint": data.get("checkpoint"),
        "format": data.get("format"),
        "layout": data.get("layout"),
        "layout_prefixes": data.get("layout_prefixes", []),
        "n_tensors": len(data.get("tensors", [])),
        "target": data.get("target"),
        "verdicts": verdicts(data),
        "verdict_line": verdict_line(data),
        "error_codes": engine_codes(data, "error"),
        "warning_codes": engine_codes(data, "warning"),
        "global_codes": sorted({f["code"] for f in findings if f["engine"] is None}),
        "n_errors": count["error"],
        "n_warnings": count["warning"],
        "n_info": count["info"],
        "findings": [{k: f.get(k) for k in ("code", "severity", "engine", "message", "evidence")}
                     for f in findings],
        "engines": {e["profile"]: _engine_digest(e) for e in data.get("engines", [])},
        "schema": {s: sum(r["status"] == s for r in data.get("schema", []))
                   for s in ("ok", "missing", "missing_optional", "unexpected", "shape_mismatch")},
        "stats": None if stats is None else _stats_digest(stats),
        "overall": data.get("overall"),
        "unchecked": data.get("unchecked", []),
        "evidence": data.get("evidence"),
    }
    return out


def _engine_digest(e: dict[str, Any]) -> dict[str, Any]:
    fates: dict[str, list[str]] = {}
    for k in e.get("keys", []):
        fates.setdefault(k["fate"], []).append(k["name"])
    aux = e.get("aux_layers", {})
    return {"verdict": e["verdict"], "covers": e.get("covers"),
            "fate_counts": {f: len(v) for f, v in fates.items()},
            "dropped": fates.get("dropped", []), "errored": fates.get("error", []),
            "unloaded_params": e.get("unloaded_params", []),
            "aux_captured": aux.get("ids"), "aux_trained": aux.get("trained"),
            "aux_source": aux.get("source"), "fc_input_width": e.get("fc_input_width")}


def _stats_digest(stats: dict[str, Any]) -> dict[str, Any]:
    rows = stats.get("stats", {})
    return {"scanned": len(rows), "skipped": list(stats.get("skipped", [])),
            "nan_or_inf": [n for n, s in rows.items() if s.get("n_nan") or s.get("n_inf")],
            "scanned_bytes": stats.get("scanned_bytes"), "budget_bytes": stats.get("budget_bytes")}
