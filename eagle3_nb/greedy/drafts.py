"""The draft over every position a verify step can draft from: one extend, then its own steps
from every position at once, in chunks (the package docstring)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from eagle3_nb.decoding import Drafting, left_pad
from eagle3_nb.model import DraftCache, LayerCache, SlotKV, Wiring
from eagle3_nb.tree import DraftTree, grow_levels

CHUNK_LOGITS = 1 << 25  # own-step logits per draft pass (queries x draft vocabulary)
PROMPT_QUERIES = 64     # queries per prompt in a pass: each step adds as many key columns


@dataclass
class Extend:
    """The draft's extend over a batch of continuations, left padded to S columns, and what its
    own steps start from. Rows are the positions a verify step can draft from: from each
    prompt's last position on, the same `rows` last columns in every prompt (every prompt has
    the same number of new tokens)."""
    cache: DraftCache
    valid: torch.Tensor       # [B, S] bool
    logits: torch.Tensor      # [B, rows, Vd]
    features: torch.Tensor    # [B, rows, H]
    positions: torch.Tensor   # [B, rows]

    @property
    def rows(self) -> int:
        return self.logits.shape[1]

    def select(self, index: torch.Tensor) -> Extend:
        """These batch rows, in this order (a row may repeat)."""
        cache = DraftCache([LayerCache(c.keys[index], c.values[index])
                            for c in self.cache.layers])
        return Extend(cache, self.valid[index], self.logits[index], self.features[index],
                       self.positions[index])


def extend(model, tokens: list[list[int]], hidden: list[torch.Tensor], rows: int,
           wiring: Wiring) -> Extend:
    """One extend over every prompt for each of the draft inputs `hidden` ([B, S, H] each, fc
    already applied where it applies), stacked: input u's prompt b is row u * B + b."""
    ids, valid = left_pad([torch.tensor(tok[1:]) for tok in tokens])   # [B, S], as `hidden`
    dev, n, S = hidden[0].device, len(hidden), ids.shape[1]
    ids, valid = ids.repeat(n, 1).to(dev), valid.repeat(n, 1).to(dev)
    positions = (valid.cumsum(-1) - 1).clamp(min=0)
    valid = valid.bool()
    cache = DraftCache()
    out = model.run(ids, torch.cat(hidden), positions, cache, wiring, own_features=True,
                    valid=valid, keep=rows)
    return Extend(cache, valid, out.logits, out.features, positions[:, S - rows:])


def projected(model, feats: list[torch.Tensor], wiring: Wiring) -> torch.Tensor:
    """The draft input of a wiring, [B, S, H]: its features, left padded, through fc where the
    wiring applies it."""
    S = max(len(f) for f in feats)
    padded = feats[0].new_zeros(len(feats), S, feats[0].shape[-1])
    for b, f in enumerate(feats):
        padded[b, S - len(f):] = f
    return model.project(padded.to(model.fc.weight), wiring)[0]


@dataclass
class _Chunk:
    """Rows first..first+rows-1 of every prompt, `slots` queries each (slot fastest): the
    positions they draft from and, per own step, the additive mask of what their queries see
    (SlotKV's columns: the extend up to their position, then their own column of each step's
    block)."""
    first: int
    rows: int
    positions: torch.Tensor        # [B, n], n = rows * slots
    visible: list[torch.Tensor]    # step s (from 1): [B, 1, n, S + s * n]

    def step(self, model, ids, feature, step: int, cache: DraftCache, wiring: Wiring):
        """One own draft step: ids [B, n] and features [B, n, H] -> logits and features."""
        out = model.run(ids, feature, self.positions + step, cache, wiring, own_features=True,
                        visible=self.visible[step - 1])
        return out.logits, out.features


def _chunk(ext: Extend, first: int, rows: int, slots: int, steps: int) -> _Chunk:
    dev, S = ext.valid.device, ext.valid.shape[1]
    cols = (S - ext.rows + first + torch.arange(rows, device=dev)).repeat_interleave(slots)
    n = len(cols)
    before = torch.arange(S, device=dev)[None, :] <= cols[:, None]                 # [n, S]
    own = torch.eye(n, dtype=torch.bool, device=dev).repeat(1, steps)
    sees = torch.cat([ext.valid[:, None, :] & before[None], own.expand(len(ext.valid), n, -1)],
                     -1)[:, None]
    bias = torch.zeros(sees.shape, dtype=ext.features.dtype, device=dev)
    bias.masked_fill_(~sees, float("-inf"))
    return _Chunk(first, rows, ext.positions[:, first:first + rows].repeat_interleave(slots, 1),
                  [bias[..., :S + s * n].contiguous() for s in range(1, steps + 1)])


def _slots(ext: Extend) -> DraftCache:
    """Per layer, the extend's keys as the shared prefix of a chunk's own steps."""
    return DraftCache([SlotKV(layer) for layer in ext.cache.layers])


def _chunks(ext: Extend, slots: int, steps: int):
    """The extend's rows in chunks of at most CHUNK_LOGITS logits per step, PROMPT_QUERIES
    queries per prompt."""
    batch, total = ext.logits.shape[0], ext.rows
    per_prompt = CHUNK_LOGITS // (batch * ext.logits.shape[-1])
    rows = max(1, min(per_prompt, PROMPT_QUERIES) // slots)
    for first in range(0, total, rows):
        yield _chunk(ext, first, min(rows, total - first), slots, steps)


class IdMaps:
    """Draft id -> target id per stacked row: each wiring's d2t reading as a table [J, Vd] and
    the wiring of each row of the batch [J * B]; an id outside the vocabulary is noted per
    drafting row (raised only if a verify step drafts from that row, as the engine stops only
    then)."""

    def __init__(self, model, wirings: list[Wiring], batch: int):
        draft_ids = torch.arange(model.lm_head.out_features, device=model.d2t.device)
        self.tables = torch.stack([model.to_target_ids(draft_ids, w) for w in wirings])
        self.of_row = torch.arange(len(wirings), device=draft_ids.device).repeat_interleave(batch)
        self.vocab = model.embed_tokens.num_embeddings

    def to_target(self, draft_ids: torch.Tensor, of_row: torch.Tensor | None = None):
        """draft_ids [R, ...]; of_row [R]: each row's wiring (default: the batch rows')."""
        of_row = self.of_row if of_row is None else of_row
        return self.tables[of_row.view(-1, *([1] * (draft_ids.dim() - 1))), draft_ids]

    def checked(self, draft_ids: torch.Tensor, step: int, bad: list,
                of_row: torch.Tensor | None = None) -> torch.Tensor:
        """Target ids of draft ids, [rows * beams, ...] in the order of `bad`'s rows; a row's
        first id outside the vocabulary is noted there."""
        ids = self.to_target(draft_ids, of_row)
        out = ((ids < 0) | (ids >= self.vocab)).reshape(len(bad), -1)
        if out.any():
            flat_draft, flat_ids = draft_ids.reshape(len(bad), -1), ids.reshape(len(bad), -1)
            for r in out.any(-1).nonzero()[:, 0].tolist():
                c = int(out[r].nonzero()[0, 0])
                bad[r] = bad[r] or (step, int(flat_draft[r, c]), int(flat_ids[r, c]))
        return ids

    def in_vocab(self, ids: torch.Tensor) -> torch.Tensor:
        """Ids fed to the next step; an out-of-vocabulary one (its row already condemned) is
        replaced so the batch can run."""
        return ids.clamp(0, self.vocab - 1)


@dataclass
class Drafted:
    """What was drafted from each row of each stacked prompt; bad[b][r]: (step, draft id,
    target id) of the first id outside the vocabulary drafted from there, or None."""
    at: Any                          # (b, r) -> a chain's drafts or (tree, tree row)
    bad: list[list[tuple | None]]


def _per_prompt(flat: list, batch: int) -> list[list]:
    """A chunk's b-major row list as [b][row]."""
    width = len(flat) // batch
    return [flat[b * width:(b + 1) * width] for b in range(batch)]


def chain_drafts(model, ext: Extend, k: int, wiring: Wiring, maps: IdMaps,
                 n_top: int) -> Drafted:
    B = ext.logits.shape[0]
    parts = [_chain_chunk(model, ext, chunk, k, wiring, maps, n_top)
             for chunk in _chunks(ext, 1, k - 1)]
    drafted, top_ids, top_probs = (torch.cat([p[i] for p in parts], 1) for i in range(3))
    # round(q, 4) for all at once: a float32 times 1e4 is exact in float64, and it is never a
    # tie, so rounding half to even there and dividing gives what round() gives
    top_probs = (top_probs.double() * 1e4).round() / 1e4
    # numpy, each step's few read as lists: lists of every row would cost more than the walk
    drafted, top_ids, top_probs = drafted.numpy(), top_ids.numpy(), top_probs.numpy()
    bad = [sum((p[3][b] for p in parts), []) for b in range(B)]

    def at(b: int, r: int):
        return drafted[b, r].tolist(), top_ids[b, r].tolist(), top_probs[b, r].tolist()
    return Drafted(at, bad)


def _chain_chunk(model, ext: Extend, chunk: _Chunk, k: int, wiring: Wiring, maps: IdMaps,
                 n_top: int):
    logits = ext.logits[:, chunk.first:chunk.first + chunk.rows]
    feature = ext.features[:, chunk.first:chunk.first + chunk.rows]
    drafted, tops, probs = [], [], []
    bad: list[tuple | None] = [None] * (logits.shape[0] * chunk.rows)
    slots_cache = _slots(ext)
    for i in range(k):
        p = torch.softmax(logits.float(), -1).topk(min(n_top, logits.shape[-1]), -1)
        # max's indices are argmax's (the first maximum, NaN first), at half the cost here
        target_ids = maps.checked(logits.max(-1).indices, i, bad)
        drafted.append(target_ids)
        tops.append(maps.to_target(p.indices))
        probs.append(p.values)
        if i + 1 < k:
            logits, feature = chunk.step(model, maps.in_vocab(target_ids), feature, i + 1,
                                         slots_cache, wiring)
    return (torch.stack(drafted, 2).cpu(), torch.stack(tops, 2).cpu(),
            torch.stack(probs, 2).cpu(), _per_prompt(bad, logits.shape[0]))


def tree_drafts(model, ext: Extend, drafting: Drafting, wiring: Wiring,
                maps: IdMaps) -> Drafted:
    B, K = ext.logits.shape[0], drafting.topk
    chunks, bad = [], [[] for _ in range(B)]
    for chunk in _chunks(ext, K, drafting.num_steps - 1):
        tree, chunk_bad = _tree_chunk(model, ext, chunk, drafting, wiring, maps)
        chunks.append((chunk.first, chunk.rows, tree))
        for b, row_bad in enumerate(_per_prompt(chunk_bad, B)):
            bad[b] += row_bad

    def at(b: int, r: int):
        first, rows, tree = next(c for c in chunks if c[0] <= r < c[0] + c[1])
        return tree, b * rows + r - first
    return Drafted(at, bad)


def _tree_chunk(model, ext: Extend, chunk: _Chunk, drafting: Drafting, wiring: Wiring,
                maps: IdMaps) -> tuple[DraftTree, list]:
    """The trees drafted from the chunk's rows of every prompt (tree row b * rows + r)."""
    B, K, rows = ext.logits.shape[0], drafting.topk, chunk.rows
    bad: list[tuple | None] = [None] * (B * rows)
    slots_cache = _slots(ext)
    of_tree_row = maps.of_row.repeat_interleave(rows)

    def check(draft_ids, step):
        of_row = of_tree_row.repeat_interleave(draft_ids.shape[0] // len(of_tree_row))
        return maps.in_vocab(maps.checked(draft_ids, step, bad, of_row))

    def run_beams(beam_ids, feature, step):
        logits, features = chunk.step(model, beam_ids.reshape(B, rows * K),
                                      feature.reshape(B, rows * K, -1), step, slots_cache,
                                      wiring)
        return logits.reshape(B * rows * K, -1), features.reshape(B * rows * K, 1, -1)

    logits = ext.logits[:, chunk.first:chunk.first + rows].reshape(B * rows, -1)
    features = ext.features[:, chunk.first:chunk.first + rows].reshape(B * rows, 1, -1)
    tree = grow_levels(logits, features, run_beams, check, drafting.num_steps, K,
                       drafting.num_draft_tokens)
    return DraftTree(tree.tokens.cpu(), tree.scores.cpu(), tree.parents, tree.depths), bad
