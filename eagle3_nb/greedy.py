"""Greedy verification without a target pass per verify step.

With greedy verification, chain or tree, the committed tokens are the target's own greedy
continuation whatever the draft proposes. So one greedy generation of the target gives every
token and every hidden state that any wiring's verify steps would see (`greedy_trace`). Per wiring
only the draft runs (`simulate_greedy`):
- one extend over the whole continuation (draft position j pairs target state j with token j+1,
  as the engines' extends do, whatever the verify steps' boundaries);
- its num_steps - 1 own steps from every position at once, each position's queries seeing the
  extend up to it and its own earlier steps (a tree: each beam slot its own, SGLang's slot
  layout, tree.py), in chunks of positions so memory stays bounded;
- then a walk over the verify points reads the accept counts from the known continuation.

acceptance.simulate's step-by-step path is the oracle: the two give the same steps, token for
token (tests/test_greedy.py). Sampling (temperature > 0) keeps the step-by-step path.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from eagle3_nb.decoding import TOP_CANDIDATES, Drafting, SampleRun, VerifyStep, left_pad, tree_step
from eagle3_nb.features import draft_features
from eagle3_nb.model import DraftCache, SlotKV, Wiring, out_of_range_error
from eagle3_nb.tree import DraftTree, accepted_path, grow_levels

CHUNK_QUERIES = 1024   # own-step queries per draft pass: bounds the logits and the mask


@dataclass
class GreedyTrace:
    """The target's greedy continuation of each prompt and the draft inputs along it: per
    prompt, tokens [P + n] and, per feature spec (feature_key), features [P + n - 1, W] at
    positions 0..P+n-2 (the last token's state is never needed)."""
    prompts: list[list[int]]
    tokens: list[list[int]]
    features: dict[tuple, list[torch.Tensor]]

    def serves(self, prompts: list[torch.Tensor], new_tokens: int, wiring: Wiring) -> bool:
        """Whether this trace holds these prompts, at least new_tokens each, and the features
        the wiring reads."""
        return (feature_key(wiring) in self.features and len(prompts) == len(self.prompts)
                and all(p.tolist() == q for p, q in zip(prompts, self.prompts))
                and all(len(t) - len(q) >= new_tokens for t, q in zip(self.tokens, self.prompts)))


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
        batch = prompts[i:i + batch_size]
        tokens, features = _generate(target, batch, new_tokens, specs)
        trace.tokens += tokens
        for key in specs:
            trace.features[key] += features[key]
        finished(len(batch))
    return trace


def _generate(target, prompts, new_tokens: int, specs: dict[tuple, Wiring]):
    ids, valid = left_pad(prompts)
    positions = (valid.cumsum(-1) - 1).clamp(min=0)
    out, past = target.forward_cached(ids, valid, positions, None, logits_to_keep=1)
    width = ids.shape[1]
    feats = {key: [draft_features(out, w)] for key, w in specs.items()}
    steps = [out.next_tokens[:, -1].cpu()]
    mask, pos = valid.to(target.device), valid.sum(-1)
    for _ in range(new_tokens - 1):
        mask = torch.cat([mask, torch.ones_like(mask[:, :1])], 1)
        out, past = target.forward_cached(steps[-1][:, None], mask, pos[:, None], past,
                                          logits_to_keep=1)
        for key, w in specs.items():
            feats[key].append(draft_features(out, w))
        steps.append(out.next_tokens[:, -1].cpu())
        pos = pos + 1
    new = torch.stack(steps, 1)
    tokens = [p.tolist() + new[b].tolist() for b, p in enumerate(prompts)]
    features = {key: [torch.cat(parts, 1)[b, width - len(p):] for b, p in enumerate(prompts)]
                for key, parts in feats.items()}
    return tokens, features


# --- the draft over every position -------------------------------------------------------------

@dataclass
class _Extend:
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


def _extend(model, tokens: list[list[int]], feats: list[torch.Tensor], rows: int,
            wiring: Wiring) -> _Extend:
    dev = model.fc.weight.device
    ids, valid = left_pad([torch.tensor(tok[1:len(f) + 1]) for tok, f in zip(tokens, feats)])
    S = ids.shape[1]
    padded = feats[0].new_zeros(len(feats), S, feats[0].shape[-1])
    for b, f in enumerate(feats):
        padded[b, S - len(f):] = f
    positions = ((valid.cumsum(-1) - 1).clamp(min=0)).to(dev)
    valid = valid.bool().to(dev)
    cache = DraftCache()
    out = model.run(ids.to(dev), padded.to(dev), positions, cache, wiring, valid=valid)
    return _Extend(cache, valid, out.logits[:, S - rows:], out.features[:, S - rows:],
                   positions[:, S - rows:])


def _own_step(model, ext: _Extend, slots_cache: DraftCache, first: int, rows: int, slots: int,
              step: int, ids: torch.Tensor, feature: torch.Tensor, wiring: Wiring):
    """One own draft step from rows first..first+rows-1, `slots` beams each: ids [B, n] and
    features [B, n, H], n = rows * slots, slot fastest. Each query sees the extend up to its
    position, its own slot's entries of the earlier steps, and itself."""
    dev, S = ids.device, ext.valid.shape[1]
    cols = (S - ext.rows + first + torch.arange(rows, device=dev)).repeat_interleave(slots)
    before = torch.arange(S, device=dev)[None, :] <= cols[:, None]                  # [n, S]
    visible = (ext.valid[:, None, :] & before[None])[:, None]                      # [B, 1, n, S]
    positions = ext.positions[:, first:first + rows].repeat_interleave(slots, 1) + step
    out = model.run(ids, feature, positions, slots_cache, wiring, own_features=True,
                    visible=visible)
    return out.logits, out.features


def _slots(ext: _Extend) -> DraftCache:
    """Per layer, the extend's keys as the shared prefix of a chunk's own steps."""
    return DraftCache([SlotKV(layer) for layer in ext.cache.layers])


def _chunks(batch: int, total: int, slots: int):
    """Rows 0..total-1 in chunks of at most CHUNK_QUERIES queries per step: (first, rows)."""
    rows = max(1, CHUNK_QUERIES // (batch * slots))
    for first in range(0, total, rows):
        yield first, min(rows, total - first)


@dataclass
class _Drafted:
    """What was drafted from each row of each prompt; bad[b][r]: (step, draft id, target id) of
    the first id outside the vocabulary drafted from there, or None."""
    at: Any                          # (b, r) -> a chain's drafts or (tree, tree row)
    bad: list[list[tuple | None]]


def _mapped(model, draft_ids: torch.Tensor, wiring: Wiring, step: int, bad: list) -> torch.Tensor:
    """Target ids of draft ids, [rows * beams, ...] in the order of `bad`'s rows; a row's first id
    outside the vocabulary is noted there (raised only if a verify step drafts from that row,
    as the engine stops only then)."""
    ids = model.to_target_ids(draft_ids, wiring)
    out = ((ids < 0) | (ids >= model.embed_tokens.num_embeddings)).reshape(len(bad), -1)
    if out.any():
        flat_draft, flat_ids = draft_ids.reshape(len(bad), -1), ids.reshape(len(bad), -1)
        for r in out.any(-1).nonzero()[:, 0].tolist():
            c = int(out[r].nonzero()[0, 0])
            bad[r] = bad[r] or (step, int(flat_draft[r, c]), int(flat_ids[r, c]))
    return ids


def _in_vocab(model, ids: torch.Tensor) -> torch.Tensor:
    """Ids fed to the next step; an out-of-vocabulary one (its row already condemned) is
    replaced so the batch can run."""
    return ids.clamp(0, model.embed_tokens.num_embeddings - 1)


def _per_prompt(flat: list, batch: int) -> list[list]:
    """A chunk's b-major row list as [b][row]."""
    width = len(flat) // batch
    return [flat[b * width:(b + 1) * width] for b in range(batch)]


def _chain_drafts(model, ext: _Extend, k: int, wiring: Wiring, n_top: int) -> _Drafted:
    B = ext.logits.shape[0]
    parts = [_chain_chunk(model, ext, first, rows, k, wiring, n_top)
             for first, rows in _chunks(B, ext.rows, 1)]
    drafted, top_ids, top_probs = (torch.cat([p[i] for p in parts], 1) for i in range(3))
    bad = [sum((p[3][b] for p in parts), []) for b in range(B)]

    def at(b: int, r: int):
        return drafted[b, r].tolist(), top_ids[b, r].tolist(), top_probs[b, r].tolist()
    return _Drafted(at, bad)


def _chain_chunk(model, ext: _Extend, first: int, rows: int, k: int, wiring: Wiring, n_top: int):
    logits = ext.logits[:, first:first + rows]
    feature = ext.features[:, first:first + rows]
    drafted, tops, probs = [], [], []
    bad: list[tuple | None] = [None] * (logits.shape[0] * rows)
    slots_cache = _slots(ext)
    for i in range(k):
        p = torch.softmax(logits.float(), -1).topk(min(n_top, logits.shape[-1]), -1)
        target_ids = _mapped(model, logits.argmax(-1), wiring, i, bad)
        drafted.append(target_ids)
        tops.append(model.to_target_ids(p.indices, wiring))
        probs.append(p.values)
        if i + 1 < k:
            logits, feature = _own_step(model, ext, slots_cache, first, rows, 1, i + 1,
                                        _in_vocab(model, target_ids), feature, wiring)
    return (torch.stack(drafted, 2).cpu(), torch.stack(tops, 2).cpu(),
            torch.stack(probs, 2).cpu(), _per_prompt(bad, logits.shape[0]))


def _tree_drafts(model, ext: _Extend, drafting: Drafting, wiring: Wiring) -> _Drafted:
    B, K = ext.logits.shape[0], drafting.topk
    chunks, bad = [], [[] for _ in range(B)]
    for first, rows in _chunks(B, ext.rows, K):
        tree, chunk_bad = _tree_chunk(model, ext, first, rows, drafting, wiring)
        chunks.append((first, rows, tree))
        for b, row_bad in enumerate(_per_prompt(chunk_bad, B)):
            bad[b] += row_bad

    def at(b: int, r: int):
        first, rows, tree = next(c for c in chunks if c[0] <= r < c[0] + c[1])
        return tree, b * rows + r - first
    return _Drafted(at, bad)


def _tree_chunk(model, ext: _Extend, first: int, rows: int, drafting: Drafting,
                wiring: Wiring) -> tuple[DraftTree, list]:
    """The trees drafted from rows first..first+rows-1 of every prompt (tree row b*rows + r)."""
    B, K = ext.logits.shape[0], drafting.topk
    bad: list[tuple | None] = [None] * (B * rows)
    slots_cache = _slots(ext)

    def check(draft_ids, step):
        return _in_vocab(model, _mapped(model, draft_ids, wiring, step, bad))

    def run_beams(beam_ids, feature, step):
        logits, features = _own_step(model, ext, slots_cache, first, rows, K, step,
                                     beam_ids.reshape(B, rows * K),
                                     feature.reshape(B, rows * K, -1), wiring)
        return logits.reshape(B * rows * K, -1), features.reshape(B * rows * K, 1, -1)

    logits = ext.logits[:, first:first + rows].reshape(B * rows, -1)
    features = ext.features[:, first:first + rows].reshape(B * rows, 1, -1)
    tree = grow_levels(logits, features, run_beams, check, drafting.num_steps, K,
                       drafting.num_draft_tokens)
    return DraftTree(tree.tokens.cpu(), tree.scores.cpu(), tree.parents, tree.depths), bad


# --- the walk over the verify points -----------------------------------------------------------

@torch.no_grad()
def simulate_greedy(model, trace: GreedyTrace, drafting: Drafting, wiring: Wiring,
                    max_new_tokens: int, eos: set[int], tree: bool = False,
                    batch_size: int = 8, finished=lambda n: None) -> list[SampleRun]:
    """Per prompt of the trace, the verify steps greedy verification takes, drafting a chain or,
    with tree, SGLang's tree (at topk 1 too), batch_size prompts at a time. Drafts start only
    where a verify step can: from each prompt's last position on."""
    runs: list[SampleRun] = []
    for i in range(0, len(trace.tokens), batch_size):
        runs += _simulate_batch(model, trace, range(i, min(i + batch_size, len(trace.tokens))),
                                drafting, wiring, max_new_tokens, eos, tree)
        finished(len(runs) - i)
    return runs


def _simulate_batch(model, trace: GreedyTrace, batch: range, drafting: Drafting, wiring: Wiring,
                    max_new_tokens: int, eos: set[int], tree: bool) -> list[SampleRun]:
    tokens = [trace.tokens[b] for b in batch]
    prompts = [trace.prompts[b] for b in batch]
    rows = len(tokens[0]) - len(prompts[0])          # new tokens: the same for every prompt
    ext = _extend(model, tokens, [trace.features[feature_key(wiring)][b] for b in batch], rows,
                  wiring)
    drafted = (_tree_drafts(model, ext, drafting, wiring) if tree else
               _chain_drafts(model, ext, drafting.num_steps, wiring, TOP_CANDIDATES))
    vocab = model.embed_tokens.num_embeddings
    runs = []
    for b, (prompt, seq) in enumerate(zip(prompts, tokens)):
        run = SampleRun(prompt, seq[len(prompt)])
        if run.first_token not in eos:
            # a verify step from position p drafts from row p - len(prompt)
            def step_at(p, b=b, seq=seq, prompt=prompt):
                found = drafted.at(b, p - len(prompt))
                return (_tree_step_at(*found, seq, p) if tree else
                        _chain_step(*found, seq, p))

            def refused(p, b=b, prompt=prompt):
                bad = drafted.bad[b][p - len(prompt)]
                return bad and out_of_range_error(*bad, vocab, wiring)
            _walk(run, max_new_tokens, eos, step_at, refused)
        runs.append(run)
    return runs


def _walk(run: SampleRun, max_new_tokens: int, eos: set[int], step_at, refused) -> None:
    """Verify steps from the first token on, until max_new_tokens are generated (the last step
    kept whole) or, with eos, a step commits one. refused(p): the error an engine stops on when
    drafting from position p, or None."""
    p = len(run.prompt)            # the position of the last committed token, next to verify
    while p - len(run.prompt) + 1 < max_new_tokens:
        error = refused(p)
        if error:
            raise error
        step = step_at(p)
        run.steps.append(step)
        committed = step.drafted[:step.accepted] + [step.bonus]
        p += len(committed)
        if eos.intersection(committed):
            return


def _chain_step(drafted: list[int], top_ids: list, top_probs: list, tokens: list[int],
                p: int) -> VerifyStep:
    """The verify step from position p: the drafts against the target's continuation."""
    greedy = tokens[p + 1:p + len(drafted) + 2]
    accepted = 0
    while accepted < len(drafted) and drafted[accepted] == greedy[accepted]:
        accepted += 1
    candidates = [[[i, round(q, 4)] for i, q in zip(ids, probs)]
                  for ids, probs in zip(top_ids, top_probs)]
    return VerifyStep(p + 1, drafted, greedy[:accepted + 1], accepted, candidates)


def _tree_step_at(drafts: DraftTree, row: int, tokens: list[int], p: int) -> VerifyStep:
    """The tree drafted from position p (row `row`), walked along the target's continuation: at
    a node of depth d on it the target's token is the continuation's token d + 1 ahead."""
    predicted = [tokens[p + depth + 1] for depth in drafts.depths[row]]
    path = accepted_path(drafts, row, predicted)
    bonus = predicted[path[-1] if path else 0]
    return tree_step(drafts, row, path, [tokens[p]] + drafts.tokens[row].tolist(), bonus, p + 1)
