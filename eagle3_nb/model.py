"""Eagle3Draft: the EAGLE-3 draft model in plain torch, one readable file.

    aux = cat(h_a1, .., h_aA)                       target residual streams, width A*Ht
    x   = fc(aux)                                   (input_norm over A*Ht, or fc_norm per chunk, first)
    e   = embed_tokens(token_{t+1})                 position t sees feature t and the NEXT token
    layer 0:  a = cat(input_layernorm(e), hidden_norm(x))        width 2H, embeddings first
              r = hidden_norm(x) if norm_before_residual else x
              h = r + o_proj(attn(a));  h = h + mlp(post_attention_layernorm(h))
    layer i:  plain decoder layer on h (pre-attention norm: input_layernorm, or hidden_norm as
              SGLang >= 0.5.16 computes it)
    logits = lm_head(norm(h))                       draft vocab
    next feature = h (norm(h) when norm_output)     H wide: later draft steps skip fc
    target_id = draft_id + d2t[draft_id]

The same math as SafeAILab cnets.py, SpecForge llama3_eagle.py, speculators eagle3/core.py and
the engines' llama_eagle3.py (see docs/domain.md); the wiring switches (eagle3_nb.wirings) select the
variants engines differ on. Device and dtype are parameters; norms compute in float32.
"""

from __future__ import annotations

import math
from copy import deepcopy
from dataclasses import dataclass, field
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from eagle3_nb.config import DraftConfig
from eagle3_nb.errors import DraftIdOutOfRange, Eagle3NbError
from eagle3_nb.io.checkpoint import Checkpoint

# --- switches: how the same weights are wired (as trained, as an engine serves them) ------

FC_RULES = ("always", "engine")            # engine: skip fc when the input is H wide (SGLang)
# "zeros": no target state at all (the draft's token path alone: the floor a tiny, predictable
# target leaves even when the features are useless); or "aux:<i>": the i-th captured layer alone
HIDDEN_SOURCES = ("concat", "final_norm", "zeros")
D2T_MODES = ("offsets", "absolute", "none")
EXTRA_LAYER_NORMS = ("input_layernorm", "hidden_norm")


@dataclass(frozen=True)
class Wiring:
    name: str
    layer_ids: tuple[int, ...] | None      # target hidden_states indices captured (None: need L)
    hidden_source: str = "concat"
    fc_rule: str = "always"
    d2t_mode: str = "offsets"
    norm_before_residual: bool = False
    norm_output: bool = False
    extra_layer_norm: str = "input_layernorm"  # pre-attention norm of decoder layers >= 1
    # draft parameters the engine leaves at their initial values (kit names, e.g. layers.0.mlp.
    # up_proj.weight): the run resets them as the engine's allocation would leave them
    reset_params: tuple[str, ...] = ()
    engine_error: str = ""                 # non-empty: the engine refuses to serve it (no run)
    note: str = ""
    engine: str = ""                       # the profile (NAME==VERSION) it serves as; "": the kit's

    def __post_init__(self):
        ok = (self.fc_rule in FC_RULES and self.d2t_mode in D2T_MODES
              and self.extra_layer_norm in EXTRA_LAYER_NORMS
              and (self.hidden_source in HIDDEN_SOURCES or self.hidden_source.startswith("aux:")))
        if not ok:
            raise Eagle3NbError(f"wiring {self.name!r} has an unknown switch value", None,
                                f"fc_rule {FC_RULES}, d2t_mode {D2T_MODES}, hidden_source "
                                f"{HIDDEN_SOURCES} or aux:<i>, extra_layer_norm {EXTRA_LAYER_NORMS}")

    def to_json(self) -> dict:
        return {"name": self.name, "layer_ids": list(self.layer_ids) if self.layer_ids else None,
                "hidden_source": self.hidden_source, "fc_rule": self.fc_rule,
                "d2t_mode": self.d2t_mode, "norm_before_residual": self.norm_before_residual,
                "norm_output": self.norm_output, "extra_layer_norm": self.extra_layer_norm,
                "reset_params": list(self.reset_params), "engine_error": self.engine_error,
                "note": self.note, "engine": self.engine}


class RMSNorm(nn.Module):
    def __init__(self, width: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(width))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x32 = x.float()
        x32 = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)
        return (self.weight.float() * x32).to(x.dtype)


# --- rotary embeddings -------------------------------------------------------------------------

def rope_inv_freq(cfg: DraftConfig) -> tuple[torch.Tensor, float]:
    """Inverse frequencies and attention scaling from the layer config: default, linear and
    llama3 scaling, in either spelling (`rope_theta` + `rope_scaling`, or `rope_parameters`)."""
    rope = dict(cfg.rope.get("rope_parameters") or {})
    scaling = dict(cfg.rope.get("rope_scaling") or {})
    theta = float(rope.get("rope_theta", cfg.rope.get("rope_theta", 10000.0)))
    params = {**scaling, **rope}
    kind = params.get("rope_type", params.get("type", "default")) or "default"
    rot = int(cfg.head_dim * float(params.get("partial_rotary_factor",
                                              cfg.rope.get("partial_rotary_factor", 1.0))))
    inv = 1.0 / theta ** (torch.arange(0, rot, 2, dtype=torch.float64) / rot)
    if kind == "default":
        return inv.float(), 1.0
    if kind == "linear":
        return (inv / float(params["factor"])).float(), 1.0
    if kind == "llama3":
        return _llama3_scaled(inv, params).float(), 1.0
    raise Eagle3NbError(f"rope type {kind!r} is not supported by the kit's draft model", None,
                        "supported: default, linear, llama3")


def _llama3_scaled(inv: torch.Tensor, p: dict) -> torch.Tensor:
    factor, low, high = float(p["factor"]), float(p["low_freq_factor"]), float(p["high_freq_factor"])
    old_ctx = float(p["original_max_position_embeddings"])
    wavelen = 2 * math.pi / inv
    smooth = (old_ctx / wavelen - low) / (high - low)
    scaled = torch.where(wavelen > old_ctx / low, inv / factor, inv)
    mid = (wavelen <= old_ctx / low) & (wavelen >= old_ctx / high)
    return torch.where(mid, (1 - smooth) * inv / factor + smooth * inv, scaled)


def apply_rope(x: torch.Tensor, positions: torch.Tensor, inv_freq: torch.Tensor) -> torch.Tensor:
    """x [B, heads, T, hd]; positions [B, T]. Rotates the first 2*len(inv_freq) dims (halves)."""
    rot = 2 * inv_freq.numel()
    angles = positions.to(torch.float32)[..., None] * inv_freq.to(x.device)  # [B, T, rot/2]
    cos = torch.cat([angles.cos(), angles.cos()], -1)[:, None].to(x.dtype)
    sin = torch.cat([angles.sin(), angles.sin()], -1)[:, None].to(x.dtype)
    xr, rest = x[..., :rot], x[..., rot:]
    half = rot // 2
    rotated = torch.cat([-xr[..., half:], xr[..., :half]], -1)
    return torch.cat([xr * cos + rotated * sin, rest], -1)


# --- layers ------------------------------------------------------------------------------------

@dataclass
class LayerCache:
    keys: torch.Tensor | None = None       # [B, nkv, S, hd], RoPE already applied
    values: torch.Tensor | None = None


@dataclass
class DraftCache:
    layers: list[LayerCache] = field(default_factory=list)
    # [B, S] bool, which cached positions later queries may see; None = all. Padding in a batch
    # of rows extended by different counts leaves holes, as an engine's per-request KV would.
    valid: torch.Tensor | None = None

    @property
    def length(self) -> int:
        first = self.layers[0] if self.layers else None
        return 0 if first is None or first.keys is None else first.keys.shape[2]

    def truncate(self, length: int) -> None:
        """Drop cached positions past `length` (rejected drafts)."""
        for c in self.layers:
            if c.keys is not None:
                c.keys, c.values = c.keys[:, :, :length], c.values[:, :, :length]
        if self.valid is not None:
            self.valid = self.valid[:, :length]

    def select(self, rows: torch.Tensor) -> None:
        """Keep only these batch rows (finished requests leave the batch)."""
        for c in self.layers:
            if c.keys is not None:
                c.keys, c.values = c.keys[rows], c.values[rows]
        if self.valid is not None:
            self.valid = self.valid[rows]

    def attention_mask(self, new_valid: torch.Tensor | None, T: int, device) -> torch.Tensor:
        """Record the new positions' validity and return what T new queries may see:
        [T, S] (causal by order) or, with holes, [B, 1, T, S]. A query always sees itself, so
        no row is fully masked (a padded query yields finite values nobody reads)."""
        past = self.length
        S = past + T
        order = torch.arange(S, device=device)
        causal = order[None, :] <= order[past:, None]
        if new_valid is None and self.valid is None:
            return causal
        B = new_valid.shape[0] if new_valid is not None else self.valid.shape[0]
        old = self.valid if self.valid is not None else torch.ones(B, past, dtype=torch.bool,
                                                                   device=device)
        new = new_valid.bool() if new_valid is not None else torch.ones(B, T, dtype=torch.bool,
                                                                       device=device)
        self.valid = torch.cat([old, new], 1)
        own = order[None, :] == order[past:, None]
        return ((causal & self.valid[:, None, :]) | own)[:, None]


@dataclass
class SlotKV:
    """One layer's keys and values for queries that each see a shared prefix (under a mask) plus
    their own entries of earlier steps and themselves, one entry per query per step: a draft's
    own steps from many positions at once (greedy.py), where a query's earlier steps are
    its own chain or its beam slot's, as in the engines' per-request draft KV."""
    prefix: LayerCache
    keys: list[torch.Tensor] = field(default_factory=list)     # per step [B, nkv, n, hd]
    values: list[torch.Tensor] = field(default_factory=list)


def slot_attention(q, prefix: tuple[torch.Tensor, torch.Tensor], visible: torch.Tensor,
                   own_keys: list[torch.Tensor], own_values: list[torch.Tensor],
                   groups: int) -> torch.Tensor:
    """q [B, nh, n, hd] over the prefix (keys, values [B, nkv, S, hd]) where visible [n, S],
    and query i over entry i of each own key/value [B, nkv, n, hd]: [B, nh, n, hd]. Scores are
    O(n * (S + steps)), not O(n * (S + steps * n)) as one mask over everything would be."""
    scale = 1.0 / math.sqrt(q.shape[-1])
    keys = prefix[0].repeat_interleave(groups, 1)
    s0 = (q @ keys.transpose(-1, -2) * scale).masked_fill(~visible, float("-inf"))
    diag = [(q * k.repeat_interleave(groups, 1)).sum(-1, keepdim=True) * scale for k in own_keys]
    p = torch.softmax(torch.cat([s0, *diag], -1), -1)
    S = keys.shape[2]
    out = p[..., :S] @ prefix[1].repeat_interleave(groups, 1)
    for i, v in enumerate(own_values):
        out = out + p[..., S + i:S + i + 1] * v.repeat_interleave(groups, 1)
    return out


class Attention(nn.Module):
    def __init__(self, cfg: DraftConfig, in_width: int, qk_norm: bool):
        super().__init__()
        nh, nkv, hd = cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim
        bias = cfg.attention_bias
        self.nh, self.nkv, self.hd = nh, nkv, hd
        self.q_proj = nn.Linear(in_width, nh * hd, bias=bias)
        self.k_proj = nn.Linear(in_width, nkv * hd, bias=bias)
        self.v_proj = nn.Linear(in_width, nkv * hd, bias=bias)
        self.o_proj = nn.Linear(nh * hd, cfg.H, bias=bias)
        if qk_norm:  # Qwen3-style drafts
            self.q_norm = RMSNorm(hd, cfg.rms_norm_eps)
            self.k_norm = RMSNorm(hd, cfg.rms_norm_eps)

    def qkv(self, x, positions, inv_freq):
        """Queries, keys, values as [B, heads, T, hd], q/k norms and RoPE applied."""
        B, T, _ = x.shape
        q = self.q_proj(x).view(B, T, self.nh, self.hd)
        k = self.k_proj(x).view(B, T, self.nkv, self.hd)
        v = self.v_proj(x).view(B, T, self.nkv, self.hd).transpose(1, 2)
        if hasattr(self, "q_norm"):
            q, k = self.q_norm(q), self.k_norm(k)
        return (apply_rope(q.transpose(1, 2), positions, inv_freq),
                apply_rope(k.transpose(1, 2), positions, inv_freq), v)

    def forward(self, x, positions, inv_freq, cache: LayerCache | None,
                visible: torch.Tensor | None = None):
        """visible: [T, S] or [B, 1, T, S] bool; default causal by order in the sequence
        (positions only rotate: they may restart or repeat)."""
        B, T, _ = x.shape
        q, k, v = self.qkv(x, positions, inv_freq)
        if isinstance(cache, SlotKV):  # visible: [n, S] over the prefix
            cache.keys.append(k)
            cache.values.append(v)
            out = slot_attention(q, (cache.prefix.keys, cache.prefix.values), visible,
                                 cache.keys, cache.values, self.nh // self.nkv)
            return self.o_proj(out.transpose(1, 2).reshape(B, T, self.nh * self.hd))
        if cache is not None:
            if cache.keys is not None:
                k = torch.cat([cache.keys, k], 2)
                v = torch.cat([cache.values, v], 2)
            cache.keys, cache.values = k, v
        if visible is None:
            past = k.shape[2] - T
            visible = (torch.arange(k.shape[2], device=x.device)[None, :]
                       <= torch.arange(past, past + T, device=x.device)[:, None])
        # GQA inside the kernel: expanding the whole cache per step cost more than the attention
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=visible,
                                             enable_gqa=self.nh != self.nkv)
        return self.o_proj(out.transpose(1, 2).reshape(B, T, self.nh * self.hd))


class MLP(nn.Module):
    def __init__(self, cfg: DraftConfig):
        super().__init__()
        if cfg.hidden_act != "silu":
            raise Eagle3NbError(f"hidden_act {cfg.hidden_act!r}: only silu drafts are supported",
                                None, "EAGLE-3 drafts use silu")
        bias = cfg.mlp_bias
        self.gate_proj = nn.Linear(cfg.H, cfg.intermediate_size, bias=bias)
        self.up_proj = nn.Linear(cfg.H, cfg.intermediate_size, bias=bias)
        self.down_proj = nn.Linear(cfg.intermediate_size, cfg.H, bias=bias)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class DecoderLayer(nn.Module):
    def __init__(self, cfg: DraftConfig, index: int):
        super().__init__()
        self.first = index == 0
        qk_norm = cfg.layer_model_type.startswith("qwen3")
        self.self_attn = Attention(cfg, 2 * cfg.H if self.first else cfg.H, qk_norm)
        self.mlp = MLP(cfg)
        self.input_layernorm = RMSNorm(cfg.H, cfg.rms_norm_eps)
        self.hidden_norm = RMSNorm(cfg.H, cfg.rms_norm_eps)  # layers >= 1: only SGLang uses it
        self.post_attention_layernorm = RMSNorm(cfg.H, cfg.rms_norm_eps)

    def forward(self, h, embeds, positions, inv_freq, wiring: Wiring, cache, visible=None):
        if self.first:
            normed = self.hidden_norm(h)
            residual = normed if wiring.norm_before_residual else h
            a = torch.cat([self.input_layernorm(embeds), normed], -1)
        else:
            residual = h
            pre = self.hidden_norm if wiring.extra_layer_norm == "hidden_norm" else self.input_layernorm
            a = pre(h)
        h = residual + self.self_attn(a, positions, inv_freq, cache, visible)
        return h + self.mlp(self.post_attention_layernorm(h))


# --- the draft ---------------------------------------------------------------------------------

@dataclass
class DraftOutput:
    logits: torch.Tensor     # [B, T, Vd]
    features: torch.Tensor   # [B, T, H]: what the next draft step is fed
    fc_applied: bool


@dataclass
class DraftProposal:
    draft_ids: torch.Tensor   # [B, k] draft-vocab ids
    target_ids: torch.Tensor  # [B, k] after d2t
    logits: torch.Tensor      # [B, k, Vd]


class Eagle3Draft(nn.Module):
    def __init__(self, cfg: DraftConfig, num_aux: int | None = None, wiring: Wiring | None = None):
        super().__init__()
        self.cfg = cfg
        self.num_aux = num_aux or cfg.num_aux
        self.wiring = wiring or Wiring("trained", None,
                                       norm_before_residual=bool(cfg.flag("norm_before_residual").value),
                                       norm_output=bool(cfg.flag("norm_output").value))
        H, Ht, A, eps = cfg.H, cfg.Ht, self.num_aux, cfg.rms_norm_eps
        self.embed_tokens = nn.Embedding(cfg.vocab_size, H)
        self.fc = nn.Linear(A * Ht, H, bias=False)
        self.input_norm = RMSNorm(A * Ht, eps) if cfg.flag("norm_before_fc").value else None
        self.fc_norm = (nn.ModuleList(RMSNorm(Ht, eps) for _ in range(A))
                        if cfg.flag("fc_norm").value else None)
        self.layers = nn.ModuleList(DecoderLayer(cfg, i) for i in range(cfg.num_hidden_layers))
        self.norm = RMSNorm(H, eps)
        self.lm_head = nn.Linear(H, cfg.Vd, bias=False)
        self.register_buffer("d2t", torch.zeros(cfg.Vd, dtype=torch.long))
        inv_freq, _ = rope_inv_freq(cfg)
        self.register_buffer("inv_freq", inv_freq, persistent=False)
        self.loaded_keys: list[str] = []
        self.missing_keys: list[str] = []

    def _apply(self, fn, recurse=True):
        """Module.to(dtype) casts floating buffers; RoPE frequencies must stay float32 (bf16 would
        round them, with an error growing with position), so they are rebuilt after any cast."""
        super()._apply(fn, recurse)
        self.inv_freq = rope_inv_freq(self.cfg)[0].to(self.inv_freq.device)
        return self

    # -- pieces ---------------------------------------------------------------------------
    def project(self, hidden: torch.Tensor, wiring: Wiring) -> tuple[torch.Tensor, bool]:
        """fc over the aux concat; skipped for an H-wide input under the engine rule."""
        width = hidden.shape[-1]
        if wiring.fc_rule == "engine" and width == self.cfg.H:
            return hidden, False
        if width != self.fc.in_features:
            raise Eagle3NbError(f"hidden states are {width} wide but fc takes "
                                f"{self.fc.in_features} ({self.num_aux} x {self.cfg.Ht})", None,
                                "feed the concatenated aux layers the draft was trained on")
        if self.input_norm is not None:
            hidden = self.input_norm(hidden)
        if self.fc_norm is not None:
            chunks = hidden.chunk(self.num_aux, -1)
            hidden = torch.cat([n(c) for n, c in zip(self.fc_norm, chunks)], -1)
        return self.fc(hidden), True

    def to_target_ids(self, draft_ids: torch.Tensor, wiring: Wiring | None = None) -> torch.Tensor:
        mode = (wiring or self.wiring).d2t_mode
        if mode == "none":
            return draft_ids
        table = self.d2t[draft_ids]
        return table if mode == "absolute" else draft_ids + table

    def checked_target_ids(self, draft_ids: torch.Tensor, wiring: Wiring, step: int) -> torch.Tensor:
        ids = self.to_target_ids(draft_ids, wiring)
        bad = (ids < 0) | (ids >= self.embed_tokens.num_embeddings)
        if bad.any():
            raise out_of_range_error(step, int(draft_ids[bad][0]), int(ids[bad][0]),
                                     self.embed_tokens.num_embeddings, wiring)
        return ids

    # -- passes ---------------------------------------------------------------------------
    def run(self, input_ids, hidden_states, position_ids=None, cache: DraftCache | None = None,
            wiring: Wiring | None = None, own_features: bool = False,
            last_only: bool = False, valid: torch.Tensor | None = None,
            visible: torch.Tensor | None = None) -> DraftOutput:
        """One causal pass: input_ids [B, T] (target ids, already shifted), hidden_states
        [B, T, A*Ht] target features (fc applies), or with own_features the draft's own H-wide
        output fed back (fc never applies, in every engine). last_only: logits and features of
        the last position only (drafting needs no more; the lm_head is the big matmul).
        valid [B, T]: False marks padding no later query may attend to (rows of a batch
        extended by different counts are left-padded, so the last position is always real).
        visible [T, S]: what each new query sees of the cache and the new positions, instead
        (the greedy path's own steps from every position at once, greedy.py)."""
        wiring = wiring or self.wiring
        B, T = input_ids.shape
        if position_ids is None:
            start = cache.length if cache is not None else 0
            position_ids = torch.arange(start, start + T, device=input_ids.device).expand(B, T)
        if cache is not None and not cache.layers:
            cache.layers = [LayerCache() for _ in self.layers]
        if visible is None and (valid is not None or (cache is not None
                                                      and cache.valid is not None)):
            visible = (cache or DraftCache()).attention_mask(valid, T, input_ids.device)
        h = hidden_states.to(self.fc.weight.dtype)
        h, applied = (h, False) if own_features else self.project(h, wiring)
        embeds = self.embed_tokens(input_ids)
        for i, layer in enumerate(self.layers):
            h = layer(h, embeds, position_ids, self.inv_freq, wiring,
                      cache.layers[i] if cache is not None else None, visible)
        h = h[:, -1:] if last_only else h
        normed = self.norm(h)
        return DraftOutput(self.lm_head(normed), normed if wiring.norm_output else h, applied)

    def forward(self, input_ids, hidden_states, position_ids=None):
        return self.run(input_ids, hidden_states, position_ids).logits

    @torch.no_grad()
    def step(self, input_ids, hidden_states, num_steps: int, position_ids=None,
             cache: DraftCache | None = None, wiring: Wiring | None = None,
             valid: torch.Tensor | None = None) -> DraftProposal:
        """Draft `num_steps` tokens as an engine does (chain, greedy): extend over the given
        positions with target features, then feed back each drafted token (mapped to a target
        id through d2t) with the draft's own H-wide feature, one position at a time. The cache
        keeps the num_steps - 1 drafted positions: truncate it to drop them."""
        wiring = wiring or self.wiring
        cache = cache if cache is not None else DraftCache()
        out = self.run(input_ids, hidden_states, position_ids, cache, wiring, last_only=True,
                       valid=valid)
        logits, feature = out.logits, out.features
        last_pos = (position_ids[:, -1:] if position_ids is not None
                    else torch.full_like(input_ids[:, -1:], cache.length - 1))
        all_logits, draft_ids = [], []
        for i in range(num_steps):
            ids = logits.argmax(-1)
            all_logits.append(logits)
            draft_ids.append(ids)
            target_ids = self.checked_target_ids(ids, wiring, i)
            if i + 1 == num_steps:
                break
            nxt = self.run(target_ids, feature, last_pos + 1 + i, cache, wiring, own_features=True)
            logits, feature = nxt.logits, nxt.features
        ids = torch.cat(draft_ids, 1)
        return DraftProposal(ids, self.to_target_ids(ids, wiring), torch.cat(all_logits, 1))


def out_of_range_error(step: int, draft_id: int, target_id: int, vocab: int,
                       wiring: Wiring) -> DraftIdOutOfRange:
    return DraftIdOutOfRange(
        f"draft step {step}: draft id {draft_id} maps to target id {target_id}, outside the "
        f"vocabulary of {vocab} (d2t read as {wiring.d2t_mode}); an engine stops here on a "
        "device-side assert", wiring.name, "check the d2t format: eagle3-nb vocab CHECKPOINT")


def as_engine_leaves(draft: Eagle3Draft, wiring: Wiring, seed: int = 0) -> Eagle3Draft:
    """The draft as an engine computes it when no checkpoint key fills `wiring.reset_params`: a
    copy with those norms at ones and those linear weights random (nn.Linear's own init, seeded,
    standing in for the uninitialised memory engines allocate them with; docs/domain.md "SGLang").
    The draft itself when nothing is reset."""
    if not wiring.reset_params:
        return draft
    # share every parameter the engine does load (embed_tokens and lm_head are GBs for a big
    # target): deepcopy returns what the memo maps an object's id to
    shared = {id(p): p for n, p in draft.named_parameters() if n not in wiring.reset_params}
    copy = deepcopy(draft, memo=shared)
    params = dict(copy.named_parameters())
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name in wiring.reset_params:
            if name not in params:
                raise Eagle3NbError(f"wiring {wiring.name!r} resets {name!r}, which this draft "
                                    "does not have", None, "check the wiring's reset_params")
            p = params[name]
            if name.endswith("norm.weight"):
                p.fill_(1.0)
            else:
                bound = 1.0 / math.sqrt(p.shape[-1])
                p.copy_(torch.empty(p.shape).uniform_(-bound, bound, generator=gen))
    return copy


# --- loading -----------------------------------------------------------------------------------

def load_draft(path: str | Path | Checkpoint, device: str | torch.device = "cpu",
               dtype: torch.dtype = torch.float32, embed_from: str | Path | None = None,
               wiring: Wiring | None = None) -> Eagle3Draft:
    """A draft checkpoint of either layout as an Eagle3Draft in eval mode. `embed_from` names a
    target checkpoint directory to borrow embed_tokens from when the draft has none (or only
    NaN ones, as speculators saves them when the verifier was never loaded)."""
    ckpt = path if isinstance(path, Checkpoint) else Checkpoint.open(path)
    cfg = ckpt.config
    if cfg.mla:
        raise Eagle3NbError("the draft uses multi-latent attention (an MLA draft, "
                            f"{(cfg.architectures or ['?'])[0]}): the kit checks its keys, shapes "
                            "and serving (inspect, notebook 01) but cannot run it", str(ckpt.path),
                            "use eagle3-nb inspect for this draft; measure acceptance in the engine")
    by_name = _read_tensors(ckpt)
    tensors = {canon: by_name[key] for canon, key in ckpt.canonical_keys.items()}
    fc = tensors.get("fc.weight")
    num_aux = fc.shape[1] // cfg.Ht if fc is not None and fc.shape[1] % cfg.Ht == 0 else None
    draft = Eagle3Draft(cfg, num_aux, wiring)
    _load_embeddings(tensors, embed_from, cfg)
    _load_state(draft, tensors)
    return draft.to(device=device, dtype=dtype).eval()


def _read_tensors(ckpt) -> dict[str, torch.Tensor]:
    if ckpt.format == "pickle":
        return {n: ckpt.pickled_tensor(n) for n in ckpt.tensors}
    from safetensors.torch import load_file

    out: dict[str, torch.Tensor] = {}
    for rel in ckpt.weight_files:
        out.update(load_file(str(ckpt.path / rel)))
    return out


def _load_embeddings(tensors: dict, embed_from, cfg: DraftConfig) -> None:
    own = tensors.get("embed_tokens.weight")
    if own is not None and not torch.isnan(own.float()).any():
        return
    if embed_from is None:
        state = "no embed_tokens" if own is None else "only NaN embed_tokens (never loaded)"
        raise Eagle3NbError(f"the draft has {state}", None,
                            "pass the target directory (embed_from=, or --target on the CLI): engines "
                            "share the target's")
    tensors["embed_tokens.weight"] = read_target_embeddings(embed_from, cfg.vocab_size, cfg.H)


def read_target_embeddings(target_dir: str | Path, vocab_size: int, hidden: int) -> torch.Tensor:
    target = Checkpoint.open(target_dir)
    names = [n for n in target.tensors if n.endswith("embed_tokens.weight")]
    if not names:
        raise Eagle3NbError("no embed_tokens.weight in the target checkpoint", str(target_dir),
                            "point embed_from at the target model directory")
    info = target.tensors[names[0]]
    if tuple(info.shape) != (vocab_size, hidden):
        raise Eagle3NbError(f"target embeddings are {list(info.shape)}, the draft needs "
                            f"[{vocab_size}, {hidden}]", str(target_dir),
                            "a draft whose width differs from the target's needs its own embed_tokens")
    return _read_tensors_named(target, names[0])


def _read_tensors_named(ckpt, name: str) -> torch.Tensor:
    if ckpt.format == "pickle":
        return ckpt.pickled_tensor(name)
    from safetensors import safe_open

    with safe_open(str(ckpt.path / ckpt.tensors[name].file), framework="pt") as fh:
        return fh.get_tensor(name)


def _load_state(draft: Eagle3Draft, tensors: dict[str, torch.Tensor]) -> None:
    state = draft.state_dict()
    for name, value in tensors.items():
        if name == "t2d":
            continue
        if name not in state:
            raise Eagle3NbError(f"checkpoint tensor {name!r} has no place in the draft model", None,
                                "check the config (layers, norms) against the weights with "
                                "eagle3-nb inspect")
        if tuple(state[name].shape) != tuple(value.shape):
            raise Eagle3NbError(f"{name}: checkpoint shape {list(value.shape)} != model "
                                f"{list(state[name].shape)}", None, "run eagle3-nb inspect")
        state[name] = value.to(state[name].dtype) if name != "d2t" else value.long()
    draft.load_state_dict(state)
    draft.loaded_keys = sorted(n for n in tensors if n != "t2d")
    draft.missing_keys = sorted(n for n in state if n not in tensors and n != "inv_freq")


def _attend(layer, a, positions, inv_freq, past_k, past_v):
    """Attention of one TTT step: causal over step-0 keys, diagonal over later steps' keys."""
    att = layer.self_attn
    B, T, _ = a.shape
    q, k, v = att.qkv(a, positions, inv_freq)
    past_k.append(k)
    past_v.append(v)
    causal = torch.ones(T, T, dtype=torch.bool, device=a.device).tril()
    out = slot_attention(q, (past_k[0], past_v[0]), causal, past_k[1:], past_v[1:],
                         att.nh // att.nkv)
    return att.o_proj(out.transpose(1, 2).reshape(B, T, att.nh * att.hd))


def ttt_logits(draft: Eagle3Draft, tokens: torch.Tensor, feats: torch.Tensor, n_steps: int):
    """Logits of each TTT step over the positions that have a token j+1 ahead: list of
    [B, T - 1 - j, Vd]. tokens [B, T], feats [B, T, A*Ht] (target features at each position)."""
    if len(draft.layers) != 1:
        raise Eagle3NbError(f"teacher-forced TTT scoring handles one-layer drafts; this one has "
                            f"{len(draft.layers)}", None,
                            "score it with a live target (simulated acceptance) instead")
    layer, B, T = draft.layers[0], tokens.shape[0], tokens.shape[1] - 1
    h = draft.project(feats[:, :T], draft.wiring)[0]
    base = torch.arange(T, device=tokens.device).expand(B, T)
    past_k, past_v, out = [], [], []
    for j in range(n_steps):
        n = T - j                                    # positions with a token j+1 ahead
        embeds = draft.embed_tokens(tokens[:, 1 + j:1 + j + n])
        x = h[:, :n]
        normed = layer.hidden_norm(x)
        residual = normed if draft.wiring.norm_before_residual else x
        a = torch.cat([layer.input_layernorm(embeds), normed], -1)
        pk = [k[:, :, :n] for k in past_k]
        pv = [v[:, :, :n] for v in past_v]
        y = residual + _attend(layer, a, base[:, :n] + j, draft.inv_freq, pk, pv)
        y = y + layer.mlp(layer.post_attention_layernorm(y))
        past_k, past_v = pk, pv
        normed_out = draft.norm(y)
        out.append(draft.lm_head(normed_out))
        h = normed_out if draft.wiring.norm_output else y
    return out
