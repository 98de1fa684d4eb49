"""A plan's known-bugs step: the release's recorded bugs (engines/bugs.py) whose condition this
draft meets, what each does to the plan, and the way out."""

from __future__ import annotations

from eagle3_nb.config import TargetInfo
from eagle3_nb.engines.bugs import affects, bugs_in
from eagle3_nb.engines.load_plan import AuxPlan
from eagle3_nb.engines.plan_state import PlanState
from eagle3_nb.findings import ERROR, INFO, WARNING


def _multimodal(target: TargetInfo | None) -> bool:
    archs = " ".join(target.architectures) if target else ""
    return "VL" in archs or "ConditionalGeneration" in archs


# When a known bug (engines/bugs.py) touches this draft: (context) -> bool
BUG_CONDITIONS = {
    "always": lambda c: True,
    "pruned_vocab": lambda c: c.cfg.pruned_vocab,
    "mla_fc_norm": lambda c: bool(c.cfg.mla) and c.flags.get("fc_norm", False),
    "aux_ids_only_in_eagle_config": lambda c: bool(c.cfg.aux_layer_ids_nested)
    and not c.cfg.aux_layer_ids_top,
    "use_aux_false": lambda c: not c.cfg.use_aux_hidden_state.value,
    "target_hidden_differs": lambda c: c.cfg.Ht != c.cfg.H,
    "draft_vocab_not_64": lambda c: c.cfg.Vd % 64 != 0,
    "aux_count_not_3": lambda c: c.num_aux() != 3,
    "multimodal_target": lambda c: _multimodal(c.target),
    "target_minimax_m2": lambda c: c.target is not None
    and any("MiniMaxM2" in a for a in c.target.architectures),
    "no_d2t": lambda c: not c.key_map.has("d2t"),
    "target_llama4": lambda c: c.target is not None
    and c.target.model_type.lower() in ("llama4", "llama4_text"),
    "target_fp8": lambda c: c.target is not None and "fp8" in (c.target.quantization or "").lower(),
    "target_mistral": lambda c: c.target is not None
    and c.target.model_type.lower().startswith("mistral"),
}

# What a bug's condition needs beyond the draft (KnownBug.needs): said, not asserted, until given
NEEDS = {"launch_method_unset": "only if the serving command names no method (not given: pass "
                                "--launch to check): "}
# What a known bug does to the plan, where the bug applies its effect (KnownBug.effect)
BUG_EFFECTS = ("nested_aux_ids_ignored",)  # aux ids are not read from eagle_config


class KnownBugs(PlanState):
    """BUG_CONDITIONS read this state (`c`): the draft, its flags, the target."""

    def active_bugs(self) -> list:
        """The known bugs of this release whose condition this draft meets."""
        return [b for b in bugs_in(self.p) if affects(b, self.p.version)
                and BUG_CONDITIONS[b.condition](self)]

    def bug_effect(self, effect: str) -> bool:
        return any(b.effect == effect and b.applies_effect(self.p.version)
                   for b in self.active_bugs())

    def report_known_bugs(self, aux: AuxPlan) -> None:
        p = self.p
        for bug in self.active_bugs():
            fix = f"fixed in {p.name} {bug.fixed}" if bug.fixed else "not fixed in any surveyed release"
            way_out = bug.way_out(p.version)
            severity = bug.severity
            if bug.applies_effect(p.version):
                # the plan already says what the engine does; the bug says why, and how out
                harmful = aux.trained is not None and aux.captured is not None and \
                    aux.trained != aux.captured
                severity = ERROR if harmful else WARNING
            line = self.effect_fix(bug, aux)
            condition = NEEDS.get(bug.needs, "")
            if condition:
                severity = INFO
            self.add("ENGINE_BUG", severity, f"{bug.id} ({p.name} {bug.first} up to "
                     f"{bug.fixed or 'now'}): {condition}{bug.symptom}"
                     + (f"; way out in {p.name} {p.version}: {way_out}" if way_out else "")
                     + (f"; for this draft: {line}" if line else "") + f"; {fix}", bug=bug.id,
                     fixed_in=bug.fixed, cite=bug.cite, applied_to_plan=bug.applies_effect(
                         p.version), way_out=way_out or None, config_line=line or None,
                     needs=bug.needs or None)

    def effect_fix(self, bug, aux: AuxPlan) -> str:
        """The config line that undoes a bug's effect for this draft, "" when none is known."""
        if bug.effect != "nested_aux_ids_ignored" or not aux.trained:
            return ""
        return f'"eagle_aux_hidden_state_layer_ids": {aux.trained}'
