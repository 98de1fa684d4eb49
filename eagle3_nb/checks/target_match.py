"""Does the draft fit the target it is served with? Engine-independent: the draft's config against
the target's config.json, each mismatch a finding that names both values.

A draft maps into the target's vocabulary (vocab_size), reads the target's hidden states (its fc
is target_hidden_size wide, else hidden_size), counts positions as the target does (RoPE), and
was trained on one verifier (speculators' verifier block). None of this is checked by an engine
at startup: a draft for another target loads and runs, and accepts almost nothing.
"""

from __future__ import annotations

from typing import Any

from eagle3_nb.config import DraftConfig, TargetInfo
from eagle3_nb.findings import ERROR, WARNING, Finding


def target_findings(cfg: DraftConfig, target: TargetInfo) -> list[Finding]:
    return (_looks_like_a_draft(cfg, target) + _sizes(cfg, target) + _rope(cfg, target)
            + _verifier(cfg, target) + _quantized(target))


def _mismatch(severity: str, what: str, draft: Any, target: Any, why: str) -> Finding:
    return Finding("TARGET_MISMATCH", severity, f"{what}: the draft says {draft}, the target "
                   f"config {target}; {why}", {"field": what, "draft": draft, "target": target})


def _looks_like_a_draft(cfg: DraftConfig, target: TargetInfo) -> list[Finding]:
    """A draft's own config given as the target: one or two layers, an EAGLE architecture."""
    archs = " ".join(target.architectures)
    if "Eagle" in archs or "eagle" in target.model_type or target.num_hidden_layers <= 2:
        return [Finding("TARGET_MISMATCH", ERROR, f"the target config describes "
                        f"{target.num_hidden_layers} layer(s) ({archs or target.model_type}): "
                        "this looks like a draft's config, not the target model's, so every "
                        "layer id resolved against it is meaningless",
                        {"field": "num_hidden_layers", "target": target.num_hidden_layers,
                         "architectures": list(target.architectures)})]
    return []


def _sizes(cfg: DraftConfig, target: TargetInfo) -> list[Finding]:
    out = []
    if target.vocab_size is not None and target.vocab_size != cfg.vocab_size:
        out.append(_mismatch(ERROR, "vocab_size", cfg.vocab_size, target.vocab_size,
                             "the draft maps its tokens into another vocabulary (d2t and every "
                             "token id are off), so it cannot propose the target's tokens"))
    if target.hidden_size is not None and target.hidden_size != cfg.Ht:
        field = "target_hidden_size" if cfg.target_hidden_size.value else "hidden_size"
        out.append(_mismatch(ERROR, field, cfg.Ht, target.hidden_size,
                             "fc reads aux states of this width; the target's are another width "
                             "(a shape error, or a draft trained for another model)"))
    return out


def _rope(cfg: DraftConfig, target: TargetInfo) -> list[Finding]:
    out = []
    mine, theirs = cfg.rope.get("rope_theta"), target.rope.get("rope_theta")
    if mine is not None and theirs is not None and float(mine) != float(theirs):
        out.append(_mismatch(WARNING, "rope_theta", mine, theirs, "the draft's positions rotate "
                             "at another rate; right only if it was trained this way"))
    kind_mine, kind_theirs = _rope_type(cfg.rope), _rope_type(target.rope)
    if kind_mine != kind_theirs:
        out.append(_mismatch(WARNING, "rope_scaling type", kind_mine, kind_theirs,
                             "long-context positions differ between draft and target"))
    return out


def _rope_type(rope: dict[str, Any]) -> str:
    for key in ("rope_scaling", "rope_parameters"):
        value = rope.get(key)
        if isinstance(value, dict):
            return str(value.get("rope_type") or value.get("type") or "default")
    return "default"


def _verifier(cfg: DraftConfig, target: TargetInfo) -> list[Finding]:
    """speculators records the verifier it trained against; its architectures must be the
    target's."""
    trained = cfg.verifier.get("architectures") if isinstance(cfg.verifier, dict) else None
    if not isinstance(trained, list) or not trained or not target.architectures:
        return []
    if list(trained) != list(target.architectures):
        name = cfg.verifier.get("name_or_path")
        return [_mismatch(ERROR, "verifier architectures", trained, list(target.architectures),
                          f"the draft was trained against {name or 'another model'}")]
    return []


def _quantized(target: TargetInfo) -> list[Finding]:
    if not target.quantization:
        return []
    return [Finding("TARGET_QUANTIZED", WARNING, f"the target is quantized "
                    f"({target.quantization}): its hidden states differ from the full-precision "
                    "ones a draft is usually trained on, which lowers acceptance",
                    {"quantization": target.quantization})]
