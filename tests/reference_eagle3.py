"""An independent EAGLE-3 draft forward, written from the published equations only.

Sources (no kit code was read while writing this):
- /work/shared/DOMAIN.md, "The draft";
- reference/eagle-and-specforge.md §1.1-1.2 (SafeAILab `cnets.py` LlamaDecoderLayeremb / Model);
- reference/speculators-and-vllm.md §2 (key shapes) and §4 (vLLM `llama_eagle3.py`:
  input_norm -> per-chunk fc_norm -> fc; norm_before_residual; norm_output);
- reference/sglang-serving.md §1.2 (extra layers use `hidden_norm` as pre-attention norm);
- HF Llama: RMSNorm in float32, rotate-half RoPE, GQA by repeating kv heads,
  `attention_bias` on q/k/v/o; Qwen3: per-head RMSNorm on q and k before RoPE;
  the "linear" and "llama3" RoPE frequency rules as published in transformers'
  `modeling_rope_utils` (`_compute_linear_scaling_rope_parameters`,
  `_compute_llama3_parameters`).

Everything is written with explicit matmuls; nothing here calls the kit.

Weights: a plain dict of tensors with canonical names
    fc.weight [H, A*Ht]; input_norm.weight [A*Ht]; fc_norm.{i}.weight [Ht];
    layers.{i}.self_attn.{q,k,v,o}_proj.weight (+ .bias with attention_bias);
    layers.{i}.self_attn.{q,k}_norm.weight [hd] (Qwen3 layers);
    layers.{i}.mlp.{gate,up,down}_proj.weight;
    layers.{i}.{input_layernorm,hidden_norm,post_attention_layernorm}.weight;
    norm.weight; lm_head.weight [Vd, H]; embed_tokens.weight [Vt, H]; d2t [Vd] (optional).

Config: a plain dict (see `RefConfig` keys below).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch


@dataclass
class RefConfig:
    hidden_size: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    num_layers: int = 1
    num_aux: int = 3
    target_hidden_size: int | None = None
    rms_norm_eps: float = 1e-6
    rope_theta: float = 10000.0
    # None / {"rope_type": "linear", "factor": f} / {"rope_type": "llama3", "factor": ...,
    # "low_freq_factor": ..., "high_freq_factor": ..., "original_max_position_embeddings": ...}
    rope_scaling: dict | None = None
    norm_before_residual: bool = False
    norm_before_fc: bool = False
    fc_norm: bool = False
    norm_output: bool = False
    qk_norm: bool = False            # Qwen3 layers
    attention_bias: bool = False
    extra_layer_norm: str = "input_layernorm"   # pre-attention norm of layers >= 1
    d2t_mode: str = "offsets"        # "offsets" | "absolute" | "none"
    extra: dict = field(default_factory=dict)

    @property
    def ht(self) -> int:
        return self.target_hidden_size or self.hidden_size


# ---------------------------------------------------------------- primitives

def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    dtype = x.dtype
    x32 = x.to(torch.float32)
    var = (x32 * x32).mean(dim=-1, keepdim=True)
    y = x32 / torch.sqrt(var + eps)
    return weight.to(torch.float32) * y.to(dtype)


def linear(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None = None) -> torch.Tensor:
    y = torch.matmul(x, w.transpose(0, 1))
    if b is not None:
        y = y + b
    return y


def silu(x: torch.Tensor) -> torch.Tensor:
    return x / (1.0 + torch.exp(-x))


def inv_freq(cfg: RefConfig) -> torch.Tensor:
    hd = cfg.head_dim
    exps = torch.arange(0, hd, 2, dtype=torch.float64) / hd
    base = 1.0 / (cfg.rope_theta ** exps)
    sc = cfg.rope_scaling
    kind = None if sc is None else (sc.get("rope_type") or sc.get("type"))
    if kind in (None, "default"):
        return base
    if kind == "linear":
        return base / float(sc["factor"])
    if kind == "llama3":
        factor = float(sc["factor"])
        low = float(sc["low_freq_factor"])
        high = float(sc["high_freq_factor"])
        old_ctx = float(sc["original_max_position_embeddings"])
        low_freq_wavelen = old_ctx / low
        high_freq_wavelen = old_ctx / high
        out = []
        for f in base.tolist():
            wavelen = 2 * math.pi / f
            if wavelen < high_freq_wavelen:          # high frequency: unchanged
                out.append(f)
            elif wavelen > low_freq_wavelen:         # low frequency: divided by factor
                out.append(f / factor)
            else:                                    # smooth interpolation between the two
                smooth = (old_ctx / wavelen - low) / (high - low)
                out.append((1 - smooth) * f / factor + smooth * f)
        return torch.tensor(out, dtype=torch.float64)
    raise ValueError(f"unknown rope type {kind!r}")


def rope_cos_sin(cfg: RefConfig, position_ids: torch.Tensor):
    """cos/sin [B, T, hd] for integer positions (float64 angles, then float32)."""
    f = inv_freq(cfg)                                             # [hd/2]
    ang = position_ids.to(torch.float64)[..., None] * f           # [B, T, hd/2]
    ang = torch.cat([ang, ang], dim=-1)
    return torch.cos(ang).to(torch.float32), torch.sin(ang).to(torch.float32)


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat([-x[..., half:], x[..., :half]], dim=-1)


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    # x [B, heads, T, hd]; cos/sin [B, T, hd]
    c = cos[:, None]
    s = sin[:, None]
    return x * c + rotate_half(x) * s


# ---------------------------------------------------------------- layers

def attention(cfg: RefConfig, w: dict, p: str, x: torch.Tensor, cos, sin) -> torch.Tensor:
    """Causal self-attention over the T positions of x [B, T, in]."""
    B, T, _ = x.shape
    nh, nkv, hd = cfg.num_heads, cfg.num_kv_heads, cfg.head_dim

    def b(name):
        return w.get(f"{p}.self_attn.{name}.bias") if cfg.attention_bias else None

    q = linear(x, w[f"{p}.self_attn.q_proj.weight"], b("q_proj")).view(B, T, nh, hd)
    k = linear(x, w[f"{p}.self_attn.k_proj.weight"], b("k_proj")).view(B, T, nkv, hd)
    v = linear(x, w[f"{p}.self_attn.v_proj.weight"], b("v_proj")).view(B, T, nkv, hd)
    if cfg.qk_norm:
        q = rms_norm(q, w[f"{p}.self_attn.q_norm.weight"], cfg.rms_norm_eps)
        k = rms_norm(k, w[f"{p}.self_attn.k_norm.weight"], cfg.rms_norm_eps)
    q, k, v = (t.transpose(1, 2) for t in (q, k, v))             # [B, heads, T, hd]
    q = apply_rope(q, cos, sin)
    k = apply_rope(k, cos, sin)
    rep = nh // nkv
    k = k[:, :, None].expand(B, nkv, rep, T, hd).reshape(B, nh, T, hd)
    v = v[:, :, None].expand(B, nkv, rep, T, hd).reshape(B, nh, T, hd)
    scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(hd)  # [B, nh, T, T]
    mask = torch.ones(T, T, dtype=torch.bool).tril()
    scores = scores.masked_fill(~mask, float("-inf"))
    probs = torch.softmax(scores, dim=-1)
    out = torch.matmul(probs, v)                                   # [B, nh, T, hd]
    out = out.transpose(1, 2).reshape(B, T, nh * hd)
    return linear(out, w[f"{p}.self_attn.o_proj.weight"], b("o_proj"))


def mlp(w: dict, p: str, x: torch.Tensor) -> torch.Tensor:
    g = linear(x, w[f"{p}.mlp.gate_proj.weight"])
    u = linear(x, w[f"{p}.mlp.up_proj.weight"])
    return linear(silu(g) * u, w[f"{p}.mlp.down_proj.weight"])


def first_layer(cfg: RefConfig, w: dict, e: torch.Tensor, x: torch.Tensor, cos, sin):
    p = "layers.0"
    eps = cfg.rms_norm_eps
    xn = rms_norm(x, w[f"{p}.hidden_norm.weight"], eps)
    en = rms_norm(e, w[f"{p}.input_layernorm.weight"], eps)
    a = torch.cat([en, xn], dim=-1)                                # embeddings first
    r = xn if cfg.norm_before_residual else x
    h = r + attention(cfg, w, p, a, cos, sin)
    h = h + mlp(w, p, rms_norm(h, w[f"{p}.post_attention_layernorm.weight"], eps))
    return h


def extra_layer(cfg: RefConfig, w: dict, i: int, h: torch.Tensor, cos, sin):
    p = f"layers.{i}"
    eps = cfg.rms_norm_eps
    key = f"{p}.{cfg.extra_layer_norm}.weight"
    nw = w[key] if key in w else torch.ones(cfg.hidden_size)      # SGLang: untrained ones
    h = h + attention(cfg, w, p, rms_norm(h, nw, eps), cos, sin)
    h = h + mlp(w, p, rms_norm(h, w[f"{p}.post_attention_layernorm.weight"], eps))
    return h


# ---------------------------------------------------------------- the draft

def project(cfg: RefConfig, w: dict, aux: torch.Tensor) -> torch.Tensor:
    """aux [.., A*Ht] -> x [.., H]: optional input_norm, optional per-chunk fc_norm, then fc."""
    eps = cfg.rms_norm_eps
    if cfg.norm_before_fc:
        aux = rms_norm(aux, w["input_norm.weight"], eps)
    if cfg.fc_norm:
        chunks = aux.split(cfg.ht, dim=-1)
        aux = torch.cat([rms_norm(c, w[f"fc_norm.{i}.weight"], eps)
                         for i, c in enumerate(chunks)], dim=-1)
    return linear(aux, w["fc.weight"])


def forward_from_x(cfg: RefConfig, w: dict, input_ids: torch.Tensor, x: torch.Tensor,
                   position_ids: torch.Tensor):
    """One causal pass from the already projected features x [B, T, H].

    Returns (logits [B, T, Vd], next_feature [B, T, H], h_prenorm [B, T, H]).
    """
    e = w["embed_tokens.weight"][input_ids]
    cos, sin = rope_cos_sin(cfg, position_ids)
    h = first_layer(cfg, w, e, x, cos, sin)
    for i in range(1, cfg.num_layers):
        h = extra_layer(cfg, w, i, h, cos, sin)
    hn = rms_norm(h, w["norm.weight"], cfg.rms_norm_eps)
    logits = linear(hn, w["lm_head.weight"])
    feat = hn if cfg.norm_output else h
    return logits, feat, h


def forward(cfg: RefConfig, w: dict, input_ids, hidden_states, position_ids, *, skip_fc=False):
    """input_ids [B, T]; hidden_states [B, T, A*Ht] (or [B, T, H] with skip_fc)."""
    x = hidden_states if skip_fc else project(cfg, w, hidden_states)
    return forward_from_x(cfg, w, input_ids, x, position_ids)


def to_target(cfg: RefConfig, w: dict, draft_ids: torch.Tensor) -> torch.Tensor:
    d2t = w.get("d2t")
    if cfg.d2t_mode == "none" or d2t is None:
        return draft_ids
    if cfg.d2t_mode == "absolute":
        return d2t[draft_ids]
    return draft_ids + d2t[draft_ids]


def chain_draft(cfg: RefConfig, w: dict, input_ids, hidden_states, position_ids, num_steps: int):
    """Greedy chain drafting by full recomputation (no cache).

    Step 0: the given pass; its last position proposes a draft id. Each later step appends one
    position: token = mapped previous proposal, feature = the previous position's own output
    (fc skipped), position = previous position + 1; the whole sequence is recomputed causally.
    Returns (draft ids [B, k], target ids [B, k], per-step last logits [B, k, Vd]).
    """
    x = project(cfg, w, hidden_states)
    ids, pos = input_ids, position_ids
    d_out, t_out, l_out = [], [], []
    for _ in range(num_steps):
        logits, feat, _ = forward_from_x(cfg, w, ids, x, pos)
        last = logits[:, -1]
        d = last.argmax(dim=-1)
        t = to_target(cfg, w, d)
        d_out.append(d)
        t_out.append(t)
        l_out.append(last)
        ids = torch.cat([ids, t[:, None]], dim=1)
        x = torch.cat([x, feat[:, -1:]], dim=1)
        pos = torch.cat([pos, pos[:, -1:] + 1], dim=1)
    return torch.stack(d_out, 1), torch.stack(t_out, 1), torch.stack(l_out, 1)
