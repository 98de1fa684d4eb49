"""The working state of one load plan, which the plan's steps (plan_startup, plan_weights,
plan_aux, plan_bugs) share: the profile, the draft's config, shapes and key map, the target,
and the findings so far."""

from __future__ import annotations

from eagle3_nb.config import DraftConfig, TargetInfo
from eagle3_nb.engines.load_plan import ParamSpec
from eagle3_nb.engines.profile import EngineProfile
from eagle3_nb.findings import Finding
from eagle3_nb.layouts import KeyMap


class PlanState:
    """Working state of one plan; the steps' methods read like the engine's own startup sequence."""

    def __init__(self, profile, cfg, shapes, target, key_map: KeyMap, served_path: str = ""):
        self.p: EngineProfile = profile
        self.cfg: DraftConfig = cfg
        # the draft's path as the engine is given it (the serving command's), when known
        self.served_path = served_path
        self.shapes = shapes
        self.key_map = key_map    # the shapes' names, each split once
        self.target: TargetInfo | None = target
        self.findings: list[Finding] = []
        self.flags: dict[str, bool] = {}
        self.params: dict[str, ParamSpec] = {}
        self.filled: dict[str, set] = {}
        self.final_boundary: bool = profile.last_layer_capturable

    def add(self, code, severity, message, **evidence):
        self.findings.append(Finding(code, severity, message, evidence, self.p.key))

    def passed(self, key: str) -> bool:
        """Whether a top-level config key reaches the draft class (a speculators converter
        passes on only some: EngineProfile.speculators_keys_passed)."""
        kept = self.p.speculators_keys_passed
        return self.cfg.dialect != "speculators" or kept is None or key in kept

    def num_aux(self) -> int:
        """How many aux states the engine builds fc for (A of fc's A*Ht inputs)."""
        cfg = self.cfg
        if self.p.fc_aux_count == "fixed_3":
            return 3
        if self.p.fc_aux_count == "eagle_config_then_top_level_ids_then_3":
            ids = cfg.aux_layer_ids_nested or cfg.aux_layer_ids_top
            return len(ids) if ids else 3
        if cfg.num_aux_hidden_states.value and self.passed("num_aux_hidden_states"):
            return int(cfg.num_aux_hidden_states.value)
        if cfg.aux_layer_ids_nested:
            return len(cfg.aux_layer_ids_nested)
        if cfg.layer_model_type in self.p.fc_aux_top_level_layer_types and cfg.aux_layer_ids_top:
            return len(cfg.aux_layer_ids_top)
        return 3
