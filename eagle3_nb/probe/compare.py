"""The profile's prediction (a LoadPlan) against what the installed engine did (an Observation).

Pure: no engine, no torch. Every difference becomes one ENGINE_DISAGREES finding; an empty list
means the profile and the installed build agree on everything the probe can see.

What is compared:
- each checkpoint key: filled / ignored / error (the plan's loaded+renamed read as filled,
  dropped+skipped as ignored) and, when filled, the engine parameter it lands in (a key the
  engine only fuses together with another counts as filled when the full load wrote it);
- the engine parameters the full load leaves (partly) unwritten, by parameter name (shards
  are folded into their parameter: "qkv_proj.weight[k]" is qkv_proj.weight);
- whether building the draft at all fails, against the plan's startup LOAD_ERRORs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from eagle3_nb.findings import ERROR, INFO, Finding

FILLED, IGNORED, ERRORED = "filled", "ignored", "error"
_PLAN_FATE = {"loaded": FILLED, "renamed": FILLED, "dropped": IGNORED, "skipped": IGNORED,
              "error": ERRORED}
# evidence keys of the planner's startup (build-time) LOAD_ERRORs
_STARTUP_EVIDENCE = ("dialect", "layer_model_type", "architecture", "num_hidden_layers",
                     "config_field", "field")
_STARTUP_WORDS = ("draft_vocab_size", "target_hidden_size is null", "predates EAGLE-3")


@dataclass
class Difference:
    what: str          # "key" | "unwritten" | "startup"
    name: str          # key or parameter
    predicted: str
    observed: str
    engine_line: str = ""  # the engine's own message, when it raised

    def to_json(self) -> dict[str, Any]:
        return {"what": self.what, "name": self.name, "predicted": self.predicted,
                "observed": self.observed, "engine_line": self.engine_line}

    def text(self) -> str:
        line = f"{self.what} {self.name}: profile says {self.predicted}; engine did {self.observed}"
        return line + (f" ({self.engine_line})" if self.engine_line else "")


def startup_errors(plan) -> list[str]:
    """Messages of the plan's LOAD_ERRORs that happen while building the draft."""
    out = []
    for f in plan.findings:
        if f.code != "LOAD_ERROR":
            continue
        if any(k in f.evidence for k in _STARTUP_EVIDENCE) or \
                any(w in f.message for w in _STARTUP_WORDS):
            out.append(f.message)
    return out


def predicted_unwritten(plan, engine_params: list[str] | None) -> set[str] | None:
    """Parameter names the plan says stay (partly) unwritten after the load, by design or not.

    plan.unloaded leaves out what the engine fills from the target (embeddings, lm_head, an
    identity vocab map, fc without aux states); those are unwritten by the checkpoint too, so
    the full set is every engine parameter the plan's keys do not fill completely. Needs the
    profile's parameter list (`engine_params`); None when it is not known."""
    if engine_params is None:
        return None
    filled = {k.param for k in plan.keys if _PLAN_FATE.get(k.fate) == FILLED and k.param}
    partly = {u.split("[")[0] for u in plan.unloaded}
    return (set(engine_params) - filled) | partly


def compare(plan, observation, engine_params: list[str] | None = None) -> list[Difference]:
    diffs: list[Difference] = []
    startup = startup_errors(plan)
    if observation.build_error:
        if not startup:
            diffs.append(Difference("startup", "build", "the draft builds",
                                    "raised while building the draft", observation.build_error))
        return diffs
    if startup:
        diffs.append(Difference("startup", "build", "fails at startup: " + startup[0][:160],
                                "built the draft without an error"))
    planned = {k.name: k for k in plan.keys}
    for obs in observation.keys:
        k = planned.get(obs.name)
        if k is None:
            diffs.append(Difference("key", obs.name, "(no plan for this key)", obs.fate))
            continue
        want = _PLAN_FATE[k.fate]
        if _written_together(want, obs, k, observation):
            continue
        if want != obs.fate:
            diffs.append(Difference("key", obs.name, _describe(want, k.param),
                                    _describe(obs.fate, _first(obs.params)), obs.error))
        elif want == FILLED and k.param not in obs.params:
            diffs.append(Difference("key", obs.name, _describe(want, k.param),
                                    _describe(obs.fate, ", ".join(obs.params))))
    if observation.raised:
        return diffs  # the engine stops at the first error: what stays unwritten is moot
    expected = predicted_unwritten(plan, engine_params)
    if expected is not None:
        seen = set(observation.unwritten)
        for name in sorted(seen - expected):
            said = ("written by the checkpoint" if name in engine_params
                    else "no such engine parameter")
            diffs.append(Difference("unwritten", name, said,
                                    f"never written ({observation.unwritten[name]:.0%} of it)"))
        for name in sorted(expected - seen):
            if name in observation.params:
                diffs.append(Difference("unwritten", name, "left unwritten", "written"))
            else:
                diffs.append(Difference("unwritten", name, "an engine parameter left unwritten",
                                        "no such parameter in the engine's model"))
    return diffs


def _written_together(want: str, obs, k, observation) -> bool:
    """A key the engine fuses with another one (SGLang's MLA draft concatenates q_a_proj and
    kv_a_proj_with_mqa inside one load_weights call) is ignored when loaded alone; it counts as
    filled when the full load wrote the parameter the plan maps it to."""
    return (want == FILLED and obs.fate == IGNORED and not observation.raised
            and k.param in observation.params and k.param not in observation.unwritten)


def _describe(fate: str, param: str | None) -> str:
    return f"{fate} -> {param}" if fate == FILLED and param else fate


def _first(params: dict[str, float]) -> str | None:
    return next(iter(params), None)


def findings(diffs: list[Difference], engine: str, profile_key: str) -> list[Finding]:
    """One ENGINE_DISAGREES finding per difference; an INFO line when there is none."""
    if not diffs:
        return [Finding("ENGINE_AGREES", INFO, f"the installed {engine} did what the "
                        f"{profile_key} profile predicts for every key and parameter",
                        {}, profile_key)]
    return [Finding("ENGINE_DISAGREES", ERROR, f"installed {engine} vs the {profile_key} "
                    f"profile: {d.text()}", d.to_json(), profile_key) for d in diffs]
