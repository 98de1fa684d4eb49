"""What reaches the draft: hidden states built from a target pass under a wiring, and the
first-step accuracy test ("0% even on training data" in one call)."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from eagle3_nb.errors import Eagle3NbError
from eagle3_nb.model import Wiring


def draft_features(out, wiring: Wiring) -> torch.Tensor:
    """The hidden state an engine (or training) hands the draft, from one TargetOutput.
    Layer ids are hidden_states indices; index L is the pre-final-norm residual stream, as the
    engines capture it (vLLM id L, speculators' last layer). "final_norm" is HF hidden_states[L]
    after the norm: what SGLang stores when aux capture is off."""
    if wiring.hidden_source == "final_norm":
        return out.final_norm
    if wiring.hidden_source == "zeros":
        width = out.final_norm.shape[-1] * max(1, len(wiring.layer_ids or ()))
        return out.final_norm.new_zeros(*out.final_norm.shape[:-1], width)
    if not wiring.layer_ids:
        raise Eagle3NbError(f"wiring {wiring.name!r} has no layer ids", None,
                            "pass the target so L resolves, or set layer_ids")
    states = [out.state(i, final="pre_norm") for i in wiring.layer_ids]
    if wiring.hidden_source.startswith("aux:"):
        return states[int(wiring.hidden_source.split(":", 1)[1])]
    return torch.cat(states, -1)


@dataclass
class StepAccuracy:
    wiring: str
    n: int
    correct: int
    fc_applied: bool
    reference: str            # "target greedy" | "recorded tokens (teacher-forced)"

    @property
    def accuracy(self) -> float:
        return self.correct / self.n if self.n else 0.0

    def to_json(self) -> dict:
        return {"wiring": self.wiring, "n": self.n, "correct": self.correct,
                "accuracy": self.accuracy, "fc_applied": self.fc_applied,
                "reference": self.reference}


@torch.no_grad()
def first_step_accuracy(draft, out, token_ids: torch.Tensor, wiring: Wiring) -> StepAccuracy:
    """Draft position t sees feature t and token t+1 and predicts token t+2; the reference is
    the target's own greedy choice there (what verification would accept). out: the target's
    pass over token_ids (TargetModel.forward_hidden), shared by every wiring."""
    ids = token_ids.reshape(-1)
    if ids.numel() < 3:
        raise Eagle3NbError("need at least 3 tokens", None, "use a longer prompt")
    feats = draft_features(out, wiring)[:-1].to(draft.fc.weight.device)
    run = draft.run(ids[1:][None].to(feats.device), feats[None], wiring=wiring)
    pred = draft.to_target_ids(run.logits[0].argmax(-1), wiring).cpu()
    ref = out.next_tokens[1:].cpu()
    return StepAccuracy(wiring.name, ref.numel(), int((pred == ref).sum()), run.fc_applied,
                        "target greedy")


@torch.no_grad()
def first_step_accuracy_on_dump(draft, sample, wiring: Wiring,
                                features: torch.Tensor) -> StepAccuracy:
    """On a hidden-state dump (no target head): teacher-forced against the recorded tokens,
    reported as such, never as an acceptance figure. features [T, W]: what the wiring feeds
    (session.dump_features)."""
    ids, feats = sample.token_ids.reshape(-1), features
    feats = feats[:-2].to(draft.fc.weight.device)
    run = draft.run(ids[1:-1][None].to(feats.device), feats[None], wiring=wiring)
    pred = draft.to_target_ids(run.logits[0].argmax(-1), wiring).cpu()
    ref = ids[2:]
    return StepAccuracy(wiring.name, ref.numel(), int((pred == ref).sum()), run.fc_applied,
                        "recorded tokens (teacher-forced)")
