"""Does the draft fit the target it is served with? Engine-independent: the draft's config against
the target's config.json, each mismatch a finding that names both values.

A draft maps into the target's vocabulary (vocab_size), reads the target's hidden states (its fc
is target_hidden_size wide, else hidden_size), counts positions as the target does (RoPE), and
was trained on one verifier (speculators' verifier block). None of this is checked by an engine
at startup: a draft for another target loads and runs, and accepts almost nothing.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from eagle3_nb.config import DraftConfig, TargetInfo, aux_id_faults, draft_marker
from eagle3_nb.engines.facts import CHECKS
from eagle3_nb.errors import Eagle3NbError
from eagle3_nb.findings import ERROR, INFO, WARNING, Finding
from eagle3_nb.io.checkpoint import Checkpoint, load_target_info, open_once, read_json
from eagle3_nb.io.safetensors import TensorInfo, read_header, read_rows

TARGET_EMBED_NAMES = ("model.embed_tokens.weight", "embed_tokens.weight",
                      "model.language_model.embed_tokens.weight",
                      "language_model.model.embed_tokens.weight")
SAMPLED_ROWS = 256
SAME_COPY = 0.99   # mean row cosine of a frozen copy of the target's embeddings (bf16 noise)


def target_findings(cfg: DraftConfig, target: TargetInfo) -> list[Finding]:
    return (_looks_like_a_draft(cfg, target) + _sizes(cfg, target) + _layer_ids(cfg, target)
            + _rope(cfg, target) + _verifier(cfg, target) + _quantized(cfg, target))


# ----------------------------------------------------------------------------- before a run

def preflight(checkpoint, target_config=None) -> None:
    """What makes a run on the draft meaningless, said before anything is loaded (the same
    answer inspect gives as a finding): a target model given as the draft, aux layer ids that
    are negative or repeated, or ids past the target's last layer. Eagle3NbError, else None.
    CHECKPOINT: a path or an opened Checkpoint; TARGET_CONFIG: the target's config.json or
    its directory (None: the target's layer count is not checked)."""
    ckpt = checkpoint if isinstance(checkpoint, Checkpoint) else open_once(checkpoint)
    why = not_a_draft(ckpt)
    if why:
        raise Eagle3NbError(why, str(ckpt.path), NOT_A_DRAFT_TODO)
    cfg = ckpt.config
    ids = cfg.aux_layer_ids.value
    declared = f"{ckpt.path / 'config.json'} ({cfg.aux_layer_ids.source})"
    faults = aux_id_faults(ids)
    if faults:
        raise Eagle3NbError(f"aux layer ids {ids} are not a list of distinct layers: {faults} "
                            "(AUX_IDS_INVALID)", declared, AUX_IDS_TODO)
    if not target_config:
        return
    _not_a_draft_as_target(Path(target_config))
    found = _layer_ids(cfg, load_target_info(target_config))
    if found:
        raise Eagle3NbError(f"{found[0].message} (TARGET_MISMATCH)", declared,
                            "pick the draft made for this target, or write the layer ids "
                            "training captured; eagle3-nb inspect DRAFT --target-config "
                            "TARGET/config.json shows every mismatch")


def _not_a_draft_as_target(target: Path) -> None:
    """A draft's directory given as the target: said as the target loader says it, before its
    one or two layers make every layer id look wrong."""
    folder = target if target.is_dir() else target.parent
    name = "config.json" if target.is_dir() else target.name
    if not (folder / name).is_file():
        return  # load_target_info says what is missing
    draft = draft_marker(read_json(folder.resolve(), name))
    if draft:
        raise Eagle3NbError(f"this is an EAGLE-3 draft's directory, not a target model "
                            f"({draft})", str(folder), "pass the target model's directory "
                            "(the model the draft speculates for) as --target")


AUX_IDS_TODO = ("write the hidden_states indices training captured, each once and none "
                "negative, into a copy's config.json (eagle3-nb inspect says where each engine "
                "reads them)")
NOT_A_DRAFT_TODO = ("pass the EAGLE-3 draft's directory as the checkpoint; this one is the "
                    "target (--target / --target-config)")
_DECODER_LAYER = re.compile(r"^layers\.(\d+)\.")


def not_a_draft(ckpt) -> str:
    """Why the directory holds a whole causal LM (a target) and not an EAGLE-3 draft, or "":
    its config.json carries no EAGLE-3 marker (config.draft_marker), its weights have no fc,
    and they hold decoder layers past the first."""
    keys = ckpt.canonical_keys
    if draft_marker(ckpt.config_raw) or "fc.weight" in keys:
        return ""
    layers = {int(m.group(1)) for k in keys if (m := _DECODER_LAYER.match(k))}
    if len(layers) < 2:
        return ""
    archs = ckpt.config_raw.get("architectures")
    named = f"names {str(archs)[:80]}" if isinstance(archs, list) and archs else \
        "names no architecture"
    return (f"this is a target model, not an EAGLE-3 draft: its config.json {named} and "
            "nothing of a draft (no Eagle3 architecture, draft_vocab_size or aux layer ids), "
            f"and its weights hold {len(layers)} decoder layers (layers.{min(layers)} to "
            f"layers.{max(layers)}) and no fc")


def not_a_draft_finding(why: str) -> Finding:
    return Finding("NOT_A_DRAFT", ERROR, f"{why}; every other finding is left out: they "
                   "describe a target read as a draft", {"why": why})


# ----------------------------------------------------------------------------- findings

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
    if target.vocab_size is not None and "vocab_size" in cfg.class_defaults \
            and target.vocab_size != cfg.vocab_size:
        out.append(_mismatch(WARNING, "vocab_size", cfg.vocab_size, target.vocab_size,
                             "config.json leaves vocab_size out, so the engine takes its config "
                             "class's default and sizes the draft's embed_tokens by it (an "
                             "embed_tokens tensor of the target's rows then fails to load); "
                             "write the target's vocab_size into config.json"))
    elif target.vocab_size is not None and target.vocab_size != cfg.vocab_size:
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
    bad = [i for i in ids if i > target.num_hidden_layers]  # negative ones: AUX_IDS_INVALID
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
    return out + _rotary_fraction(cfg, target) + _mrope(cfg, target) + _pair_layout(cfg, target)


def _rope_type(rope: dict[str, Any]) -> str:
    """The scaling type; M-RoPE is a position layout, not a scaling (transformers and both
    engines build it as "default" with mrope_section), so _mrope compares it."""
    for key in ("rope_scaling", "rope_parameters"):
        value = rope.get(key)
        if isinstance(value, dict):
            kind = str(value.get("rope_type") or value.get("type") or "default")
            return "default" if kind == "mrope" else kind
    return "default"


def _rope_field(rope: dict[str, Any], name: str) -> Any:
    """A RoPE setting at the top level or inside rope_scaling / rope_parameters (transformers 5
    folds them into rope_parameters; both engines read either)."""
    if name in rope:
        return rope[name]
    for key in ("rope_parameters", "rope_scaling"):
        value = rope.get(key)
        if isinstance(value, dict) and name in value:
            return value[name]
    return None


# transformers' defaults for a partial rotary: GlmConfig, Glm4Config, Glm4MoeConfig.__post_init__
# setdefault("partial_rotary_factor", 0.5) [transformers 5.23]
PARTIAL_ROTARY_DEFAULTS = {"glm": 0.5, "glm4": 0.5, "glm4_moe": 0.5}


def _rotary_fraction(cfg: DraftConfig, target: TargetInfo) -> list[Finding]:
    mine = _rope_field(cfg.rope, "partial_rotary_factor")
    theirs = _rope_field(target.rope, "partial_rotary_factor")
    theirs = PARTIAL_ROTARY_DEFAULTS.get(target.model_type, 1.0) if theirs is None else theirs
    mine = 1.0 if mine is None else mine
    if not _numbers(mine, theirs) or float(mine) == float(theirs):
        return []
    return [_mismatch(WARNING, "partial_rotary_factor", mine, theirs,
                      CHECKS["partial_rotary"])]


def _numbers(*values: Any) -> bool:
    return all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)


def _mrope(cfg: DraftConfig, target: TargetInfo) -> list[Finding]:
    """Multimodal RoPE (Qwen2-VL, Qwen2.5-VL, Qwen3-VL targets): text, height and width positions
    rotate separate frequency sections. The engines decide the draft's positions from the draft's
    own config, never the target's."""
    mine = _rope_field(cfg.rope, "mrope_section")
    theirs = _rope_field(target.rope, "mrope_section")
    if mine is None and theirs is None:
        return []
    if mine != theirs:
        return [_mismatch(WARNING, "mrope_section", mine, theirs, MROPE_WHY)]
    inter_mine, inter_theirs = _mrope_interleaved(cfg.rope, ""), _mrope_interleaved(
        target.rope, target.model_type)
    if inter_mine != inter_theirs:
        return [_mismatch(WARNING, "mrope_interleaved", inter_mine, inter_theirs,
                          CHECKS["mrope_interleaved"])]
    return []


MROPE_WHY = CHECKS["mrope"]


def _mrope_interleaved(rope: dict[str, Any], model_type: str) -> bool:
    """transformers' Qwen3-VL rotary always interleaves the sections (Qwen3VLTextRotaryEmbedding
    .recomposition_frequencies, whatever the config says [transformers 5.23]); the engines read
    mrope_interleaved."""
    value = _rope_field(rope, "mrope_interleaved")
    return bool(value) if value is not None else model_type.startswith("qwen3_vl")


# The target's q/k pair layout as transformers runs it: interleaved pairs (x0, x1), (x2, x3) ...
# or NeoX halves (x_i, x_{i+d/2}).
#   llama4_text: modeling_llama4.py apply_rotary_emb (view_as_complex over adjacent pairs)
#   glm, glm4: modeling_glm4.py rotate_half (x[..., 0::2], x[..., 1::2])
#   deepseek_v3 (and its kin): modeling_deepseek_v3.py DeepseekV3Attention.forward,
#       apply_rotary_pos_emb_interleave when config.rope_interleave (default True)
# [transformers 5.23]. Everything else: rotate_half over halves (NeoX).
INTERLEAVED_TARGETS = {"llama4": "modeling_llama4.py apply_rotary_emb",
                       "llama4_text": "modeling_llama4.py apply_rotary_emb",
                       "glm": "modeling_glm.py rotate_half", "glm4": "modeling_glm4.py rotate_half"}
MLA_TARGETS = frozenset({"deepseek_v2", "deepseek_v3", "deepseek_v32", "kimi_k2"})
TARGET_LAYOUT_CITE = "transformers 5.23 " + ", ".join(
    sorted(set(INTERLEAVED_TARGETS.values())) + ["modeling_deepseek_v3.py DeepseekV3Attention "
                                                 "(rope_interleave, default True)"])


def target_pair_layout(target: TargetInfo) -> str:
    if target.model_type in INTERLEAVED_TARGETS:
        return "interleaved"
    if target.model_type in MLA_TARGETS:
        return "interleaved" if target.rope.get("rope_interleave", True) else "neox"
    return "neox"


def served_pair_layout(fact: dict[str, Any], cfg: DraftConfig) -> str:
    """The pair layout an engine serves this draft with: its DRAFT_ROPE fact applied to the
    draft's own config."""
    rule = fact["mla" if cfg.mla else "llama"]
    value = cfg.rope.get(rule["field"]) if rule["field"] else None
    if value is None:
        return rule["default"]
    return "interleaved" if bool(value) == rule["interleaved_if"] else "neox"


def declared_pair_layout(cfg: DraftConfig) -> str | None:
    """What the draft's config says about its pairs, if anything (the trainer's layout)."""
    if "rope_is_neox_style" in cfg.rope:
        return "neox" if cfg.rope["rope_is_neox_style"] else "interleaved"
    if "rope_interleave" in cfg.rope:
        return "interleaved" if cfg.rope["rope_interleave"] else "neox"
    return None


def _pair_layout(cfg: DraftConfig, target: TargetInfo) -> list[Finding]:
    """Interleaved pairs or NeoX halves. A draft has its own q/k weights, so its layout need not
    be the target's: it must be the one it was trained with. A warning when the draft's config
    declares a layout an engine does not serve it with; an info line when only the target
    differs (normal for a Llama draft of a Llama 4 or GLM target)."""
    from eagle3_nb.engines import engines

    roped = {name: e.draft_rope for name, e in engines().items() if e.draft_rope}
    served = {name: served_pair_layout(rope, cfg) for name, rope in roped.items()}
    declared, theirs = declared_pair_layout(cfg), target_pair_layout(target)
    ignored = sorted(name for name, layout in served.items()
                     if declared is not None and layout != declared)
    if not ignored and all(layout == theirs for layout in served.values()):
        return []
    evidence = {"field": "rope layout", "draft": served, "draft_declared": declared,
                "target": theirs, "cites": [*(rope["cite"] for rope in roped.values()),
                                            TARGET_LAYOUT_CITE]}
    as_served = ", ".join(f"{name} serves {layout}" for name, layout in served.items())
    if ignored:
        message = (f"rope layout: the draft's config declares {declared} pairs, but "
                   f"{' and '.join(ignored)} serve{'s' if len(ignored) == 1 else ''} it "
                   f"otherwise ({as_served}; the target {target.model_type or '?'} rotates "
                   f"{theirs}): where the engine differs from the trainer, the draft's attention "
                   "pairs the wrong dimensions and sees scrambled positions, and acceptance "
                   "drops. Serve it where the layout matches, or retrain in the engine's layout")
        return [Finding("TARGET_MISMATCH", WARNING, message, evidence)]
    message = (f"rope layout: the target {target.model_type or '?'} rotates {theirs} pairs, the "
               f"draft as served {as_served}; the draft has its own q/k weights, so this is right "
               "when its trainer rotated the engine's way (a Llama-style draft class does), wrong "
               "if it was trained with the target's attention")
    return [Finding("TARGET_MISMATCH", INFO, message, evidence)]


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


# names quantized checkpoints carry (RedHatAI/...-FP8, ...-AWQ, nvidia/...-NVFP4, ...)
QUANTIZED_NAME = re.compile(r"(?i)(?:^|[-_/.])(fp8|fp4|nvfp4|mxfp4|int4|int8|awq|gptq|w4a16|"
                            r"w8a8|w8a16|4bit|8bit|bnb)(?:$|[-_/.])")


def _quantized(cfg: DraftConfig, target: TargetInfo) -> list[Finding]:
    """A quantized target lowers acceptance for a draft trained on full-precision states; a
    draft whose recorded verifier is this quantized target was trained on exactly these."""
    if not target.quantization:
        return []
    verifier = cfg.verifier.get("name_or_path") if isinstance(cfg.verifier, dict) else None
    evidence = {"quantization": target.quantization, "verifier": verifier,
                "target": target.name_or_path}
    if isinstance(verifier, str) and (verifier == target.name_or_path or
                                      QUANTIZED_NAME.search(verifier)):
        return [Finding("TARGET_QUANTIZED", INFO, f"the target is quantized "
                        f"({target.quantization}) and the draft records a quantized verifier "
                        f"({verifier}): it was trained on these hidden states", evidence)]
    said = (f"its recorded verifier {verifier} looks full precision" if verifier else
            "its config does not record the verifier it was trained on")
    return [Finding("TARGET_QUANTIZED", WARNING, f"the target is quantized "
                    f"({target.quantization}): its hidden states differ from the full-precision "
                    f"ones a draft is usually trained on, which lowers acceptance ({said})",
                    evidence)]


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
    evidence = {"mean_cosine": round(cosine, 4), "rows": len(rows)}
    what = (f"the draft's embed_tokens differ from the target's (mean cosine {cosine:.3f} over "
            f"{len(rows)} rows; a frozen copy is above {SAME_COPY})")
    # one finding per release: it hurts only where the engine serves the draft's own copy
    return [Finding("EMBED_DIFFERS", ERROR, f"{what}: this release serves the draft's own copy",
                    {**evidence, "served": "draft"}, p.profile.key)
            if _uses_own_embedding(p.profile, ckpt.config) else
            Finding("EMBED_DIFFERS", INFO, f"{what}: this release replaces them with the "
                    "target's, so they do no harm here", {**evidence, "served": "target"},
                    p.profile.key)
            for p in plans]


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
