"""Does the draft fit the target it is served with? Engine-independent: the draft's config against
the target's config.json, each mismatch a finding that names both values.

A draft maps into the target's vocabulary (vocab_size), reads the target's hidden states (its fc
is target_hidden_size wide, else hidden_size), counts positions as the target does (RoPE), and
was trained on one verifier (speculators' verifier block). None of this is checked by an engine
at startup: a draft for another target loads and runs, and accepts almost nothing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from eagle3_nb.config import DraftConfig, TargetInfo
from eagle3_nb.findings import ERROR, WARNING, Finding
from eagle3_nb.io.safetensors import TensorInfo, read_header, read_rows

TARGET_EMBED_NAMES = ("model.embed_tokens.weight", "embed_tokens.weight",
                      "model.language_model.embed_tokens.weight",
                      "language_model.model.embed_tokens.weight")
SAMPLED_ROWS = 256
SAME_COPY = 0.99   # mean row cosine of a frozen copy of the target's embeddings (bf16 noise)


def target_findings(cfg: DraftConfig, target: TargetInfo) -> list[Finding]:
    return (_looks_like_a_draft(cfg, target) + _sizes(cfg, target) + _layer_ids(cfg, target)
            + _rope(cfg, target) + _verifier(cfg, target) + _quantized(target))


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


def _layer_ids(cfg: DraftConfig, target: TargetInfo) -> list[Finding]:
    """Declared aux layer ids must name layers the target has: under either convention an id
    lies in [0, L] (L, the state after the last layer, only as a capture-before index)."""
    ids = cfg.aux_layer_ids.value or []
    bad = [i for i in ids if i < 0 or i > target.num_hidden_layers]
    if not bad:
        return []
    return [_mismatch(ERROR, "aux layer ids", ids, f"{target.num_hidden_layers} layers",
                      f"{bad} name no layer of this target: a draft for a deeper model, or a "
                      "config written for another target")]


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


def embedding_findings(ckpt, target_dir: Path, plans: list) -> list[Finding]:
    """The draft's own embed_tokens against the target's, row by row, where the target's
    weights are at hand. Drafts train with the target's embeddings frozen, so a copy that
    differs was saved from something else (an exporter's random init); it matters where an
    engine uses the draft's own copy."""
    key = ckpt.canonical_keys.get("embed_tokens.weight")
    theirs = _target_tensor(target_dir, TARGET_EMBED_NAMES)
    if key is None or theirs is None:
        return []
    mine = ckpt.tensors[key]
    if mine.shape != theirs[1].shape or len(mine.shape) != 2 or ckpt.format != "safetensors":
        return []
    step = max(1, mine.shape[0] // SAMPLED_ROWS)
    rows = list(range(0, mine.shape[0], step))[:SAMPLED_ROWS]
    a = read_rows(ckpt.path / mine.file, mine, rows)
    b = read_rows(theirs[0], theirs[1], rows)
    cosine = _mean_cosine(a, b)
    if cosine >= SAME_COPY:
        return []
    users = [p.profile.key for p in plans if _uses_own_embedding(p.profile, ckpt.config)]
    where = (f"{', '.join(users)} use{'s' if len(users) == 1 else ''} the draft's own copy"
             if users else "no engine checked here uses the draft's copy")
    return [Finding("EMBED_DIFFERS", ERROR if users else WARNING, f"the draft's embed_tokens "
                    f"differ from the target's (mean cosine {cosine:.3f} over {len(rows)} rows; "
                    f"a frozen copy is above {SAME_COPY}): {where}",
                    {"mean_cosine": round(cosine, 4), "rows": len(rows), "engines": users})]


def _uses_own_embedding(profile, cfg: DraftConfig) -> bool:
    """Whether this release serves the checkpoint's own embed_tokens (its embed_policy, the
    shapes being equal here)."""
    if profile.embed_policy == "own_if_present":
        return True
    if profile.embed_policy == "target_unless_hidden_differs":
        return cfg.Ht != cfg.H
    return False


def _mean_cosine(a, b) -> float:
    import numpy as np

    num = (a * b).sum(axis=1)
    den = np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1)
    ok = den > 0
    return float((num[ok] / den[ok]).mean()) if ok.any() else 0.0


def _target_tensor(target_dir: Path, names: tuple[str, ...]) -> tuple[Path, TensorInfo] | None:
    for path in sorted(Path(target_dir).glob("*.safetensors")):
        header = read_header(path)
        for name in names:
            if name in header.tensors:
                return path, header.tensors[name]
    return None
