"""What the converted copy looks like, and where each of its tensors comes from.

`resolve_target` turns `--to` / `--engine` into the output's key layout and config dialect (the
package docstring says how an engine's profile decides); `plan_keys` names every tensor of the
copy, from the source's header alone.
"""

from __future__ import annotations

from dataclasses import dataclass

from eagle3_nb.engines import resolve_engine
from eagle3_nb.engines.facts import CONVERSION as FACTS
from eagle3_nb.errors import ConversionError
from eagle3_nb.io.checkpoint import Checkpoint
from eagle3_nb.io.safetensors import TensorInfo
from eagle3_nb.layouts import KeyName, layer_index, split_key


@dataclass(frozen=True)
class Target:
    keys: str      # "midlayer" | "layers" | "keep"
    config: str    # "flat" | "speculators" | "keep"
    reason: str


@dataclass(frozen=True)
class PlannedTensor:
    """One tensor of the copy."""
    old: str
    new: str
    info: TensorInfo      # source tensor (file relative to the source dir)
    out_file: str         # output file name relative to DST
    data: bytes | None = None   # replacement bytes (--fix-d2t); None: the source's bytes
    # the canonical name ("" for a key that is not EAGLE-3's): a rename keeps the source key's,
    # which the source's key map already holds; when not given, read from `new`
    canonical: str | None = None

    def __post_init__(self):
        if self.canonical is None:
            object.__setattr__(self, "canonical", split_key(self.new).canonical)


def resolve_target(to: str | None, engine: str | None, fix_d2t: bool = False) -> Target:
    """Turn `to` / `engine` into what the output's keys and config look like (package docstring)."""
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
    return target_for_engine(resolve_engine(engine))


def target_for_engine(profile) -> Target:
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


def _new_name(k: KeyName, target: Target, warnings: list[str]) -> str:
    original = k.original
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


def plan_keys(ckpt: Checkpoint, target: Target) -> tuple[list[PlannedTensor], list[str]]:
    """Every tensor of the copy under its new name, with the warnings the renaming raises."""
    warnings: list[str] = []
    entries: list[PlannedTensor] = []
    seen: dict[str, str] = {}
    for name, info in ckpt.tensors.items():
        key = ckpt.key_map.key(name)
        new = _new_name(key, target, warnings)
        if new in seen:
            raise ConversionError(f"keys {seen[new]!r} and {name!r} both become {new!r}",
                                  str(ckpt.path), "the checkpoint mixes layouts for the same "
                                  "tensor; decide which copy is stale (the kit will not guess)")
        seen[new] = name
        out_file = "model.safetensors" if ckpt.format == "pickle" else info.file
        entries.append(PlannedTensor(name, new, info, out_file, canonical=key.canonical))
    extra = sorted({i for e in entries if (i := layer_index(e.canonical or e.new))})
    if target.keys == "midlayer" and extra:
        warnings.append(f"multi-layer draft: only layer 0 becomes midlayer.*; layers "
                        f"{', '.join(map(str, extra))} keep their layers.N.* keys, and "
                        + FACTS["one_draft_layer"])
    return entries, warnings
