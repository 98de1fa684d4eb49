"""Test oracles: a target's aux hidden states as each layer-id convention reads them.

Which index a config's ids mean (docs/domain.md "Aux layer ids: two conventions"):

- "hf": id -> `hidden_states[id]`, the input of layer id (EAGLE's defaults [2, L//2, L-3],
  vLLM, speculators' top-level ids, flat-config lists starting at 2);
- "output_of_layer": id -> `hidden_states[id + 1]` (SpecForge's [1, L//2-1, L-4], SGLang's +1).

The kit reads ids in engines.planner and wirings; the tests hold the target's states and the
dump readers against these readings. Index L is HF's final-norm state unless final="pre_norm"
(the engines' residual stream).
"""

from __future__ import annotations

from typing import Sequence

import torch

from eagle3_nb.errors import Eagle3NbError
from eagle3_nb.target import TargetModel, TargetOutput

CONVENTIONS = {"hf": 0, "output_of_layer": 1}   # id -> hidden_states[id + offset]


def resolve_aux_indices(layer_ids: Sequence[int], convention: str, num_layers: int,
                        sort: bool = True) -> list[int]:
    """Layer ids under a convention -> indices into HF `hidden_states` (0..L), sorted ascending
    unless sort=False (engines concatenate in ascending order; vLLM sorts, DeepSeek's path does
    not)."""
    if convention not in CONVENTIONS:
        raise Eagle3NbError(f"unknown layer-id convention {convention!r}", None,
                            f"use one of {sorted(CONVENTIONS)}")
    ids = list(layer_ids)
    if not ids or not all(isinstance(i, int) and not isinstance(i, bool) for i in ids):
        raise Eagle3NbError(f"layer ids must be a non-empty list of ints, got {layer_ids!r}", None,
                            "pass e.g. [2, L//2, L-3]")
    offset = CONVENTIONS[convention]
    top = num_layers - offset
    bad = [i for i in ids if not 0 <= i <= top]
    if bad:
        raise Eagle3NbError(f"layer ids {bad} out of range for a {num_layers}-layer target under "
                            f"convention {convention!r} (valid: 0..{top})", None,
                            "check the ids against the target's num_hidden_layers")
    indices = [i + offset for i in ids]
    return sorted(indices) if sort else indices


def aux_states(out: TargetOutput, layer_ids: Sequence[int], convention: str = "hf",
               final: str = "hf", sort: bool = True) -> torch.Tensor:
    """The captured states of one pass, concatenated on the last dim: [.., A*Ht]."""
    return out.aux(resolve_aux_indices(layer_ids, convention, out.num_layers, sort), final)


def aux_hidden_states(target: TargetModel, input_ids, layer_ids: Sequence[int],
                      convention: str = "hf", attention_mask=None, final: str = "hf",
                      sort: bool = True) -> torch.Tensor:
    return aux_states(target.forward_hidden(input_ids, attention_mask), layer_ids, convention,
                      final, sort)


def final_norm_state(target: TargetModel, input_ids, attention_mask=None) -> torch.Tensor:
    """HF hidden_states[L], after the final norm: what SGLang stores when aux capture is off
    (the "single-layer" state that makes an engine skip fc), and SpecForge's `hidden_state`."""
    return target.forward_hidden(input_ids, attention_mask).final_norm


def pre_norm_last_state(target: TargetModel, input_ids, attention_mask=None) -> torch.Tensor:
    """The last decoder layer's output before the final norm (vLLM's hidden_states[L],
    speculators' last captured layer)."""
    return target.forward_hidden(input_ids, attention_mask).pre_norm_last
