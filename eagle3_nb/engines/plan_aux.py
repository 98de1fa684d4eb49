"""A plan's aux step: which target layers the engine captures for the draft (its capture table
and the profile's id rules), against what training used, and the width reaching fc."""

from __future__ import annotations

from eagle3_nb.config import TargetInfo
from eagle3_nb.engines.aux_ids import default_aux_ids, trained_aux_indices
from eagle3_nb.engines.capture import CAPTURE, capture_fact, surveyed_release
from eagle3_nb.engines.load_plan import AuxPlan
from eagle3_nb.engines.plan_bugs import KnownBugs
from eagle3_nb.engines.profile import (AS_IS, AS_IS_IF_MAX_IS_L, AUX_RULES, NO_CAPTURE, PLUS_ONE,
                                       PLUS_ONE_IF_FIRST_IS_1, release_key)
from eagle3_nb.findings import ERROR, INFO, WARNING

# Capture-table rules that leave the numbering to the profile: "fixed_default" (the hook ignores
# the ids; those releases read none, aux_id_sources is empty) and "of_language_model" (a wrapper
# that hands the ids to its language model, which numbers them as the family does).
DEFERRED_RULES = ("fixed_default", "of_language_model")


class AuxCapture(KnownBugs):
    """Reads the bugs whose effect changes what is captured (KnownBugs.bug_effect)."""

    def aux_plan(self) -> AuxPlan:
        p, cfg, target = self.p, self.cfg, self.target
        L = target.num_hidden_layers if target else None
        family = target.family if target else "llama"
        configured, source = None, "default"
        sources = p.aux_id_sources
        if self.bug_effect("nested_aux_ids_ignored"):
            sources = tuple(s for s in sources if s != "eagle_config")
        for src in sources:
            ids = cfg.aux_layer_ids_nested if src == "eagle_config" else cfg.aux_layer_ids_top
            if ids:
                configured, source = list(ids), src
                break
        rule = self._capture_rule(family)
        use_aux = bool(cfg.use_aux_hidden_state.value) if p.reads_use_aux_hidden_state else True
        trained, trained_src = trained_aux_indices(cfg, L)
        plan = AuxPlan(configured, source, rule, None, use_aux, trained, trained_src, None)
        if rule == NO_CAPTURE:
            return plan
        if not cfg.use_aux_hidden_state.value and not p.reads_use_aux_hidden_state:
            self.add("AUX_LAYER_CONVENTION", ERROR, "the config says use_aux_hidden_state: false "
                     "(trained on the target's final-norm state) but this engine never reads the "
                     "flag: it captures aux layers and feeds them through fc",
                     cite=p.cites.get("use_aux", ""))
        if not use_aux:
            plan.width = cfg.Ht
            plan.notes.append("use_aux_hidden_state is false: the draft gets the target's "
                              "final-norm hidden state, as it was trained (fc unused)")
            return plan
        if configured is None and L and 1 < L < p.default_ids_min_layers:
            self.add("LOAD_ERROR", ERROR, f"the target has {L} layers and no aux ids are given: "
                     f"{p.default_ids_error}", num_hidden_layers=L,
                     cite=p.cites.get("aux_ids", ""))
        plan.captured = self._captured(configured, rule, L, family, plan)
        n = len(plan.captured) if plan.captured is not None else (
            len(set(configured)) if configured else 3)
        plan.width = n * cfg.Ht
        self._report_aux(plan, L)
        return plan

    def _capture_rule(self, family: str) -> str:
        """The layer-id rule of the served target class, from the per-release capture table
        (engines/capture.py); the profile's family rule only where the table cannot answer, and
        then never silently. NO_CAPTURE after reporting why the engine cannot start."""
        p, target = self.p, self.target
        fallback = p.aux_rules.get(family)
        self.final_boundary = p.last_layer_capturable or family in p.final_boundary_families
        if target is None:
            return fallback or PLUS_ONE
        if not self._target_allowed(target):
            return NO_CAPTURE
        arch = target.architectures[0] if target.architectures else ""
        fact = capture_fact(p.name, p.version, arch) if arch else None
        if fact is None:
            return self._capture_unchecked(arch, family, fallback)
        where = f"{p.name} {p.version}"
        if fact.status != CAPTURE:
            # no_capture: no hook, or one that never runs (vLLM's Qwen3.5 wrappers 0.17.0-0.19.0
            # inherit one whose ids their forward never reads, then one that asserts): either
            # way startup fails, as read in the wheels' runners
            what = ("has no working EAGLE-3 capture hook" if fact.status == "no_capture" else
                    "is not a model class it serves")
            upgrade = (f"; the class captures from {p.name} {fact.next_capture}"
                       if fact.next_capture else "")
            self.add("LOAD_ERROR", ERROR, f"the target class {arch} {what} in {where}: startup "
                     f"with an EAGLE-3 draft fails{upgrade}", architecture=arch,
                     status=fact.status, surveyed_release=fact.release,
                     fixed_in=fact.next_capture, cite=fact.hook or fact.change)
            return NO_CAPTURE
        if fact.final_boundary is not None:
            self.final_boundary = fact.final_boundary
        if fact.rule in AUX_RULES:
            return fact.rule
        if fact.rule in DEFERRED_RULES:
            return fallback or PLUS_ONE
        self.add("TARGET_CAPTURE_UNCHECKED", WARNING, f"the capture hook of {arch} in {where} "
                 f"({fact.hook}) has a layer-id rule the kit cannot classify: assumed the "
                 f"{family} rule {fallback or PLUS_ONE}", architecture=arch, hook=fact.hook)
        return fallback or PLUS_ONE

    def _target_allowed(self, target: TargetInfo) -> bool:
        """The release's gate on the target's model_type (vLLM before 0.22), if it has one."""
        steps = [s for s in self.p.target_allowlist
                 if release_key(s[0]) <= release_key(self.p.version)]
        if not steps:
            return True
        allowed = max(steps, key=lambda s: release_key(s[0]))[1]
        if any(a in target.model_type for a in allowed):
            return True
        self.add("LOAD_ERROR", ERROR, self.p.target_allowlist_error.format(
            allowed="/".join(allowed), model_type=target.model_type),
            model_type=target.model_type, cite=self.p.cites.get("target_allowlist", ""))
        return False

    def _capture_unchecked(self, arch: str, family: str, fallback: str | None) -> str:
        p = self.p
        if not arch:
            why = "the target config names no architectures"
        elif surveyed_release(p.name, p.version) is None:
            why = f"no capture survey reaches {p.name} {p.version}"
        else:
            self.add("LOAD_ERROR", ERROR, f"the target class {arch} captures aux hidden states "
                     f"in no surveyed {p.name} release (docs/target-capture.md): startup with an "
                     "EAGLE-3 draft fails, or the architecture name is not one the engine serves",
                     architecture=arch)
            return NO_CAPTURE
        if fallback == NO_CAPTURE:
            self.add("LOAD_ERROR", ERROR, f"{why}, but no {family} target class captures aux "
                     f"hidden states in {p.name} {p.version} (no set_eagle3_layers_to_capture)",
                     family=family, cite=p.cites.get("targets", ""))
            return NO_CAPTURE
        self.add("TARGET_CAPTURE_UNCHECKED", WARNING, f"{why}: whether the target class "
                 f"captures aux hidden states is not checked; assumed the {family} rule "
                 f"{fallback or PLUS_ONE}", architecture=arch or None, family=family)
        return fallback or PLUS_ONE

    def _captured(self, configured, rule, L, family, plan) -> list[int] | None:
        if configured is None:
            return default_aux_ids(L) if L else None
        if rule == AS_IS_IF_MAX_IS_L and L is None:
            plan.notes.append("gpt-oss rule needs L: assumed +1")
        offset = {PLUS_ONE: 1, AS_IS: 0,
                  PLUS_ONE_IF_FIRST_IS_1: 1 if configured[0] == 1 else 0,
                  AS_IS_IF_MAX_IS_L: 0 if L and max(configured) == L else 1}[rule]
        ids = [i + offset for i in configured]
        if self.p.aux_sorted.get(family, True):
            ids = sorted(set(ids))
        if L is None:
            return ids
        top = L if self.final_boundary else L - 1
        kept = [i for i in ids if 0 <= i <= top]
        if len(kept) != len(ids):
            plan.notes.append(f"ids {sorted(set(ids) - set(kept))} are outside what a {L}-layer "
                              "target can capture: those states are never produced")
        return kept

    def _report_aux(self, plan: AuxPlan, L: int | None) -> None:
        cfg, p = self.cfg, self.p
        if plan.source == "default":
            declared = cfg.aux_layer_ids
            if declared.present:
                differs = plan.trained is not None and plan.captured is not None and \
                    plan.trained != plan.captured
                sev = ERROR if differs else (INFO if plan.captured is not None else WARNING)
                read = [s for s in p.aux_id_sources if s != "eagle_config"
                        or not self.bug_effect("nested_aux_ids_ignored")]
                where = "only from " + "/".join(read) if read else "from no config at all"
                line = self._launch_ids_line(plan.trained) if differs else ""
                self.add("AUX_LAYERS_DEFAULTED", sev, f"the engine reads aux ids "
                         f"{where}, but this config declares them at {declared.source}: the target "
                         f"captures the defaults [2, L//2, L-3]"
                         + (f" = {plan.captured}, training used {plan.trained}" if differs else "")
                         + (f"; write in the launch config: {line}" if line else ""),
                         declared=declared.value, declared_at=declared.source,
                         captured=plan.captured, cite=p.cites.get("aux_ids", ""),
                         config_line=line or None)
            elif cfg.aux_ids_unread.present:
                written = cfg.aux_ids_unread
                self.add("AUX_LAYERS_DEFAULTED", WARNING, f"eagle_aux_hidden_state_layer_ids at "
                         f"{written.source} is {str(written.value)[:40]!r}, not a list of "
                         "integers: the engine does not read it as layer ids and the target "
                         "captures its defaults [2, L//2, L-3]"
                         + (f" = {plan.captured}" if plan.captured else "")
                         + "; write the ids training used as a JSON list", declared=written.value,
                         declared_at=written.source, captured=plan.captured,
                         cite=p.cites.get("aux_ids", ""))
            else:
                self.add("AUX_LAYERS_DEFAULTED", WARNING, "no aux layer ids declared: the engine "
                         "captures its defaults [2, L//2, L-3]; right only if training used the "
                         "same layers (vllm PR #50170: 1.2% acceptance when it did not)",
                         captured=plan.captured)
        elif plan.trained is not None and plan.captured is not None and plan.trained != plan.captured:
            self.add("AUX_LAYER_CONVENTION", ERROR, f"the engine captures hidden_states "
                     f"{plan.captured} ({plan.rule} on {plan.source} ids {plan.configured}) but "
                     f"training used {plan.trained} ({plan.trained_source})",
                     captured=plan.captured, trained=plan.trained, rule=plan.rule,
                     cite=p.cites.get("plus_one" if plan.rule == PLUS_ONE else "aux_ids", ""))
        if p.graphs_use_default_ids and plan.source != "default" and L and \
                plan.captured != default_aux_ids(L):
            self.add("AUX_LAYER_CONVENTION", WARNING, f"the engine with CUDA graphs (the default) "
                     f"replays decode/verify with the default layers {default_aux_ids(L)}, not "
                     f"{plan.captured}; only eager prefill uses the config ids "
                     "(--disable-cuda-graph, or SGLang >= the fix in PR #22836)",
                     cite=p.cites.get("graphs", ""))

    def _launch_ids_line(self, indices: list[int] | None) -> str:
        """The launch-config line that makes the engine capture these hidden_states indices."""
        if not self.p.aux_ids_launch_line or not indices:
            return ""
        ids = sorted(i + self.p.aux_ids_launch_offset for i in indices)
        return self.p.aux_ids_launch_line.format(ids=ids)

    # --- fc width ----------------------------------------------------------------------------
    def report_fc(self, aux: AuxPlan, fc_ckpt: int | None) -> None:
        cfg, p = self.cfg, self.p
        engine_in = self.num_aux() * cfg.Ht
        if fc_ckpt is not None and fc_ckpt != engine_in:
            self.add("AUX_COUNT_MISMATCH", ERROR, f"the engine builds fc for {self.num_aux()} aux "
                     f"states ({engine_in} inputs) but the checkpoint's fc takes {fc_ckpt} "
                     f"({fc_ckpt / cfg.Ht:g} x {cfg.Ht}); "
                     + (f"give {fc_ckpt // cfg.Ht:g} ids in the launch config "
                        f"({p.aux_ids_launch_line.split(':')[0]})" if p.aux_ids_launch_line
                        else "set num_aux_hidden_states or "
                        "eagle_config.eagle_aux_hidden_state_layer_ids"), engine=engine_in,
                     checkpoint=fc_ckpt, cite=p.cites.get("fc_width", ""))
        if aux.width is None or aux.width == engine_in or not aux.use_aux:
            return
        if p.fc_skip_when_width_is_hidden and aux.width == cfg.H:
            self.add("FC_SKIPPED", ERROR, f"the engine feeds the draft a {aux.width}-wide hidden state "
                     f"(draft hidden_size {cfg.H}): fc is skipped silently and the draft sees an "
                     "untransformed state (accept len ~1.00)", width=aux.width,
                     cite=p.cites.get("fc_skip", ""))
        else:
            self.add("LOAD_ERROR", ERROR, f"the engine feeds fc a {aux.width}-wide hidden state but "
                     f"fc takes {engine_in}: shape error at the first request", width=aux.width,
                     fc_in=engine_in)
