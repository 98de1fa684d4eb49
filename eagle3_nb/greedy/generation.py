"""The target's greedy continuation of a batch of prompts, with the draft inputs along it, and the
tail pass that verifies the last steps past it (the package docstring)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from eagle3_nb.decoding import left_pad
from eagle3_nb.errors import Eagle3NbError
from eagle3_nb.features import draft_features
from eagle3_nb.model import Wiring


@dataclass
class Tail:
    """A batch's target KV cache after its generation (every generated token's state but the
    last token's), for the last verify steps that check tokens past the generated ones."""
    target: Any
    past: Any
    valid: torch.Tensor         # [B, C] the cache's real columns
    last: list[int]             # per prompt, the position of its last generated token

    def predict(self, tries: dict[int, list[tuple[int, int]]]) -> dict[int, list[int]]:
        """tries: row -> nodes (token, parent), node 0 the row's last generated token, every
        parent before its children. One target pass over them, each node at its depth past
        that token seeing the row's cache and its ancestors, as a verify pass does: per row,
        the target's greedy token after each node. Once: the pass extends the cache."""
        B, C = self.valid.shape
        N = max(len(t) for t in tries.values())
        ids, positions = [[0] * N for _ in range(B)], [[0] * N for _ in range(B)]
        sees = torch.zeros(B, N, C + N, dtype=torch.bool)
        sees[:, torch.arange(N), C + torch.arange(N)] = True      # every node sees itself
        at_b, at_node, at_col = [], [], []                        # and its ancestors
        for b, nodes in tries.items():
            sees[b, :len(nodes), :C] = self.valid[b]
            ancestors: list[list[int]] = []
            for n, (token, parent) in enumerate(nodes):
                ancestors.append((ancestors[parent] if n else []) + [n])
                ids[b][n], positions[b][n] = token, self.last[b] + len(ancestors[n]) - 1
                at_b += [b] * len(ancestors[n])
                at_node += [n] * len(ancestors[n])
                at_col += [C + a for a in ancestors[n]]
        sees[at_b, at_node, at_col] = True
        ids, positions = torch.tensor(ids), torch.tensor(positions)
        dtype = self.target.dtype
        mask = torch.zeros(B, 1, N, C + N, dtype=dtype).masked_fill(~sees[:, None],
                                                                     torch.finfo(dtype).min)
        out, _ = self.target.forward_cached(ids, mask, positions, self.past, logits_to_keep=N)
        self.past = None
        preds = out.next_tokens.cpu().tolist()
        return {b: preds[b][:len(nodes)] for b, nodes in tries.items()}


@dataclass
class Generation:
    """The target's greedy continuation of a batch of prompts: tokens [P + n] per prompt and,
    per feature spec (feature_key), features [P + n - 1, W] at positions 0..P+n-2 (the last
    token's state is never needed), or the error the spec raised; `tail` when kept."""
    prompts: list[list[int]]
    tokens: list[list[int]]
    features: dict[tuple, list[torch.Tensor] | Eagle3NbError]
    tail: Tail | None = None


@dataclass
class GreedyTrace:
    """Greedy generations of every prompt, reusable by later simulations of the same prompts."""
    prompts: list[list[int]]
    tokens: list[list[int]]
    features: dict[tuple, list[torch.Tensor] | Eagle3NbError]

    def serves(self, prompts: list[torch.Tensor], new_tokens: int, wirings: list[Wiring]) -> bool:
        """Whether this trace holds these prompts, at least new_tokens each, and the features
        the wirings read."""
        return (all(feature_key(w) in self.features for w in wirings)
                and len(prompts) == len(self.prompts)
                and all(p.tolist() == q for p, q in zip(prompts, self.prompts))
                and all(len(t) - len(q) >= new_tokens for t, q in zip(self.tokens, self.prompts)))

    def batch(self, rows: range) -> Generation:
        return Generation([self.prompts[r] for r in rows], [self.tokens[r] for r in rows],
                          {key: f if isinstance(f, Eagle3NbError) else [f[r] for r in rows]
                           for key, f in self.features.items()})


def feature_key(wiring: Wiring) -> tuple:
    return (wiring.hidden_source, tuple(wiring.layer_ids or ()))


@torch.no_grad()
def greedy_trace(target, prompts: list[torch.Tensor], new_tokens: int, wirings: list[Wiring],
                 batch_size: int, finished=lambda n: None) -> GreedyTrace:
    """Plain greedy generation of new_tokens per prompt, batch_size prompts at a time (left
    padded, each row at its own positions, as the step-by-step path prefills them)."""
    specs = {feature_key(w): w for w in wirings}
    trace = GreedyTrace([p.tolist() for p in prompts], [], {key: [] for key in specs})
    for i in range(0, len(prompts), batch_size):
        gen = generate(target, prompts[i:i + batch_size], new_tokens, specs)
        trace.tokens += gen.tokens
        for key, feats in gen.features.items():
            if isinstance(trace.features[key], list):     # else: the error it raised
                trace.features[key] = feats if isinstance(feats, Eagle3NbError) else \
                    trace.features[key] + feats
        finished(len(gen.prompts))
    return trace


class Passes:
    """A generation's target passes seen as one TargetOutput (what draft_features reads): each
    state concatenated over the passes once, when first read."""

    def __init__(self, outs: list):
        self.outs, self.cat = outs, {}

    def state(self, index: int, final: str = "hf") -> torch.Tensor:
        if (index, final) not in self.cat:
            self.cat[index, final] = torch.cat([o.state(index, final) for o in self.outs], 1)
        return self.cat[index, final]

    @property
    def final_norm(self) -> torch.Tensor:
        return self.state(len(self.outs[0].hidden_states) - 1)


def generate(target, prompts, new_tokens: int, specs: dict[tuple, Wiring],
             keep_cache: bool = False) -> Generation:
    ids, valid = left_pad(prompts)
    positions = (valid.cumsum(-1) - 1).clamp(min=0)
    out, past = target.forward_cached(ids, valid, positions, None, logits_to_keep=1)
    outs, steps = [out], [out.next_tokens[:, -1].cpu()]
    mask, pos = valid.to(target.device), valid.sum(-1)
    for _ in range(new_tokens - 1):
        mask = torch.cat([mask, torch.ones_like(mask[:, :1])], 1)
        out, past = target.forward_cached(steps[-1][:, None], mask, pos[:, None], past,
                                          logits_to_keep=1)
        outs.append(out)
        steps.append(out.next_tokens[:, -1].cpu())
        pos = pos + 1
    new = torch.stack(steps, 1)
    tokens = [p.tolist() + new[b].tolist() for b, p in enumerate(prompts)]
    passes, width = Passes(outs), ids.shape[1]
    features: dict[tuple, Any] = {}
    for key, wiring in specs.items():
        try:
            feats = draft_features(passes, wiring)
        except Eagle3NbError as exc:      # this spec's wirings fail, the others run
            features[key] = exc
            continue
        features[key] = [feats[b, width - len(p):] for b, p in enumerate(prompts)]
    tail = (Tail(target, past, mask.bool().cpu(), [len(t) - 1 for t in tokens])
            if keep_cache else None)
    return Generation([p.tolist() for p in prompts], tokens, features, tail)
