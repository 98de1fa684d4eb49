"""The plain transformer pieces the EAGLE-3 draft (eagle3_nb.model) is built from: RMSNorm in
float32, RoPE (default, linear and llama3 scaling), attention with grouped kv heads and optional
q/k norms (Qwen3), its KV caches, and the SiLU MLP. Nothing here is EAGLE-3 specific: how layer
0 joins the token embedding and the target's features is model.DecoderLayer."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import nn

from eagle3_nb.config import DraftConfig
from eagle3_nb.errors import Eagle3NbError


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


def rope_tables(positions: torch.Tensor, inv_freq: torch.Tensor,
                dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin [B, 1, T, len(inv_freq)] at positions [B, T], for apply_rope."""
    angles = positions.to(torch.float32)[..., None] * inv_freq.to(positions.device)
    return angles.cos()[:, None].to(dtype), angles.sin()[:, None].to(dtype)


def apply_rope(x: torch.Tensor, tables: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
    """x [B, heads, T, hd]; tables from rope_tables. Rotates the first 2*len(inv_freq) dims
    as halves (x1, x2) -> (x1 cos - x2 sin, x2 cos + x1 sin); a partial rotary leaves the rest
    as it is."""
    cos, sin = tables
    half = cos.shape[-1]
    x1, x2 = x[..., :half], x[..., half:2 * half]
    out = [x1 * cos - x2 * sin, x2 * cos + x1 * sin]
    return torch.cat(out if 2 * half == x.shape[-1] else out + [x[..., 2 * half:]], -1)



# --- attention and its caches -------------------------------------------------------------------

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
    own steps from many positions at once (greedy/), where a query's earlier steps are
    its own chain or its beam slot's, as in the engines' per-request draft KV. After the
    prefix's S columns each step adds a block of n columns, one per query."""
    prefix: LayerCache
    keys: torch.Tensor | None = None        # [B, nkv, S + steps * n, hd]
    values: torch.Tensor | None = None

    def attend(self, q, k, v, visible: torch.Tensor, gqa: bool) -> torch.Tensor:
        """Add this step's k, v [B, nkv, n, hd] as a block; q [B, nh, n, hd] over every column
        where visible ([B, 1, n, S + steps * n], bool or additive) lets it: its prefix, and in
        each block its own column. One fused kernel, scores O(n * (S + steps * n)): fine for
        the few queries per prompt greedy/ sends at once. The keys grow by concatenation:
        the kernel runs much slower on a strided view of a preallocated buffer."""
        first = self.keys is None
        self.keys = torch.cat([self.prefix.keys if first else self.keys, k], 2)
        self.values = torch.cat([self.prefix.values if first else self.values, v], 2)
        return F.scaled_dot_product_attention(q, self.keys, self.values, attn_mask=visible,
                                              enable_gqa=gqa)


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

    def qkv(self, x, positions, inv_freq, keep: int = 0):
        """Queries, keys, values as [B, heads, T, hd], q/k norms and RoPE applied; keep=n:
        queries of the last n positions only."""
        B, T, _ = x.shape
        xq = x[:, -keep:] if keep else x
        q = self.q_proj(xq).view(B, xq.shape[1], self.nh, self.hd)
        k = self.k_proj(x).view(B, T, self.nkv, self.hd)
        v = self.v_proj(x).view(B, T, self.nkv, self.hd).transpose(1, 2)
        if hasattr(self, "q_norm"):
            q, k = self.q_norm(q), self.k_norm(k)
        tables = rope_tables(positions, inv_freq, x.dtype)
        q_tables = tuple(t[:, :, -keep:] for t in tables) if keep else tables
        return apply_rope(q.transpose(1, 2), q_tables), apply_rope(k.transpose(1, 2), tables), v

    def forward(self, x, positions, inv_freq, cache: LayerCache | None,
                visible: torch.Tensor | None = None, keep: int = 0):
        """visible: [T, S] or [B, 1, T, S] bool; default causal by order in the sequence
        (positions only rotate: they may restart or repeat). keep=n: the outputs of the last n
        queries only, every position's keys and values cached."""
        B, T, _ = x.shape
        q, k, v = self.qkv(x, positions, inv_freq, keep)
        if isinstance(cache, SlotKV):
            out = cache.attend(q, k, v, visible, self.nh != self.nkv)
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
        if keep:
            visible, T = visible[..., -keep:, :], keep
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
