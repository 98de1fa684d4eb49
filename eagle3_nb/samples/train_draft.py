"""Train the bundled tiny EAGLE-3 draft on the tiny target's aux hidden states.

The recipe of EAGLE-3 (SafeAILab traineagle3/cnets.py, SpecForge core/eagle3.py), small:
- vocab mapping: loss-masked token counts over the training text, top Vd ids, sorted, offsets;
- training-time test (TTT): step 0 sees the target features (through fc); step j sees the draft's
  own step j-1 output at the same index, the token j further on, RoPE position t + j, and attends
  to step-0 keys at positions <= t plus its own steps' keys at index t (the "diagonal"), which is
  exactly the cache an engine holds when it drafts j tokens ahead of position t;
- loss: soft cross-entropy against the target's distribution restricted to the draft vocab,
  positions whose target argmax is outside the draft vocab masked, step j weighted 0.8**j;
- acc_j: draft argmax == target argmax (SpecForge's per-step metric, not conditional).

Weight decay is part of the recipe for the demo's sake, not for accuracy. The trained function
has a free scale: multiplying fc, o_proj and down_proj by c multiplies the residual stream by c
and leaves every logit unchanged (hidden_norm, post_attention_layernorm and the final norm
remove it). Only `norm_before_residual` breaks that symmetry: flipped, the residual is
hidden_norm(fc(aux)) instead of fc(aux). Without decay this draft ended with fc's output as large
as hidden_norm's (RMS 0.78 against 0.90), so serving it with the flag flipped cost nothing
measurable, but nothing ties a draft to that point. Decay 0.1 on the matrices (the target
recipe's) shrinks the scale to less than half of hidden_norm's (RMS 0.44 against 1.01), and the
flip then takes the accept length from 1.99 to 1.40 (docs/bundled-pair.md has the numbers).
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass

import torch
import torch.nn.functional as F

from eagle3_nb.config import DraftConfig
from eagle3_nb.model import Eagle3Draft, ttt_logits
from eagle3_nb.samples.training import lr_at
from eagle3_nb.vocab import build_from_counts


@dataclass(frozen=True)
class DraftRecipe:
    steps: int = 3000
    batch: int = 16
    seq_len: int = 128
    ttt_steps: int = 4
    lr: float = 3e-3
    min_lr: float = 3e-4
    warmup: int = 50
    weight_decay: float = 0.1       # sets the residual stream's free scale (see above)
    step_decay: float = 0.8
    seed: int = 20250602
    threads: int = 1                # torch CPU threads (results can differ between thread counts)


def vocab_tables(stream: torch.Tensor, draft_vocab: int, vocab: int):
    counts = torch.bincount(stream, minlength=vocab).numpy()
    mapping = build_from_counts(counts, draft_vocab, vocab)
    return torch.from_numpy(mapping.d2t), torch.from_numpy(mapping.t2d)


def ttt_loss(logits_steps, target_logits, t2d, step_decay: float):
    """Soft CE per step vs the target distribution over the draft vocab; returns loss, accs."""
    kept = torch.nonzero(t2d).squeeze(-1)
    total, accs = 0.0, []
    for j, logits in enumerate(logits_steps):
        n = logits.shape[1]
        tgt = target_logits[:, 1 + j:1 + j + n]          # target's prediction for token t+2+j
        mask = t2d[tgt.argmax(-1)].float()
        p = torch.softmax(tgt[..., kept].float(), -1)
        loss = -(p * F.log_softmax(logits.float(), -1)).sum(-1)
        total = total + step_decay ** j * (loss * mask).sum() / mask.sum().clamp(min=1)
        hit = (kept[logits.argmax(-1)] == tgt.argmax(-1)).float()
        accs.append(float((hit * mask).sum() / mask.sum().clamp(min=1)))
    return total, accs


def train_draft(target, cfg: DraftConfig, stream: torch.Tensor, layer_ids: list[int],
                recipe: DraftRecipe = DraftRecipe(), log=print) -> dict:
    """Train a fresh Eagle3Draft on random windows of `stream` (target token ids).
    `layer_ids` are the hidden_states indices the draft is trained on. Returns the trained
    state (canonical names, embed_tokens excluded as trainers do), d2t, t2d and the curves."""
    torch.manual_seed(recipe.seed)
    gen = torch.Generator().manual_seed(recipe.seed)
    d2t, t2d = vocab_tables(stream, cfg.Vd, cfg.vocab_size)
    draft = Eagle3Draft(cfg, len(layer_ids))
    draft.d2t.copy_(d2t)
    draft.embed_tokens.weight.data.copy_(target.model.get_input_embeddings().weight.float())
    draft.embed_tokens.weight.requires_grad_(False)   # frozen, as SafeAILab / SpecForge do
    params = [p for p in draft.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(decay_groups(params, recipe.weight_decay), lr=recipe.lr)
    curve, start = [], time.time()
    for step in range(recipe.steps):
        tokens = _batch(stream, recipe, gen)
        with torch.no_grad():
            out = target.forward_hidden(tokens)
            feats = torch.cat([out.state(i, final="pre_norm") for i in layer_ids], -1).float()
            target_logits = out.logits.float()
        for group in opt.param_groups:
            group["lr"] = lr_at(step, recipe)
        loss, accs = ttt_loss(ttt_logits(draft, tokens, feats, recipe.ttt_steps),
                              target_logits, t2d, recipe.step_decay)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 0.5)
        opt.step()
        if step % 50 == 0 or step == recipe.steps - 1:
            curve.append({"step": step, "loss": round(loss.item(), 4),
                          "acc": [round(a, 4) for a in accs]})
            if log:
                log(f"draft step {step}: loss {loss.item():.3f} acc {[round(a, 3) for a in accs]}"
                    f" ({time.time() - start:.0f}s)")
    state = {k: v.detach().clone() for k, v in draft.state_dict().items()
             if k not in ("inv_freq", "embed_tokens.weight")}
    state["t2d"] = t2d
    return {"state": state, "curve": curve, "recipe": asdict(recipe),
            "seconds": round(time.time() - start, 1), "layer_ids": list(layer_ids)}


def decay_groups(params, weight_decay: float) -> list[dict]:
    """Weight decay on matrices only, not on norm weights (as the target recipe does)."""
    return [{"params": [p for p in params if p.dim() >= 2], "weight_decay": weight_decay},
            {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]


def _batch(stream: torch.Tensor, r: DraftRecipe, gen: torch.Generator) -> torch.Tensor:
    starts = torch.randint(0, len(stream) - r.seq_len - 1, (r.batch,), generator=gen)
    return torch.stack([stream[s:s + r.seq_len] for s in starts.tolist()])

