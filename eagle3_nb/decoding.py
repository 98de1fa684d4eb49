"""What a simulated decode records: the drafting settings, each verify step, each prompt's run
and the result with its statistics. Both the step-by-step simulation (acceptance.py) and the
greedy fast path (greedy/) build them, so their results compare token for token."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from eagle3_nb.defaults import DEFAULT_NUM_STEPS
from eagle3_nb.engines.registry import figure_names
from eagle3_nb.errors import Eagle3NbError
from eagle3_nb.tree import DraftTree, shown_path
from eagle3_nb.uncertainty import ratio_se

TOP_CANDIDATES = 3


@dataclass(frozen=True)
class Drafting:
    """How many tokens a verify step drafts and checks, as the engines name it: num_steps
    (SGLang --speculative-num-steps, vLLM num_speculative_tokens), topk
    (--speculative-eagle-topk: 1 is a chain) and num_draft_tokens (--speculative-num-draft-tokens:
    the tree's size, root included; a chain's is num_steps + 1). `source` says where they came
    from (defaults, parameters, a launch command, the engine's own log)."""
    num_steps: int = DEFAULT_NUM_STEPS
    topk: int = 1
    num_draft_tokens: int | None = None
    source: str = "the kit's defaults"
    temperature: float = 0.0   # 0: greedy verification; above: the target samples (tree.py)

    def __post_init__(self):
        if not self.temperature >= 0:
            raise Eagle3NbError(f"temperature {self.temperature} must be >= 0", "temperature",
                                "0 for greedy verification, or the engine's sampling temperature")
        if self.num_steps < 1 or self.topk < 1:
            raise Eagle3NbError(f"num_steps {self.num_steps} and topk {self.topk} must be >= 1",
                                None, "pass positive counts")
        if self.num_draft_tokens is None or self.topk == 1:
            # SGLang sets num_draft_tokens to num_steps + 1 when topk is 1 (speculative_hook.py)
            object.__setattr__(self, "num_draft_tokens", self.chain_tokens if self.topk == 1
                               else self.num_draft_tokens or self.max_draft_tokens)
        if not 2 <= self.num_draft_tokens <= self.max_draft_tokens:
            raise Eagle3NbError(
                f"num_draft_tokens {self.num_draft_tokens} with topk {self.topk} and num_steps "
                f"{self.num_steps}: a tree holds 2 to {self.max_draft_tokens} tokens (the root "
                f"and topk + (num_steps - 1) * topk^2 candidates)", "num_draft_tokens",
                "pick a size inside that range")

    @property
    def chain_tokens(self) -> int:
        return self.num_steps + 1

    @property
    def max_draft_tokens(self) -> int:
        return 1 + self.topk + (self.num_steps - 1) * self.topk ** 2

    @property
    def is_chain(self) -> bool:
        return self.topk == 1

    def label(self) -> str:
        shape = (f"chain of {self.num_steps}" if self.is_chain else
                 f"tree: {self.num_steps} steps, topk {self.topk}, "
                 f"{self.num_draft_tokens} draft tokens")
        if self.temperature:
            return f"{shape}, sampled at temperature {self.temperature:g}"
        return shape

    def to_json(self) -> dict[str, Any]:
        return {"num_steps": self.num_steps, "topk": self.topk,
                "num_draft_tokens": self.num_draft_tokens, "temperature": self.temperature,
                "verification": "target-only rejection sampling" if self.temperature else "greedy",
                "source": self.source, "label": self.label()}


@dataclass
class VerifyStep:
    position: int          # committed tokens before the step (prompt included)
    drafted: list[int]     # target ids the draft proposed
    target: list[int]      # the target's token after each accepted draft, then the bonus: what
                           # it verified (after a rejected token it verifies nothing)
    accepted: int
    # per drafted position, the draft's top candidates as [target id, probability], best first
    # (a tree: the siblings it verified there, as [target id, cumulative score])
    candidates: list[list[list[float]]] = field(default_factory=list)
    # a tree step only: the verified tree, {"tokens", "parents", "scores"} (node 0 is the root)
    tree: dict[str, Any] | None = None

    @property
    def accept_length(self) -> int:
        return self.accepted + 1

    @property
    def bonus(self) -> int:
        return self.target[self.accepted]

    @property
    def accept_flags(self) -> list[bool]:
        """Per drafted token: kept (the accepted prefix) or rejected."""
        return [i < self.accepted for i in range(len(self.drafted))]

    def to_json(self) -> dict[str, Any]:
        out = {"position": self.position, "drafted": self.drafted, "target": self.target,
               "accepted": self.accepted, "accept_flags": self.accept_flags,
               "accept_length": self.accept_length, "candidates": self.candidates}
        if self.tree is not None:
            out["tree"] = self.tree
        return out


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
    drafting: Drafting | None = None     # None: a chain of num_steps
    threads: str = ""                    # torch's threads it ran on, and why

    def __post_init__(self):
        self.drafting = self.drafting or Drafting(self.num_steps)

    @property
    def steps(self) -> list[VerifyStep]:
        return [s for run in self.samples for s in run.steps]

    def per_prompt(self) -> tuple[list[int], list[int]]:
        """(accept lengths summed, verify steps) per prompt: the sampling unit of the errors."""
        return ([sum(s.accept_length for s in r.steps) for r in self.samples],
                [len(r.steps) for r in self.samples])

    def per_prompt_passed(self, position: int) -> list[int]:
        """Per prompt, the verify steps that accepted the drafted token at `position`."""
        return [sum(s.accepted > position for s in r.steps) for r in self.samples]

    def stats(self) -> dict[str, Any]:
        steps, k = self.steps, self.num_steps
        n = len(steps)
        accepted = [s.accepted for s in steps]
        reached = [sum(a >= i for a in accepted) for i in range(k)]
        passed = [sum(a > i for a in accepted) for i in range(k)]
        lengths, counts = self.per_prompt()
        return {
            "wiring": self.wiring, "num_steps": k, "drafting": self.drafting.to_json(),
            "n_samples": len(self.samples),
            "n_verify_steps": n, "n_tokens": sum(len(r.generated) for r in self.samples),
            # tokens per verify step, bonus included, and 1 + accepted / drafts: identical per
            # step here; engines differ only in what they average over
            "mean_accept_length": (sum(accepted) + n) / n if n else None,
            "mean_accept_length_se": ratio_se(lengths, counts),
            "mean_acceptance_length": 1 + sum(accepted) / n if n else None,
            "per_position_acceptance": [p / n if n else None for p in passed],
            "per_position_acceptance_se": [ratio_se(self.per_prompt_passed(i), counts)
                                           for i in range(k)],
            "conditional_acceptance": [p / r if r else None for p, r in zip(passed, reached)],
            "accept_length_histogram": {str(i + 1): accepted.count(i) for i in range(k + 1)},
            "standard_errors": "by prompt (delta method for a ratio of sums over prompts)",
            "engine_figure_names": figure_names(),
            **({"threads": self.threads} if self.threads else {}),
        }

    def to_json(self, with_steps: bool = False) -> dict[str, Any]:
        out = self.stats()
        if with_steps:
            out["samples"] = [{"prompt": r.prompt, "first_token": r.first_token,
                               "steps": [s.to_json() for s in r.steps]} for r in self.samples]
        return out


def tree_step(tree: DraftTree, row: int, path: list[int], verify: list[int], bonus: int,
              position: int) -> VerifyStep:
    """One row's verify step: the shown path (accepted nodes, then the draft's favourite
    continuation), the target's tokens where it verified (the committed ones along the accepted
    path, then the bonus), the siblings tried at each shown position, and the whole tree."""
    shown = shown_path(tree, row, path)
    target = [verify[n] for n in path] + [bonus]
    scores = [round(s, 4) for s in tree.scores[row].tolist()]
    parents = tree.parents[row]
    siblings = [sorted(([verify[c], scores[c - 1]] for c in tree.children(row, parents[n])),
                       key=lambda pair: -pair[1])[:TOP_CANDIDATES] for n in shown]
    return VerifyStep(position, [verify[n] for n in shown], target, len(path), siblings,
                      {"tokens": verify, "parents": parents, "scores": scores})


def left_pad(rows: list[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """[B, T] ids left-padded with 0, and [B, T] long mask (1 = a real token)."""
    width = max(len(r) for r in rows)
    ids = torch.zeros(len(rows), width, dtype=torch.long)
    mask = torch.zeros(len(rows), width, dtype=torch.long)
    for b, r in enumerate(rows):
        ids[b, width - len(r):], mask[b, width - len(r):] = r, 1
    return ids, mask
