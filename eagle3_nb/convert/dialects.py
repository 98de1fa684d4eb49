"""The config dialects a copy is written in, and every change the rewrite makes, with its reason.

    flat         SafeAILab / SpecForge / SGLang: a flat LlamaConfig, aux ids in eagle_config
    speculators  speculators / vLLM: the layer's fields nested in transformer_layer_config

`build_config` writes the new config.json's content and lists each differing leaf as a
`ConfigChange` (a leaf a builder did not name is added as following from the dialect change).
What an engine does with each form is quoted from eagle3_nb.engines.facts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from eagle3_nb.config import NORM_FLAGS, DraftConfig
from eagle3_nb.convert.plan import PlannedTensor, Target
from eagle3_nb.engines.config_rules import json_type
from eagle3_nb.engines.facts import CONVERSION as FACTS
from eagle3_nb.engines.planner import flat_aux_ids, plan_load, trained_aux_indices
from eagle3_nb.io.checkpoint import Checkpoint
from eagle3_nb.layouts import layer_index

FLAT_ARCH = "LlamaForCausalLMEagle3"          # what a flat config names (FACTS["flat_arch"])
SPECULATORS_ARCH = "Eagle3DraftModel"

# flat (top-level) fields that make up a speculators transformer_layer_config
LAYER_KEYS = (
    "model_type", "hidden_size", "intermediate_size", "num_attention_heads", "num_key_value_heads",
    "head_dim", "num_hidden_layers", "rms_norm_eps", "rope_theta", "rope_scaling",
    "rope_parameters", "partial_rotary_factor", "max_position_embeddings", "vocab_size",
    "attention_bias", "mlp_bias", "hidden_act", "tie_word_embeddings",
    # harmless LlamaConfig/Qwen3Config fields carried along rather than dropped
    "torch_dtype", "dtype", "bos_token_id", "eos_token_id", "pad_token_id", "initializer_range",
    "attention_dropout", "use_cache", "pretraining_tp", "layer_types", "sliding_window",
    "use_sliding_window", "max_window_layers",
)
# speculators top-level keys that the flat config keeps at the top level as they are
SPEC_TOP_KEEP = ("draft_vocab_size", "num_aux_hidden_states", "tie_word_embeddings", "dtype",
                 "torch_dtype", "transformers_version")
# the speculators converter hard-codes this proposal (docs/speculators-and-vllm.md); vLLM reads
# num_speculative_tokens from proposal_methods[0]
DEFAULT_PROPOSAL = {"proposal_type": "greedy", "speculative_tokens": 3, "verifier_accept_k": 1,
                    "accept_tolerance": 0.0}


class _Absent:
    def __repr__(self) -> str:
        return "<absent>"


ABSENT = _Absent()


def _show(value: Any) -> Any:
    return "<absent>" if value is ABSENT else value


@dataclass(frozen=True)
class ConfigChange:
    key: str                 # dotted path in the new config (or the removed key)
    old: Any                 # ABSENT when the key did not exist
    new: Any                 # ABSENT when the key is not written
    reason: str
    old_key: str | None = None   # where the old value lived, when it moved

    def to_json(self) -> dict[str, Any]:
        out = {"key": self.key, "old": _show(self.old), "new": _show(self.new),
               "reason": self.reason}
        if self.old_key and self.old_key != self.key:
            out["old_key"] = self.old_key
        return out

    def describe(self) -> str:
        src = f"{self.old_key}={_show(self.old)!r}" if self.old_key else repr(_show(self.old))
        return f"{self.key}: {src} -> {_show(self.new)!r} ({self.reason})"


def _flat_from_speculators(raw: dict[str, Any], cfg: DraftConfig, where: str,
                           ) -> tuple[dict[str, Any], list[ConfigChange], list[str]]:
    layer = dict(raw["transformer_layer_config"])
    changes: list[ConfigChange] = []
    warnings: list[str] = []
    out: dict[str, Any] = {}
    moved_reason = "flat LlamaConfig: the layer fields live at the top level"
    moved: dict[str, ConfigChange] = {}
    for k, v in layer.items():
        if k == "architectures":
            changes.append(ConfigChange(k, v, ABSENT, "the layer config's own architectures "
                                        "are replaced by the draft architecture",
                                        f"transformer_layer_config.{k}"))
            continue
        out[k] = v
        moved[k] = ConfigChange(k, v, v, moved_reason, f"transformer_layer_config.{k}")
    if "model_type" not in layer:
        out["model_type"] = "llama"
        changes.append(ConfigChange("model_type", ABSENT, "llama", FACTS["model_type_needed"]))
    elif str(layer["model_type"]) != "llama":
        warnings.append("layer model_type " + FACTS["flat_layer_type"].format(
            model_type=layer["model_type"], arch=FLAT_ARCH))
    old_arch = raw.get("architectures", ABSENT)
    out["architectures"] = [FLAT_ARCH]
    changes.append(ConfigChange("architectures", old_arch, [FLAT_ARCH],
                                FACTS["flat_arch"]))
    for k in SPEC_TOP_KEEP:
        if k in raw:
            if k in out and out[k] != raw[k]:
                moved[k] = ConfigChange(k, out[k], raw[k], "the top-level value wins over "
                                        "transformer_layer_config's (the kit reads it first)",
                                        f"transformer_layer_config.{k}")
            out[k] = raw[k]
    changes.extend(moved.values())
    ths = raw.get("target_hidden_size")
    if ths is not None:
        out["target_hidden_size"] = ths
    elif "target_hidden_size" in raw:
        changes.append(ConfigChange("target_hidden_size", None, ABSENT,
                                    "null means 'same as hidden_size'; the flat form omits it"))
    # norm flags: explicit where the meaning depends on a default
    for flag in NORM_FLAGS:
        if flag in raw:
            out[flag] = raw[flag]
    if "norm_before_residual" not in raw:
        out["norm_before_residual"] = True
        changes.append(ConfigChange("norm_before_residual", ABSENT, True,
                                    FACTS["nbr_missing"]))
    if out.get("norm_before_residual"):
        warnings.append(FACTS["nbr_true"])
    ids = raw.get("eagle_aux_hidden_state_layer_ids")
    new_ids, ids_reason = flat_aux_ids(cfg.aux_layer_ids_top, where)
    if cfg.aux_ids_unread.present:  # a string "2,4,5": no engine reads it as ids
        ids_reason = "not a list of integers, so no engine reads it as ids: not written"
    eagle: dict[str, Any] = {}
    if new_ids is not None:
        eagle["eagle_aux_hidden_state_layer_ids"] = new_ids
    eagle["use_aux_hidden_state"] = True
    if "norm_before_fc" in raw:
        eagle["norm_before_fc"] = raw["norm_before_fc"]
        changes.append(ConfigChange("eagle_config.norm_before_fc", raw["norm_before_fc"],
                                    raw["norm_before_fc"], FACTS["nested_nbf"], "norm_before_fc"))
    out["eagle_config"] = eagle
    changes.append(ConfigChange("eagle_config.eagle_aux_hidden_state_layer_ids",
                                ABSENT if ids is None else ids,
                                ABSENT if new_ids is None else new_ids, ids_reason,
                                "eagle_aux_hidden_state_layer_ids"))
    changes.append(ConfigChange("eagle_config.use_aux_hidden_state", ABSENT, True,
                                "EAGLE-3 drafts read concatenated aux hidden states"))
    dropped_reason = {"auto_map": "remote code: the kit never writes auto_map",
                      "transformer_layer_config": "moved to the top level"}
    for k in raw:
        if k in out or k in dropped_reason or k in ("eagle_aux_hidden_state_layer_ids",
                                                    "target_hidden_size", "architectures"):
            continue
        reason = ("speculators-only metadata, not part of a flat config"
                  if k.startswith("speculators_") else "no meaning in the flat format")
        changes.append(ConfigChange(k, raw[k], ABSENT, reason))
    for k, reason in dropped_reason.items():
        if k in raw and k != "transformer_layer_config":
            changes.append(ConfigChange(k, raw[k], ABSENT, reason))
    return out, changes, warnings


def _speculators_from_flat(raw: dict[str, Any], cfg: DraftConfig, entries: list[PlannedTensor],
                           where: str) -> tuple[dict[str, Any], list[ConfigChange], list[str]]:
    changes: list[ConfigChange] = []
    warnings: list[str] = []
    moved = "speculators nests the decoder layer's fields in transformer_layer_config"
    layer: dict[str, Any] = {}
    for k in LAYER_KEYS:
        if k in raw:
            layer[k] = raw[k]
            changes.append(ConfigChange(f"transformer_layer_config.{k}", raw[k], raw[k], moved, k))
    if "model_type" not in layer:
        layer["model_type"] = "llama"
        changes.append(ConfigChange("transformer_layer_config.model_type", ABSENT, "llama",
                                    "speculators dispatches the layer config on model_type; "
                                    "none given, Llama assumed"))
    n_layers = 1 + max((layer_index(e.canonical) or 0 for e in entries), default=0)
    if "num_hidden_layers" not in layer:
        layer["num_hidden_layers"] = n_layers
        changes.append(ConfigChange("transformer_layer_config.num_hidden_layers", ABSENT, n_layers,
                                    "counted from the layer keys; transformers' LlamaConfig "
                                    "would otherwise default to 32 layers"))
    out: dict[str, Any] = {"architectures": [SPECULATORS_ARCH], "speculators_model_type": "eagle3",
                           "transformer_layer_config": layer}
    changes.append(ConfigChange("architectures", raw.get("architectures", ABSENT),
                                [SPECULATORS_ARCH], FACTS["speculators_arch"]))
    changes.append(ConfigChange("speculators_model_type", ABSENT, "eagle3",
                                FACTS["speculators_type"]))
    # draft vocab: must be explicit, speculators defaults a missing value to 32000
    dvs = raw.get("draft_vocab_size")
    if dvs is None:
        lm = next((e.info.shape for e in entries if e.canonical == "lm_head.weight"), None)
        dvs = lm[0] if lm else cfg.vocab_size
        changes.append(ConfigChange("draft_vocab_size", raw.get("draft_vocab_size", ABSENT), dvs,
                                    "speculators needs an integer (its default is 32000): taken "
                                    "from lm_head.weight rows, else vocab_size"))
    out["draft_vocab_size"] = dvs
    out["target_hidden_size"] = raw.get("target_hidden_size")
    if "target_hidden_size" not in raw:
        changes.append(ConfigChange("target_hidden_size", ABSENT, None,
                                    "speculators always writes it; null = same as hidden_size"))
    if "num_aux_hidden_states" in raw:
        out["num_aux_hidden_states"] = raw["num_aux_hidden_states"]
    out["tie_word_embeddings"] = cfg.tie_word_embeddings
    # aux ids: the kit's reading of a flat config (planner.trained_aux_indices) -> hidden_states[k]
    declared = cfg.aux_layer_ids
    idx, why = trained_aux_indices(cfg, None)
    if declared.value:
        out["eagle_aux_hidden_state_layer_ids"] = idx
        changes.append(ConfigChange("eagle_aux_hidden_state_layer_ids", declared.value, idx,
                                    f"{FACTS['speculators_ids']}; flat {why}",
                                    "eagle_config.eagle_aux_hidden_state_layer_ids"
                                    if declared.source == "eagle_config"
                                    else "eagle_aux_hidden_state_layer_ids"))
    # norm flags: explicit values, each with the reason for a default
    for flag in NORM_FLAGS:
        given = cfg.flag(flag)
        value = bool(given.value) if given.present else False
        out[flag] = value
        old_key = {"eagle_config": f"eagle_config.{flag}"}.get(given.source, flag)
        if flag == "fc_norm" and given.present and "fc_norm" not in raw:
            old_key = "use_aux_norm"
        if not given.present:
            reason = FACTS["flat_nbr"] if flag == "norm_before_residual" else \
                     "absent means False in every engine; written explicitly"
            changes.append(ConfigChange(flag, ABSENT, value, reason))
        elif old_key != flag:
            changes.append(ConfigChange(flag, given.value, value,
                                        "speculators reads norm flags at the top level", old_key))
    eagle = raw.get("eagle_config") or {}
    if eagle.get("use_aux_hidden_state") is False:
        warnings.append("eagle_config.use_aux_hidden_state is false: the speculators format has no "
                        "such switch (it always feeds aux hidden states through fc)")
    spec_cfg = {"algorithm": "eagle3", "default_proposal_method": "greedy",
                "proposal_methods": [dict(DEFAULT_PROPOSAL)]}
    out["speculators_config"] = spec_cfg
    changes.append(ConfigChange("speculators_config", ABSENT, spec_cfg,
                                "speculators metadata: algorithm eagle3, the speculators "
                                "converter's greedy 3-token proposal; no verifier block (a flat "
                                "config does not name its target)"))
    warnings.append(FACTS["no_verifier"])
    handled = set(LAYER_KEYS) | {"architectures", "draft_vocab_size", "target_hidden_size",
                                 "num_aux_hidden_states", "eagle_aux_hidden_state_layer_ids",
                                 "use_aux_norm", *NORM_FLAGS}
    for k in raw:
        if k in handled:
            continue
        if k == "eagle_config":
            reason = "converted: ids and norm_before_fc moved to the top level"
        elif k == "auto_map":
            reason = "remote code: the kit never writes auto_map"
        else:
            reason = "not part of the speculators eagle3 config"
        changes.append(ConfigChange(k, raw[k], ABSENT, reason))
    return out, changes, warnings


def _keep_dialect(raw: dict[str, Any]) -> tuple[dict[str, Any], list[ConfigChange], list[str]]:
    out = {k: v for k, v in raw.items() if k != "auto_map"}
    changes = ([ConfigChange("auto_map", raw["auto_map"], ABSENT,
                             FACTS["auto_map"])]
               if "auto_map" in raw else [])
    return out, changes, []


def build_config(ckpt: Checkpoint, cfg: DraftConfig, target: Target, entries: list[PlannedTensor],
                  ) -> tuple[dict[str, Any], list[ConfigChange], list[str]]:
    raw = ckpt.config_raw
    where = str(ckpt.path / "config.json")
    want = cfg.dialect if target.config == "keep" else target.config
    if want == cfg.dialect:
        out, changes, warnings = _keep_dialect(raw)
    elif want == "flat":
        out, changes, warnings = _flat_from_speculators(raw, cfg, where)
    else:
        out, changes, warnings = _speculators_from_flat(raw, cfg, entries, where)
    changes = [c for c in changes if not (c.old == c.new and (c.old_key or c.key) == c.key)]
    repaired = _num_aux_repaired(out, cfg, entries)
    changes += repaired
    warnings += [f"repaired in the copy: {c.describe()}" for c in repaired]
    changes += _unaccounted(raw, out, changes)
    if target.config == "flat":   # SGLang-only advice: not for an engine that keeps the dialect
        warnings += _flat_warnings(out, entries)
    return out, changes, warnings


def _num_aux_repaired(out: dict[str, Any], cfg: DraftConfig, entries: list[PlannedTensor],
                      ) -> list[ConfigChange]:
    """A num_aux_hidden_states that is no integer (the kit set it aside: config.unread) written
    as fc's count, in_features / target_hidden_size; removed when fc does not give one. Copied
    as it was, the engines that build fc from it would raise (config_rules.NUM_AUX_READ)."""
    if "num_aux_hidden_states" not in cfg.unread or "num_aux_hidden_states" not in out:
        return []
    old = out.pop("num_aux_hidden_states")
    fc = next((e.info.shape for e in entries if e.canonical == "fc.weight"), None)
    why = f"not an integer (a JSON {json_type(old)}): {FACTS['num_aux_not_int']}"
    if fc and len(fc) == 2 and fc[1] % cfg.Ht == 0:
        out["num_aux_hidden_states"] = fc[1] // cfg.Ht
        return [ConfigChange("num_aux_hidden_states", old, out["num_aux_hidden_states"],
                             f"{why}; written as fc's count (in_features {fc[1]} / "
                             f"target_hidden_size {cfg.Ht})")]
    return [ConfigChange("num_aux_hidden_states", old, ABSENT,
                         f"{why}; removed, since fc's shape gives no count")]


def _flatten(d: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for k, v in d.items():
        path = f"{prefix}{k}"
        if isinstance(v, dict) and v:
            flat.update(_flatten(v, path + "."))
        else:
            flat[path] = v
    return flat


def _unaccounted(old: dict, new: dict, changes: list[ConfigChange]) -> list[ConfigChange]:
    """Every differing leaf must appear in the change list; add what a builder did not name."""
    named = {c.key for c in changes} | {c.old_key for c in changes if c.old_key}

    def covered(path: str) -> bool:
        return any(path == n or path.startswith(n + ".") or n.startswith(path + ".")
                   for n in named)
    fo, fn = _flatten(old), _flatten(new)
    extra = []
    for path in sorted(set(fo) | set(fn)):
        a, b = fo.get(path, ABSENT), fn.get(path, ABSENT)
        if (a is ABSENT or b is ABSENT or a != b) and not covered(path):
            extra.append(ConfigChange(path, a, b, "follows from the dialect change"))
    return extra


def _flat_warnings(out: dict[str, Any], entries: list[PlannedTensor]) -> list[str]:
    warnings = []
    eagle = out.get("eagle_config") or {}
    if out.get("eagle_aux_hidden_state_layer_ids") and not eagle.get(
            "eagle_aux_hidden_state_layer_ids"):
        warnings.append(FACTS["top_level_ids"])
    names = {e.canonical or e.new for e in entries}
    layers = sorted({i for n in names if (i := layer_index(n))})
    lacking = [i for i in layers if f"layers.{i}.hidden_norm.weight" not in names]
    if lacking:
        warnings.append(f"layers {', '.join(map(str, lacking))} " + FACTS["hidden_norm"])
    return warnings


def ids_where_the_engine_reads(profile, ckpt: Checkpoint, config: dict) -> list[ConfigChange]:
    """A flat config whose aux ids sit where this release does not read them (vLLM's model
    runner V2 reads only the top level): the ids written at the top level too, as the
    hidden_states indices training used, which that engine captures as is. The nested ids stay
    for the engines that read them there."""
    cfg = ckpt.config
    if "speculators_config" in config or "eagle_aux_hidden_state_layer_ids" in config \
            or not cfg.aux_layer_ids.present:
        return []
    plan = plan_load(profile, cfg, {n: t.shape for n, t in ckpt.tensors.items()},
                     key_map=ckpt.key_map)
    trained, why = trained_aux_indices(cfg, None)
    if plan.aux.source != "default" or not trained or "top_level" not in profile.aux_id_sources:
        return []
    config["eagle_aux_hidden_state_layer_ids"] = trained
    return [ConfigChange("eagle_aux_hidden_state_layer_ids", ABSENT, trained,
                         f"{profile.key} does not read the ids at {cfg.aux_layer_ids.source}: "
                         f"written where it does, as the hidden_states training used ({why})")]
