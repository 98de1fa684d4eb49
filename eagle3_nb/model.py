"""Eagle3Draft: the EAGLE-3 draft model in plain torch (its generic pieces: eagle3_nb.draft_blocks).

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
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

from eagle3_nb.config import DraftConfig
from eagle3_nb.draft_blocks import (MLP, Attention, DraftCache, LayerCache, RMSNorm, SlotKV,
                                    rope_inv_freq, slot_attention)
from eagle3_nb.errors import DraftIdOutOfRange, Eagle3NbError
from eagle3_nb.io.checkpoint import Checkpoint

__all__ = ["D2T_MODES", "EXTRA_LAYER_NORMS", "FC_RULES", "HIDDEN_SOURCES", "DecoderLayer",
           "DraftCache", "DraftOutput", "DraftProposal", "Eagle3Draft", "LayerCache", "SlotKV",
           "Wiring", "as_engine_leaves", "load_draft", "out_of_range_error",
           "read_target_embeddings", "rope_inv_freq", "ttt_logits"]

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

    def forward(self, h, embeds, positions, inv_freq, wiring: Wiring, cache, visible=None,
                keep: int = 0):
        """keep=n: the outputs of the last n positions only (every position's keys and values
        are still cached)."""
        if self.first:
            normed = self.hidden_norm(h)
            residual = normed if wiring.norm_before_residual else h
            a = torch.cat([self.input_layernorm(embeds), normed], -1)
        else:
            residual = h
            pre = self.hidden_norm if wiring.extra_layer_norm == "hidden_norm" else self.input_layernorm
            a = pre(h)
        residual = residual[:, -keep:] if keep else residual
        h = residual + self.self_attn(a, positions, inv_freq, cache, visible, keep)
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
            visible: torch.Tensor | None = None, keep: int = 0) -> DraftOutput:
        """One causal pass: input_ids [B, T] (target ids, already shifted), hidden_states
        [B, T, A*Ht] target features (fc applies), or with own_features the draft's own H-wide
        output fed back (fc never applies, in every engine). last_only: logits and features of
        the last position only (drafting needs no more; the lm_head is the big matmul); keep=n:
        of the last n positions only.
        valid [B, T]: False marks padding no later query may attend to (rows of a batch
        extended by different counts are left-padded, so the last position is always real).
        visible [T, S]: what each new query sees of the cache and the new positions, instead
        (the greedy path's own steps from every position at once, greedy/)."""
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
        keep = 1 if last_only else keep
        for i, layer in enumerate(self.layers):   # the last layer: only the positions kept
            h = layer(h, embeds, position_ids, self.inv_freq, wiring,
                      cache.layers[i] if cache is not None else None, visible,
                      keep if i == len(self.layers) - 1 else 0)
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
