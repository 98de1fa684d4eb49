"""One generic planner: what a given engine profile does with a given draft checkpoint.

Input: DraftConfig, the checkpoint's tensor names and shapes, optional target info, a profile.
Output: a LoadPlan (each key's fate, unloaded parameters, aux capture, fc width) and the
findings that hold for that engine. No engine-specific branches live here: every difference
between engines is a field of EngineProfile.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

from eagle3_nb.config import (ABSENT, NORM_FLAGS, TRAINER_FLAG_DEFAULTS, DraftConfig, TargetInfo,
                              aux_id_faults)
from eagle3_nb.errors import ConversionError
from eagle3_nb.findings import ERROR, INFO, STARTUP_FAILURES, WARNING, Finding
from eagle3_nb.engines.bugs import affects, bugs_in
from eagle3_nb.engines.capture import CAPTURE, capture_fact, surveyed_release
from eagle3_nb.engines.profile import (AS_IS, AS_IS_IF_MAX_IS_L, AUX_RULES, NO_CAPTURE, PLUS_ONE,
                                       PLUS_ONE_IF_FIRST_IS_1, EngineProfile, release_key)
from eagle3_nb.layouts import mla_attention_shapes, split_key

DEFAULT_MAX_POSITIONS = 2048  # transformers' LlamaConfig default when the key is absent

_LAYER_PARAM = re.compile(r"\.layers\.(\d+)\.")
LOADED, RENAMED, DROPPED, SKIPPED, ERRORED = "loaded", "renamed", "dropped", "skipped", "error"


@dataclass
class ParamSpec:
    kind: str                                   # linear | norm | embedding | lm_head | vocab_map
    shards: dict = field(default_factory=dict)  # shard id (None when unsharded) -> shape


@dataclass
class KeyFate:
    name: str
    fate: str
    param: str | None
    reason: str = ""

    def to_json(self) -> dict:
        return {"name": self.name, "fate": self.fate, "param": self.param, "reason": self.reason}


@dataclass
class AuxPlan:
    configured: list[int] | None   # ids as the engine reads them from the config
    source: str                    # "eagle_config" | "top_level" | "default"
    rule: str
    captured: list[int] | None     # hidden_states indices the target captures (None: need L)
    use_aux: bool
    trained: list[int] | None      # hidden_states indices the trainer meant
    trained_source: str
    width: int | None              # width of the hidden state reaching the draft
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        return {"ids": self.captured, "configured": self.configured, "source": self.source,
                "rule": self.rule, "use_aux_hidden_state": self.use_aux,
                "trained": self.trained, "trained_source": self.trained_source,
                "width": self.width, "notes": self.notes}


@dataclass
class LoadPlan:
    profile: EngineProfile
    keys: list[KeyFate]
    unloaded: list[str]
    aux: AuxPlan
    fc_width_engine: int
    fc_width_checkpoint: int | None
    flags: dict[str, bool]          # effective norm flags in this engine
    findings: list[Finding]
    params: dict[str, ParamSpec] = field(default_factory=dict)  # the engine's draft parameters

    @property
    def verdict(self) -> str:
        return self.verdict_with(())

    def verdict_with(self, extra) -> str:
        """The verdict with the findings beyond the plan that hold for this release (the
        draft's own, and those a launch command, a log or the target weights tagged with it)."""
        found = [*self.findings, *extra]
        if any(f.code in STARTUP_FAILURES for f in found):
            return "load_error"
        return "silent_failure" if any(f.severity == ERROR for f in found) else "ok"

    def to_json(self, extra=()) -> dict:
        verdict = self.verdict_with(extra)
        return {"engine": self.profile.name, "version": self.profile.version,
                "profile": self.profile.key, "covers": self.profile.range_text(),
                "keys": [k.to_json() for k in self.keys], "unloaded_params": self.unloaded,
                "aux_layers": self.aux.to_json(),
                "fc_input_width": {"engine": self.fc_width_engine,
                                   "checkpoint": self.fc_width_checkpoint},
                "norm_flags": self.flags, "verdict": verdict}


def plan_load(profile: EngineProfile, cfg: DraftConfig, shapes: dict[str, tuple[int, ...]],
              target: TargetInfo | None = None) -> LoadPlan:
    profile = draft_class_profile(profile, cfg)
    ctx = _Ctx(profile, cfg, shapes, target)
    ctx.report_unverified()
    ctx.check_startup()
    ctx.flags = {name: _effective_flag(profile, cfg, name) for name in NORM_FLAGS}
    ctx.params = _engine_params(profile, cfg, ctx.num_aux(), ctx.flags)
    keys = [ctx.key_fate(name) for name in shapes]
    ctx.report_keys(keys)
    unloaded = ctx.report_unloaded(keys)
    ctx.report_overwritten_copies()
    aux = ctx.aux_plan()
    fc_ckpt = _fc_width(shapes)
    ctx.report_fc(aux, fc_ckpt)
    ctx.report_flags()
    ctx.report_context()
    ctx.report_known_bugs(aux)
    return LoadPlan(profile, keys, unloaded, aux, ctx.num_aux() * cfg.Ht, fc_ckpt, ctx.flags,
                    ctx.findings, ctx.params)


# What a draft class decides (its module and loader); everything else (the target runner, the
# proposer's embedding and head sharing, the release's bugs) stays with the release's profile.
DRAFT_CLASS_FIELDS = (
    "architectures", "architecture_errors", "draft_attention", "decoder_param", "max_layers",
    "too_many_layers_error", "renames", "key_resolution", "unknown_keys", "unknown_error",
    "ignored_unknown_suffixes", "stacked", "required_fields", "fc_aux_count",
    "fc_aux_top_level_layer_types", "has_input_norm", "has_fc_norm", "has_q_k_norm",
    "extra_layer_attn_norm", "extra_layers_have_hidden_norm", "flags", "drop_when_off",
    "missing_draft_vocab_error", "target_hidden_null_breaks_fc", "d2t_param",
    "d2t_param_needs_pruned_vocab", "fc_skip_when_width_is_hidden", "single_layer_param",
    "regex_renames", "extra_layers_have_input_norm", "unused_unless")


def draft_class_profile(profile: EngineProfile, cfg: DraftConfig) -> EngineProfile:
    """The profile of the draft class the engine builds for this config: its MLA class when
    architectures[0] names it (or, for an MLA class taking any architecture, "*", when the
    config gives MLA sizes: kv_lora_rank), else the profile itself (the Llama-style class)."""
    arch = cfg.architectures[0] if cfg.architectures else ""
    mla = profile.mla
    if mla is None or not (arch in mla.architectures or ("*" in mla.architectures and cfg.mla)):
        return profile
    return replace(profile, mla=None, cites={**profile.cites, **mla.cites},
                   **{name: getattr(mla, name) for name in DRAFT_CLASS_FIELDS})


def _fc_width(shapes: dict[str, tuple[int, ...]]) -> int | None:
    for name, shape in shapes.items():
        if split_key(name).canonical == "fc.weight" and len(shape) == 2:
            return shape[1]
    return None


def _effective_flag(profile: EngineProfile, cfg: DraftConfig, name: str) -> bool:
    rule, given = profile.flags[name], cfg.flag(name)
    if not rule.read or cfg.dialect in rule.ignored_in:
        return False
    if given.present and given.source in rule.sources:
        return bool(given.value)
    return rule.default[cfg.dialect]


def trained_aux_indices(cfg: DraftConfig, num_layers: int | None) -> tuple[list[int] | None, str]:
    """hidden_states indices the trainer captured (docs/domain.md 'What the trainer meant')."""
    declared = cfg.aux_layer_ids
    if declared.value is None:
        if num_layers is None:
            return None, "default [2, L//2, L-3] (pass the target config to resolve L)"
        return _defaults(num_layers), "default [2, L//2, L-3]: no ids declared"
    ids = declared.value
    faults = aux_id_faults(ids)
    if faults:  # no convention reads these: what training captured is not known
        return None, f"{declared.source} ids {ids} are not layer ids ({faults})"
    if cfg.dialect == "speculators":
        return sorted(set(ids)), f"{declared.source} ids read as hidden_states[id] (vLLM extraction)"
    if ids[0] == 1:
        return sorted({i + 1 for i in ids}), (f"{declared.source} ids start at 1: 'output of layer' "
                                              "convention, hidden_states[id + 1]")
    return sorted(set(ids)), (f"{declared.source} ids start at {ids[0]}: 'input to layer' "
                              "convention, hidden_states[id] (sglang PR #25454)")


def _defaults(num_layers: int) -> list[int]:
    return [2, num_layers // 2, num_layers - 3]


def _engine_params(profile: EngineProfile, cfg: DraftConfig, num_aux: int,
                   flags: dict[str, bool]) -> dict[str, ParamSpec]:
    H, Ht, hd = cfg.H, cfg.Ht, cfg.head_dim
    nh, nkv = cfg.num_attention_heads, cfg.num_key_value_heads
    params: dict[str, ParamSpec] = {}

    def add(name, kind, shape, shard=None):
        params.setdefault(name, ParamSpec(kind)).shards[shard] = tuple(shape)

    if profile.embed_policy != "target_always" and all(  # else the draft builds none at all
            module != "embed_tokens" or switch_on(switch, cfg)
            for module, switch in profile.unused_unless):
        add("model.embed_tokens.weight", "embedding", (cfg.vocab_size, H))
    add("model.fc.weight", "linear", (H, num_aux * Ht))
    if profile.has_input_norm and flags["norm_before_fc"]:
        add("model.input_norm.weight", "norm", (num_aux * Ht,))
    if profile.has_fc_norm and flags["fc_norm"]:
        for i in range(num_aux):
            add(f"model.fc_norm.{i}.weight", "norm", (Ht,))
    n_layers = cfg.num_hidden_layers if "{i}" in profile.decoder_param else 1
    for i in range(n_layers):
        p = profile.decoder_param.format(i=i)
        if n_layers == 1 and profile.single_layer_param:
            p = profile.single_layer_param
        width = 2 * H if i == 0 else H
        if profile.draft_attention == "mla":
            _mla_params(profile, cfg, p, width, add)
            _mlp_and_norms(profile, cfg, p, i, add)
            continue
        for shard, rows in (("q", nh * hd), ("k", nkv * hd), ("v", nkv * hd)):
            add(f"{p}self_attn.qkv_proj.weight", "linear", (rows, width), shard)
            if cfg.attention_bias and profile.qkv_bias:
                add(f"{p}self_attn.qkv_proj.bias", "linear", (rows,), shard)
        add(f"{p}self_attn.o_proj.weight", "linear", (H, nh * hd))
        if profile.has_q_k_norm and cfg.layer_model_type.startswith("qwen3"):
            add(f"{p}self_attn.q_norm.weight", "norm", (hd,))
            add(f"{p}self_attn.k_norm.weight", "norm", (hd,))
        _mlp_and_norms(profile, cfg, p, i, add)
    add("model.norm.weight", "norm", (H,))
    if not cfg.tie_word_embeddings:
        add("lm_head.weight", "lm_head", (cfg.Vd, H))
    if cfg.pruned_vocab or not profile.d2t_param_needs_pruned_vocab:
        add(profile.d2t_param, "vocab_map", (cfg.Vd,))
    return params


def _mlp_and_norms(profile: EngineProfile, cfg: DraftConfig, p: str, i: int, add) -> None:
    H, inter = cfg.H, cfg.intermediate_size
    add(f"{p}mlp.gate_up_proj.weight", "linear", (inter, H), 0)
    add(f"{p}mlp.gate_up_proj.weight", "linear", (inter, H), 1)
    add(f"{p}mlp.down_proj.weight", "linear", (H, inter))
    if i == 0 or profile.extra_layers_have_input_norm:
        add(f"{p}input_layernorm.weight", "norm", (H,))
    add(f"{p}post_attention_layernorm.weight", "norm", (H,))
    if i == 0 or profile.extra_layers_have_hidden_norm:
        add(f"{p}hidden_norm.weight", "norm", (H,))


def _mla_params(profile: EngineProfile, cfg: DraftConfig, p: str, width: int, add) -> None:
    """Multi-latent attention: each checkpoint tensor lands in its own parameter, or in a shard
    of the parameter the profile's `stacked` rules fuse it into."""
    if not cfg.mla:
        return  # check_startup reports the missing MLA sizes
    for name, shape in mla_attention_shapes(cfg, width).items():
        kind = "norm" if name.endswith("layernorm") else "linear"
        fused = next(((param, shard) for param, part, shard in profile.stacked
                      if part == f".{name}"), None)
        if fused:
            add(f"{p}self_attn{fused[0]}.weight", kind, shape, fused[1])
        else:
            add(f"{p}self_attn.{name}.weight", kind, shape)


# EngineProfile.unused_unless switches: whether the engine builds the module for this draft
UNUSED_SWITCHES = {"target_hidden_differs": lambda cfg: cfg.Ht != cfg.H}


def switch_on(switch: str, cfg: DraftConfig) -> bool:
    return UNUSED_SWITCHES[switch](cfg)


def _multimodal(target: TargetInfo | None) -> bool:
    archs = " ".join(target.architectures) if target else ""
    return "VL" in archs or "ConditionalGeneration" in archs


# Capture-table rules that leave the numbering to the profile: "fixed_default" (the hook ignores
# the ids; those releases read none, aux_id_sources is empty) and "of_language_model" (a wrapper
# that hands the ids to its language model, which numbers them as the family does).
DEFERRED_RULES = ("fixed_default", "of_language_model")

# When a known bug (engines/bugs.py) touches this draft: (context) -> bool
BUG_CONDITIONS = {
    "always": lambda c: True,
    "pruned_vocab": lambda c: c.cfg.pruned_vocab,
    "mla_fc_norm": lambda c: bool(c.cfg.mla) and c.flags.get("fc_norm", False),
    "aux_ids_only_in_eagle_config": lambda c: bool(c.cfg.aux_layer_ids_nested)
    and not c.cfg.aux_layer_ids_top,
    "use_aux_false": lambda c: not c.cfg.use_aux_hidden_state.value,
    "target_hidden_differs": lambda c: c.cfg.Ht != c.cfg.H,
    "draft_vocab_not_64": lambda c: c.cfg.Vd % 64 != 0,
    "aux_count_not_3": lambda c: c.num_aux() != 3,
    "multimodal_target": lambda c: _multimodal(c.target),
    "target_minimax_m2": lambda c: c.target is not None
    and any("MiniMaxM2" in a for a in c.target.architectures),
    "no_d2t": lambda c: not any(split_key(k).canonical == "d2t" for k in c.shapes),
    "target_llama4": lambda c: c.target is not None
    and c.target.model_type.lower() in ("llama4", "llama4_text"),
    "target_fp8": lambda c: c.target is not None and "fp8" in (c.target.quantization or "").lower(),
    "target_mistral": lambda c: c.target is not None
    and c.target.model_type.lower().startswith("mistral"),
}

# What a bug's condition needs beyond the draft (KnownBug.needs): said, not asserted, until given
NEEDS = {"launch_method_unset": "only if the serving command names no method (not given: pass "
                                "--launch to check): "}
# Why a draft context shorter than the target's lowers acceptance whatever the engine: the
# public thread where it did (a draft trained on 2k, served past it)
CONTEXT_CITE = ("sglang#6783 (acceptance drops on prompts past the draft's training window; "
                "the draft's max_position_embeddings against the target's)")
# What a known bug does to the plan, where the bug applies its effect (KnownBug.effect)
BUG_EFFECTS = ("nested_aux_ids_ignored",)  # aux ids are not read from eagle_config


class _Ctx:
    """Working state of one plan; methods read like the engine's own startup sequence."""

    def __init__(self, profile, cfg, shapes, target):
        self.p: EngineProfile = profile
        self.cfg: DraftConfig = cfg
        self.shapes = shapes
        self.target: TargetInfo | None = target
        self.findings: list[Finding] = []
        self.flags: dict[str, bool] = {}
        self.params: dict[str, ParamSpec] = {}
        self.filled: dict[str, set] = {}
        self.final_boundary: bool = profile.last_layer_capturable

    def add(self, code, severity, message, **evidence):
        self.findings.append(Finding(code, severity, message, evidence, self.p.key))

    # --- startup ---------------------------------------------------------------------------
    def report_unverified(self) -> None:
        p = self.p
        if p.caveat and not p.eagle3_since:
            self.add("ENGINE_READ_ONLY", INFO, f"{p.name} {p.version}: {p.caveat}",
                     cite=p.evidence)
        if p.eagle3_since:
            self.add("LOAD_ERROR", ERROR, f"{p.name} {p.version} predates EAGLE-3 in {p.name} "
                     f"(first in {p.eagle3_since}): it has no EAGLE-3 draft model",
                     first_release=p.eagle3_since)
        elif p.based_on and p.covers_release(p.version):
            self.add("ENGINE_UNVERIFIED", WARNING, f"{p.name} {p.version} lies within "
                     f"{p.range_text()}, but it is not a published release the kit surveyed (a "
                     f"dev, rc, local or unknown post build): this answer uses the {p.based_on} "
                     f"profile, and what that build changed is not checked", based_on=p.based_on)
        elif p.based_on:
            self.add("ENGINE_UNVERIFIED", WARNING, f"{p.name} {p.version} is a release whose "
                     f"code the kit has not read: this answer uses the {p.based_on} profile, and "
                     f"what changed in between is not checked", based_on=p.based_on)

    def check_startup(self) -> None:
        p, cfg = self.p, self.cfg
        if cfg.dialect not in p.dialects:
            self.add("LOAD_ERROR", ERROR, p.dialect_error, dialect=cfg.dialect)
            return
        if cfg.dialect == "speculators":
            if not {"*", cfg.layer_model_type} & p.speculators_layer_types:
                why = (p.speculators_layer_type_error or "the engine has no EAGLE-3 draft class "
                       "for layer model type {layer_model_type!r}")
                self.add("LOAD_ERROR", ERROR, why.format(layer_model_type=cfg.layer_model_type),
                         layer_model_type=cfg.layer_model_type)
        else:
            self._check_architecture()
        if p.max_layers is not None and cfg.num_hidden_layers > p.max_layers:
            self.add("LOAD_ERROR", ERROR, f"{cfg.num_hidden_layers} decoder layers: "
                     f"{p.too_many_layers_error}", num_hidden_layers=cfg.num_hidden_layers)
        why = p.draft_model_type_errors.get(cfg.layer_model_type)
        if why:
            self.add("LOAD_ERROR", ERROR, f"model_type {cfg.layer_model_type!r}: {why}",
                     layer_model_type=cfg.layer_model_type,
                     cite=p.cites.get("draft_model_type_errors", ""))
        if p.draft_attention == "mla" and not cfg.mla:
            self.add("LOAD_ERROR", ERROR, f"{p.name}'s MLA draft class needs kv_lora_rank, "
                     "qk_nope_head_dim, qk_rope_head_dim and v_head_dim in the config: it has "
                     "none (AttributeError at startup)", cite=p.cites.get("draft_attention", ""))
        for name, error in p.required_fields:
            if (cfg.mla or {}).get(name) is None:
                self.add("LOAD_ERROR", ERROR, f"{name} is null or absent: {error}", field=name)
        if p.missing_draft_vocab_error and cfg.draft_vocab_size.source == ABSENT:
            self.add("LOAD_ERROR", ERROR, p.missing_draft_vocab_error)
        ths = cfg.target_hidden_size
        if p.target_hidden_null_breaks_fc and ths.present and ths.value is None:
            self.add("LOAD_ERROR", ERROR, "target_hidden_size is null: the engine reads it with "
                     "hasattr and builds fc with a None width; remove the key or set a number")

    def _check_architecture(self) -> None:
        archs = self.cfg.architectures
        arch = archs[0] if archs else None
        if arch in self.p.architectures or "*" in self.p.architectures:
            return
        why = self.p.architecture_errors.get(arch or "")
        known = ", ".join(self.p.architectures)
        self.add("LOAD_ERROR", ERROR, f"architectures[0] is {arch!r}: "
                 + (why or f"no draft class for it (accepted: {known})"), architecture=arch)

    def num_aux(self) -> int:
        cfg = self.cfg
        if self.p.fc_aux_count == "fixed_3":
            return 3
        if self.p.fc_aux_count == "eagle_config_then_top_level_ids_then_3":
            ids = cfg.aux_layer_ids_nested or cfg.aux_layer_ids_top
            return len(ids) if ids else 3
        if cfg.num_aux_hidden_states.value:
            return int(cfg.num_aux_hidden_states.value)
        if cfg.aux_layer_ids_nested:
            return len(cfg.aux_layer_ids_nested)
        if cfg.layer_model_type in self.p.fc_aux_top_level_layer_types and cfg.aux_layer_ids_top:
            return len(cfg.aux_layer_ids_top)
        return 3

    # --- weights ---------------------------------------------------------------------------
    def key_fate(self, key: str) -> KeyFate:
        name, renamed = self._regex_renamed(key)
        for old, new in self.p.renames:
            if old in name:
                name, renamed = name.replace(old, new), True
        if "t2d" in name:
            return KeyFate(key, SKIPPED, None, "t2d is never read")
        unused = self._unused(name)
        if unused:
            return KeyFate(key, SKIPPED, None, unused)
        dropped = self._dropped_when_off(name)
        if dropped:
            return KeyFate(key, DROPPED, None, dropped)
        if self.p.key_resolution == "bare_or_model":
            return self._resolve_bare_or_model(key, name, renamed)
        return self._resolve_model_prefix(key, name, renamed)

    def _resolve_bare_or_model(self, key, name, renamed) -> KeyFate:
        if "d2t" in name:
            return self._load(key, self.p.d2t_param, None, renamed, "d2t + arange")
        for param_part, weight_part, shard in self.p.stacked:
            if weight_part not in name:
                continue
            name = name.replace(weight_part, param_part)
            param = f"model.{name}" if name not in self.params else name
            return self._load(key, param, shard, renamed)
        param = name if name in self.params else f"model.{name}"
        return self._load(key, param, None, renamed)

    def _resolve_model_prefix(self, key, name, renamed) -> KeyFate:
        if "d2t" in name:
            name = name.replace("d2t", self.p.d2t_param)
        elif "lm_head" not in name:
            name = "model." + name
        shard = None
        for param_part, weight_part, sh in self.p.stacked:
            if weight_part in name:
                name, shard = name.replace(weight_part, param_part), sh
                break
        return self._load(key, name, shard, renamed)

    def _regex_renamed(self, key: str) -> tuple[str, bool]:
        """The profile's anchored renames for this draft's depth (one decoder layer or more)."""
        depth = "single" if self.cfg.num_hidden_layers == 1 else "multi"
        name = key
        for when, pattern, new in self.p.regex_renames:
            if when in (depth, "any"):
                name = re.sub(pattern, new, name)
        return name, name != key

    def _unused(self, name: str) -> str:
        """Keys of a module the engine does not build while its switch is off (it uses the
        target's): never read, so neither loaded nor a loss."""
        for module, switch in self.p.unused_unless:
            if f".{module}." in f".{name}" and not switch_on(switch, self.cfg):
                return (f"{module}.* is never read: the engine builds none while {switch} is "
                        f"false and uses the target's")
        return ""

    def _dropped_when_off(self, name: str) -> str:
        """The profile's keys removed while a switch is off (vLLM's weight mapper)."""
        switches = {**self.flags, "use_aux_hidden_state": bool(self.cfg.use_aux_hidden_state.value)}
        for module, switch in self.p.drop_when_off:
            if f".{module}." in f".{name}" and not switches[switch]:
                return f"{module}.* removed when {switch} is false"
        return ""

    def _load(self, key, param, shard, renamed, how="") -> KeyFate:
        spec = self.params.get(param)
        if spec is None or shard not in spec.shards:
            return self._unknown(key, param)
        want, got = spec.shards[shard], tuple(self.shapes[key])
        if spec.kind != "vocab_map" and want != got:
            return KeyFate(key, ERRORED, param, f"shape {list(got)} != parameter {list(want)}: "
                           "the loader asserts")
        self.filled.setdefault(param, set()).add(shard)
        reason = how or (f"shard {shard}" if shard is not None else "")
        return KeyFate(key, RENAMED if renamed else LOADED, param, reason)

    def _unknown(self, key, param) -> KeyFate:
        if self.p.unknown_keys == "drop_silent":
            return KeyFate(key, DROPPED, None, f"no parameter {param!r}: dropped without a message")
        if self.p.unknown_keys == "drop_logged":
            return KeyFate(key, DROPPED, None, f"no parameter {param!r}: skipped with one "
                           "warning line in the server log")
        if key.endswith(self.p.ignored_unknown_suffixes):
            return KeyFate(key, DROPPED, None, "unmatched suffix ignored by the loader")
        return KeyFate(key, ERRORED, None, self.p.unknown_error.format(param=param))

    def report_keys(self, keys: list[KeyFate]) -> None:
        dropped = [k.name for k in keys if k.fate == DROPPED]
        if dropped:
            how = ("skips (one warning line each in the log)" if self.p.unknown_keys == "drop_logged"
                   else "silently ignores")
            self.add("KEYS_DROPPED", ERROR if self._dropped_matters(keys) else WARNING,
                     f"the engine {how} {len(dropped)} tensor(s): {_preview(dropped)}",
                     keys=dropped)
        errored = [k for k in keys if k.fate == ERRORED]
        if errored:
            self.add("LOAD_ERROR", ERROR, f"the engine fails while loading weights: "
                     f"{errored[0].name}: {errored[0].reason}"
                     + (f" (and {len(errored) - 1} more)" if len(errored) > 1 else ""),
                     keys={k.name: k.reason for k in errored})

    def _dropped_matters(self, keys) -> bool:
        # a d2t ignored beside a full vocabulary loses nothing: the identity mapping is right
        return any(k.fate == DROPPED and "bias" not in k.name and not (
            split_key(k.name).canonical == "d2t" and not self.cfg.pruned_vocab) for k in keys)

    def report_unloaded(self, keys: list[KeyFate]) -> list[str]:
        unloaded = []
        for param, spec in self.params.items():
            missing = [s for s in spec.shards if s not in self.filled.get(param, set())]
            if not missing:
                continue
            label = param if missing == [None] else f"{param}[{','.join(map(str, missing))}]"
            if self._unloaded_is_fine(param, spec):
                continue
            unloaded.append(label)
        if unloaded:
            severe = [u for u in unloaded if self._severity_of_unloaded(u) == ERROR]
            self.add("PARAMS_UNLOADED", ERROR if severe else WARNING,
                     f"the engine leaves {len(unloaded)} parameter(s) at their initial values "
                     f"(linear layers: uninitialised memory or random init; norms: ones): "
                     f"{_preview(unloaded)}", params=unloaded)
            if self.p.missing_params == "raise":
                self.add("LOAD_ERROR", ERROR, "the loader checks that every parameter was "
                         "written: ValueError 'Following weights were not initialized from "
                         f"checkpoint' for {_preview(unloaded)}", params=unloaded,
                         cite=self.p.cites.get("missing_params", ""))
        self._report_extra_layer_norms(unloaded)
        return unloaded

    def _unloaded_is_fine(self, param: str, spec: ParamSpec) -> bool:
        """Parameters the engine fills from elsewhere by design."""
        cfg = self.cfg
        if spec.kind == "embedding":
            return self._report_embedding()
        if spec.kind == "lm_head":
            return self._report_lm_head()
        if param == "model.fc.weight" and not cfg.use_aux_hidden_state.value:
            return True  # trained without aux states: fc is never applied
        if spec.kind == "vocab_map":
            return not cfg.pruned_vocab  # identity mapping is right for a full vocab
        m = _LAYER_PARAM.search(param)
        if (param.endswith("hidden_norm.weight") and m and int(m.group(1)) >= 1
                and self.p.extra_layer_attn_norm == "input_layernorm"):
            return True  # built in every layer, read only by layer 0 (vLLM llama_eagle3.py)
        return False

    def _severity_of_unloaded(self, label: str) -> str:
        param = label.split("[")[0]
        return ERROR if self.params[param].kind != "norm" else WARNING

    def _target_shapes_match(self) -> bool:
        """[V, H] of the draft equals the target's (unknown target: assumed, as is usual)."""
        t, cfg = self.target, self.cfg
        return t is None or ((t.vocab_size in (None, cfg.vocab_size))
                             and (t.hidden_size in (None, cfg.H)))

    def _report_embedding(self) -> bool:
        cfg, has_own = self.cfg, self._has_key("embed_tokens.weight")
        if self.p.embed_policy == "target_always":
            self.add("EMBED_REPLACED", INFO, "the engine always uses the target's embed_tokens "
                     "(the draft builds none)")
            return True
        if self.p.embed_policy == "target_if_shapes_match" and self._target_shapes_match():
            self.add("EMBED_REPLACED", INFO, "the engine uses the target's embed_tokens "
                     "whenever the shapes match", cite=self.p.cites.get("embed_policy", ""))
            return True
        if self.p.embed_policy == "target_unless_hidden_differs":
            ths = cfg.target_hidden_size
            own = ths.present and ths.value != cfg.H
            if not own:
                self.add("EMBED_REPLACED", INFO, "the engine replaces the draft's embed_tokens "
                         "with the target's (set_embed)" + ("; the checkpoint's own copy is ignored"
                                                             if has_own else ""))
                return True
            return has_own
        if has_own:
            return True
        if cfg.Ht != cfg.H:
            return False
        self.add("EMBED_REPLACED", INFO, "the engine shares the target's embed_tokens: the "
                 "checkpoint has none")
        return True

    def _report_lm_head(self) -> bool:
        cfg = self.cfg
        if self.p.lm_head_policy == "own_always":
            return False
        if self.p.lm_head_policy == "target_if_shapes_match":
            borrowed = not cfg.pruned_vocab and self._target_shapes_match()
        elif self.p.lm_head_policy == "target_if_draft_vocab_null":
            borrowed = cfg.draft_vocab_size.present and cfg.draft_vocab_size.value is None
        elif self.p.lm_head_policy == "target_if_absent":
            borrowed = not self._has_key("lm_head.weight")
            if borrowed and cfg.pruned_vocab:
                self.add("LM_HEAD_FROM_TARGET", ERROR, "the checkpoint has no lm_head: the engine "
                         f"uses the target's {cfg.vocab_size}-token head although the draft's "
                         f"vocabulary is pruned to {cfg.Vd}, and still maps each drafted id "
                         "through d2t: drafted tokens are the wrong ones",
                         cite=self.p.cites.get("lm_head", ""))
                return True
        else:
            borrowed = not cfg.pruned_vocab and not self._has_key("lm_head.weight")
        if borrowed:
            self.add("LM_HEAD_FROM_TARGET", INFO, "the engine uses the target's lm_head")
        return borrowed

    def report_overwritten_copies(self) -> None:
        """Releases that replace the draft's own trained embed_tokens or lm_head with the
        target's whenever the shapes match (vLLM 0.9.1-0.11.0: vllm #27732, fixed by #28549)."""
        if not self._target_shapes_match():
            return
        copies = (("embed_tokens", "embed_policy", "EMBED_REPLACED", WARNING),
                  ("lm_head", "lm_head_policy", "LM_HEAD_FROM_TARGET", ERROR))
        for name, policy, code, severity in copies:
            if getattr(self.p, policy) != "target_if_shapes_match" or \
                    not self._has_key(f"{name}.weight") or \
                    (name == "lm_head" and self.cfg.pruned_vocab):
                continue
            self.add(code, severity, f"the engine overwrites the draft's own trained {name} "
                     "with the target's because the shapes match", cite=self.p.cites.get(policy, ""))

    def _has_key(self, canonical: str) -> bool:
        return any(split_key(k).canonical == canonical for k in self.shapes)

    def _report_extra_layer_norms(self, unloaded: list[str]) -> None:
        if self.p.extra_layer_attn_norm != "hidden_norm":
            return
        hit = [u for u in unloaded if u.endswith("hidden_norm.weight")
               and (m := _LAYER_PARAM.search(u)) and int(m.group(1)) >= 1]
        if hit:
            self.add("PARAMS_UNLOADED", ERROR, "the engine uses hidden_norm as the pre-attention "
                     "norm of decoder layers >= 1, but the checkpoint has none for them (speculators "
                     "layers are plain Llama layers): those layers run with an untrained all-ones "
                     "norm and the trained input_layernorm is never used", params=hit,
                     cite=self.p.cites.get("extra_layers", ""))

    # --- aux hidden states -----------------------------------------------------------------
    def aux_plan(self) -> AuxPlan:
        p, cfg, target = self.p, self.cfg, self.target
        L = target.num_hidden_layers if target else None
        family = target.family if target else "llama"
        configured, source = None, "default"
        sources = p.aux_id_sources
        if self.bug_effect("nested_aux_ids_ignored"):
            sources = tuple(s for s in sources if s != "eagle_config")
        for src in sources:
            ids = cfg.aux_layer_ids_nested if src == "eagle_config" else cfg.aux_layer_ids_top
            if ids:
                configured, source = list(ids), src
                break
        rule = self._capture_rule(family)
        use_aux = bool(cfg.use_aux_hidden_state.value) if p.reads_use_aux_hidden_state else True
        trained, trained_src = trained_aux_indices(cfg, L)
        plan = AuxPlan(configured, source, rule, None, use_aux, trained, trained_src, None)
        if rule == NO_CAPTURE:
            return plan
        if not cfg.use_aux_hidden_state.value and not p.reads_use_aux_hidden_state:
            self.add("AUX_LAYER_CONVENTION", ERROR, "the config says use_aux_hidden_state: false "
                     "(trained on the target's final-norm state) but this engine never reads the "
                     "flag: it captures aux layers and feeds them through fc",
                     cite=p.cites.get("use_aux", ""))
        if not use_aux:
            plan.width = cfg.Ht
            plan.notes.append("use_aux_hidden_state is false: the draft gets the target's "
                              "final-norm hidden state, as it was trained (fc unused)")
            return plan
        if configured is None and L and 1 < L < p.default_ids_min_layers:
            self.add("LOAD_ERROR", ERROR, f"the target has {L} layers and no aux ids are given: "
                     f"{p.default_ids_error}", num_hidden_layers=L,
                     cite=p.cites.get("aux_ids", ""))
        plan.captured = self._captured(configured, rule, L, family, plan)
        n = len(plan.captured) if plan.captured is not None else (
            len(set(configured)) if configured else 3)
        plan.width = n * cfg.Ht
        self._report_aux(plan, L)
        return plan

    def _capture_rule(self, family: str) -> str:
        """The layer-id rule of the served target class, from the per-release capture table
        (engines/capture.py); the profile's family rule only where the table cannot answer, and
        then never silently. NO_CAPTURE after reporting why the engine cannot start."""
        p, target = self.p, self.target
        fallback = p.aux_rules.get(family)
        self.final_boundary = p.last_layer_capturable or family in p.final_boundary_families
        if target is None:
            return fallback or PLUS_ONE
        if not self._target_allowed(target):
            return NO_CAPTURE
        arch = target.architectures[0] if target.architectures else ""
        fact = capture_fact(p.name, p.version, arch) if arch else None
        if fact is None:
            return self._capture_unchecked(arch, family, fallback)
        where = f"{p.name} {p.version}"
        if fact.status != CAPTURE:
            # no_capture: no hook, or one that never runs (vLLM's Qwen3.5 wrappers 0.17.0-0.19.0
            # inherit one whose ids their forward never reads, then one that asserts): either
            # way startup fails, as read in the wheels' runners
            what = ("has no working EAGLE-3 capture hook" if fact.status == "no_capture" else
                    "is not a model class it serves")
            upgrade = (f"; the class captures from {p.name} {fact.next_capture}"
                       if fact.next_capture else "")
            self.add("LOAD_ERROR", ERROR, f"the target class {arch} {what} in {where}: startup "
                     f"with an EAGLE-3 draft fails{upgrade}", architecture=arch,
                     status=fact.status, surveyed_release=fact.release,
                     fixed_in=fact.next_capture, cite=fact.hook or fact.change)
            return NO_CAPTURE
        if fact.final_boundary is not None:
            self.final_boundary = fact.final_boundary
        if fact.rule in AUX_RULES:
            return fact.rule
        if fact.rule in DEFERRED_RULES:
            return fallback or PLUS_ONE
        self.add("TARGET_CAPTURE_UNCHECKED", WARNING, f"the capture hook of {arch} in {where} "
                 f"({fact.hook}) has a layer-id rule the kit cannot classify: assumed the "
                 f"{family} rule {fallback or PLUS_ONE}", architecture=arch, hook=fact.hook)
        return fallback or PLUS_ONE

    def _target_allowed(self, target: TargetInfo) -> bool:
        """The release's gate on the target's model_type (vLLM before 0.22), if it has one."""
        steps = [s for s in self.p.target_allowlist
                 if release_key(s[0]) <= release_key(self.p.version)]
        if not steps:
            return True
        allowed = max(steps, key=lambda s: release_key(s[0]))[1]
        if any(a in target.model_type for a in allowed):
            return True
        self.add("LOAD_ERROR", ERROR, self.p.target_allowlist_error.format(
            allowed="/".join(allowed), model_type=target.model_type),
            model_type=target.model_type, cite=self.p.cites.get("target_allowlist", ""))
        return False

    def _capture_unchecked(self, arch: str, family: str, fallback: str | None) -> str:
        p = self.p
        if not arch:
            why = "the target config names no architectures"
        elif surveyed_release(p.name, p.version) is None:
            why = f"no capture survey reaches {p.name} {p.version}"
        else:
            self.add("LOAD_ERROR", ERROR, f"the target class {arch} captures aux hidden states "
                     f"in no surveyed {p.name} release (docs/target-capture.md): startup with an "
                     "EAGLE-3 draft fails, or the architecture name is not one the engine serves",
                     architecture=arch)
            return NO_CAPTURE
        if fallback == NO_CAPTURE:
            self.add("LOAD_ERROR", ERROR, f"{why}, but no {family} target class captures aux "
                     f"hidden states in {p.name} {p.version} (no set_eagle3_layers_to_capture)",
                     family=family, cite=p.cites.get("targets", ""))
            return NO_CAPTURE
        self.add("TARGET_CAPTURE_UNCHECKED", WARNING, f"{why}: whether the target class "
                 f"captures aux hidden states is not checked; assumed the {family} rule "
                 f"{fallback or PLUS_ONE}", architecture=arch or None, family=family)
        return fallback or PLUS_ONE

    def _captured(self, configured, rule, L, family, plan) -> list[int] | None:
        if configured is None:
            return _defaults(L) if L else None
        if rule == AS_IS_IF_MAX_IS_L and L is None:
            plan.notes.append("gpt-oss rule needs L: assumed +1")
        offset = {PLUS_ONE: 1, AS_IS: 0,
                  PLUS_ONE_IF_FIRST_IS_1: 1 if configured[0] == 1 else 0,
                  AS_IS_IF_MAX_IS_L: 0 if L and max(configured) == L else 1}[rule]
        ids = [i + offset for i in configured]
        if self.p.aux_sorted.get(family, True):
            ids = sorted(set(ids))
        if L is None:
            return ids
        top = L if self.final_boundary else L - 1
        kept = [i for i in ids if 0 <= i <= top]
        if len(kept) != len(ids):
            plan.notes.append(f"ids {sorted(set(ids) - set(kept))} are outside what a {L}-layer "
                              "target can capture: those states are never produced")
        return kept

    def _report_aux(self, plan: AuxPlan, L: int | None) -> None:
        cfg, p = self.cfg, self.p
        if plan.source == "default":
            declared = cfg.aux_layer_ids
            if declared.present:
                differs = plan.trained is not None and plan.captured is not None and \
                    plan.trained != plan.captured
                sev = ERROR if differs else (INFO if plan.captured is not None else WARNING)
                read = [s for s in p.aux_id_sources if s != "eagle_config"
                        or not self.bug_effect("nested_aux_ids_ignored")]
                where = "only from " + "/".join(read) if read else "from no config at all"
                line = self._launch_ids_line(plan.trained) if differs else ""
                self.add("AUX_LAYERS_DEFAULTED", sev, f"the engine reads aux ids "
                         f"{where}, but this config declares them at {declared.source}: the target "
                         f"captures the defaults [2, L//2, L-3]"
                         + (f" = {plan.captured}, training used {plan.trained}" if differs else "")
                         + (f"; write in the launch config: {line}" if line else ""),
                         declared=declared.value, declared_at=declared.source,
                         captured=plan.captured, cite=p.cites.get("aux_ids", ""),
                         config_line=line or None)
            else:
                self.add("AUX_LAYERS_DEFAULTED", WARNING, "no aux layer ids declared: the engine "
                         "captures its defaults [2, L//2, L-3]; right only if training used the "
                         "same layers (vllm PR #50170: 1.2% acceptance when it did not)",
                         captured=plan.captured)
        elif plan.trained is not None and plan.captured is not None and plan.trained != plan.captured:
            self.add("AUX_LAYER_CONVENTION", ERROR, f"the engine captures hidden_states "
                     f"{plan.captured} ({plan.rule} on {plan.source} ids {plan.configured}) but "
                     f"training used {plan.trained} ({plan.trained_source})",
                     captured=plan.captured, trained=plan.trained, rule=plan.rule,
                     cite=p.cites.get("plus_one" if plan.rule == PLUS_ONE else "aux_ids", ""))
        if p.graphs_use_default_ids and plan.source != "default" and L and \
                plan.captured != _defaults(L):
            self.add("AUX_LAYER_CONVENTION", WARNING, f"the engine with CUDA graphs (the default) "
                     f"replays decode/verify with the default layers {_defaults(L)}, not "
                     f"{plan.captured}; only eager prefill uses the config ids "
                     "(--disable-cuda-graph, or SGLang >= the fix in PR #22836)",
                     cite=p.cites.get("graphs", ""))

    def _launch_ids_line(self, indices: list[int] | None) -> str:
        """The launch-config line that makes the engine capture these hidden_states indices."""
        if not self.p.aux_ids_launch_line or not indices:
            return ""
        ids = sorted(i + self.p.aux_ids_launch_offset for i in indices)
        return self.p.aux_ids_launch_line.format(ids=ids)

    # --- fc width ----------------------------------------------------------------------------
    def report_fc(self, aux: AuxPlan, fc_ckpt: int | None) -> None:
        cfg, p = self.cfg, self.p
        engine_in = self.num_aux() * cfg.Ht
        if fc_ckpt is not None and fc_ckpt != engine_in:
            self.add("AUX_COUNT_MISMATCH", ERROR, f"the engine builds fc for {self.num_aux()} aux "
                     f"states ({engine_in} inputs) but the checkpoint's fc takes {fc_ckpt} "
                     f"({fc_ckpt / cfg.Ht:g} x {cfg.Ht}); "
                     + (f"give {fc_ckpt // cfg.Ht:g} ids in the launch config "
                        f"({p.aux_ids_launch_line.split(':')[0]})" if p.aux_ids_launch_line
                        else "set num_aux_hidden_states or "
                        "eagle_config.eagle_aux_hidden_state_layer_ids"), engine=engine_in,
                     checkpoint=fc_ckpt, cite=p.cites.get("fc_width", ""))
        if aux.width is None or aux.width == engine_in or not aux.use_aux:
            return
        if p.fc_skip_when_width_is_hidden and aux.width == cfg.H:
            self.add("FC_SKIPPED", ERROR, f"the engine feeds the draft a {aux.width}-wide hidden state "
                     f"(draft hidden_size {cfg.H}): fc is skipped silently and the draft sees an "
                     "untransformed state (accept len ~1.00)", width=aux.width,
                     cite=p.cites.get("fc_skip", ""))
        else:
            self.add("LOAD_ERROR", ERROR, f"the engine feeds fc a {aux.width}-wide hidden state but "
                     f"fc takes {engine_in}: shape error at the first request", width=aux.width,
                     fc_in=engine_in)

    # --- known bugs --------------------------------------------------------------------------
    def active_bugs(self) -> list:
        """The known bugs of this release whose condition this draft meets."""
        return [b for b in bugs_in(self.p) if affects(b, self.p.version)
                and BUG_CONDITIONS[b.condition](self)]

    def bug_effect(self, effect: str) -> bool:
        return any(b.effect == effect and b.applies_effect(self.p.version)
                   for b in self.active_bugs())

    def report_known_bugs(self, aux: AuxPlan) -> None:
        p = self.p
        for bug in self.active_bugs():
            fix = f"fixed in {p.name} {bug.fixed}" if bug.fixed else "not fixed in any surveyed release"
            way_out = bug.way_out(p.version)
            severity = bug.severity
            if bug.applies_effect(p.version):
                # the plan already says what the engine does; the bug says why, and how out
                harmful = aux.trained is not None and aux.captured is not None and \
                    aux.trained != aux.captured
                severity = ERROR if harmful else WARNING
            line = self.effect_fix(bug, aux)
            condition = NEEDS.get(bug.needs, "")
            if condition:
                severity = INFO
            self.add("ENGINE_BUG", severity, f"{bug.id} ({p.name} {bug.first} up to "
                     f"{bug.fixed or 'now'}): {condition}{bug.symptom}"
                     + (f"; way out in {p.name} {p.version}: {way_out}" if way_out else "")
                     + (f"; for this draft: {line}" if line else "") + f"; {fix}", bug=bug.id,
                     fixed_in=bug.fixed, cite=bug.cite, applied_to_plan=bug.applies_effect(
                         p.version), way_out=way_out or None, config_line=line or None,
                     needs=bug.needs or None)

    def effect_fix(self, bug, aux: AuxPlan) -> str:
        """The config line that undoes a bug's effect for this draft, "" when none is known."""
        if bug.effect != "nested_aux_ids_ignored" or not aux.trained:
            return ""
        return f'"eagle_aux_hidden_state_layer_ids": {aux.trained}'

    # --- config flags ------------------------------------------------------------------------
    def report_flags(self) -> None:
        for name in NORM_FLAGS:
            rule, given = self.p.flags[name], self.cfg.flag(name)
            if given.present and given.value and self.cfg.dialect in rule.ignored_in:
                self.add("NORM_FLAG_IGNORED", ERROR, f"{name}: true in the config, but the "
                         f"engine's {self.cfg.dialect} config path does not pass it on, so the "
                         "draft is computed as if it were false", flag=name,
                         cite=self.p.cites.get("norm_flags", ""))
            elif given.present and given.value and not rule.read:
                self.add("NORM_FLAG_IGNORED", ERROR, f"{name}: true in the config but "
                         f"the engine never reads it, so the draft is computed as if it were "
                         "false (lower acceptance, no error)", flag=name)
            elif given.present and given.value and given.source not in rule.sources:
                self.add("NORM_FLAG_IGNORED", ERROR, f"{name}: set at {given.source}, where "
                         f"the engine does not look (it reads {'/'.join(rule.sources)})", flag=name)
            elif not given.present and rule.read:
                self._report_flag_default(name)

    def _report_flag_default(self, name: str) -> None:
        trained = TRAINER_FLAG_DEFAULTS[name][self.cfg.dialect]
        served = self.flags[name]
        if len(trained) > 1 or served not in trained:
            options = " or ".join(str(v).lower() for v in sorted(trained))
            self.add("NORM_FLAG_AMBIGUOUS", WARNING, f"{name} is absent: the engine assumes "
                     f"{str(served).lower()}, while a {self.cfg.dialect} trainer may have used "
                     f"{options}; write the value training used into config.json",
                     flag=name, engine_default=served, trainer_defaults=sorted(trained),
                     cite=self.p.cites.get(name, ""))

    def report_context(self) -> None:
        target, cfg = self.target, self.cfg
        if not target or not target.max_position_embeddings:
            return
        draft = cfg.max_position_embeddings.value or DEFAULT_MAX_POSITIONS
        if target.max_position_embeddings <= draft:
            return
        msg = (f"draft max_position_embeddings {draft} < target context "
               f"{target.max_position_embeddings}")
        if self.p.context_error:
            self.add("LOAD_ERROR", ERROR, f"{msg}: {self.p.context_error}",
                     cite=self.p.cites.get("context", ""))
        self.add("CONTEXT_TOO_SHORT", WARNING, f"{msg}: either the draft was trained on a "
                 "shorter window, and acceptance drops on prompts past it (sglang #6783), or "
                 "the config value is simply wrong: trainers often copy a default, and raising "
                 "it in the config with no retraining has restored acceptance in public reports. "
                 "Check the training sequence length before retraining", draft=draft,
                 target=target.max_position_embeddings, cite=CONTEXT_CITE)


def _preview(items: list[str], n: int = 4) -> str:
    head = ", ".join(items[:n])
    return head + (f" (+{len(items) - n} more)" if len(items) > n else "")


def flat_aux_ids(ids: list[int] | None, where: str) -> tuple[list[int] | None, str]:
    """hidden_states indices (speculators' top-level ids, vLLM's convention) -> the ids a flat
    config must carry so SGLang, which applies PLUS_ONE on Llama/Qwen targets (its profiles'
    aux_rules, cited there as "plus_one"), captures the same layers. With the reason."""
    if not ids:
        return None, ("no top-level ids in the speculators config: none written, engines use "
                      "their defaults (hidden_states[2], [L//2], [L-3]) on both sides")
    if any(i - 1 < 0 for i in ids):
        raise ConversionError(
            f"eagle_aux_hidden_state_layer_ids {ids} contains hidden_states index 0 (the "
            "embeddings): the flat form stores id - 1 ('output of layer' ids, which SGLang turns "
            "back into hidden_states[id] by adding 1), and -1 cannot be written", where,
            "check the draft's aux layer ids; the embedding output cannot be expressed in a "
            "flat SGLang config")
    return [i - 1 for i in ids], (
        "speculators top-level ids are hidden_states[id] (vLLM extraction); SGLang reads only the "
        "nested eagle_config and adds +1 for Llama/Qwen targets, so the flat file carries id - 1 "
        "('output of layer' convention) and SGLang captures hidden_states[id] again")
