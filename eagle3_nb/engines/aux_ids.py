"""The trainer's reading of a draft config's aux layer ids, and the ids a flat config must carry
to keep the same layers: hidden_states indices (docs/domain.md "What the trainer meant")."""

from __future__ import annotations

from eagle3_nb.config import DraftConfig, aux_id_faults
from eagle3_nb.errors import ConversionError


def trained_aux_indices(cfg: DraftConfig, num_layers: int | None) -> tuple[list[int] | None, str]:
    """hidden_states indices the trainer captured (docs/domain.md 'What the trainer meant')."""
    declared = cfg.aux_layer_ids
    if declared.value is None:
        if num_layers is None:
            return None, "default [2, L//2, L-3] (pass the target config to resolve L)"
        return default_aux_ids(num_layers), "default [2, L//2, L-3]: no ids declared"
    ids = declared.value
    faults = aux_id_faults(ids)
    if faults:  # no convention reads these: what training captured is not known
        return None, f"{declared.source} ids {ids} are not layer ids ({faults})"
    if cfg.dialect == "speculators":
        return sorted(set(ids)), f"{declared.source} ids read as hidden_states[id] (vLLM extraction)"
    if ids[0] == 1:
        return sorted({i + 1 for i in ids}), (f"{declared.source} ids start at 1: 'output of layer' "
                                              "convention, hidden_states[id + 1]")
    return sorted(set(ids)), (f"{declared.source} ids start at {ids[0]}: 'input to layer' "
                              "convention, hidden_states[id] (sglang PR #25454)")


def default_aux_ids(num_layers: int) -> list[int]:
    return [2, num_layers // 2, num_layers - 3]


def flat_aux_ids(ids: list[int] | None, where: str) -> tuple[list[int] | None, str]:
    """hidden_states indices (speculators' top-level ids, vLLM's convention) -> the ids a flat
    config must carry so SGLang, which applies PLUS_ONE on Llama/Qwen targets (its profiles'
    aux_rules, cited there as "plus_one"), captures the same layers. With the reason."""
    if not ids:
        return None, ("no top-level ids in the speculators config: none written, engines use "
                      "their defaults (hidden_states[2], [L//2], [L-3]) on both sides")
    if any(i - 1 < 0 for i in ids):
        raise ConversionError(
            f"eagle_aux_hidden_state_layer_ids {ids} contains hidden_states index 0 (the "
            "embeddings): the flat form stores id - 1 ('output of layer' ids, which SGLang turns "
            "back into hidden_states[id] by adding 1), and -1 cannot be written", where,
            "check the draft's aux layer ids; the embedding output cannot be expressed in a "
            "flat SGLang config")
    return [i - 1 for i in ids], (
        "speculators top-level ids are hidden_states[id] (vLLM extraction); SGLang reads only the "
        "nested eagle_config and adds +1 for Llama/Qwen targets, so the flat file carries id - 1 "
        "('output of layer' convention) and SGLang captures hidden_states[id] again")
