"""One generic planner: what a given engine profile does with a given draft checkpoint.

Input: DraftConfig, the checkpoint's tensor names and shapes (and their KeyMap, when the caller
keeps one: a Checkpoint's key_map), optional target info, a profile.
Output: a LoadPlan (each key's fate, unloaded parameters, aux capture, fc width) and the
findings that hold for that engine. No engine-specific branches live here: every difference
between engines is a field of EngineProfile.

`plan_load` runs the engine's startup sequence in order; each step is a module of its own:
plan_startup (the draft class, config flags, context), draft_params (the parameters it
allocates), plan_weights (each key's fate), plan_aux (the layers captured, the fc width) and
plan_bugs (the release's known bugs). The plan's types are in load_plan, the aux-id readings in
aux_ids.
"""

from __future__ import annotations

from dataclasses import replace

from eagle3_nb.config import NORM_FLAGS, DraftConfig, TargetInfo
from eagle3_nb.engines.aux_ids import flat_aux_ids, trained_aux_indices
from eagle3_nb.engines.draft_params import engine_params
from eagle3_nb.engines.load_plan import LoadPlan
from eagle3_nb.engines.plan_aux import AuxCapture
from eagle3_nb.engines.plan_bugs import BUG_CONDITIONS, BUG_EFFECTS, NEEDS
from eagle3_nb.engines.plan_startup import StartupChecks
from eagle3_nb.engines.plan_weights import WeightFates
from eagle3_nb.engines.profile import EngineProfile
from eagle3_nb.layouts import KeyMap

__all__ = ["BUG_CONDITIONS", "BUG_EFFECTS", "NEEDS", "LoadPlan", "draft_class_profile",
           "flat_aux_ids", "plan_load", "trained_aux_indices"]


class _Ctx(StartupChecks, WeightFates, AuxCapture):
    """Working state of one plan, with every step's methods."""


def plan_load(profile: EngineProfile, cfg: DraftConfig, shapes: dict[str, tuple[int, ...]],
              target: TargetInfo | None = None, *, key_map: KeyMap | None = None,
              served_path: str = "") -> LoadPlan:
    """KEY_MAP: the map of the shapes' names (a Checkpoint's key_map); built here when not
    given. SERVED_PATH: the draft's path as the serving command names it, when one does (what
    the engine's guesses from a path see); else the path the config was read from."""
    if key_map is None:
        key_map = KeyMap.of(shapes)
    elif not key_map.covers(shapes):
        raise ValueError("plan_load: the key map is not the map of these shapes' names")
    profile = draft_class_profile(profile, cfg)
    ctx = _Ctx(profile, cfg, shapes, target, key_map, served_path)
    ctx.report_unverified()
    ctx.check_startup()
    ctx.flags = {name: _effective_flag(profile, cfg, name) for name in NORM_FLAGS}
    ctx.params = engine_params(profile, cfg, ctx.num_aux(), ctx.flags)
    keys = [ctx.key_fate(name) for name in shapes]
    ctx.report_keys(keys)
    unloaded = ctx.report_unloaded(keys)
    ctx.report_overwritten_copies()
    aux = ctx.aux_plan()
    fc_ckpt = _fc_width(shapes, key_map)
    ctx.report_fc(aux, fc_ckpt)
    ctx.report_flags()
    ctx.report_context()
    ctx.report_known_bugs(aux)
    return LoadPlan(profile, keys, unloaded, aux, ctx.num_aux() * cfg.Ht, fc_ckpt, ctx.flags,
                    ctx.findings, ctx.params)


# What a draft class decides (its module and loader); everything else (the target runner, the
# proposer's embedding and head sharing, the release's bugs) stays with the release's profile.
DRAFT_CLASS_FIELDS = (
    "architectures", "architecture_errors", "draft_attention", "decoder_param", "max_layers",
    "too_many_layers_error", "renames", "key_resolution", "unknown_keys", "unknown_error",
    "ignored_unknown_suffixes", "stacked", "required_fields", "fc_aux_count",
    "fc_aux_top_level_layer_types", "has_input_norm", "has_fc_norm", "has_q_k_norm",
    "extra_layer_attn_norm", "extra_layers_have_hidden_norm", "flags", "drop_when_off",
    "missing_draft_vocab_error", "target_hidden_null_breaks_fc", "d2t_param",
    "d2t_param_needs_pruned_vocab", "fc_skip_when_width_is_hidden", "single_layer_param",
    "regex_renames", "extra_layers_have_input_norm", "unused_unless", "qkv_bias", "o_proj_bias",
    "mlp_bias_params", "ties_lm_head")


def draft_class_profile(profile: EngineProfile, cfg: DraftConfig) -> EngineProfile:
    """The profile of the draft class the engine builds for this config: its MLA class when
    architectures[0] names it (or, for an MLA class taking any architecture, "*", when the
    config gives MLA sizes: kv_lora_rank), else the profile itself (the Llama-style class)."""
    arch = cfg.architectures[0] if cfg.architectures else ""
    mla = profile.mla
    if mla is None or not (arch in mla.architectures
                           or ("*" in mla.architectures and cfg.mla_requested)):
        return profile
    return replace(profile, mla=None, cites={**profile.cites, **mla.cites},
                   **{name: getattr(mla, name) for name in DRAFT_CLASS_FIELDS})


def _fc_width(shapes: dict[str, tuple[int, ...]], key_map: KeyMap) -> int | None:
    for name, shape in shapes.items():
        if key_map.canonical(name) == "fc.weight" and len(shape) == 2:
            return shape[1]
    return None


def _effective_flag(profile: EngineProfile, cfg: DraftConfig, name: str) -> bool:
    rule, given = profile.flags[name], cfg.flag(name)
    if not rule.read or cfg.dialect in rule.ignored_in:
        return False
    if given.present and given.source in rule.sources:
        return bool(given.value)
    return rule.default[cfg.dialect]
