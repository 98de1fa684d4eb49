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
    cache: DraftCache
    logits: torch.Tensor     # [J, Vd]
    features: torch.Tensor   # [J, H]


def _extend(model, tokens: list[int], feats: torch.Tensor, wiring: Wiring) -> _Extend:
    dev = model.fc.weight.device
    ids = torch.tensor(tokens[1:len(feats) + 1], device=dev)[None]
    cache = DraftCache()
    out = model.run(ids, feats[None].to(dev), cache=cache, wiring=wiring)
    return _Extend(cache, out.logits[0], out.features[0])


def _slots(ext: _Extend) -> DraftCache:
    """Per layer, the extend's keys as the shared prefix of a chunk's own steps."""
    return DraftCache([SlotKV(layer) for layer in ext.cache.layers])


def _own_step(model, ext: _Extend, slots_cache: DraftCache, first: int, rows: int, slots: int,
              step: int, ids: torch.Tensor, feature: torch.Tensor, wiring: Wiring):
    """One own draft step for positions first..first+rows-1, `slots` beams each ([rows*slots]
    ids and [rows*slots, H] features, slot fastest). Each query sees the extend up to its
    position, its own slot's entries of the earlier steps, and itself."""
    dev = ids.device
    at = first + torch.arange(rows, device=dev).repeat_interleave(slots)        # [n]
    visible = torch.arange(ext.logits.shape[0], device=dev)[None] <= at[:, None]
    out = model.run(ids[None], feature[None], (at + step)[None], slots_cache, wiring,
                    own_features=True, visible=visible)
    return out.logits[0], out.features[0]


def _chunks(total: int, slots: int):
    rows = max(1, CHUNK_QUERIES // slots)
    for first in range(0, total, rows):
        yield first, min(rows, total - first)


@dataclass
class _ChainDrafts:
    drafted: torch.Tensor      # [J, k] target ids
    top_ids: torch.Tensor      # [J, k, c] the draft's best candidates (target ids)
    top_probs: torch.Tensor    # [J, k, c]
    bad: list[tuple | None]    # per position: (step, draft id, target id) of the first id
                               # outside the vocabulary, or None


def _chain_drafts(model, ext: _Extend, k: int, wiring: Wiring, n_top: int) -> _ChainDrafts:
    J = ext.logits.shape[0]
    parts = [_chain_chunk(model, ext, first, rows, k, wiring, n_top)
             for first, rows in _chunks(J, 1)]
    return _ChainDrafts(torch.cat([p[0] for p in parts]), torch.cat([p[1] for p in parts]),
                        torch.cat([p[2] for p in parts]), sum((p[3] for p in parts), []))


def _chain_chunk(model, ext, first, rows, k, wiring, n_top):
    logits = ext.logits[first:first + rows]
    feature = ext.features[first:first + rows]
    drafted, tops, probs = [], [], []
    bad: list[tuple | None] = [None] * rows
    slots_cache = _slots(ext)
    for i in range(k):
        ids = logits.argmax(-1)
        p = torch.softmax(logits.float(), -1).topk(min(n_top, logits.shape[-1]), -1)
        target_ids = _mapped(model, ids, wiring, i, bad)
        drafted.append(target_ids)
        tops.append(model.to_target_ids(p.indices, wiring))
        probs.append(p.values)
        if i + 1 < k:
            logits, feature = _own_step(model, ext, slots_cache, first, rows, 1, i + 1,
                                        _in_vocab(model, target_ids), feature, wiring)
    return (torch.stack(drafted, 1).cpu(), torch.stack(tops, 1).cpu(),
            torch.stack(probs, 1).cpu(), bad)


def _mapped(model, draft_ids: torch.Tensor, wiring: Wiring, step: int, bad: list) -> torch.Tensor:
    """Target ids of draft ids, [positions * beams, ...] for the positions of `bad`; a position's
    first id outside the vocabulary is noted there (raised only if a verify step drafts from
    that position, as the engine would stop only then)."""
    ids = model.to_target_ids(draft_ids, wiring)
    out = ((ids < 0) | (ids >= model.embed_tokens.num_embeddings)).reshape(len(bad), -1)
    if out.any():
        flat_draft, flat_ids = draft_ids.reshape(len(bad), -1), ids.reshape(len(bad), -1)
        for r in out.any(-1).nonzero()[:, 0].tolist():
            c = int(out[r].nonzero()[0, 0])
            bad[r] = bad[r] or (step, int(flat_draft[r, c]), int(flat_ids[r, c]))
    return ids


def _in_vocab(model, ids: torch.Tensor) -> torch.Tensor:
    """Ids fed to the next step; an out-of-vocabulary one (its position already condemned)
    is replaced so the batch can run."""
    return ids.clamp(0, model.embed_tokens.num_embeddings - 1)


def _tree_drafts(model, ext: _Extend, drafting, wiring: Wiring) -> tuple[DraftTree, list]:
    J, K = ext.logits.shape[0], drafting.topk
    trees, bad = [], []
    for first, rows in _chunks(J, K):
        chunk_bad: list[tuple | None] = [None] * rows
        slots_cache = _slots(ext)

        def check(draft_ids, step):
            return _in_vocab(model, _mapped(model, draft_ids, wiring, step, chunk_bad))

        def run_beams(beam_ids, feature, step):
            return _own_step(model, ext, slots_cache, first, rows, K, step,
                             beam_ids.reshape(-1), feature.reshape(rows * K, -1), wiring)

        trees.append(grow_levels(ext.logits[first:first + rows],
                                 ext.features[first:first + rows, None], run_beams, check,
                                 drafting.num_steps, K, drafting.num_draft_tokens))
        bad += chunk_bad
    return _joined(trees), bad


def _joined(trees: list[DraftTree]) -> DraftTree:
    return DraftTree(torch.cat([t.tokens for t in trees]).cpu(),
                     torch.cat([t.scores for t in trees]).cpu(),
                     sum((t.parents for t in trees), []), sum((t.depths for t in trees), []))


# --- the walk over the verify points -----------------------------------------------------------

@torch.no_grad()
def simulate_greedy(model, trace: GreedyTrace, drafting: Drafting, wiring: Wiring,
                    max_new_tokens: int, eos: set[int], tree: bool = False,
                    finished=lambda n: None) -> list[SampleRun]:
    """Per prompt of the trace, the verify steps greedy verification takes, drafting a chain or,
    with tree, SGLang's tree (at topk 1 too)."""
    runs = []
    vocab = model.embed_tokens.num_embeddings
    for b, tokens in enumerate(trace.tokens):
        prompt = trace.prompts[b]
        run = SampleRun(prompt, tokens[len(prompt)])
        if run.first_token not in eos:
            ext = _extend(model, tokens, trace.features[feature_key(wiring)][b], wiring)
            if tree:
                drafts, bad = _tree_drafts(model, ext, drafting, wiring)
                step_at = lambda p: _tree_step_at(drafts, tokens, p)  # noqa: E731
            else:
                chain = _chain_drafts(model, ext, drafting.num_steps, wiring, TOP_CANDIDATES)
                bad, step_at = chain.bad, lambda p: _chain_step(chain, tokens, p)
            _walk(run, max_new_tokens, eos, step_at,
                  lambda p: bad[p - 1] and out_of_range_error(*bad[p - 1], vocab, wiring))
        runs.append(run)
        finished(1)
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


def _chain_step(chain: _ChainDrafts, tokens: list[int], p: int) -> VerifyStep:
    """The verify step from position p: the drafts against the target's continuation."""
    drafted = chain.drafted[p - 1].tolist()
    greedy = tokens[p + 1:p + len(drafted) + 2]
    accepted = 0
    while accepted < len(drafted) and drafted[accepted] == greedy[accepted]:
        accepted += 1
    candidates = [[[i, round(q, 4)] for i, q in zip(ids, probs)]
                  for ids, probs in zip(chain.top_ids[p - 1].tolist(),
                                        chain.top_probs[p - 1].tolist())]
    return VerifyStep(p + 1, drafted, greedy[:accepted + 1], accepted, candidates)


def _tree_step_at(drafts: DraftTree, tokens: list[int], p: int) -> VerifyStep:
    """The tree drafted from position p, walked along the target's continuation: at a node of
    depth d on it the target's token is the continuation's token d + 1 ahead."""
    row = p - 1
    predicted = [tokens[p + depth + 1] for depth in drafts.depths[row]]
    path = accepted_path(drafts, row, predicted)
    bonus = predicted[path[-1] if path else 0]
    return tree_step(drafts, row, path, [tokens[p]] + drafts.tokens[row].tolist(), bonus, p + 1)
