"""Speculative decoding simulated on a real target: a chain, or SGLang's tree
(--speculative-eagle-topk > 1, its rules in tree.py), with the same batching and caches,
verified greedily or, at a temperature, by target-only rejection sampling.

Per verify step (as SGLang/vLLM do with topk 1): the draft extends over the committed tokens with
the target's features, drafts k tokens autoregressively (its own H-wide state fed back, each token
mapped through d2t), the target verifies them in one pass, the longest prefix equal to the target's
greedy tokens is accepted and the target's next token is added as the bonus. Accept length per
step = accepted + 1 (1..k+1).

The target pass that verifies step s also yields the features step s+1 needs, so each step costs
one target pass over k + 1 positions and one draft extend over the accepted + 1 committed ones:
both KV caches live across verify steps, rejected drafts becoming masked holes in them, as an
engine keeps its per-request KV.
"""

from __future__ import annotations

from typing import Any

import torch

from eagle3_nb.decoding import (TOP_CANDIDATES, AcceptanceResult, Drafting, SampleRun,
                                VerifyStep, left_pad, tree_step)
from eagle3_nb.defaults import DEFAULT_BATCH_SIZE, DEFAULT_MAX_NEW_TOKENS, DEFAULT_NUM_STEPS
from eagle3_nb.errors import Eagle3NbError
from eagle3_nb.features import draft_features
from eagle3_nb.greedy import GreedyTrace, simulate_greedy
from eagle3_nb.model import DraftCache, Wiring, as_engine_leaves, ttt_logits
from eagle3_nb.progress import progress_bar
from eagle3_nb.tree import (DraftTree, accepted_path, draft_tree, sampled_path, target_probs,
                            verify_mask)

__all__ = ["AcceptanceResult", "Drafting", "SampleRun", "VerifyStep", "score_dumps", "simulate",
           "simulate_each"]


@torch.no_grad()
def simulate(draft, target, prompts: list[torch.Tensor], num_steps: int = DEFAULT_NUM_STEPS,
             max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS, wiring: Wiring | None = None,
             stop_at_eos: bool = False, progress: bool | None = None,
             batch_size: int = DEFAULT_BATCH_SIZE,
             drafting: Drafting | None = None, tree: bool | None = None,
             seed: int = 0, stepwise: bool = False,
             trace: GreedyTrace | None = None) -> AcceptanceResult:
    """Greedy speculative decoding of each prompt until max_new_tokens are generated (the last
    verify step is kept whole). EOS is not special unless stop_at_eos (then a prompt ends with
    the verify step that commits it, kept whole), so runs stay comparable. Up to batch_size
    prompts decode together, each at its own pace, with the target's and the draft's KV caches
    kept across verify steps as an engine keeps them; the tokens do not depend on the batch
    size. A wiring that resets parameters runs on a copy with them reset, as the engine leaves
    them; one the engine refuses to load raises instead of producing a number.
    drafting: steps, topk and tree size (default: a chain of num_steps); a topk above 1 drafts
    a tree as SGLang does (tree.py); tree=True runs the tree code even at topk 1. A
    temperature above 0 samples the first token and verifies by target-only rejection sampling
    (tree.sampled_path), from a generator seeded with `seed`: the committed tokens are then
    distributed as the target's own samples, and the tokens depend on the batch size.
    Greedy verification takes the fast path (greedy/: one target generation, then the draft
    alone; `trace` reuses a generation of these prompts) unless stepwise, which runs the verify
    steps one by one as an engine does: the fast path's oracle, with the same result."""
    drafting = drafting or Drafting(num_steps)
    _check_batch_size(batch_size)
    wiring = wiring or draft.wiring
    _check_served(wiring)
    model = as_engine_leaves(draft, wiring)
    eos = target.eos_token_ids if stop_at_eos else set()
    prompts = _checked_prompts(prompts)
    if not drafting.temperature and not stepwise:
        with progress_bar(len(prompts), progress, f"simulating {wiring.name}") as bar:
            runs, = simulate_greedy(target, prompts, [(model, wiring)], drafting, max_new_tokens,
                                    eos, _uses_tree(drafting, tree), batch_size, bar.update,
                                    trace)
        if isinstance(runs, Eagle3NbError):
            raise runs
        return AcceptanceResult(wiring.name, drafting.num_steps, runs, drafting)
    batch_class = _TreeBatch if _uses_tree(drafting, tree) else _Batch
    generator = torch.Generator().manual_seed(seed)
    runs = []
    with progress_bar(len(prompts), progress, f"simulating {wiring.name}") as bar:
        for i in range(0, len(prompts), batch_size):
            batch = batch_class(model, target, prompts[i:i + batch_size], drafting, wiring, eos,
                                generator)
            runs += batch.decode(max_new_tokens, bar.update)
    return AcceptanceResult(wiring.name, drafting.num_steps, runs, drafting)


def simulate_each(draft, target, prompts: list[torch.Tensor], wirings: list[Wiring],
                  max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS, progress: bool | None = None,
                  batch_size: int = DEFAULT_BATCH_SIZE,
                  drafting: Drafting | None = None) -> list[AcceptanceResult | Eagle3NbError]:
    """`simulate` under each wiring, or the error it raises there. Greedy verification shares
    the work (greedy/: one target generation for all, the drafts of alike wirings in one
    batch); at a temperature each wiring runs on its own."""
    drafting = drafting or Drafting()
    if drafting.temperature:
        return [_outcome(lambda w=w: simulate(draft, target, prompts,
                                              max_new_tokens=max_new_tokens, wiring=w,
                                              progress=progress, batch_size=batch_size,
                                              drafting=drafting)) for w in wirings]
    _check_batch_size(batch_size)
    outcomes: list = [None] * len(wirings)
    try:
        prompts = _checked_prompts(prompts)
    except Eagle3NbError as exc:
        return [exc] * len(wirings)
    models: dict[tuple, Any] = {}      # one copy per set of parameters an engine leaves unset
    jobs, of_job = [], []
    for i, wiring in enumerate(wirings):
        try:
            _check_served(wiring)
            if wiring.reset_params not in models:
                models[wiring.reset_params] = as_engine_leaves(draft, wiring)
        except Eagle3NbError as exc:
            outcomes[i] = exc
            continue
        jobs.append((models[wiring.reset_params], wiring))
        of_job.append(i)
    if jobs:
        with progress_bar(len(prompts), progress, f"simulating {len(jobs)} wirings") as bar:
            done = simulate_greedy(target, prompts, jobs, drafting, max_new_tokens, set(),
                                   _uses_tree(drafting, None), batch_size, bar.update)
        for i, runs in zip(of_job, done):
            outcomes[i] = runs if isinstance(runs, Eagle3NbError) else \
                AcceptanceResult(wirings[i].name, drafting.num_steps, runs, drafting)
    return outcomes


def _outcome(run):
    try:
        return run()
    except Eagle3NbError as exc:
        return exc


def _check_batch_size(batch_size: int) -> None:
    if batch_size < 1:
        raise Eagle3NbError(f"batch_size {batch_size} must be >= 1", None, "pass positive counts")


def _check_served(wiring: Wiring) -> None:
    if wiring.engine_error:
        raise Eagle3NbError(f"{wiring.name} does not serve this draft: {wiring.engine_error}",
                            wiring.name, "fix the load error first (eagle3-nb inspect)")


def _checked_prompts(prompts: list[torch.Tensor]) -> list[torch.Tensor]:
    prompts = [p.reshape(-1).cpu() for p in prompts]
    if any(len(p) < 2 for p in prompts):
        raise Eagle3NbError("a prompt needs at least 2 tokens (the draft pairs each state with the "
                            "next token)", None, "drop empty or one-token prompts")
    return prompts


def _uses_tree(drafting: Drafting, tree: bool | None) -> bool:
    """The tree rules: asked for, a topk above 1, or sampling (its verification is the tree's)."""
    return bool(tree or drafting.temperature > 0 or (tree is None and not drafting.is_chain))


class _Batch:
    """Requests decoding together. Invariant between steps, per row: the target and the draft
    have processed positions 0..pos-1 of the committed tokens `seq` (len(seq) = pos + 1: the
    last one, the bonus, is next to verify); draft position j pairs target state j with token
    j+1. Rejected drafts stay in the target cache as masked holes; padding of rows extended by
    different counts leaves holes in the draft cache (model.DraftCache.valid)."""

    def __init__(self, draft, target, prompts, drafting: Drafting, wiring, eos,
                 generator: torch.Generator | None = None):
        self.draft, self.target, self.wiring, self.eos = draft, target, wiring, eos
        self.drafting, self.k, self.generator = drafting, drafting.num_steps, generator
        self.dev = draft.fc.weight.device
        self.rows = list(range(len(prompts)))           # index into self.runs of each live row
        ids, valid = left_pad(prompts)
        positions = (valid.cumsum(-1) - 1).clamp(min=0)
        out, self.past = target.forward_cached(ids, valid, positions, None, logits_to_keep=1)
        first = self._first_tokens(out)
        self.runs = [SampleRun(p.tolist(), int(f)) for p, f in zip(prompts, first)]
        self.seqs = [p.tolist() + [int(f)] for p, f in zip(prompts, first)]
        self.hit_eos = [int(f) in eos for f in first]   # per row: committed an EOS (stop_at_eos)
        self.mask = valid.to(target.device)
        self.pos = valid.sum(-1)                         # target/draft positions done per row
        self.dcache = DraftCache()
        # the next draft extend: ids shifted one left (each state pairs with the next token)
        self.extend = (torch.cat([ids[:, 1:], first[:, None]], 1), draft_features(out, wiring),
                       positions, valid.bool())

    def _first_tokens(self, out) -> torch.Tensor:
        """[B]: the prefill's token, the target's greedy choice or, when sampling, its sample."""
        if not self.drafting.temperature:
            return out.next_tokens[:, -1].cpu()
        probs = target_probs(out.logits[:, -1], self.drafting.temperature)
        return torch.multinomial(probs, 1, generator=self.generator)[:, 0]

    def decode(self, max_new_tokens: int, finished=lambda n: None) -> list[SampleRun]:
        """Verify steps until every row is done; finished(n) hears of rows as they finish."""
        live = len(self.rows)
        while True:
            self._retire(max_new_tokens)
            finished(live - len(self.rows))
            live = len(self.rows)
            if not live:
                return self.runs
            self._verify_step()

    def _verify_step(self) -> None:
        proposal = self._draft()
        drafted = proposal.target_ids.cpu()
        last = torch.tensor([self.seqs[r][-1] for r in self.rows])
        verify = torch.cat([last[:, None], drafted], 1)                     # [B, k + 1]
        out, preds, accepted = self._verify(verify)     # preds: the target's k + 1 choices
        bonus = preds.gather(1, accepted[:, None])[:, 0]
        candidates = _top_candidates(self.draft, proposal.logits, self.wiring)
        for b, r in enumerate(self.rows):
            a = int(accepted[b])
            self.runs[r].steps.append(VerifyStep(
                len(self.seqs[r]), drafted[b].tolist(), preds[b, :a + 1].tolist(), a,
                candidates[b]))
            committed = drafted[b, :a].tolist() + [int(bonus[b])]
            self.seqs[r] += committed
            self.hit_eos[r] = self.hit_eos[r] or bool(self.eos.intersection(committed))
        self._next_extend(verify, bonus, accepted, draft_features(out, self.wiring))

    def _draft(self):
        """Extend the draft over the newly committed positions, draft k, forget the drafts."""
        ids, feats, positions, valid = (t.to(self.dev) for t in self.extend)
        length = self.dcache.length + ids.shape[1]
        proposal = self.draft.step(ids, feats, self.k, positions, self.dcache, self.wiring, valid)
        self.dcache.truncate(length)                     # drop the k - 1 drafted positions
        return proposal

    def _verify(self, verify: torch.Tensor):
        """One target pass over [bonus, drafts]; the rejected slots become holes."""
        k = self.k
        self.mask = torch.cat([self.mask, torch.ones_like(verify, device=self.mask.device)], 1)
        out, self.past = self.target.forward_cached(verify, self.mask,
                                                    self.pos[:, None] + torch.arange(k + 1),
                                                    self.past, logits_to_keep=k + 1)
        preds = out.next_tokens.cpu()
        accepted = (verify[:, 1:] == preds[:, :k]).int().cumprod(1).sum(1)
        self.mask[:, -(k + 1):] = self._committed(accepted).to(self.mask)
        return out, preds, accepted

    def _committed(self, accepted: torch.Tensor) -> torch.Tensor:
        """[B, k + 1]: the verified slots kept (the last bonus and the accepted drafts)."""
        return torch.arange(self.k + 1)[None] <= accepted[:, None]

    def _next_extend(self, verify, bonus, accepted, feats) -> None:
        """The draft's next extend: each committed slot's state paired with the token after it
        (the accepted drafts, then the new bonus), right-aligned so the last slot is real."""
        k, span = self.k, torch.arange(self.k + 1)
        ids = torch.cat([verify[:, 1:], bonus[:, None]], 1).scatter(1, accepted[:, None],
                                                                      bonus[:, None])
        shift = k - accepted
        self.extend = (_roll_right(ids, shift), _roll_right(feats, shift),
                       (self.pos[:, None] + span - shift[:, None]).clamp(min=0),
                       _roll_right(self._committed(accepted), shift))
        self.pos = self.pos + accepted + 1

    def _retire(self, max_new_tokens: int) -> None:
        """Finished requests leave the batch, their caches with them."""
        live = [b for b, r in enumerate(self.rows)
                if len(self.seqs[r]) - len(self.runs[r].prompt) < max_new_tokens
                and not self.hit_eos[r]]
        if len(live) == len(self.rows):
            return
        keep = torch.tensor(live, dtype=torch.long)
        self.rows = [self.rows[b] for b in live]
        if not live:
            return
        self.past.batch_select_indices(keep.to(self.target.device))
        self.dcache.select(keep.to(self.dev))
        self.mask, self.pos = self.mask[keep.to(self.mask.device)], self.pos[keep]
        self.extend = tuple(t[keep.to(t.device)] for t in self.extend)


class _TreeBatch(_Batch):
    """Requests drafting trees (tree.py) instead of chains: the same caches, holes and
    retirement; a verify pass over every node of each row's tree under its tree mask; the
    accepted path's states extend the draft next (rows right-aligned to num_steps + 1)."""

    def _verify_step(self) -> None:
        d = self.drafting
        ids, feats, positions, valid = (t.to(self.dev) for t in self.extend)
        tree = draft_tree(self.draft, ids, feats, positions, valid, self.dcache, self.wiring,
                          d.num_steps, d.topk, d.num_draft_tokens)
        roots = torch.tensor([self.seqs[r][-1] for r in self.rows])
        verify = torch.cat([roots[:, None], tree.tokens.cpu()], 1)             # [B, N]
        mask = verify_mask(tree, self.mask, self.target.dtype).to(self.target.device)
        out, self.past = self.target.forward_cached(
            verify, mask, self.pos[:, None] + torch.tensor(tree.depths), self.past,
            logits_to_keep=verify.shape[1])
        preds = out.next_tokens.cpu()
        probs = (target_probs(out.logits, self.drafting.temperature)
                 if self.drafting.temperature else None)
        kept = torch.zeros(verify.shape, dtype=torch.bool)
        paths, bonuses = [], []
        for b, r in enumerate(self.rows):
            path, bonus = self._accept(tree, b, preds[b].tolist(), probs)
            kept[b, [0, *path]] = True
            paths.append(path)
            bonuses.append(bonus)
            self._record(r, tree_step(tree, b, path, verify[b].tolist(), bonus,
                                      len(self.seqs[r])))
        self.mask = torch.cat([self.mask, kept.to(self.mask)], 1)
        self._next_tree_extend(verify, bonuses, draft_features(out, self.wiring), paths)

    def _accept(self, tree: DraftTree, b: int, preds: list[int], probs) -> tuple[list[int], int]:
        """(accepted nodes, bonus token): greedy, or target-only rejection sampling."""
        if probs is None:
            path = accepted_path(tree, b, preds)
            return path, preds[path[-1] if path else 0]
        return sampled_path(tree, b, probs[b], self.generator)

    def _record(self, r: int, step: VerifyStep) -> None:
        self.runs[r].steps.append(step)
        committed = step.drafted[:step.accepted] + [step.bonus]
        self.seqs[r] += committed
        self.hit_eos[r] = self.hit_eos[r] or bool(self.eos.intersection(committed))

    def _next_tree_extend(self, verify, bonuses: list[int], feats, paths) -> None:
        """Each committed node's state paired with the token after it (the accepted nodes'
        tokens, then the bonus), right-aligned so the last slot is real."""
        B, W = len(paths), self.k + 1
        ids = torch.zeros(B, W, dtype=torch.long)
        out_feats = feats.new_zeros(B, W, feats.shape[-1])
        positions = torch.zeros(B, W, dtype=torch.long)
        valid = torch.zeros(B, W, dtype=torch.bool)
        for b, path in enumerate(paths):
            nodes, n = [0, *path], len(path) + 1
            ids[b, W - n:] = torch.tensor([int(verify[b, p]) for p in path] + [bonuses[b]])
            out_feats[b, W - n:] = feats[b, nodes]
            positions[b, W - n:] = self.pos[b] + torch.arange(n)
            valid[b, W - n:] = True
        self.extend = (ids, out_feats, positions, valid)
        self.pos = self.pos + torch.tensor([len(p) + 1 for p in paths])


def _roll_right(x: torch.Tensor, shift: torch.Tensor) -> torch.Tensor:
    """Roll each row b of x [B, T, ...] right by shift[b] (wrapping), on dim 1."""
    T = x.shape[1]
    index = (torch.arange(T)[None] - shift[:, None]) % T
    index = index.to(x.device).view(*index.shape, *([1] * (x.dim() - 2))).expand_as(x)
    return x.gather(1, index)


def _top_candidates(draft, logits: torch.Tensor, wiring: Wiring) -> list[list[list[list[float]]]]:
    """[B, k, Vd] draft logits -> per row, per drafted position, the best few as [target id,
    probability] (one transfer from the device for the whole batch)."""
    probs = torch.softmax(logits.float(), -1)
    top = probs.topk(min(TOP_CANDIDATES, probs.shape[-1]), -1)
    ids = draft.to_target_ids(top.indices, wiring).cpu().tolist()
    return [[[[i, round(p, 4)] for i, p in zip(pos_ids, pos_p)]
             for pos_ids, pos_p in zip(row_ids, row_p)]
            for row_ids, row_p in zip(ids, top.values.cpu().tolist())]


@torch.no_grad()
def score_dumps(draft, samples, features: list[torch.Tensor], num_steps: int = 4,
                wiring: Wiring | None = None) -> dict[str, Any]:
    """Teacher-forced draft accuracy on hidden-state dumps (no target head, so no verification):
    at step j the draft sees its own step j-1 state and the RECORDED token j further on, and is
    scored against the recorded token after that (SpecForge's acc_j). Labelled as such: this is
    not an accept length, and later steps overstate what chained drafting achieves.
    features: per sample, what the wiring feeds (session.dump_features)."""
    wiring = wiring or draft.wiring
    saved, draft.wiring = draft.wiring, wiring   # ttt_logits reads the norm switches from it
    try:
        correct, total = _score(draft, samples, features, num_steps, wiring, ttt_logits)
    finally:
        draft.wiring = saved
    return {"metric": "teacher-forced accuracy against the recorded tokens (not an accept length)",
            "wiring": wiring.name, "num_steps": num_steps, "n_samples": len(samples),
            "n_positions": total[0],
            "per_step_accuracy": [c / t if t else None for c, t in zip(correct, total)]}


def _score(draft, samples, features, num_steps, wiring, ttt_logits):
    correct, total = [0] * num_steps, [0] * num_steps
    for sample, feats in zip(samples, features):
        tokens = sample.token_ids.reshape(-1)[None].to(draft.fc.weight.device)
        steps = ttt_logits(draft, tokens, feats[None].to(draft.fc.weight.device), num_steps)
        for j, logits in enumerate(steps):
            pred = draft.to_target_ids(logits[0].argmax(-1), wiring)
            ref = tokens[0, 2 + j:2 + j + pred.numel()]
            pred = pred[:ref.numel()]
            correct[j] += int((pred == ref).sum())
            total[j] += ref.numel()
    return correct, total
