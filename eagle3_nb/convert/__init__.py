"""Non-destructive layout conversion between the two draft checkpoint formats.

    eagle        SafeAILab / SpecForge / SGLang: decoder keys `midlayer.*`, flat LlamaConfig
    speculators  speculators / vLLM: decoder keys `layers.N.*`, nested speculators config

`convert_checkpoint(src, dst, to=..., engine=...)` never writes into SRC. It

1. refuses a DST that exists (`OutputExistsError`) and hashes every source file;
2. writes everything into a temporary directory next to DST (same filesystem): new
   safetensors files whose headers carry the renamed keys and whose data sections are the
   source tensors' bytes, copied byte for byte in bounded chunks (no torch; a pickle source is
   the one exception: it is read with `torch.load(weights_only=True)` when it is opened and
   written with `safetensors.torch.save_file`), a rewritten config.json and, for a sharded
   source, a new index with the same shard split;
3. proves the result: re-opens the finished directory with `Checkpoint.open`, compares the sha256
   of every tensor's data bytes with the source's, checks names, dtypes and shapes, parses the new
   config with `parse_config` and checks that the kit still reads the same aux layers from it;
4. hashes the source again (it must not have changed), writes `eagle3_nb_provenance.json`
   (source hashes before and after, every key rename, every config change with its reason,
   warnings, output hashes) and renames the directory to DST atomically (no-replace rename).
   The proof runs just before that rename; a rename does not touch file contents.

On any failure the temporary directory is removed and nothing is left behind. Checkpoint code
(`*.py`, `auto_map`) is never copied or written. Files other than config.json and the weights are
not copied either; they are listed in the warnings and the provenance.

Choosing the target: `to="eagle"` or `to="speculators"`; or, with `to=None`, an engine
`NAME==VERSION`, resolved to its profile (eagle3_nb.engines): a profile that builds only
`model.midlayer.*` gets `midlayer.*` keys, one that reads a single config dialect gets that
dialect, and everything else keeps its layout (wrapper prefixes are always stripped). When both
`to` and `engine` are given, `to` decides and the engine is only recorded.

`fix_d2t=True` rewrites d2t as offsets, and only when the evidence decides (eagle3_nb.vocab):
absolute ids proven by t2d, or a missing d2t rebuilt from t2d. A table that is already offsets,
ambiguous or invalid is refused: the kit never "repairs" on a guess.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import struct
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from eagle3_nb.config import NORM_FLAGS, DraftConfig, parse_config
from eagle3_nb.engines import resolve_engine
from eagle3_nb.engines.facts import CONVERSION as FACTS
from eagle3_nb.engines.planner import flat_aux_ids, trained_aux_indices
from eagle3_nb.errors import ConversionError, Eagle3NbError, OutputExistsError, VerificationError
from eagle3_nb.findings import ABSOLUTE, ARANGE_SUBTRACTED, MISSING, OFFSET
from eagle3_nb.io.checkpoint import INDEX_NAME, Checkpoint, inside, read_json, sha256_file
from eagle3_nb.io.files import (OWNER_NAME, cleanup_on_signals, default_dir_mode, fsync_dir,
                                remove_stale_staging, rename_noreplace, staging_dir)
from eagle3_nb.io.safetensors import DTYPES, TensorInfo, read_header
from eagle3_nb.layouts import detect_layout, layer_index, split_key

PROVENANCE_NAME = "eagle3_nb_provenance.json"
COPY_CHUNK_BYTES = 16 << 20          # bounded read size when copying / hashing tensor data
FLAT_ARCH = "LlamaForCausalLMEagle3"
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


# --------------------------------------------------------------------------------------------
# results


@dataclass(frozen=True)
class Target:
    keys: str      # "midlayer" | "layers" | "keep"
    config: str    # "flat" | "speculators" | "keep"
    reason: str


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


@dataclass
class ConversionResult:
    dst: Path
    source: Path
    target: Target
    renames: dict[str, str]              # old key -> new key, only keys whose name changed
    config_changes: list[ConfigChange]
    warnings: list[str]
    verified: bool
    checks: dict[str, Any]
    source_hashes: dict[str, str]
    output_hashes: dict[str, str]
    tensor_sha256: dict[str, str]        # new key -> sha256 of its data bytes (equal in src/dst)
    provenance: Path

    def to_json(self) -> dict[str, Any]:
        return {"dst": str(self.dst), "source": str(self.source),
                "target": {"keys": self.target.keys, "config": self.target.config,
                           "reason": self.target.reason},
                "renames": self.renames,
                "config_changes": [c.to_json() for c in self.config_changes],
                "warnings": self.warnings, "verified": self.verified, "checks": self.checks,
                "output_sha256": self.output_hashes, "provenance": str(self.provenance)}


# --------------------------------------------------------------------------------------------
# target selection


def resolve_target(to: str | None, engine: str | None, fix_d2t: bool = False) -> Target:
    """Turn `to` / `engine` into what the output's keys and config look like (module docstring)."""
    if to is not None:
        choice = str(to).strip().lower()
        if choice == "eagle":
            return Target("midlayer", "flat", FACTS["eagle_layout"])
        if choice == "speculators":
            return Target("layers", "speculators", FACTS["speculators_layout"])
        raise ConversionError(f"unknown target format {to!r}", "--to",
                              FACTS["format_choice"])
    if engine is None and fix_d2t:
        return Target("keep", "keep", "--fix-d2t only: layout and config dialect kept")
    if engine is None:
        raise ConversionError("no target given", "convert",
                              FACTS["convert_target"])
    return _target_for_engine(resolve_engine(engine))


def _ids_where_the_engine_reads(profile, ckpt: Checkpoint, config: dict) -> list[ConfigChange]:
    """A flat config whose aux ids sit where this release does not read them (vLLM's model
    runner V2 reads only the top level): the ids written at the top level too, as the
    hidden_states indices training used, which that engine captures as is. The nested ids stay
    for the engines that read them there."""
    from eagle3_nb.engines.planner import plan_load, trained_aux_indices

    cfg = ckpt.config
    if "speculators_config" in config or "eagle_aux_hidden_state_layer_ids" in config \
            or not cfg.aux_layer_ids.present:
        return []
    plan = plan_load(profile, cfg, {n: t.shape for n, t in ckpt.tensors.items()})
    trained, why = trained_aux_indices(cfg, None)
    if plan.aux.source != "default" or not trained or "top_level" not in profile.aux_id_sources:
        return []
    config["eagle_aux_hidden_state_layer_ids"] = trained
    return [ConfigChange("eagle_aux_hidden_state_layer_ids", ABSENT, trained,
                         f"{profile.key} does not read the ids at {cfg.aux_layer_ids.source}: "
                         f"written where it does, as the hidden_states training used ({why})")]


def _target_for_engine(profile) -> Target:
    """The layout a profile loads, read from its data: the decoder parameter names it builds
    and the config dialects it starts from."""
    # a bare midlayer for a one-layer draft with no rename from layers.0 reads midlayer.* only
    only_midlayer = bool(profile.single_layer_param) and not profile.regex_renames
    keys = "keep" if "{i}" in profile.decoder_param and not only_midlayer else "midlayer"
    config = "keep" if len(profile.dialects) > 1 else next(iter(profile.dialects))
    what = ("model.midlayer.* only" if keys == "midlayer" else "both key layouts")
    dialects = " and ".join(sorted(profile.dialects))
    return Target(keys, config, f"{profile.key} loads {what} and reads {dialects} configs: "
                                "wrapper prefixes stripped")


# --------------------------------------------------------------------------------------------
# key plan


@dataclass(frozen=True)
class _Entry:
    old: str
    new: str
    info: TensorInfo      # source tensor (file relative to the source dir)
    out_file: str         # output file name relative to DST
    data: bytes | None = None   # replacement bytes (--fix-d2t); None: the source's bytes


def _new_name(original: str, target: Target, warnings: list[str]) -> str:
    k = split_key(original)
    if not k.canonical:
        warnings.append(f"tensor {original!r} is not an EAGLE-3 key: copied under its own name "
                        + FACTS["unknown_key"])
        return original
    bare = original[len(k.prefix):]
    new = k.canonical                                   # bare speculators name, legacy renamed
    keep_midlayer = target.keys == "keep" and bare.startswith("midlayer.")
    if (target.keys == "midlayer" or keep_midlayer) and new.startswith("layers.0."):
        new = "midlayer." + new[len("layers.0."):]
    return new


def _plan_keys(ckpt: Checkpoint, target: Target) -> tuple[list[_Entry], list[str]]:
    warnings: list[str] = []
    entries: list[_Entry] = []
    seen: dict[str, str] = {}
    for name, info in ckpt.tensors.items():
        new = _new_name(name, target, warnings)
        if new in seen:
            raise ConversionError(f"keys {seen[new]!r} and {name!r} both become {new!r}",
                                  str(ckpt.path), "the checkpoint mixes layouts for the same "
                                  "tensor; decide which copy is stale (the kit will not guess)")
        seen[new] = name
        out_file = "model.safetensors" if ckpt.format == "pickle" else info.file
        entries.append(_Entry(name, new, info, out_file))
    extra = sorted({i for e in entries if (i := layer_index(split_key(e.new).canonical or e.new))})
    if target.keys == "midlayer" and extra:
        warnings.append(f"multi-layer draft: only layer 0 becomes midlayer.*; layers "
                        f"{', '.join(map(str, extra))} keep their layers.N.* keys, and "
                        + FACTS["one_draft_layer"])
    return entries, warnings


# --------------------------------------------------------------------------------------------
# config rewrite


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
    new_ids, ids_reason = flat_aux_ids(ids, where)
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


def _speculators_from_flat(raw: dict[str, Any], cfg: DraftConfig, entries: list[_Entry],
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
    n_layers = 1 + max((layer_index(split_key(e.new).canonical) or 0 for e in entries), default=0)
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
        lm = next((e.info.shape for e in entries if split_key(e.new).canonical == "lm_head.weight"),
                  None)
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


def _build_config(ckpt: Checkpoint, cfg: DraftConfig, target: Target, entries: list[_Entry],
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
    changes += _unaccounted(raw, out, changes)
    if target.config == "flat":   # SGLang-only advice: not for an engine that keeps the dialect
        warnings += _flat_warnings(out, entries)
    return out, changes, warnings


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


def _flat_warnings(out: dict[str, Any], entries: list[_Entry]) -> list[str]:
    warnings = []
    eagle = out.get("eagle_config") or {}
    if out.get("eagle_aux_hidden_state_layer_ids") and not eagle.get(
            "eagle_aux_hidden_state_layer_ids"):
        warnings.append(FACTS["top_level_ids"])
    names = {split_key(e.new).canonical or e.new for e in entries}
    layers = sorted({i for n in names if (i := layer_index(n))})
    lacking = [i for i in layers if f"layers.{i}.hidden_norm.weight" not in names]
    if lacking:
        warnings.append(f"layers {', '.join(map(str, lacking))} " + FACTS["hidden_norm"])
    return warnings


# --------------------------------------------------------------------------------------------
# writing


def _read_exact(fh, start: int, nbytes: int, sink, where: str) -> None:
    """Feed `nbytes` bytes at `start` to sink(bytes), COPY_CHUNK_BYTES at a time."""
    fh.seek(start)
    left = nbytes
    while left:
        block = fh.read(min(COPY_CHUNK_BYTES, left))
        if not block:
            raise ConversionError(f"file ended {left} bytes early while reading tensor data",
                                  where, "the file is truncated or changed during the conversion")
        sink(block)
        left -= len(block)


def _copy_tensor(src_fh, out_fh, info: TensorInfo, where: str) -> str:
    """Copy one tensor's data bytes; return their sha256."""
    h = hashlib.sha256()

    def sink(block: bytes) -> None:
        h.update(block)
        out_fh.write(block)
    _read_exact(src_fh, info.data_start, info.nbytes, sink, where)
    return h.hexdigest()


# The reference writer (safetensors 0.8, Rust) orders tensors by dtype, descending in its enum
# order, then by name; the order is by item size first, so every tensor stays aligned. Same order
# here: a conversion that renames nothing reproduces the reference writer's file byte for byte.
WRITE_ORDER = ("U64", "I64", "F64", "F32", "U32", "I32", "BF16", "F16", "U16", "I16",
               "F8_E4M3", "F8_E5M2", "I8", "U8", "BOOL")


def _write_rank(dtype: str) -> tuple[int, int]:
    if dtype in WRITE_ORDER:
        return (-DTYPES[dtype][0], WRITE_ORDER.index(dtype))
    return (-DTYPES[dtype][0], len(WRITE_ORDER))


def _header_bytes(items: list[tuple[str, TensorInfo]], metadata: dict[str, str]) -> bytes:
    header: dict[str, Any] = {"__metadata__": metadata}
    offset = 0
    for name, info in items:
        header[name] = {"dtype": info.dtype, "shape": list(info.shape),
                        "data_offsets": [offset, offset + info.nbytes]}
        offset += info.nbytes
    raw = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    raw += b" " * (-len(raw) % 8)   # the reference writer pads with spaces to 8 bytes
    return struct.pack("<Q", len(raw)) + raw


def _write_safetensors_copy(ckpt: Checkpoint, entries: list[_Entry], out_path: Path,
                            metadata: dict[str, str]) -> dict[str, str]:
    """A new safetensors file: renamed header, source data bytes; returns new key -> sha256."""
    items = sorted(entries, key=lambda e: (_write_rank(e.info.dtype), e.new))
    hashes: dict[str, str] = {}
    handles: dict[str, Any] = {}
    try:
        with open(out_path, "xb") as out:
            out.write(_header_bytes([(e.new, e.info) for e in items], metadata))
            for e in items:
                if e.data is not None:
                    out.write(e.data)
                    hashes[e.new] = hashlib.sha256(e.data).hexdigest()
                    continue
                fh = handles.get(e.info.file)
                if fh is None:
                    fh = handles[e.info.file] = open(ckpt.file_path(e.info.file), "rb")
                hashes[e.new] = _copy_tensor(fh, out, e.info, str(ckpt.file_path(e.info.file)))
            out.flush()
            os.fsync(out.fileno())
    finally:
        for fh in handles.values():
            fh.close()
    return hashes


def _tensor_bytes(tensor) -> bytes:
    t = tensor.detach().contiguous().reshape(-1)
    import torch

    return t.view(torch.uint8).numpy().tobytes() if t.numel() else b""


def _write_pickle_as_safetensors(ckpt: Checkpoint, entries: list[_Entry], out_path: Path,
                                 ) -> dict[str, str]:
    from safetensors.torch import save_file

    tensors, hashes = {}, {}
    import torch

    for e in entries:
        if e.data is not None:
            t = torch.frombuffer(bytearray(e.data), dtype=torch.int64)
        else:
            t = ckpt.pickled_tensor(e.old).detach().contiguous().clone()  # no shared storage
        tensors[e.new] = t
        hashes[e.new] = hashlib.sha256(_tensor_bytes(t)).hexdigest()
    save_file(tensors, str(out_path), metadata={"format": "pt"})
    with open(out_path, "rb") as fh:
        os.fsync(fh.fileno())
    return hashes


def _write_weights(ckpt: Checkpoint, entries: list[_Entry], tmp: Path) -> dict[str, str]:
    if ckpt.format == "pickle":
        return _write_pickle_as_safetensors(ckpt, entries, tmp / "model.safetensors")
    hashes: dict[str, str] = {}
    by_file: dict[str, list[_Entry]] = {}
    for e in entries:
        by_file.setdefault(e.out_file, []).append(e)
    for rel in ckpt.weight_files:
        src_meta = read_header(ckpt.file_path(rel), rel).metadata
        metadata = {"format": "pt", **src_meta}
        dest = inside(tmp.resolve(), rel)  # never outside the temp dir, whatever rel says
        dest.parent.mkdir(parents=True, exist_ok=True)
        hashes.update(_write_safetensors_copy(ckpt, by_file.get(rel, []), dest, metadata))
    if ckpt.format == "safetensors-sharded":
        index = read_json(ckpt.path, INDEX_NAME)
        meta = dict(index.get("metadata") or {}) if isinstance(index.get("metadata"), dict) else {}
        meta["total_size"] = sum(e.info.nbytes for e in entries)
        weight_map = {e.new: e.out_file for e in sorted(entries, key=lambda e: e.new)}
        new_index = {"metadata": meta, "weight_map": weight_map}
        _write_json(tmp / INDEX_NAME, new_index)
    return hashes


def _write_json(path: Path, data: dict[str, Any]) -> None:
    with open(path, "x", encoding="utf-8") as fh:
        fh.write(json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n")
        fh.flush()
        os.fsync(fh.fileno())


# --------------------------------------------------------------------------------------------
# proof


def _hash_output_tensor(path: Path, info: TensorInfo) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        _read_exact(fh, info.data_start, info.nbytes, h.update, str(path))
    return h.hexdigest()


def _verify(tmp: Path, ckpt: Checkpoint, entries: list[_Entry], src_hashes: dict[str, str],
            src_cfg: DraftConfig, target: Target) -> dict[str, Any]:
    try:
        out = Checkpoint.open(tmp)
    except Eagle3NbError as exc:
        raise VerificationError(f"the written copy does not open as a checkpoint ({exc})",
                                str(tmp), "report this as a bug; nothing was written") from None
    expected = {e.new: e for e in entries}
    if set(out.tensors) != set(expected):
        missing = sorted(set(expected) - set(out.tensors))
        extra = sorted(set(out.tensors) - set(expected))
        raise VerificationError(f"written keys differ from the plan (missing {missing[:5]}, "
                                f"extra {extra[:5]})", str(tmp), "report this as a bug")
    want_format = "safetensors-sharded" if ckpt.format == "safetensors-sharded" else "safetensors"
    if out.format != want_format:
        raise VerificationError(f"written format {out.format}, expected {want_format}", str(tmp),
                                "report this as a bug")
    for name, e in expected.items():
        info = out.tensors[name]
        if (info.dtype, info.shape) != (e.info.dtype, e.info.shape):
            raise VerificationError(f"tensor {name!r} is {info.dtype}{list(info.shape)} in the "
                                    f"copy, {e.info.dtype}{list(e.info.shape)} in the source",
                                    str(tmp), "report this as a bug")
        if e.out_file != info.file and ckpt.format != "pickle":
            raise VerificationError(f"tensor {name!r} landed in {info.file}, not {e.out_file}",
                                    str(tmp), "report this as a bug")
        got = _hash_output_tensor(out.file_path(info.file), info)
        if got != src_hashes[name]:
            raise VerificationError(f"tensor {name!r}: data bytes differ from the source "
                                    f"({e.old!r})", str(tmp),
                                    "check the disk and rerun; nothing was written")
    try:
        new_cfg = parse_config(out.config_raw, str(tmp / "config.json"))
    except Eagle3NbError as exc:
        raise VerificationError(f"the written config does not parse ({exc})", str(tmp),
                                "report this as a bug") from None
    want_dialect = src_cfg.dialect if target.config == "keep" else target.config
    if new_cfg.dialect != want_dialect:
        raise VerificationError(f"written config reads as {new_cfg.dialect}, not {want_dialect}",
                                str(tmp), "report this as a bug")
    aux_before, _ = trained_aux_indices(src_cfg, None)
    aux_after, why_after = trained_aux_indices(new_cfg, None)
    layout = detect_layout(list(out.tensors))
    return {"tensors_checked": len(expected), "tensor_bytes_identical": True,
            "names_dtypes_shapes": True, "format": out.format, "config_parses": True,
            "config_dialect": new_cfg.dialect, "layout": layout.describe(),
            "aux_hidden_states_before": aux_before, "aux_hidden_states_after": aux_after,
            "aux_reading_after": why_after, "aux_same": aux_before == aux_after}


# --------------------------------------------------------------------------------------------
# d2t repair (only on decisive evidence)


def _fix_d2t(ckpt: Checkpoint, cfg: DraftConfig, entries: list[_Entry]
             ) -> tuple[list[_Entry], dict[str, Any]]:
    import numpy as np

    from eagle3_nb.vocab import VocabMapping  # numpy: only --fix-d2t reads arrays


    mapping = VocabMapping.from_checkpoint(ckpt, cfg)
    evidence = mapping.evidence + mapping.problems
    if mapping.format in (ABSOLUTE, ARANGE_SUBTRACTED) and not mapping.problems:
        ids = mapping.intended_ids
    elif mapping.format == MISSING and mapping.t2d is not None and int(mapping.t2d.sum()) == cfg.Vd:
        ids = np.flatnonzero(mapping.t2d)
    else:
        raise ConversionError(f"--fix-d2t refused: the table reads as {mapping.format!r}, not as "
                              "something the evidence lets the kit repair (" + "; ".join(evidence)
                              + ")", str(ckpt.path),
                              "a correct offset table needs no fix; an ambiguous one needs a "
                              "person to check token ids (eagle3-nb vocab PATH --tokenizer ...)")
    data = (ids - np.arange(cfg.Vd)).astype("<i8").tobytes()
    old = next((e for e in entries if e.new == "d2t"), None)
    near = old or next((e for e in entries if e.new == "t2d"), entries[0])
    info = TensorInfo("d2t", "I64", (cfg.Vd,), near.out_file, -1, len(data))
    fixed = _Entry(old.old if old else "", "d2t", info, near.out_file, data)
    rest = [e for e in entries if e is not old]
    return rest + [fixed], {"before": mapping.format, "evidence": evidence,
                            "rule": "d2t = target_ids - arange(draft_vocab_size)"}


def _revalidate_d2t(tmp: Path) -> dict[str, Any]:
    from eagle3_nb.vocab import VocabMapping

    out = Checkpoint.open(tmp)
    mapping = VocabMapping.from_checkpoint(out, out.config)
    if mapping.format != OFFSET or not mapping.readings["offsets"].valid:
        raise VerificationError(f"the repaired d2t reads as {mapping.format}", str(tmp),
                                "report this as a bug; nothing was written")
    return {"format": mapping.format, "t2d_agrees": mapping.t2d_agrees}


# --------------------------------------------------------------------------------------------
# destination handling


def _check_destination(dst: Path, src: Path) -> Path:
    if os.path.lexists(dst):
        raise OutputExistsError("destination already exists", str(dst),
                                "choose a new directory; conversion never overwrites or merges")
    parent = dst.absolute().parent
    if not parent.is_dir():
        raise ConversionError("the destination's parent directory does not exist", str(dst),
                              f"create {parent} first")
    dst_abs = parent.resolve() / dst.name
    src_abs = src.resolve()
    if src_abs == dst_abs or src_abs in dst_abs.parents:
        raise ConversionError("the destination is inside the source checkpoint", str(dst),
                              "write the conversion somewhere outside the directory it reads")
    return dst_abs


def _earlier_provenance(ckpt: Checkpoint, warnings: list[str]) -> dict[str, Any] | None:
    """The source's own provenance file (it was converted before), kept as data in the chain."""
    if not (ckpt.path / PROVENANCE_NAME).is_file():
        return None
    try:
        return read_json(ckpt.path, PROVENANCE_NAME)
    except Eagle3NbError as exc:
        warnings.append(f"the source's {PROVENANCE_NAME} is unreadable and not carried over "
                        f"({exc})")
        return None


def _kit_version() -> str:
    try:
        from importlib.metadata import version

        return version("eagle3_nb")
    except Exception:  # noqa: BLE001 - not installed: still convert
        return "unknown"


# --------------------------------------------------------------------------------------------
# entry point


def preview(ckpt: Checkpoint, profile) -> tuple[DraftConfig, dict[str, tuple[int, ...]]] | None:
    """What `convert CKPT NEW --engine PROFILE` would write, from headers and JSON only: the
    copy's parsed config and its tensor shapes by name; None when the conversion is refused.
    Advice that names the conversion is checked against it (checks.load)."""
    try:
        target = _target_for_engine(profile)
        entries, _ = _plan_keys(ckpt, target)
        config, _, _ = _build_config(ckpt, ckpt.config, target, entries)
        _ids_where_the_engine_reads(profile, ckpt, config)
        return parse_config(config), {e.new: tuple(e.info.shape) for e in entries}
    except Eagle3NbError:
        return None


def convert_checkpoint(src: str | os.PathLike, dst: str | os.PathLike, to: str | None = None,
                       engine: str | None = None, fix_d2t: bool = False) -> ConversionResult:
    """Write a converted copy of SRC to the new directory DST and prove it (module docstring)."""
    target = resolve_target(to, engine, fix_d2t)
    src_path, dst_path = Path(src), Path(dst)
    dst_abs = _check_destination(dst_path, src_path)
    ckpt = Checkpoint.open(src_path)
    dst_abs = _check_destination(dst_path, ckpt.path)   # again, against the resolved source
    src_cfg = ckpt.config
    entries, key_warnings = _plan_keys(ckpt, target)
    d2t_fix = None
    if fix_d2t:
        entries, d2t_fix = _fix_d2t(ckpt, src_cfg, entries)
    new_config, changes, cfg_warnings = _build_config(ckpt, src_cfg, target, entries)
    if engine is not None and to is None:
        changes += _ids_where_the_engine_reads(resolve_engine(engine), ckpt, new_config)
    warnings = key_warnings + cfg_warnings
    earlier = _earlier_provenance(ckpt, warnings)
    used = {"config.json", INDEX_NAME, *ckpt.code_files,
            *(Path(rel).parts[0] for rel in ckpt.weight_files)}
    if earlier is not None:
        used.add(PROVENANCE_NAME)
    left = sorted(p.name for p in ckpt.path.iterdir() if p.name not in used)
    if ckpt.code_files:
        warnings.append(f"checkpoint code not copied (never executed or written): "
                        f"{', '.join(ckpt.code_files)}")
    if left:
        warnings.append(f"other files not copied: {', '.join(left)}")
    free = shutil.disk_usage(dst_abs.parent).free
    if free < ckpt.declared_bytes + (1 << 20):
        raise ConversionError(f"{free} bytes free, the copy needs about {ckpt.declared_bytes}",
                              str(dst_abs.parent), "free some space or choose another place")

    try:
        hashes_before = ckpt.hash_files()
    except OSError as exc:
        raise ConversionError(f"cannot read a source file ({exc.strerror})", str(exc.filename),
                              "check that the checkpoint is complete and readable") from None
    remove_stale_staging(dst_abs)
    # the owner file inside lets the next run remove what a SIGKILLed one left
    tmp = staging_dir(dst_abs, "eagle3-nb convert", ConversionError)
    with cleanup_on_signals():  # SIGTERM/SIGHUP unwind through the rollback below
        try:
            tensor_hashes = _write_weights(ckpt, entries, tmp)
            _write_json(tmp / "config.json", new_config)
            checks = _verify(tmp, ckpt, entries, tensor_hashes, src_cfg, target)
            if d2t_fix is not None:
                checks["d2t_after"] = _revalidate_d2t(tmp)
            if not checks["aux_same"]:
                before = checks["aux_hidden_states_before"]
                after = checks["aux_hidden_states_after"]
                warnings.append(
                    f"the flat form of these aux ids is ambiguous: the source means hidden_states"
                    f"{before}, the kit reads the written config as hidden_states{after} "
                    f"({checks['aux_reading_after']}). " + FACTS["flat_ids_reading"])
            hashes_after = ckpt.hash_files()
            checks["source_unchanged"] = hashes_after == hashes_before
            if not checks["source_unchanged"]:
                changed = sorted(n for n in hashes_before
                                 if hashes_after.get(n) != hashes_before[n])
                raise ConversionError(f"source files changed during the conversion: "
                                      f"{', '.join(changed)}", str(ckpt.path),
                                      "stop whatever writes to the source and convert again")
            output_hashes = {p.relative_to(tmp).as_posix(): sha256_file(p)
                             for p in sorted(tmp.rglob("*")) if p.is_file()
                             and p.name != OWNER_NAME}
            renames = {e.old: e.new for e in entries if e.old and e.old != e.new}
            provenance = {
                "tool": "eagle3_nb", "version": _kit_version(), "operation": "convert",
                "created_utc": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                "source": {"path": str(ckpt.path), "format": ckpt.format,
                           "layout": detect_layout(list(ckpt.tensors)).describe(),
                           "config_dialect": src_cfg.dialect,
                           "sha256_before": hashes_before, "sha256_after": hashes_after,
                           "code_files_not_copied": ckpt.code_files,
                           "other_files_not_copied": left},
                "target": {"to": to, "engine": engine, "keys": target.keys, "config": target.config,
                           "reason": target.reason},
                "renames": renames,
                "tensors": {e.new: {"source_key": e.old, "dtype": e.info.dtype,
                                    "shape": list(e.info.shape), "file": e.out_file,
                                    "sha256": tensor_hashes[e.new]}
                            for e in sorted(entries, key=lambda e: e.new)},
                "config_changes": [c.to_json() for c in changes],
                "warnings": warnings,
                "verification": checks,
                "output": {"sha256": output_hashes},
            }
            if d2t_fix is not None:
                provenance["d2t_fix"] = d2t_fix
            if earlier is not None:
                provenance["source_provenance"] = earlier   # the chain of earlier conversions
            _write_json(tmp / PROVENANCE_NAME, provenance)
            (tmp / OWNER_NAME).unlink()
            fsync_dir(tmp)
            os.chmod(tmp, default_dir_mode())
            rename_noreplace(tmp, dst_abs)
            fsync_dir(dst_abs.parent)
        except BaseException as exc:
            shutil.rmtree(tmp, ignore_errors=True)
            if isinstance(exc, Eagle3NbError) or not isinstance(exc, Exception):
                raise
            detail = f"{type(exc).__name__}: {exc}".splitlines()[0]
            raise ConversionError(f"conversion failed and was rolled back ({detail})", str(dst_abs),
                                  "nothing was written; fix the cause (disk, permissions) and rerun"
                                  ) from exc
    return ConversionResult(dst_abs, ckpt.path, target, renames, changes, warnings, True, checks,
                            hashes_before, output_hashes, tensor_hashes,
                            dst_abs / PROVENANCE_NAME)
