"""The named wirings of one draft: how hidden states reach it and how it is computed.

"As trained" and "as an engine serves it" differ in a handful of switches (model.Wiring), so the
same draft can be run both ways and the difference measured. The presets: `trained` (from the
draft's config), one per engine profile (from its load plan), and the classic failures.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from eagle3_nb.config import DraftConfig, TargetInfo
from eagle3_nb.engines import PROFILES
from eagle3_nb.engines.facts import CHECKS
from eagle3_nb.engines.planner import plan_load, trained_aux_indices
from eagle3_nb.engines.registry import engine as registered
from eagle3_nb.model import Wiring


def trained_wiring(cfg: DraftConfig, target: TargetInfo | None) -> Wiring:
    ids, why = trained_aux_indices(cfg, target.num_hidden_layers if target else None)
    return Wiring("trained", tuple(ids) if ids else None,
                  "concat" if cfg.use_aux_hidden_state.value else "final_norm",
                  norm_before_residual=bool(cfg.flag("norm_before_residual").value),
                  norm_output=bool(cfg.flag("norm_output").value), note=why)


@dataclass(frozen=True)
class Served:
    """What the serving command says about the draft (engines.launch.LaunchSettings): the
    path it names, and the aux layer ids it gives ENGINE (one that takes them from its launch
    config, never from the draft: LaunchSettings.aux_ids, in that engine's numbering)."""
    path: str = ""
    engine: str = ""
    aux_ids: tuple[int, ...] | None = None

    @classmethod
    def of(cls, settings) -> "Served":
        if settings is None:
            return cls()
        ids = settings.aux_ids
        return cls(settings.draft or "", settings.engine, None if ids is None else tuple(ids))


def engine_wiring(profile, cfg: DraftConfig, shapes: dict, target: TargetInfo | None,
                  served: Served = Served()) -> Wiring:
    """The draft as PROFILE's release serves it, from SERVED's path and ids where the serving
    command gives them."""
    plan = plan_load(profile, cfg, shapes, target, served_path=served.path)
    unloaded = [u.split("[")[0] for u in plan.unloaded]
    reset = tuple(n for u in plan.unloaded if u.split("[")[0] != profile.d2t_param
                  for n in kit_param_names(u))
    here = Path(cfg.where).parent
    error = next((f.message for f in plan.findings if f.code == "LOAD_ERROR"), "") or \
        registered(profile.name).path_misread(served.path or str(here), profile.version, here)
    from_launch = _launch_capture(profile, served, target)
    captured = from_launch if from_launch is not None else \
        (tuple(plan.aux.captured) if plan.aux.captured is not None else None)
    return Wiring(profile.key, captured,
                  "concat" if plan.aux.use_aux else "final_norm",
                  "engine" if profile.fc_skip_when_width_is_hidden else "always",
                  "none" if profile.d2t_param in unloaded else profile.d2t_reading,
                  plan.flags["norm_before_residual"], plan.flags["norm_output"],
                  profile.extra_layer_attn_norm, reset, error,
                  note=f"as {profile.key} serves it ({plan.verdict}"
                       + (f"; {len(reset)} parameter(s) left at init" if reset else "")
                       + ("; aux layers from the launch config" if from_launch else "") + ")",
                  engine=profile.key)


def _launch_capture(profile, served: Served, target: TargetInfo | None) -> tuple[int, ...] | None:
    """The hidden_states indices the serving command makes PROFILE's engine capture, or None
    when it names none for that engine (the plan's then). An id of -1 is the final post-norm
    state, hidden_states[L]: without the target's L those ids cannot be placed (None)."""
    if served.aux_ids is None or served.engine != profile.name:
        return None
    if -1 in served.aux_ids and target is None:
        return None
    last = target.num_hidden_layers if target else 0
    return tuple(last if i == -1 else i - profile.aux_ids_launch_offset for i in served.aux_ids)


_FUSED_SHARDS = {"qkv_proj": {"q": "q_proj", "k": "k_proj", "v": "v_proj"},
                 "gate_up_proj": {"0": "gate_proj", "1": "up_proj"}}


def kit_param_names(engine_label: str) -> list[str]:
    """An engine parameter label from the load plan ("model.midlayer.self_attn.qkv_proj.weight[q,k]",
    "model.layers.1.hidden_norm.weight") -> the draft model's own parameter names."""
    name, _, shards = engine_label.partition("[")
    name = name.removeprefix("model.")
    if name.startswith("midlayer."):
        name = "layers.0." + name[len("midlayer."):]
    for fused, parts in _FUSED_SHARDS.items():
        if f".{fused}." in name:
            wanted = shards.rstrip("]").split(",") if shards else list(parts)
            return [name.replace(fused, parts[s]) for s in wanted if s in parts]
    return [name]


def wiring_presets(cfg: DraftConfig, shapes: dict, target: TargetInfo | None,
                   profiles=PROFILES, planned: dict[str, Wiring] | None = None,
                   served: Served = Served()) -> dict[str, Wiring]:
    """Every named wiring for this draft: trained, each engine, and the classic failures.
    PLANNED: engine wirings already planned for this draft, target and SERVED (what the serving
    command says), by profile key (filled here: each engine range is planned once however many
    checks ask)."""
    trained = trained_wiring(cfg, target)
    presets = {"trained": trained}
    planned = {} if planned is None else planned
    for p in profiles:
        if p.key not in planned:
            planned[p.key] = engine_wiring(p, cfg, shapes, target, served)
        presets[p.key] = planned[p.key]
    presets["single_layer"] = replace(trained, name="single_layer", hidden_source="final_norm",
                                      fc_rule="engine", note=CHECKS["single_layer"])
    deepest = target.num_hidden_layers if target else None  # hidden_states[L]: the last one
    if trained.layer_ids and (deepest is None or max(trained.layer_ids) < deepest):
        presets["layers_plus_one"] = replace(
            trained, name="layers_plus_one", layer_ids=tuple(i + 1 for i in trained.layer_ids),
            note="every captured layer one deeper than trained (the +1 convention applied twice)")
    presets["d2t_absolute"] = replace(trained, name="d2t_absolute", d2t_mode="absolute",
                                      note="d2t read as absolute ids")
    presets["d2t_none"] = replace(trained, name="d2t_none", d2t_mode="none",
                                  note="no d2t: draft id i used as target id i")
    presets["embeddings_only"] = replace(
        trained, name="embeddings_only", hidden_source="zeros",
        note="no target state (zeros): what the draft's token path alone achieves, the floor "
             "under every wiring whose features are useless")
    presets["norm_before_residual_flipped"] = replace(
        trained, name="norm_before_residual_flipped",
        norm_before_residual=not trained.norm_before_residual,
        note="norm_before_residual opposite to training")
    return presets
