"""Findings: the kit's answers, each with a stable code a person and a script can rely on."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

ERROR, WARNING, INFO = "error", "warning", "info"
SEVERITY_ORDER = {ERROR: 0, WARNING: 1, INFO: 2}

# Stable codes. Never rename one; add new ones at the end of their group.
CODES: dict[str, str] = {
    # checkpoint keys and engine load plans
    "KEYS_DROPPED": "tensors the engine silently ignores",
    "PARAMS_UNLOADED": "engine parameters no checkpoint tensor fills",
    "LOAD_ERROR": "the engine refuses to start or to load the draft",
    "SHAPE_MISMATCH": "a tensor's shape differs from what the config promises",
    "AUX_LAYERS_DEFAULTED": "the engine falls back to its default aux layer ids",
    "AUX_LAYER_CONVENTION": "the engine captures other target layers than the trainer meant",
    "AUX_COUNT_MISMATCH": "fc width, aux id count and the engine's aux count disagree",
    "FC_SKIPPED": "the hidden state reaching the draft is H wide, so the engine skips fc",
    "NAN_WEIGHTS": "NaN/Inf or never-initialised tensors",
    "CONTEXT_TOO_SHORT": "draft max_position_embeddings below the target's context",
    "REMOTE_CODE": "the directory ships code; it was not executed",
    "NORM_FLAG_AMBIGUOUS": "a norm flag is absent and engines default it differently",
    "NORM_FLAG_IGNORED": "the checkpoint sets a norm flag the engine never reads",
    "EMBED_REPLACED": "the engine swaps in the target's embeddings",
    "LM_HEAD_FROM_TARGET": "the engine borrows the target's lm_head",
    "STATS_SKIPPED": "tensors not scanned for statistics (budget or --no-stats)",
    # vocabulary mapping (d2t / t2d)
    "D2T_MISSING": "pruned draft vocab without a d2t table",
    "D2T_ABSOLUTE": "d2t holds absolute target ids instead of offsets",
    "D2T_INVALID": "d2t is out of range, not injective, or the wrong dtype/length",
    "D2T_AMBIGUOUS": "d2t reads as offsets and as absolute ids; nothing decides",
    "T2D_MISMATCH": "t2d disagrees with d2t",
    "LOW_VOCAB_COVERAGE": "a corpus's target tokens fall outside the draft vocab",
    # simulated acceptance on a real target
    "ACCEPT_AT_FLOOR": "as trained, the draft accepts no more than with no target state at all",
    "ACCEPT_COLLAPSES": "served as the engine would, the simulated accept length collapses",
    "ACCEPT_MISMATCH": "the engine's reported acceptance differs from the as-trained simulation",
    # first-step accuracy on real target hidden states (notebook 03)
    "HIDDEN_COLLAPSES": "served as the engine would, the draft's first-step accuracy collapses "
                        "or the run crashes",
    "HIDDEN_LAYERS_DIFFER": "the engine captures other target layers than the draft was "
                            "trained on; the measured cost depends on how alike they are",
}


@dataclass
class Finding:
    code: str
    severity: str
    message: str
    evidence: dict[str, Any] = field(default_factory=dict)
    engine: str | None = None  # "NAME==VERSION" of the profile it applies to, None for all

    def __post_init__(self):
        if self.code not in CODES:
            raise ValueError(f"unknown finding code {self.code!r}")
        if self.severity not in SEVERITY_ORDER:
            raise ValueError(f"unknown severity {self.severity!r}")

    def to_json(self) -> dict[str, Any]:
        return {"code": self.code, "severity": self.severity, "message": self.message,
                "engine": self.engine, "evidence": self.evidence}


def sort_findings(findings: list[Finding]) -> list[Finding]:
    """Errors first, then warnings, then info; stable within a severity."""
    return sorted(findings, key=lambda f: SEVERITY_ORDER[f.severity])


# A served wiring that keeps at most this share of what the trained wiring achieves collapses:
# first-step accuracy (notebook 03), accepted tokens beyond the bonus (notebook 04).
COLLAPSE_FRACTION = 0.5


def collapses(value: float | None, trained: float | None) -> bool:
    """value at most COLLAPSE_FRACTION of trained (False when either is missing or trained is 0)."""
    return bool(trained) and value is not None and value <= COLLAPSE_FRACTION * trained


def has_errors(findings: list[Finding]) -> bool:
    return any(f.severity == ERROR for f in findings)
