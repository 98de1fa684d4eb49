"""What a load plan holds: each checkpoint key's fate, the parameters the engine builds, its aux
capture and the verdict (engines.planner builds them)."""

from __future__ import annotations

from dataclasses import dataclass, field

from eagle3_nb.engines.profile import EngineProfile
from eagle3_nb.findings import ERROR, STARTUP_FAILURES, Finding

LOADED, RENAMED, DROPPED, SKIPPED, ERRORED = "loaded", "renamed", "dropped", "skipped", "error"


@dataclass
class ParamSpec:
    kind: str                                   # linear | norm | embedding | lm_head | vocab_map
    shards: dict = field(default_factory=dict)  # shard id (None when unsharded) -> shape


@dataclass
class KeyFate:
    name: str
    fate: str
    param: str | None
    reason: str = ""

    def to_json(self) -> dict:
        return {"name": self.name, "fate": self.fate, "param": self.param, "reason": self.reason}


@dataclass
class AuxPlan:
    configured: list[int] | None   # ids as the engine reads them from the config
    source: str                    # "eagle_config" | "top_level" | "default"
    rule: str
    captured: list[int] | None     # hidden_states indices the target captures (None: need L)
    use_aux: bool
    trained: list[int] | None      # hidden_states indices the trainer meant
    trained_source: str
    width: int | None              # width of the hidden state reaching the draft
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        return {"ids": self.captured, "configured": self.configured, "source": self.source,
                "rule": self.rule, "use_aux_hidden_state": self.use_aux,
                "trained": self.trained, "trained_source": self.trained_source,
                "width": self.width, "notes": self.notes}


@dataclass
class LoadPlan:
    profile: EngineProfile
    keys: list[KeyFate]
    unloaded: list[str]
    aux: AuxPlan
    fc_width_engine: int
    fc_width_checkpoint: int | None
    flags: dict[str, bool]          # effective norm flags in this engine
    findings: list[Finding]
    params: dict[str, ParamSpec] = field(default_factory=dict)  # the engine's draft parameters

    @property
    def verdict(self) -> str:
        return self.verdict_with(())

    def verdict_with(self, extra) -> str:
        """The verdict with the findings beyond the plan that hold for this release (the
        draft's own, and those a launch command, a log or the target weights tagged with it)."""
        found = [*self.findings, *extra]
        if any(f.code in STARTUP_FAILURES for f in found):
            return "load_error"
        return "silent_failure" if any(f.severity == ERROR for f in found) else "ok"

    def to_json(self, extra=()) -> dict:
        verdict = self.verdict_with(extra)
        return {"engine": self.profile.name, "version": self.profile.version,
                "profile": self.profile.key, "covers": self.profile.range_text(),
                "keys": [k.to_json() for k in self.keys], "unloaded_params": self.unloaded,
                "aux_layers": self.aux.to_json(),
                "fc_input_width": {"engine": self.fc_width_engine,
                                   "checkpoint": self.fc_width_checkpoint},
                "norm_flags": self.flags, "verdict": verdict}
