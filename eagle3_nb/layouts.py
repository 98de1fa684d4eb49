"""Key layouts and the expected key/shape schema.

Two layouts exist: `eagle` (SafeAILab/SpecForge: the decoder layer is `midlayer.*`) and
`speculators` (`layers.N.*`). The kit's canonical names are the bare speculators ones
(`layers.0.self_attn.q_proj.weight`, `fc.weight`, `d2t` ...). Wrapper prefixes left by training
code (`model.`, `draft_model.`, `module.`, `_orig_mod.`) are detected and reported.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Iterable, Mapping

from eagle3_nb.config import DraftConfig

WRAPPER_PREFIXES = ("model.", "draft_model.", "module.", "_orig_mod.", "eagle_module.")
ROOTS = ("fc.", "midlayer.", "layers.", "norm.", "lm_head.", "embed_tokens.", "input_norm.",
         "fc_norm.", "aux_norm_", "d2t", "t2d")
# legacy names some trainers wrote for per-chunk fc norms (SGLang >=0.5.16 renames them too)
LEGACY_FC_NORMS = {"aux_norm_low": "fc_norm.0", "aux_norm_mid": "fc_norm.1",
                   "aux_norm_high": "fc_norm.2"}
_LAYER = re.compile(r"^layers\.(\d+)\.")


@dataclass(frozen=True)
class KeyName:
    original: str
    prefix: str       # wrapper prefix stripped off ("" when none)
    canonical: str    # bare, speculators-style name ("" when not an EAGLE-3 key at all)


def split_key(name: str) -> KeyName:
    """Strip wrapper prefixes until a known EAGLE-3 root appears; map to the canonical name."""
    rest, prefix = name, ""
    while not rest.startswith(ROOTS):
        for p in WRAPPER_PREFIXES:
            if rest.startswith(p):
                rest, prefix = rest[len(p):], prefix + p
                break
        else:
            return KeyName(name, "", "")
    return KeyName(name, prefix, canonical_name(rest))


@dataclass(frozen=True)
class KeyMap:
    """A checkpoint's tensor names, each split once (`KeyMap.of`; a Checkpoint keeps its own as
    `key_map`): what the planner, the statistics and layout detection read instead of splitting
    every name again at each question."""
    keys: tuple[KeyName, ...]          # in the checkpoint's order
    _by_name: Mapping[str, KeyName] = field(init=False, repr=False, compare=False)
    # canonical name (the name itself for a key that is not EAGLE-3's) -> the name as stored;
    # of two names with one canonical form, the later one
    stored: Mapping[str, str] = field(init=False, repr=False, compare=False)
    canonicals: frozenset[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self):
        object.__setattr__(self, "_by_name", MappingProxyType({k.original: k for k in self.keys}))
        object.__setattr__(self, "stored", MappingProxyType(
            {k.canonical or k.original: k.original for k in self.keys}))
        object.__setattr__(self, "canonicals",
                           frozenset(k.canonical for k in self.keys if k.canonical))

    @classmethod
    def of(cls, names: Iterable[str]) -> "KeyMap":
        return cls(tuple(split_key(n) for n in names))

    def covers(self, names: Iterable[str]) -> bool:
        """Whether this is the map of exactly these names."""
        return self._by_name.keys() == set(names)

    def key(self, name: str) -> KeyName:
        return self._by_name[name]

    def canonical(self, name: str) -> str:
        """The canonical name of a stored name ("" when it is not an EAGLE-3 key)."""
        return self._by_name[name].canonical

    def canonical_or_name(self, name: str) -> str:
        return self._by_name[name].canonical or name

    def has(self, canonical: str) -> bool:
        """Whether some stored name has this canonical name."""
        return canonical in self.canonicals

    def original(self, canonical: str) -> str | None:
        """The name a canonical name is stored under (None when absent)."""
        return self.stored.get(canonical)


def canonical_name(bare: str) -> str:
    if bare.startswith("midlayer."):
        return "layers.0." + bare[len("midlayer."):]
    for legacy, new in LEGACY_FC_NORMS.items():
        if bare.startswith(legacy):
            return new + bare[len(legacy):]
    return bare


def layer_index(canonical: str) -> int | None:
    m = _LAYER.match(canonical)
    return int(m.group(1)) if m else None


@dataclass(frozen=True)
class Layout:
    name: str                 # "eagle" | "speculators" | "mixed" | "unknown"
    prefixes: tuple[str, ...]  # wrapper prefixes seen (empty when keys are bare)
    unrecognised: tuple[str, ...]

    def describe(self) -> str:
        text = self.name
        if self.prefixes:
            text += " with prefix " + ", ".join(repr(p) for p in self.prefixes)
        return text


def detect_layout(names: Iterable[str] | KeyMap) -> Layout:
    """The key layout of a checkpoint: of its names, or of the map it already keeps."""
    keys = (names if isinstance(names, KeyMap) else KeyMap.of(names)).keys
    eagle = any(k.original[len(k.prefix):].startswith("midlayer.") for k in keys)
    spec = any(k.original[len(k.prefix):].startswith("layers.") for k in keys)
    name = {(True, False): "eagle", (False, True): "speculators",
            (True, True): "mixed"}.get((eagle, spec), "unknown")
    prefixes = tuple(sorted({k.prefix for k in keys if k.prefix}))
    unrecognised = tuple(k.original for k in keys if not k.canonical)
    return Layout(name, prefixes, unrecognised)


@dataclass(frozen=True)
class SchemaEntry:
    name: str                  # canonical
    shape: tuple[int, ...]
    required: bool
    kind: str                  # "linear" | "norm" | "embedding" | "vocab_map"
    note: str = ""


def expected_schema(cfg: DraftConfig, num_aux: int | None = None) -> dict[str, SchemaEntry]:
    """Every tensor the config promises, canonical names, with shapes (docs/domain.md 'The draft')."""
    H, Ht, A = cfg.H, cfg.Ht, num_aux or cfg.num_aux
    out: dict[str, SchemaEntry] = {}

    def add(name, shape, kind, required=True, note=""):
        out[name] = SchemaEntry(name, tuple(shape), required, kind, note)

    add("fc.weight", (H, A * Ht), "linear", note=f"{A} aux states x {Ht}")
    if cfg.flag("norm_before_fc").value:
        add("input_norm.weight", (A * Ht,), "norm", note="norm_before_fc")
    if cfg.flag("fc_norm").value:
        for i in range(A):
            add(f"fc_norm.{i}.weight", (Ht,), "norm", note="fc_norm")
    for i in range(cfg.num_hidden_layers):
        _layer_entries(cfg, i, add)
    add("norm.weight", (H,), "norm")
    if not cfg.tie_word_embeddings:
        add("lm_head.weight", (cfg.Vd, H), "linear",
            required=cfg.draft_vocab_size.value is not None or cfg.draft_vocab_size.source == "absent",
            note="draft vocab")
    add("embed_tokens.weight", (cfg.vocab_size, H), "embedding", required=cfg.tie_word_embeddings,
        note="optional: engines usually share the target's")
    if cfg.pruned_vocab:
        add("d2t", (cfg.Vd,), "vocab_map", note="offsets: target_id = i + d2t[i]")
        add("t2d", (cfg.vocab_size,), "vocab_map", note="bool mask over the target vocab")
    return out


def _layer_entries(cfg: DraftConfig, i: int, add) -> None:
    H, hd, nh, nkv, inter = cfg.H, cfg.head_dim, cfg.num_attention_heads, cfg.num_key_value_heads, cfg.intermediate_size
    width = 2 * H if i == 0 else H  # layer 0 attends over [embeds, hidden]
    p = f"layers.{i}."
    if cfg.mla:
        for name, shape in mla_attention_shapes(cfg, width).items():
            add(f"{p}self_attn.{name}.weight", shape, "norm" if name.endswith("layernorm")
                else "linear")
    else:
        for proj, rows in (("q_proj", nh * hd), ("k_proj", nkv * hd), ("v_proj", nkv * hd)):
            add(f"{p}self_attn.{proj}.weight", (rows, width), "linear")
            if cfg.attention_bias:
                add(f"{p}self_attn.{proj}.bias", (rows,), "linear")
        add(f"{p}self_attn.o_proj.weight", (H, nh * hd), "linear")
        if cfg.attention_bias:
            add(f"{p}self_attn.o_proj.bias", (H,), "linear")
    if cfg.layer_model_type.startswith("qwen3"):
        add(f"{p}self_attn.q_norm.weight", (hd,), "norm")
        add(f"{p}self_attn.k_norm.weight", (hd,), "norm")
    for proj, shape in (("gate_proj", (inter, H)), ("up_proj", (inter, H)), ("down_proj", (H, inter))):
        add(f"{p}mlp.{proj}.weight", shape, "linear")
    add(f"{p}input_layernorm.weight", (H,), "norm")
    if i == 0:
        add(f"{p}hidden_norm.weight", (H,), "norm")
    add(f"{p}post_attention_layernorm.weight", (H,), "norm")


def mla_attention_shapes(cfg: DraftConfig, width: int) -> dict[str, tuple[int, ...]]:
    """Checkpoint tensors of one multi-latent attention block (DeepSeek-V2 names), by name
    under self_attn: the low-rank query (or a plain q_proj without q_lora_rank), the shared
    key/value latent with its rope part, and the per-head up-projections."""
    m, nh, H = cfg.mla or {}, cfg.num_attention_heads, cfg.H
    nope, rope, v, kv_rank = (m["qk_nope_head_dim"], m["qk_rope_head_dim"], m["v_head_dim"],
                              m["kv_lora_rank"])
    out: dict[str, tuple[int, ...]] = {}
    if m["q_lora_rank"]:
        out["q_a_proj"] = (m["q_lora_rank"], width)
        out["q_a_layernorm"] = (m["q_lora_rank"],)
        out["q_b_proj"] = (nh * (nope + rope), m["q_lora_rank"])
    else:
        out["q_proj"] = (nh * (nope + rope), width)
    out["kv_a_proj_with_mqa"] = (kv_rank + rope, width)
    out["kv_a_layernorm"] = (kv_rank,)
    out["kv_b_proj"] = (nh * (nope + v), kv_rank)
    out["o_proj"] = (H, nh * v)
    return out


@dataclass(frozen=True)
class SchemaRow:
    name: str                      # canonical
    checkpoint_key: str | None
    expected_shape: tuple[int, ...] | None
    actual_shape: tuple[int, ...] | None
    status: str                    # "ok" | "missing" | "missing_optional" | "unexpected" | "shape_mismatch"
    note: str = ""


def schema_diff(cfg: DraftConfig, shapes: dict[str, tuple[int, ...]],
                key_map: KeyMap | None = None) -> list[SchemaRow]:
    """Compare checkpoint keys (original names -> shapes) with the config's promise; KEY_MAP is
    the map of the shapes' names when the caller has it."""
    schema = expected_schema(cfg)
    key_map = KeyMap.of(shapes) if key_map is None else key_map
    by_canonical: dict[str, str] = {}
    rows: list[SchemaRow] = []
    for key in shapes:
        k = key_map.key(key)
        if k.canonical in schema:
            by_canonical[k.canonical] = key
        else:
            rows.append(SchemaRow(k.canonical or key, key, None, shapes[key], "unexpected"))
    for name, entry in schema.items():
        key = by_canonical.get(name)
        if key is None:
            status = "missing" if entry.required else "missing_optional"
            rows.append(SchemaRow(name, None, entry.shape, None, status, entry.note))
            continue
        status = "ok" if tuple(shapes[key]) == entry.shape else "shape_mismatch"
        rows.append(SchemaRow(name, key, entry.shape, tuple(shapes[key]), status, entry.note))
    order = {"shape_mismatch": 0, "missing": 1, "unexpected": 2, "missing_optional": 3, "ok": 4}
    return sorted(rows, key=lambda r: order[r.status])
