"""DraftConfig: one normalised view of the two config dialects, recording where each value came from.

- flat (SafeAILab / SpecForge / SGLang): a LlamaConfig with `draft_vocab_size`, optional
  `target_hidden_size` and an optional nested `eagle_config`.
- speculators (vLLM): `speculators_model_type: "eagle3"`, the layer config nested in
  `transformer_layer_config`, the EAGLE fields at the top level.

Sources: "top_level", "eagle_config", "transformer_layer_config", "default", or "absent" (not in
the file; engines apply their own defaults, which is exactly what the kit has to compare).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from eagle3_nb.defaults import DEFAULT_BATCH_SIZE, DEFAULT_MAX_NEW_TOKENS
from eagle3_nb.errors import ConfigError

TOP, EAGLE, LAYER, DEFAULT, ABSENT = ("top_level", "eagle_config", "transformer_layer_config",
                                      "default", "absent")
NORM_FLAGS = ("norm_before_residual", "norm_before_fc", "fc_norm", "norm_output")
# fc_norm's legacy key, as a flag's source: training reads it as fc_norm; an engine only where
# its FlagRule names it (SGLang does, vLLM and TensorRT-LLM read fc_norm alone)
USE_AUX_NORM = "use_aux_norm"
# Multi-latent attention (DeepSeek-V2 style) sizes; kv_lora_rank marks an MLA layer
MLA_FIELDS = ("q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim")
# What a trainer used when its config omits a flag, per dialect. SafeAILab/SpecForge: False
# (cnets.py keeps the un-normed residual). speculators: the config class defaults to False but
# the training CLI defaults norm_before_residual/norm_before_fc/norm_output to True for eagle3
# (speculators train/config/schema.py), so an absent key could mean either.
TRAINER_FLAG_DEFAULTS: dict[str, dict[str, frozenset[bool]]] = {
    "norm_before_residual": {"flat": frozenset({False}), "speculators": frozenset({False, True})},
    "norm_before_fc": {"flat": frozenset({False}), "speculators": frozenset({False, True})},
    "fc_norm": {"flat": frozenset({False}), "speculators": frozenset({False})},
    "norm_output": {"flat": frozenset({False}), "speculators": frozenset({False, True})},
}


@dataclass(frozen=True)
class Sourced:
    value: Any
    source: str

    @property
    def present(self) -> bool:
        return self.source != ABSENT


@dataclass
class DraftConfig:
    dialect: str                     # "flat" | "speculators"
    architectures: list[str]
    layer_model_type: str            # "llama", "qwen3", ...
    hidden_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    intermediate_size: int
    vocab_size: int                  # target vocab Vt
    draft_vocab_size: Sourced        # value None when null or absent
    target_hidden_size: Sourced
    rms_norm_eps: float
    max_position_embeddings: Sourced
    tie_word_embeddings: bool
    attention_bias: bool
    mlp_bias: bool
    hidden_act: str
    rope: dict[str, Any]
    aux_layer_ids_top: list[int] | None
    aux_layer_ids_nested: list[int] | None
    eagle_config: dict[str, Any] | None
    num_aux_hidden_states: Sourced
    use_aux_hidden_state: Sourced
    norm_flags: dict[str, Sourced]
    verifier: dict[str, Any] = field(default_factory=dict)
    has_auto_map: bool = False
    mla: dict[str, int | None] | None = None  # MLA_FIELDS when the layer is MLA, else None
    mla_unread: str = ""   # why kv_lora_rank's MLA sizes cannot be read, when it is set
    # values set aside as written (a string of aux ids): engines.config_rules say who raises
    unread: dict[str, Any] = field(default_factory=dict)
    class_defaults: dict[str, int] = field(default_factory=dict)  # sizes from CONFIG_CLASS_SIZES
    # the config.json as written: the engines' own config readers refuse values this view
    # normalises (a null num_hidden_layers, a string attention_bias): engines.config_rules
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)
    where: str = field(default="", compare=False)   # the config.json it was read from

    @property
    def H(self) -> int:
        return self.hidden_size

    @property
    def Ht(self) -> int:
        return self.target_hidden_size.value or self.hidden_size

    @property
    def Vd(self) -> int:
        return self.draft_vocab_size.value or self.vocab_size

    @property
    def pruned_vocab(self) -> bool:
        return self.Vd != self.vocab_size

    @property
    def aux_layer_ids(self) -> Sourced:
        """The ids the trainer declared, where that dialect's trainer writes them."""
        order = ((self.aux_layer_ids_top, TOP), (self.aux_layer_ids_nested, EAGLE))
        if self.dialect == "flat":
            order = order[::-1]
        for ids, src in order:
            if ids:
                return Sourced(list(ids), src)
        return Sourced(None, ABSENT)

    @property
    def mla_requested(self) -> bool:
        """kv_lora_rank is set, whether or not the other MLA sizes can be read."""
        return self.mla is not None or bool(self.mla_unread)

    @property
    def aux_ids_unread(self) -> Sourced:
        """Aux layer ids written as no list (a string "1,3,5"): no engine reads them as ids."""
        if AUX_IDS_KEY in self.unread:
            return Sourced(self.unread[AUX_IDS_KEY], TOP)
        return Sourced(None, ABSENT)

    @property
    def num_aux(self) -> int:
        """The trainer's aux count: explicit count, else the id list's length, else 3."""
        if self.num_aux_hidden_states.value:
            return int(self.num_aux_hidden_states.value)
        ids = self.aux_layer_ids.value
        return len(ids) if ids else 3

    def flag(self, name: str) -> Sourced:
        return self.norm_flags[name]

    def to_json(self) -> dict[str, Any]:
        plain = {"dialect": self.dialect, "architectures": self.architectures,
                 "layer_model_type": self.layer_model_type, "hidden_size": self.hidden_size,
                 "num_hidden_layers": self.num_hidden_layers,
                 "num_attention_heads": self.num_attention_heads,
                 "num_key_value_heads": self.num_key_value_heads, "head_dim": self.head_dim,
                 "intermediate_size": self.intermediate_size, "vocab_size": self.vocab_size,
                 "rms_norm_eps": self.rms_norm_eps, "tie_word_embeddings": self.tie_word_embeddings,
                 "attention_bias": self.attention_bias, "hidden_act": self.hidden_act,
                 "rope": self.rope, "aux_layer_ids_top_level": self.aux_layer_ids_top,
                 "aux_layer_ids_eagle_config": self.aux_layer_ids_nested,
                 "num_aux": self.num_aux, "verifier": self.verifier,
                 "has_auto_map": self.has_auto_map, "mla": self.mla,
                 "unread": self.unread, "class_defaults": self.class_defaults}
        sourced = {"draft_vocab_size": self.draft_vocab_size,
                   "target_hidden_size": self.target_hidden_size,
                   "max_position_embeddings": self.max_position_embeddings,
                   "aux_layer_ids": self.aux_layer_ids,
                   "num_aux_hidden_states": self.num_aux_hidden_states,
                   "use_aux_hidden_state": self.use_aux_hidden_state, **self.norm_flags}
        plain.update({k: {"value": v.value, "source": v.source} for k, v in sourced.items()})
        return plain


def parse_config(raw: dict[str, Any], where: str = "config.json") -> DraftConfig:
    """Normalise a raw config.json dict of either dialect."""
    for key, high in (("draft_vocab_size", BOUNDS["vocab_size"][1]),
                      ("target_hidden_size", BOUNDS["hidden_size"][1])):
        if raw.get(key) is not None:  # null is meaningful (SGLang: take the target's)
            bounded_int(raw[key], key, where, 1, high)
    if "speculators_model_type" in raw or "transformer_layer_config" in raw:
        return _parse_speculators(raw, where)
    return _parse_flat(raw, where)


def _get(d: dict, key: str, src: str) -> Sourced:
    return Sourced(d[key], src) if key in d else Sourced(None, ABSENT)


def _ids(value: Any, key: str, where: str) -> list[int] | None:
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(v, int) and not isinstance(v, bool)
                                              for v in value):
        raise ConfigError(f"{key} is {value!r}, not a list of integers", where,
                          "fix the layer id list")
    return list(value)


AUX_IDS_KEY = "eagle_aux_hidden_state_layer_ids"


def _top_level_ids(raw: dict[str, Any], where: str, unread: dict[str, Any]) -> list[int] | None:
    """The top-level aux ids; no list at all (a string) is set aside: vLLM captures only a list
    (eagle3_utils.py get_eagle3_aux_layers_from_config), SGLang only eagle_config's ids
    (spec_aux_hidden_state.py); a len() of it: config_rules. A list of non-integers: refused."""
    value = raw.get(AUX_IDS_KEY)
    if value is not None and not isinstance(value, list):
        unread[AUX_IDS_KEY] = value
        return None
    return _ids(value, AUX_IDS_KEY, where)


def _num_aux(raw: dict[str, Any], where: str, unread: dict[str, Any]) -> Sourced:
    """A count in bounds, or set aside when no integer (config_rules.NUM_AUX_READ: who raises)."""
    value = raw.get("num_aux_hidden_states")
    if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
        unread["num_aux_hidden_states"] = value
        return Sourced(None, ABSENT)
    if value is not None:
        bounded_int(value, "num_aux_hidden_states", where, 1, 64)
    return _get(raw, "num_aux_hidden_states", TOP)


# Bounds on what the kit reads from a config, far outside any real model, so a hostile or broken
# value is a clear error instead of a loop bound, a division by zero or a huge allocation.
BOUNDS = {"hidden_size": (1, 1 << 20), "num_attention_heads": (1, 1 << 12),
          "num_key_value_heads": (1, 1 << 12), "head_dim": (1, 1 << 12),
          "intermediate_size": (1, 1 << 22), "vocab_size": (1, 1 << 24),
          "num_hidden_layers": (1, 1 << 8), "max_position_embeddings": (1, 1 << 30),
          "mla": (1, 1 << 16)}
TARGET_MAX_LAYERS = 1 << 12
# A flat config without num_hidden_layers gets its transformers config class's default, since
# the engines read flat configs through AutoConfig: 32 (LlamaConfig, Qwen3Config, ...; 32 in
# every transformers release read, 4.57.1 to 5.23.0), except these (configuration_*.py, 5.23.0).
# A speculators layer config gets no default in vLLM (engines.config_rules); the kit keeps 1.
CONFIG_CLASS_LAYERS = {"deepseek_v3": 61, "qwen3_moe": 24}
# A flat config's missing layer size is its config class's default too, as AutoConfig gives it to
# SGLang and vLLM: transformers models/llama/configuration_llama.py LlamaConfig fields (5.23.0; the
# same __init__ defaults in 4.57.1); the plan judges the shapes. Other classes: not read, refused.
CONFIG_CLASS_SIZES = {"llama": {"hidden_size": 4096, "num_attention_heads": 32,
                                "intermediate_size": 11008, "vocab_size": 32000}}
LAYER_SIZES = ("hidden_size", "num_attention_heads", "intermediate_size", "vocab_size")


def bounded_int(value: Any, key: str, where: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        shown = repr(value) if len(repr(value)) <= 40 else repr(value)[:40] + "..."
        raise ConfigError(f"{key} is {shown}: expected an integer from {low} to {high}", where,
                          "fix the value in config.json (a copy of it)")
    return value


# RoPE numbers the kit computes with (model.rope_inv_freq) or compares (target_match): a NaN or
# Infinity (Python's json reads both) would turn every position's rotation into NaN silently.
_ROPE_POSITIVE = ("rope_theta", "factor", "partial_rotary_factor",
                  "original_max_position_embeddings", "low_freq_factor", "high_freq_factor")


def rope_numbers(section: dict[str, Any], where: str) -> None:
    """Every number among the RoPE settings finite; theta, the factors and the original context
    positive numbers, partial_rotary_factor at most 1."""
    for key in ("rope_scaling", "rope_parameters"):
        nested = section.get(key)
        if nested is not None and not isinstance(nested, dict):
            raise ConfigError(f"{key} is {_shown(nested)}, not an object", where,
                              "write it as an object (or null), as transformers does")
    found = [(k, section.get(k)) for k in ("rope_theta", "partial_rotary_factor")]
    for key in ("rope_scaling", "rope_parameters"):
        found += [(f"{key}.{k}", v) for k, v in (section.get(key) or {}).items()]
    for key, value in found:
        _rope_number(key, value, where)


def _rope_number(key: str, value: Any, where: str) -> None:
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    positive = key.rsplit(".", 1)[-1] in _ROPE_POSITIVE
    if value is None or not (number or positive):
        return  # strings (rope_type), lists (mrope_section) and nulls are not numbers
    if not number or not math.isfinite(value) or (positive and value <= 0):
        raise ConfigError(f"{key} is {_shown(value)}: expected a finite"
                          f"{' positive' if positive else ''} number", where,
                          "fix the value in config.json (a copy of it); the trainer's own "
                          "config has the one it trained with")
    if key.endswith("partial_rotary_factor") and value > 1:
        raise ConfigError(f"{key} is {value!r}: a share of the head dimension, at most 1", where,
                          "fix the value in config.json (a copy of it)")


def _shown(value: Any) -> str:
    return repr(value) if len(repr(value)) <= 40 else repr(value)[:40] + "..."


def token_id_list(value: Any, key: str, where: str, vocab_size: int) -> list[int]:
    """A list of token ids as a file states it: integers (no booleans, floats or strings) in
    [0, vocab_size)."""
    def is_id(v: Any) -> bool:
        return isinstance(v, int) and not isinstance(v, bool) and 0 <= v < vocab_size

    bad = [v for v in value if not is_id(v)][:1] if isinstance(value, list) else [value]
    if bad:
        raise ConfigError(f"{key} holds {str(bad[0])[:40]}: token ids are integers from 0 to "
                          f"{vocab_size - 1}", where, "fix the file (the ids must come from the "
                          "target's tokenizer)")
    return value


def _layer_sizes(layer: dict[str, Any], where: str, layer_src: str,
                 defaulted: dict[str, int]) -> dict[str, int]:
    """The four sizes; a flat config's missing one from CONFIG_CLASS_SIZES (into DEFAULTED). A
    speculators layer config gets none: vLLM builds the draft from it as it stands."""
    model_type = layer.get("model_type") if isinstance(layer.get("model_type"), str) else ""
    class_sizes = CONFIG_CLASS_SIZES.get(model_type, {}) if layer_src == TOP else {}
    for key in LAYER_SIZES:
        if key not in layer and key in class_sizes:
            defaulted[key] = class_sizes[key]
    given = {k: defaulted.get(k, layer.get(k)) for k in LAYER_SIZES}
    missing = [k for k, v in given.items() if not isinstance(v, int)]
    if missing:
        section = "transformer_layer_config" if layer_src == LAYER else "the top level"
        raise ConfigError(f"missing or non-integer {', '.join(missing)} in {section}", where,
                          "a draft config needs the decoder layer's sizes")
    return {k: bounded_int(v, k, where, *BOUNDS[k]) for k, v in given.items()}


def _layer_fields(layer: dict[str, Any], where: str, layer_src: str) -> dict[str, Any]:
    defaulted: dict[str, int] = {}
    sizes = _layer_sizes(layer, where, layer_src, defaulted)
    H, nh = sizes["hidden_size"], sizes["num_attention_heads"]
    model_type = layer.get("model_type") if isinstance(layer.get("model_type"), str) else ""
    layers = 1 if layer_src == LAYER else CONFIG_CLASS_LAYERS.get(model_type, 32)
    for key, default in (("num_hidden_layers", layers), ("num_key_value_heads", nh),
                         ("head_dim", max(1, H // nh))):
        value = layer.get(key)
        sizes[key] = default if value is None else bounded_int(value, key, where, *BOUNDS[key])
    if nh % sizes["num_key_value_heads"]:
        raise ConfigError(f"num_attention_heads {nh} is not a multiple of num_key_value_heads "
                          f"{sizes['num_key_value_heads']}", where, "fix the head counts")
    context = _get(layer, "max_position_embeddings", layer_src)
    if context.present:
        bounded_int(context.value, "max_position_embeddings", where,
                    *BOUNDS["max_position_embeddings"])
    eps = layer.get("rms_norm_eps")
    if eps is not None and (isinstance(eps, bool) or not isinstance(eps, (int, float))
                            or not 0 < eps < 1):
        raise ConfigError(f"rms_norm_eps is {eps!r}: expected a number between 0 and 1", where,
                          "fix the value in config.json (a copy of it)")
    rope_keys = ("rope_theta", "rope_scaling", "rope_parameters", "partial_rotary_factor",
                 "rope_is_neox_style", "rope_interleave")   # the last two: the pair layout
    rope_numbers(layer, where)
    mla, mla_unread = _mla_fields(layer, where)
    return dict(
        mla=mla, mla_unread=mla_unread, class_defaults=defaulted,
        layer_model_type=str(layer.get("model_type") or "llama"),
        hidden_size=H, num_hidden_layers=sizes["num_hidden_layers"],
        num_attention_heads=nh, num_key_value_heads=sizes["num_key_value_heads"],
        head_dim=sizes["head_dim"],
        intermediate_size=sizes["intermediate_size"], vocab_size=sizes["vocab_size"],
        rms_norm_eps=float(eps or 1e-6),
        max_position_embeddings=context,
        attention_bias=bool(layer.get("attention_bias", False)),
        mlp_bias=bool(layer.get("mlp_bias", False)),
        hidden_act=str(layer.get("hidden_act", "silu")),
        rope={k: layer[k] for k in rope_keys if k in layer},
    )


def _architectures(raw: dict[str, Any], where: str) -> list[str]:
    archs = raw.get("architectures") or []
    if not isinstance(archs, list) or not all(isinstance(a, str) for a in archs):
        raise ConfigError(f"architectures is {str(archs)[:40]}, not a list of class names", where,
                          'write it as a list, e.g. ["LlamaForCausalLMEagle3"]')
    return list(archs)


def _mla_fields(layer: dict[str, Any], where: str) -> tuple[dict[str, int | None] | None, str]:
    """The MLA sizes when kv_lora_rank is set (q_lora_rank may be null), or why they cannot be
    read: a Llama draft class never reads them, one picking MLA by kv_lora_rank (TensorRT-LLM)
    fails (the plan says so). An integer out of bounds is refused."""
    if layer.get("kv_lora_rank") is None:
        return None, ""
    out: dict[str, int | None] = {}
    faults = []
    for key in MLA_FIELDS:
        value = layer.get(key)
        if value is None:
            out[key] = None
            if key != "q_lora_rank":
                faults.append(f"{key} is missing")
        elif isinstance(value, bool) or not isinstance(value, int):
            faults.append(f"{key} is {_shown(value)}, not an integer")
        else:
            out[key] = bounded_int(value, key, where, *BOUNDS["mla"])
    if faults:
        return None, (f"kv_lora_rank is set (an MLA layer) but {'; '.join(faults)} (an MLA "
                      f"layer needs every one of {', '.join(MLA_FIELDS)})")
    return out, ""


def _parse_flat(raw: dict[str, Any], where: str) -> DraftConfig:
    eagle = raw.get("eagle_config")
    if eagle is not None and not isinstance(eagle, dict):
        raise ConfigError("eagle_config is not a JSON object", where, "fix or remove it")
    eagle = eagle or {}
    flags = {name: _get(raw, name, TOP) for name in NORM_FLAGS}
    if "norm_before_fc" in eagle:  # SGLang 0.5.23 and vLLM read the nested value first
        flags["norm_before_fc"] = Sourced(eagle["norm_before_fc"], EAGLE)
    if not flags["fc_norm"].present and "use_aux_norm" in raw:  # its legacy name
        flags["fc_norm"] = Sourced(raw["use_aux_norm"], USE_AUX_NORM)
    unread: dict[str, Any] = {}
    return DraftConfig(
        dialect="flat", architectures=_architectures(raw, where),
        **_layer_fields(raw, where, TOP),
        draft_vocab_size=_get(raw, "draft_vocab_size", TOP),
        target_hidden_size=_get(raw, "target_hidden_size", TOP),
        tie_word_embeddings=bool(raw.get("tie_word_embeddings", False)),
        aux_layer_ids_top=_top_level_ids(raw, where, unread),
        aux_layer_ids_nested=_ids(eagle.get("eagle_aux_hidden_state_layer_ids"),
                                  "eagle_config.eagle_aux_hidden_state_layer_ids", where),
        eagle_config=raw.get("eagle_config"),
        num_aux_hidden_states=_num_aux(raw, where, unread),
        use_aux_hidden_state=(Sourced(eagle["use_aux_hidden_state"], EAGLE)
                              if "use_aux_hidden_state" in eagle else Sourced(True, DEFAULT)),
        norm_flags=flags, has_auto_map="auto_map" in raw, unread=unread, raw=raw, where=where,
    )


def _parse_speculators(raw: dict[str, Any], where: str) -> DraftConfig:
    layer = raw.get("transformer_layer_config")
    if not isinstance(layer, dict):
        raise ConfigError("speculators config without a transformer_layer_config object", where,
                          "re-save the draft with speculators, or write the flat form (eagle3-nb convert "
                          "--to eagle)")
    unread: dict[str, Any] = {}
    # vLLM checks speculators_config only for null (transformers_utils/config.py get_config) and
    # replaces architectures (speculators/algos.py update_eagle3) [0.33.0, 0.34.0]
    spec = raw.get("speculators_config") or {}
    if not isinstance(spec, dict):
        unread["speculators_config"], spec = spec, {}
    archs = raw.get("architectures") or []
    if not isinstance(archs, list) or not all(isinstance(a, str) for a in archs):
        unread["architectures"], archs = archs, []
    verifier = spec.get("verifier") or {}
    return DraftConfig(
        dialect="speculators", architectures=list(archs),
        **_layer_fields(layer, where, LAYER),
        draft_vocab_size=_get(raw, "draft_vocab_size", TOP),
        target_hidden_size=_get(raw, "target_hidden_size", TOP),
        tie_word_embeddings=bool(raw.get("tie_word_embeddings",
                                         layer.get("tie_word_embeddings", False))),
        aux_layer_ids_top=_top_level_ids(raw, where, unread),
        aux_layer_ids_nested=None, eagle_config=raw.get("eagle_config"),
        num_aux_hidden_states=_num_aux(raw, where, unread),
        use_aux_hidden_state=Sourced(True, DEFAULT),
        norm_flags={name: _get(raw, name, TOP) for name in NORM_FLAGS},
        verifier=verifier if isinstance(verifier, dict) else {},
        has_auto_map="auto_map" in raw, unread=unread, raw=raw, where=where,
    )


TARGET_ROPE_KEYS = ("rope_theta", "rope_scaling", "rope_parameters", "partial_rotary_factor",
                    "rope_interleave")


@dataclass(frozen=True)
class TargetInfo:
    """What the kit needs from the target model's config.json."""
    num_hidden_layers: int
    hidden_size: int | None
    vocab_size: int | None
    max_position_embeddings: int | None
    model_type: str
    architectures: tuple[str, ...]
    rope: dict[str, Any] = field(default_factory=dict)   # TARGET_ROPE_KEYS, as given
    quantization: str | None = None                       # quantization_config's method, if any
    name_or_path: str | None = None                       # its _name_or_path, if recorded

    @property
    def family(self) -> str:
        """Capture-rule family: engines offset aux ids differently per target class."""
        mt = self.model_type.lower()
        archs = " ".join(self.architectures).lower()
        if mt in {"deepseek_v2", "deepseek_v3", "deepseek_v32", "kimi_k2"} or "deepseek" in archs:
            return "deepseek"
        if mt == "gpt_oss" or "gptoss" in archs:
            return "gpt_oss"
        return "llama"


def aux_id_faults(ids: list[int] | None) -> str:
    """What makes declared aux layer ids wrong whatever the target: a negative id names no
    layer, a repeated one captures one layer twice. "" when neither."""
    ids = list(ids or [])
    negative = sorted({i for i in ids if i < 0})
    repeated = sorted({i for i in ids if i >= 0 and ids.count(i) > 1})
    return "; ".join(part for part in (f"negative {negative}" if negative else "",
                                       f"repeated {repeated}" if repeated else "") if part)


def draft_marker(config: dict[str, Any]) -> str:
    """What in a config.json says it is an EAGLE-3 draft's, or "" for anything else."""
    archs = config.get("architectures") if isinstance(config.get("architectures"), list) else []
    eagle = [a for a in archs if isinstance(a, str) and "eagle" in a.lower()]
    if eagle:
        return f"architectures {eagle}"
    for key in ("speculators_model_type", "draft_vocab_size", "eagle_aux_hidden_state_layer_ids"):
        if key in config:
            return f"config.json has {key}"
    return ""


def parse_target_config(raw: dict[str, Any], where: str) -> TargetInfo:
    text = raw.get("text_config") if isinstance(raw.get("text_config"), dict) else raw
    layers = text.get("num_hidden_layers")
    if isinstance(layers, bool) or not isinstance(layers, int) or layers <= 0:
        raise ConfigError("target config has no positive integer num_hidden_layers", where,
                          "pass the target model's own config.json")
    bounded_int(layers, "num_hidden_layers", where, 1, TARGET_MAX_LAYERS)
    sizes = {k: (None if text.get(k) is None else bounded_int(text[k], k, where, *BOUNDS[k]))
             for k in ("hidden_size", "vocab_size", "max_position_embeddings")}
    archs = raw.get("architectures") or ()
    if not isinstance(archs, (list, tuple)) or not all(isinstance(a, str) for a in archs):
        raise ConfigError(f"architectures is {str(archs)[:40]}, not a list of names", where,
                          "pass the target model's own config.json")
    quant = raw.get("quantization_config") or text.get("quantization_config")
    method = None
    if isinstance(quant, dict):
        method = str(quant.get("quant_method") or quant.get("quant_algo") or "unnamed")[:40]
    elif quant is not None:
        method = "unnamed"
    rope_numbers(text, where)
    rope = {k: text[k] for k in TARGET_ROPE_KEYS if k in text}
    name = raw.get("_name_or_path")
    return TargetInfo(layers, sizes["hidden_size"], sizes["vocab_size"],
                      sizes["max_position_embeddings"],
                      str(text.get("model_type") or raw.get("model_type") or ""), tuple(archs),
                      rope, method, name[:300] if isinstance(name, str) and name else None)


# --- drafting settings -------------------------------------------------------------------------
# What a simulation drafts (num_steps, topk, num_draft_tokens, as SGLang names them) sets its cost:
# num_steps draft forwards per verify step, and a tree of up to 1 + topk + (num_steps - 1) * topk^2
# tokens verified at once. The engines bound none of them from above (SGLang 0.5.23
# arg_groups/speculative_hook.py checks num_steps >= 1, vLLM 0.34.0 config/speculative.py
# num_speculative_tokens > 0), so the kit does, before anything runs.
MAX_NUM_STEPS = 64   # 8x the deepest engine default or published setting (SGLang's defaults draft
                     # 3 or 5 steps; SpecBundle's settings and sglang#4247's runs up to 8); a
                     # draft's per-position acceptance has decayed to nothing long before
MAX_DRAFT_TOKENS = 1024   # tokens verified at once: 128x SGLang's largest default (8)
SIMULATION_BUDGET = 2 << 30   # bytes: see simulation_bytes
SETTINGS_ENGINES_RUN = ("pass settings an engine runs (the engines' defaults draft 3 steps at "
                        "topk 1, or 5 steps at topk 4 verifying 8 tokens); cap a wide tree with "
                        "--num-draft-tokens")


def verified_tokens(num_steps: int, topk: int, num_draft_tokens: int | None) -> int:
    """Tokens one verify step checks, root included: a chain's num_steps + 1, a tree's
    num_draft_tokens, or every candidate when that is unset (acceptance.Drafting's rule)."""
    if topk == 1:
        return num_steps + 1
    return num_draft_tokens or 1 + topk + (num_steps - 1) * topk * topk


def simulation_bytes(num_steps: int, topk: int, num_draft_tokens: int | None, batch_size: int,
                     max_new_tokens: int, draft_vocab: int = 0) -> int:
    """A lower bound of one verify step's largest tensors: the float32 verify mask of a batch
    over the cache, which keeps a slot for every verified token (up to max_new_tokens verify
    steps), the draft's logits for its topk beams, and the candidates' scores, ids and parents.
    The target's attention scores are that mask again per head, so the real peak is higher."""
    verified = verified_tokens(num_steps, topk, num_draft_tokens)
    mask = 4 * batch_size * verified * (max_new_tokens * verified + verified)
    candidates = 24 * batch_size * (topk + (num_steps - 1) * topk * topk)
    return mask + candidates + 4 * batch_size * topk * draft_vocab


def drafting_problem(num_steps: int, topk: int, num_draft_tokens: int | None = None, *,
                     batch_size: int = DEFAULT_BATCH_SIZE,
                     max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS,
                     max_positions: int | None = None, draft_vocab: int | None = None) -> str:
    """Why these settings cannot be simulated here, or "" when they can. max_positions and
    draft_vocab: the draft's max_position_embeddings and (draft) vocabulary, when known."""
    if num_steps > MAX_NUM_STEPS:
        return (f"num_steps {num_steps} is over the kit's limit of {MAX_NUM_STEPS} draft steps "
                "(no engine default or published setting drafts more than 8)")
    if draft_vocab and topk > draft_vocab:
        return f"topk {topk} is more than the draft's {draft_vocab} vocabulary tokens"
    if max_positions and num_steps + max_new_tokens + 2 > max_positions:
        return (f"{max_new_tokens} new tokens and {num_steps} draft steps reach position "
                f"{num_steps + max_new_tokens + 2}, past the draft's max_position_embeddings "
                f"{max_positions} (an engine refuses a context longer than the draft's)")
    need = simulation_bytes(num_steps, topk, num_draft_tokens, batch_size, max_new_tokens,
                            draft_vocab or 0)
    if need > SIMULATION_BUDGET:
        tokens = verified_tokens(num_steps, topk, num_draft_tokens)
        return (f"verifying {tokens} tokens a step (num_steps {num_steps}, topk {topk}) for "
                f"{batch_size} prompts over {max_new_tokens} new tokens needs at least "
                f"{need / (1 << 30):.1f} GiB, over the kit's {SIMULATION_BUDGET >> 30} GiB budget")
    if verified_tokens(num_steps, topk, num_draft_tokens) > MAX_DRAFT_TOKENS:
        return (f"verifying {verified_tokens(num_steps, topk, num_draft_tokens)} tokens a step "
                f"is over the kit's limit of {MAX_DRAFT_TOKENS}")
    return ""


def launch_count_problem(setting: str, value: int) -> str:
    """Why a serving command's drafting count is beyond anything an engine runs, or "".
    The cost of the whole combination is drafting_problem's, asked where a run is set up."""
    high = {"num_steps": MAX_NUM_STEPS, "topk": MAX_DRAFT_TOKENS,
            "num_draft_tokens": MAX_DRAFT_TOKENS}.get(setting)
    if high is not None and not 1 <= value <= high:
        return f"is outside 1 to {high}"
    return ""
