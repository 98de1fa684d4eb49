"""Greedy verification without a target pass per verify step.

With greedy verification, chain or tree, the committed tokens are the target's own greedy
continuation whatever the draft proposes. So one greedy generation of the target gives every
token and every hidden state that any wiring's verify steps would see. Per wiring only the draft
runs (`simulate_greedy`):
- one extend over the whole continuation (draft position j pairs target state j with token j+1,
  as the engines' extends do, whatever the verify steps' boundaries);
- its num_steps - 1 own steps from every position at once, each position's queries seeing the
  extend up to it and its own earlier steps (a tree: each beam slot its own, SGLang's slot
  layout, tree.py), in chunks of positions so memory stays bounded;
- then a walk over the verify points reads the accept counts from the known continuation.

Several wirings share whatever is exactly the same for them: one generation serves all; wirings
whose draft is the same module under the same layer switches draft in one batch (their rows
stacked), the extend running once per distinct input (features, and whether fc applies to
them); a d2t reading only changes how the drafted ids map; wirings that compute the same
(switches that make no difference to this draft, such as the norm of a layer it does not have)
are walked once.

The generation stops at the token the last verify step drafts after (max_new_tokens - 1 new
ones). What the last steps check past it, one target pass per batch verifies on the
generation's KV cache, as the engine's last verify pass does: per prompt, every wiring's drafts
past the generated tokens that followed the target's, merged by their tokens (the same tokens
after the same context get the same answer).

acceptance.simulate's step-by-step path is the oracle: the two give the same steps, token for
token (tests/test_greedy.py). Sampling (temperature > 0) keeps the step-by-step path.
"""

from __future__ import annotations

import gc
from contextlib import contextmanager
from typing import Any

import torch

from eagle3_nb.decoding import TOP_CANDIDATES, Drafting, SampleRun
from eagle3_nb.errors import Eagle3NbError
from eagle3_nb.greedy.drafts import IdMaps, chain_drafts, extend, projected, tree_drafts
from eagle3_nb.greedy.generation import (Generation, GreedyTrace, feature_key, generate,
                                         greedy_trace)
from eagle3_nb.greedy.walk import Pending, finish, walk_job
from eagle3_nb.model import Wiring

__all__ = ["GreedyTrace", "feature_key", "greedy_trace", "simulate_greedy"]


def _group_key(model, wiring: Wiring) -> tuple:
    """What the draft's layers compute with, besides their input: wirings alike here draft in
    one batch. A norm switch of layers >= 1 means nothing to a one-layer draft."""
    return (id(model), wiring.norm_before_residual, wiring.norm_output,
            wiring.extra_layer_norm if len(model.layers) > 1 else None)


def _input_key(model, wiring: Wiring, width: int) -> tuple:
    """What the extend is fed: the features, and whether fc applies to them (model.project)."""
    skips_fc = wiring.fc_rule == "engine" and width == model.cfg.H
    return feature_key(wiring), skips_fc


@torch.no_grad()
def simulate_greedy(target, prompts: list[torch.Tensor], jobs: list[tuple[Any, Wiring]],
                    drafting: Drafting, max_new_tokens: int, eos: set[int], tree: bool = False,
                    batch_size: int = 8, finished=lambda n: None,
                    trace: GreedyTrace | None = None) -> list[list[SampleRun] | Eagle3NbError]:
    """Per job (the draft as the engine leaves it under a wiring, and that wiring): per prompt,
    the verify steps greedy verification takes, drafting a chain or, with tree, SGLang's tree
    (at topk 1 too), batch_size prompts at a time; or the error that stops the engine. Drafts
    start only where a verify step can: from each prompt's last position on. `trace`: a
    generation of these prompts to reuse when it holds enough tokens (the last steps then
    need no target pass)."""
    wirings = [w for _, w in jobs]
    if trace is not None and not trace.serves(prompts, max_new_tokens + drafting.num_steps,
                                              wirings):
        trace = None
    specs = {feature_key(w): w for w in wirings}
    outcomes: list[Any] = [[] for _ in jobs]
    for i in range(0, len(prompts), batch_size):
        live = [j for j, o in enumerate(outcomes) if not isinstance(o, Eagle3NbError)]
        if not live:
            break
        rows = range(i, min(i + batch_size, len(prompts)))
        # the last step drafts from position P + max_new_tokens - 2 (the tokens before it
        # and their states); what it checks past the generated tokens the tail verifies
        gen = (trace.batch(rows) if trace else
               generate(target, [prompts[r] for r in rows], max(1, max_new_tokens - 1), specs,
                        keep_cache=True))
        groups: dict[tuple, list[int]] = {}
        for j in live:
            groups.setdefault(_group_key(*jobs[j]), []).append(j)
        pending: list[Pending] = []
        with _collector_paused():
            for group in groups.values():
                done = _simulate_group(gen, [jobs[j] for j in group], drafting, max_new_tokens,
                                       eos, tree)
                for j, outcome in zip(group, done):
                    if isinstance(outcome, Eagle3NbError):
                        outcomes[j] = outcome
                    else:
                        outcomes[j] += outcome[0]
                        pending += outcome[1]
            finish(gen, pending)
        finished(len(rows))
    return outcomes


@contextmanager
def _collector_paused():
    """Drafting and the walk allocate many small objects (tensors; a few lists per verify
    step), none of them cyclic: Python's cyclic collector, triggered by their number, would
    traverse every live object (the models' too) again and again, for as long as the walk
    itself takes. It collects once, after."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _simulate_group(gen: Generation, jobs: list[tuple[Any, Wiring]], drafting: Drafting,
                    max_new_tokens: int, eos: set[int], tree: bool) -> list:
    """Jobs that share the draft module and its layer switches, drafted in one batch: per job
    (runs, pending last steps), or its error."""
    model = jobs[0][0]
    outcomes: list[Any] = [None] * len(jobs)
    inputs: dict[tuple, int] = {}      # input key -> index among the projected inputs
    hidden, rows_of = [], []            # rows_of: (job, its input) of each distinct job
    same_as: dict[int, int] = {}        # job -> the distinct job computing exactly the same
    distinct: dict[tuple, int] = {}
    for j, (_, wiring) in enumerate(jobs):
        feats = gen.features[feature_key(wiring)]
        try:
            if isinstance(feats, Eagle3NbError):
                raise feats
            key = _input_key(model, wiring, feats[0].shape[-1])
            if key not in inputs:
                hidden.append(projected(model, feats, wiring))
                inputs[key] = len(hidden) - 1
        except Eagle3NbError as exc:
            outcomes[j] = exc
            continue
        same_as[j] = distinct.setdefault((inputs[key], wiring.d2t_mode), j)
        if same_as[j] == j:
            rows_of.append((j, inputs[key]))
    if rows_of:
        walked = _draft_and_walk(model, gen, hidden, rows_of, jobs, drafting, max_new_tokens,
                                 eos, tree)
        for j, first in same_as.items():     # the same runs; their last steps finished once
            outcome = walked[first]
            outcomes[j] = outcome if j == first or isinstance(outcome, Eagle3NbError) else \
                (outcome[0], [])
    return outcomes


def _draft_and_walk(model, gen: Generation, hidden: list[torch.Tensor],
                    rows_of: list[tuple[int, int]], jobs, drafting: Drafting,
                    max_new_tokens: int, eos: set[int], tree: bool) -> dict[int, Any]:
    """The drafts of the distinct jobs (rows_of: job, its input), stacked job-major, then each
    job's walk: job -> (runs, pending last steps), or the error that stops it."""
    B = len(gen.tokens)
    rows = len(gen.tokens[0]) - len(gen.prompts[0])        # new tokens: the same per prompt
    wiring = jobs[rows_of[0][0]][1]
    ext = extend(model, gen.tokens, hidden, rows, wiring)
    if len(hidden) > 1 or len(rows_of) > 1:
        ext = ext.select(torch.tensor([u * B + b for _, u in rows_of for b in range(B)],
                                      device=ext.valid.device))
    maps = IdMaps(model, [jobs[j][1] for j, _ in rows_of], B)
    drafted = (tree_drafts(model, ext, drafting, wiring, maps) if tree else
               chain_drafts(model, ext, drafting.num_steps, wiring, maps, TOP_CANDIDATES))
    walked: dict[int, Any] = {}
    for n, (j, _) in enumerate(rows_of):
        try:
            walked[j] = walk_job(gen, drafted, n * B, jobs[j][1], maps.vocab, drafting,
                                 max_new_tokens, eos, tree)
        except Eagle3NbError as exc:
            walked[j] = exc
    return walked
