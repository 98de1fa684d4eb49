"""The sample drafts' dimensions and weights: random (seeded) draws in canonical speculators names,
or the trained draft's tensors when data_samples/train/ holds them, and the vocabulary mapping
the trainers build. Imports torch: a build tool."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

SEED = 20250601

# draft and target dimensions (the target is a tiny Llama with the draft's hidden size)
H, NUM_HEADS, NUM_KV_HEADS, HEAD_DIM, INTERMEDIATE = 64, 4, 2, 16, 128
TARGET_VOCAB, DRAFT_VOCAB = 512, 256
TARGET_LAYERS = 8
MAX_POSITIONS, RMS_EPS, ROPE_THETA = 4096, 1e-5, 10000.0
DEFAULT_AUX_IDS = [2, TARGET_LAYERS // 2, TARGET_LAYERS - 3]  # [2, 4, 5]
LEADING_IDS = 24  # this many lowest ids are the most frequent: d2t starts with that many zeros
BF16 = torch.bfloat16
TRAINED_DRAFT = "draft.safetensors"     # data_samples/train/: the trained draft (`--train`)
DRAFT_CURVES = "draft_training.json"


@dataclass(frozen=True)
class Weights:
    """One random draft, in canonical speculators names (`layers.0.*`, `fc.weight`, ...)."""
    core: dict[str, torch.Tensor]          # fc, layers.0.*, norm, lm_head (no embeddings)
    second_layer: dict[str, torch.Tensor]  # a plain Llama decoder layer as layers.1.*
    embed_tokens: torch.Tensor             # [Vt, H]
    fc_four_aux: torch.Tensor              # [H, 4H]
    d2t: torch.Tensor                      # [Vd] int64 offsets
    t2d: torch.Tensor                      # [Vt] bool


def synthetic_token_counts(vocab_size: int) -> torch.Tensor:
    """Zipf-like counts, low ids most frequent; past the first LEADING_IDS an integer hash jitters
    each count by 25..175 %, so the kept ids skip some and d2t grows after its leading zeros."""
    ids = torch.arange(vocab_size, dtype=torch.int64)
    base = 1_000_000 // (ids + 1)
    percent = 25 + (ids * 2654435761 % 2**32) % 151  # Knuth multiplicative hash
    percent[:LEADING_IDS] = 100
    return base * percent // 100


def vocab_mapping(counts: torch.Tensor, draft_vocab: int) -> tuple[torch.Tensor, torch.Tensor]:
    """What the trainers do: keep the most frequent ids (ties by id), sort them ascending,
    d2t = ids - arange (offsets), t2d[ids] = True."""
    order = torch.argsort(-counts, stable=True)
    ids = torch.sort(order[:draft_vocab]).values
    d2t = ids - torch.arange(draft_vocab, dtype=torch.int64)
    t2d = torch.zeros(counts.numel(), dtype=torch.bool)
    t2d[ids] = True
    return d2t, t2d


class SeededInit:
    """Draws tensors from one seeded generator; the call order fixes every value."""

    def __init__(self, seed: int):
        self.gen = torch.Generator().manual_seed(seed)

    def linear(self, rows: int, cols: int) -> torch.Tensor:
        return (torch.randn(rows, cols, generator=self.gen) * 0.02).to(BF16)

    def structured(self, rows: int, cols: int) -> torch.Tensor:
        """A weight that looks trained (rows of different norms, std off the initialiser's),
        for the structural extras no sample trains: random-init detection must not fire."""
        scales = 0.3 + 1.4 * torch.rand(rows, 1, generator=self.gen)
        return (torch.randn(rows, cols, generator=self.gen) * 0.05 * scales).to(BF16)

    def norm(self, width: int) -> torch.Tensor:
        # around 1 but not exactly 1: all-ones norms look untrained
        return (1.0 + 0.05 * torch.randn(width, generator=self.gen)).to(BF16)


def decoder_layer(init: SeededInit, index: int, draw=None) -> dict[str, torch.Tensor]:
    """Layer 0 is the EAGLE-3 layer (q/k/v over [embeds, hidden], hidden_norm); later layers are
    plain Llama layers with H-wide inputs. DRAW makes each linear weight (default: init.linear)."""
    draw = draw or init.linear
    width = 2 * H if index == 0 else H
    p = f"layers.{index}."
    out = {
        p + "self_attn.q_proj.weight": draw(NUM_HEADS * HEAD_DIM, width),
        p + "self_attn.k_proj.weight": draw(NUM_KV_HEADS * HEAD_DIM, width),
        p + "self_attn.v_proj.weight": draw(NUM_KV_HEADS * HEAD_DIM, width),
        p + "self_attn.o_proj.weight": draw(H, NUM_HEADS * HEAD_DIM),
        p + "mlp.gate_proj.weight": draw(INTERMEDIATE, H),
        p + "mlp.up_proj.weight": draw(INTERMEDIATE, H),
        p + "mlp.down_proj.weight": draw(H, INTERMEDIATE),
        p + "input_layernorm.weight": init.norm(H),
        p + "post_attention_layernorm.weight": init.norm(H),
    }
    if index == 0:
        out[p + "hidden_norm.weight"] = init.norm(H)
    return out


def make_weights(seed: int = SEED, trained_dir: Path | None = None) -> Weights:
    """Random weights; with `trained_dir` (data_samples/ after `--train`), the trained draft's
    core and vocab tables and the trained target's embeddings replace the random ones. The
    structural extras (a second layer, a 4-aux fc) stay random, drawn to look trained: they only
    feed key/shape checks."""
    init = SeededInit(seed)
    core = {"fc.weight": init.linear(H, 3 * H), **decoder_layer(init, 0),
            "norm.weight": init.norm(H), "lm_head.weight": init.linear(DRAFT_VOCAB, H)}
    embed = init.linear(TARGET_VOCAB, H)
    fc_four = init.structured(H, 4 * H)
    second = decoder_layer(init, 1, init.structured)
    d2t, t2d = vocab_mapping(synthetic_token_counts(TARGET_VOCAB), DRAFT_VOCAB)
    trained = _trained_tensors(trained_dir) if trained_dir else None
    if trained is not None:
        core = {k: trained[k] for k in core}
        d2t, t2d, embed = trained["d2t"], trained["t2d"], trained["embed_tokens.weight"]
    return Weights(core, second, embed, fc_four, d2t, t2d)


def _trained_tensors(data_dir: Path) -> dict[str, torch.Tensor] | None:
    from safetensors.torch import load_file

    draft, target = data_dir / "train" / TRAINED_DRAFT, data_dir / "target" / "model.safetensors"
    if not draft.exists() or not target.exists():
        return None
    tensors = load_file(str(draft))
    tensors["embed_tokens.weight"] = load_file(str(target))["model.embed_tokens.weight"].to(BF16)
    return tensors


def with_vocab(w: Weights, tensors: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    return {**tensors, "d2t": w.d2t, "t2d": w.t2d}


def eagle_names(tensors: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """SafeAILab/SpecForge names: the single decoder layer is `midlayer.*`."""
    return {("midlayer." + k[len("layers.0."):] if k.startswith("layers.0.") else k): v
            for k, v in tensors.items()}


def eagle_state(w: Weights) -> dict[str, torch.Tensor]:
    """The good flat draft: midlayer.*, fc, norm, lm_head, d2t, t2d; no embed_tokens."""
    return with_vocab(w, eagle_names(w.core))


def speculators_state(w: Weights) -> dict[str, torch.Tensor]:
    return with_vocab(w, {**w.core, "embed_tokens.weight": w.embed_tokens})


def prefixed(prefix: str, tensors: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    return {prefix + k: v for k, v in tensors.items()}
