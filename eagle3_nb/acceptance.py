"""Chain speculative decoding with greedy verification, simulated on a real target.

Per verify step (as SGLang/vLLM do with topk 1): the draft extends over the committed tokens with
the target's features, drafts k tokens autoregressively (its own H-wide state fed back, each token
mapped through d2t), the target verifies them in one pass, the longest prefix equal to the target's
greedy tokens is accepted and the target's next token is added as the bonus. Accept length per
step = accepted + 1 (1..k+1).

The target pass that verifies step s also yields the features step s+1 needs (a causal pass over a
prefix gives the prefix's states), so each step costs one target pass, as in an engine.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from .errors import Eagle3NbError
from .features import draft_features
from .wiring import Wiring


@dataclass
class VerifyStep:
    position: int          # committed tokens before the step (prompt included)
    drafted: list[int]     # target ids the draft proposed
    target: list[int]      # the target's greedy token at each drafted position, then one more
    accepted: int
    # per drafted position, the draft's top candidates as [target id, probability], best first
    candidates: list[list[list[float]]] = field(default_factory=list)

    @property
    def accept_length(self) -> int:
        return self.accepted + 1

    @property
    def bonus(self) -> int:
        return self.target[self.accepted]

    def to_json(self) -> dict[str, Any]:
        return {"position": self.position, "drafted": self.drafted, "target": self.target,
                "accepted": self.accepted, "candidates": self.candidates}


@dataclass
class SampleRun:
    prompt: list[int]
    first_token: int                 # from the prefill pass, before any verify step
    steps: list[VerifyStep] = field(default_factory=list)

    @property
    def generated(self) -> list[int]:
        out = [self.first_token]
        for s in self.steps:
            out += s.drafted[:s.accepted] + [s.bonus]
        return out


@dataclass
class AcceptanceResult:
    wiring: str
    num_steps: int
    samples: list[SampleRun]

    @property
    def steps(self) -> list[VerifyStep]:
        return [s for run in self.samples for s in run.steps]

    def stats(self) -> dict[str, Any]:
        steps, k = self.steps, self.num_steps
        n = len(steps)
        accepted = [s.accepted for s in steps]
        reached = [sum(a >= i for a in accepted) for i in range(k)]
        passed = [sum(a > i for a in accepted) for i in range(k)]
        return {
            "wiring": self.wiring, "num_steps": k, "n_samples": len(self.samples),
            "n_verify_steps": n, "n_tokens": sum(len(r.generated) for r in self.samples),
            # SGLang: tokens per verify step, bonus included; vLLM: 1 + accepted / drafts.
            # Identical per step here; engines differ only in what they average over.
            "mean_accept_length": (sum(accepted) + n) / n if n else None,
            "vllm_mean_acceptance_length": 1 + sum(accepted) / n if n else None,
            "per_position_acceptance": [p / n if n else None for p in passed],
            "conditional_acceptance": [p / r if r else None for p, r in zip(passed, reached)],
            "accept_length_histogram": {str(i + 1): accepted.count(i) for i in range(k + 1)},
        }

    def to_json(self, with_steps: bool = False) -> dict[str, Any]:
        out = self.stats()
        if with_steps:
            out["samples"] = [{"prompt": r.prompt, "first_token": r.first_token,
                               "steps": [s.to_json() for s in r.steps]} for r in self.samples]
        return out


@torch.no_grad()
def simulate(draft, target, prompts: list[torch.Tensor], num_steps: int = 4,
             max_new_tokens: int = 64, wiring: Wiring | None = None, stop_at_eos: bool = False,
             progress: bool | None = None) -> AcceptanceResult:
    """Greedy chain speculative decoding of each prompt until max_new_tokens are generated
    (the last verify step is kept whole). EOS is not special unless stop_at_eos, so runs stay
    comparable. A wiring that resets parameters runs on a copy with them reset, as the engine
    leaves them; one the engine refuses to load raises instead of producing a number."""
    from .model import as_engine_leaves

    wiring = wiring or draft.wiring
    if wiring.engine_error:
        raise Eagle3NbError(f"{wiring.name} does not serve this draft: {wiring.engine_error}",
                            wiring.name, "fix the load error first (eagle3-nb inspect)")
    model = as_engine_leaves(draft, wiring)
    eos = target.eos_token_ids if stop_at_eos else set()
    runs = [_simulate_one(model, target, p.reshape(-1).cpu(), num_steps, max_new_tokens, wiring, eos)
            for p in _progress(prompts, progress, f"simulating {wiring.name}")]
    return AcceptanceResult(wiring.name, num_steps, runs)


def _progress(items, enabled: bool | None, desc: str):
    """tqdm over the prompts when asked, or by default when the run is long enough to wait on."""
    if enabled is None:
        enabled = len(items) > 8
    if not enabled:
        return items
    from tqdm.auto import tqdm
    return tqdm(items, desc=desc, unit="prompt", leave=False)


def _simulate_one(draft, target, prompt, k, max_new_tokens, wiring, eos) -> SampleRun:
    out = target.forward_hidden(prompt, logits_to_keep=1)
    seq = torch.cat([prompt, out.next_tokens[-1:].cpu()])
    run = SampleRun(prompt.tolist(), int(seq[-1]))
    while len(seq) - len(prompt) < max_new_tokens and int(seq[-1]) not in eos:
        feats = draft_features(out, wiring)[: len(seq) - 1].to(draft.fc.weight.device)
        proposal = draft.step(seq[1:][None].to(feats.device), feats[None], k, wiring=wiring)
        drafted = proposal.target_ids[0].cpu()
        out = target.forward_hidden(torch.cat([seq, drafted]), logits_to_keep=k + 1)
        preds = out.next_tokens.cpu()          # the target's k + 1 choices after seq[:-1]
        accepted = int((drafted == preds[:k]).int().cumprod(0).sum())
        run.steps.append(VerifyStep(len(seq), drafted.tolist(), preds.tolist(), accepted,
                                    _top_candidates(draft, proposal.logits[0], wiring)))
        seq = torch.cat([seq, drafted[:accepted], preds[accepted:accepted + 1]])
    return run


TOP_CANDIDATES = 3


def _top_candidates(draft, logits: torch.Tensor, wiring: Wiring) -> list[list[list[float]]]:
    """[k, Vd] draft logits -> per position the best few as [target id, probability]."""
    probs = torch.softmax(logits.float(), -1)
    top = probs.topk(min(TOP_CANDIDATES, probs.shape[-1]), -1)
    ids = draft.to_target_ids(top.indices, wiring).cpu().tolist()
    return [[[i, round(p, 4)] for i, p in zip(row_ids, row_p)]
            for row_ids, row_p in zip(ids, top.values.cpu().tolist())]


@torch.no_grad()
def score_dumps(draft, samples, num_steps: int = 4, wiring: Wiring | None = None) -> dict[str, Any]:
    """Teacher-forced draft accuracy on hidden-state dumps (no target head, so no verification):
    at step j the draft sees its own step j-1 state and the RECORDED token j further on, and is
    scored against the recorded token after that (SpecForge's acc_j). Labelled as such: this is
    not an accept length, and later steps overstate what chained drafting achieves."""
    from .train_draft import ttt_logits

    wiring = wiring or draft.wiring
    saved, draft.wiring = draft.wiring, wiring   # ttt_logits reads the norm switches from it
    try:
        correct, total = _score(draft, samples, num_steps, wiring, ttt_logits)
    finally:
        draft.wiring = saved
    return {"metric": "teacher-forced accuracy against the recorded tokens (not an accept length)",
            "wiring": wiring.name, "num_steps": num_steps, "n_samples": len(samples),
            "n_positions": total[0],
            "per_step_accuracy": [c / t if t else None for c, t in zip(correct, total)]}


def _score(draft, samples, num_steps, wiring, ttt_logits):
    correct, total = [0] * num_steps, [0] * num_steps
    for sample in samples:
        feats = sample.aux_hidden_states if wiring.hidden_source == "concat" else sample.last_hidden_state
        if feats is None:
            raise Eagle3NbError("the dump has no state for this wiring", str(sample.source),
                                "use the trained wiring (aux concat)")
        tokens = sample.token_ids.reshape(-1)[None].to(draft.fc.weight.device)
        steps = ttt_logits(draft, tokens, feats[None].to(draft.fc.weight.device), num_steps)
        for j, logits in enumerate(steps):
            pred = draft.to_target_ids(logits[0].argmax(-1), wiring)
            ref = tokens[0, 2 + j:2 + j + pred.numel()]
            pred = pred[:ref.numel()]
            correct[j] += int((pred == ref).sum())
            total[j] += ref.numel()
    return correct, total
