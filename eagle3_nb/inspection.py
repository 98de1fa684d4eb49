"""Inspection: will each engine load this draft, and what will it do with it?

path -> Checkpoint -> DraftConfig -> LoadPlan per engine (+ schema diff, tensor statistics)
-> findings. Headers and JSON only unless statistics are asked for; never imports torch for a
safetensors checkpoint.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .checkpoint import Checkpoint, read_json
from .config import DraftConfig, TargetInfo, parse_config, parse_target_config
from .engines import resolve_engines
from .engines.planner import LoadPlan, plan_load
from .errors import ConfigError
from .findings import ERROR, INFO, Finding, has_errors, sort_findings
from .layouts import Layout, SchemaRow, detect_layout, schema_diff, split_key

DEFAULT_STATS_BUDGET = 1 << 30


@dataclass
class Inspection:
    checkpoint: Checkpoint
    config: DraftConfig
    layout: Layout
    target: TargetInfo | None
    plans: list[LoadPlan]
    schema: list[SchemaRow]
    stats: Any | None            # stats.StatsResult when statistics were scanned
    global_findings: list[Finding]
    vocab: Any | None = None     # vocab.VocabMapping when tensor data was read

    @property
    def findings(self) -> list[Finding]:
        out = list(self.global_findings)
        for plan in self.plans:
            out.extend(plan.findings)
        return sort_findings(out)

    @property
    def has_errors(self) -> bool:
        return has_errors(self.findings)

    def to_json(self) -> dict[str, Any]:
        ckpt = self.checkpoint
        global_errors = has_errors(self.global_findings)
        return {
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
            "engines": [p.to_json(extra_errors=global_errors) for p in self.plans],
            "findings": [f.to_json() for f in self.findings],
        }


def inspect_checkpoint(path: str | Path, engines: list[str] | None = None,
                       target_config: str | Path | None = None, stats: bool = True,
                       stats_budget: int = DEFAULT_STATS_BUDGET) -> Inspection:
    ckpt = Checkpoint.open(path)
    cfg = parse_config(ckpt.config_raw, str(ckpt.path / "config.json"))
    target = load_target_info(target_config) if target_config else None
    profiles = resolve_engines(engines)
    shapes = {name: t.shape for name, t in ckpt.tensors.items()}
    plans = [plan_load(p, cfg, shapes, target) for p in profiles]
    schema = schema_diff(cfg, shapes)
    findings = checkpoint_findings(ckpt, cfg, schema)
    stats_result = vocab = None
    if stats:  # the only steps that read tensor data
        from .stats import scan_stats, stats_findings
        from .vocab import VocabMapping
        stats_result = scan_stats(ckpt, stats_budget)
        findings += stats_findings(stats_result, ckpt)
        vocab = VocabMapping.from_checkpoint(ckpt, cfg)
        findings += vocab.findings()
    else:
        findings += _vocab_presence_findings(ckpt, cfg)
    return Inspection(ckpt, cfg, detect_layout(list(shapes)), target, plans, schema,
                      stats_result, findings, vocab)


def load_target_info(target_config: str | Path) -> TargetInfo:
    """A target config.json, or a directory holding one."""
    path = Path(target_config)
    if path.is_dir():
        raw = read_json(path.resolve(), "config.json")
        where = str(path / "config.json")
    elif path.is_file():
        raw = read_json(path.resolve().parent, path.name)
        where = str(path)
    else:
        raise ConfigError("target config not found", str(path),
                          "pass the target model's config.json or its directory")
    return parse_target_config(raw, where)


def checkpoint_findings(ckpt: Checkpoint, cfg: DraftConfig, schema: list[SchemaRow]) -> list[Finding]:
    """Findings that hold whatever engine serves the draft."""
    out: list[Finding] = []
    if ckpt.code_files or cfg.has_auto_map:
        out.append(Finding("REMOTE_CODE", INFO, "the checkpoint ships code "
                           f"({', '.join(ckpt.code_files) or 'auto_map in config.json'}); the kit "
                           "never executes it and neither should your engine (no --trust-remote-code)",
                           {"files": ckpt.code_files, "auto_map": ckpt.auto_map}))
    mismatched = [r for r in schema if r.status == "shape_mismatch"]
    if mismatched:
        out.append(Finding("SHAPE_MISMATCH", ERROR, "tensor shapes differ from what config.json "
                           "promises: " + "; ".join(f"{r.checkpoint_key} {list(r.actual_shape)} != "
                                                     f"{list(r.expected_shape)}" for r in mismatched[:4]),
                           {r.checkpoint_key: {"actual": list(r.actual_shape),
                                               "expected": list(r.expected_shape)}
                            for r in mismatched}))
    out += _aux_count_findings(ckpt, cfg)
    return out


def _aux_count_findings(ckpt: Checkpoint, cfg: DraftConfig) -> list[Finding]:
    fc = next((t for t in ckpt.tensors.values() if split_key(t.name).canonical == "fc.weight"), None)
    ids = cfg.aux_layer_ids.value
    if fc is None or len(fc.shape) != 2 or not ids or fc.shape[1] % cfg.Ht:
        return []
    chunks = fc.shape[1] // cfg.Ht
    if chunks == len(ids):
        return []
    return [Finding("AUX_COUNT_MISMATCH", ERROR, f"fc takes {chunks} aux states of width {cfg.Ht} "
                    f"but the config declares {len(ids)} layer ids {ids}",
                    {"fc_width": fc.shape[1], "ids": ids})]


def _vocab_presence_findings(ckpt: Checkpoint, cfg: DraftConfig) -> list[Finding]:
    """Header-only vocab check (--no-stats): the full one reads d2t/t2d (eagle3_nb.vocab)."""
    names = {split_key(n).canonical for n in ckpt.tensors}
    if cfg.pruned_vocab and "d2t" not in names:
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


def check_vocab(path: str | Path, tokenizer: str | Path | None = None,
                corpus: str | Path | None = None, engines: list[str] | None = None) -> dict[str, Any]:
    """The vocab answer for one checkpoint: format with evidence, validity per engine, coverage."""
    from .vocab import (VocabMapping, count_tokens, coverage, coverage_finding, load_tokenizer,
                        read_corpus)

    ckpt = Checkpoint.open(path)
    cfg = parse_config(ckpt.config_raw, str(ckpt.path / "config.json"))
    profiles = resolve_engines(engines)
    mapping = VocabMapping.from_checkpoint(ckpt, cfg)
    tok = load_tokenizer(tokenizer) if tokenizer else None
    findings = mapping.findings()
    cov = None
    if corpus:
        seqs, masks = read_corpus(corpus, tok)
        counts = count_tokens(seqs, masks, cfg.vocab_size)
        cov = {"intended": coverage(mapping.intended_ids, counts),
               "as_engines_read_it": coverage(mapping.engine_ids(profiles[0]), counts),
               "n_tokens": int(counts.sum())}
        if mapping.readings:  # evidence for an ambiguous table: real text favours one reading
            cov["per_reading"] = {name: coverage(r.ids, counts)
                                  for name, r in mapping.readings.items()}
        findings += coverage_finding(cov["intended"] if cov["intended"] is not None
                                     else cov["as_engines_read_it"])
    offsets = mapping.readings.get("offsets")
    view = mapping.engine_view(profiles)
    return {"checkpoint": str(ckpt.path), "format": mapping.format,
            "valid": mapping.valid(profiles), "draft_vocab_size": cfg.Vd,
            "target_vocab_size": cfg.vocab_size,
            "n_out_of_range": offsets.n_out_of_range if offsets else 0,
            "n_duplicates": offsets.n_duplicates if offsets else 0,
            "t2d_agrees": mapping.t2d_agrees, "evidence": mapping.evidence,
            "problems": mapping.problems,
            "engines": [{k: r[k] for k in ("engine", "version", "profile", "param", "n_wrong",
                                            "n_out_of_range")} for r in view],
            "coverage": cov, "findings": [f.to_json() for f in sort_findings(findings)],
            "tokenizer": str(tokenizer) if tokenizer else None}
