"""How alike the target's layers are, and how far what reaches the draft under a wiring is from
what it was trained on: cosine similarities on one target pass.

A wrong layer convention feeds the draft hidden_states[k + 1] where it was trained on [k]. What
that costs depends on how alike adjacent layers are in that target, not on the convention: sglang
PR #25454 measured ~0.10 accept-length loss on Kimi-K2.5 from an off-by-one, vllm PR #43671 saw
MiniMax-M2's position-0 acceptance fall from ~45% to ~10% from one. These numbers explain a
measured accuracy drop instead of guessing it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import torch
import torch.nn.functional as F

from eagle3_nb.features import draft_features
from eagle3_nb.target import TargetOutput
from eagle3_nb.model import Wiring, as_engine_leaves


def positions(x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
    """[.., T, W] -> [N, W] float32 rows, one per real (unpadded) position."""
    rows = x.reshape(-1, x.shape[-1]).float()
    return rows if mask is None else rows[mask.reshape(-1).to(rows.device).bool()]


def n_positions(out: TargetOutput) -> int:
    if out.attention_mask is not None:
        return int(out.attention_mask.sum())
    return out.final_norm[..., 0].numel()


def mean_cosine(a: torch.Tensor, b: torch.Tensor, mask: torch.Tensor | None = None) -> float:
    """Mean over positions of the per-position cosine similarity of two equally wide states
    (0 where either is all zeros)."""
    return float(F.cosine_similarity(positions(a, mask), positions(b, mask), dim=-1).mean())


def weighted_mean(values: Sequence[Any], weights: Sequence[int]) -> Any:
    """The position-weighted mean of per-sample results: floats, (nested) lists of them, or
    None (None stays None)."""
    if not values or values[0] is None:
        return None
    if isinstance(values[0], list):
        return [weighted_mean([v[i] for v in values], weights) for i in range(len(values[0]))]
    return sum(v * w for v, w in zip(values, weights)) / sum(weights)


@torch.no_grad()
def layer_similarity(out: TargetOutput) -> list[list[float]]:
    """[i][j]: mean per-position cosine similarity of hidden_states[i] and [j], i, j = 0..L.
    Index L is the pre-final-norm state, as engines capture it (features.draft_features)."""
    states = [positions(out.state(i, final="pre_norm"), out.attention_mask)
              for i in range(out.num_layers + 1)]
    unit = F.normalize(torch.stack(states), dim=-1)                  # [L+1, N, H]
    return (torch.einsum("inh,jnh->ij", unit, unit) / unit.shape[1]).cpu().tolist()


def mean_layer_similarity(outs: Sequence[TargetOutput]) -> list[list[float]]:
    """layer_similarity over several target passes, weighted by their positions."""
    return weighted_mean([layer_similarity(o) for o in outs], [n_positions(o) for o in outs])


@dataclass
class FeatureDrift:
    served: str
    trained: str
    # cosine of what reaches the decoder layer (fc output, or the raw state where fc is
    # skipped) served vs as trained; 1.0 means the draft computes on what it was trained on
    feature_cosine: float
    # per aux slot, the served captured state vs the trained one (None unless both concatenate)
    aux_cosine: list[float] | None
    fc_applied: bool
    n_positions: int

    def to_json(self) -> dict[str, Any]:
        return {"served": self.served, "trained": self.trained,
                "feature_cosine": self.feature_cosine, "aux_cosine": self.aux_cosine,
                "fc_applied": self.fc_applied, "n_positions": self.n_positions}


@torch.no_grad()
def feature_drift(draft, out: TargetOutput | Sequence[TargetOutput], served: Wiring,
                  trained: Wiring, served_draft=None) -> FeatureDrift:
    """What reaches the draft's decoder layer under `served` against what it would be as
    trained, on the same target pass(es) (several: weighted by positions). The served side
    computes with the parameters the engine leaves unloaded reset (model.as_engine_leaves;
    pass `served_draft` when the caller already holds that copy), so a reset fc counts."""
    outs = [out] if isinstance(out, TargetOutput) else list(out)
    engine = served_draft if served_draft is not None else as_engine_leaves(draft, served)
    per = [_drift_one(draft, engine, o, served, trained) for o in outs]
    weights = [n_positions(o) for o in outs]
    return FeatureDrift(served.name, trained.name, weighted_mean([p[0] for p in per], weights),
                        weighted_mean([p[1] for p in per], weights), per[0][2], sum(weights))


def _drift_one(draft, engine, out: TargetOutput, served: Wiring, trained: Wiring):
    return features_drift(draft, engine, draft_features(out, served), draft_features(out, trained),
                          served, trained, out.attention_mask)


def features_drift(draft, engine, served_feats: torch.Tensor, trained_feats: torch.Tensor,
                   served: Wiring, trained: Wiring, mask: torch.Tensor | None = None):
    """(feature cosine, per-slot aux cosines or None, fc applied) from the two wirings' features
    on the same positions (a target pass, or a hidden-state dump)."""
    ref, _ = _project(draft, trained_feats, trained)
    got, applied = _project(engine, served_feats, served)
    return (mean_cosine(got, ref, mask), slot_cosines(served_feats, trained_feats, served, trained,
                                                      mask), applied)


def _project(draft, feats: torch.Tensor, wiring: Wiring) -> tuple[torch.Tensor, bool]:
    weight = draft.fc.weight
    return draft.project(feats.to(weight.device, weight.dtype), wiring)


def _same_concat(served: Wiring, trained: Wiring) -> bool:
    both_concat = served.hidden_source == trained.hidden_source == "concat"
    return bool(both_concat and served.layer_ids and trained.layer_ids
                and len(served.layer_ids) == len(trained.layer_ids))


def slot_cosines(served_feats: torch.Tensor, trained_feats: torch.Tensor, served: Wiring,
                 trained: Wiring, mask: torch.Tensor | None = None) -> list[float] | None:
    """Per aux slot (the wiring's own order, as draft_features concatenates), the cosine of the
    served captured state against the trained one; None unless both wirings concatenate the
    same number of layers."""
    if not _same_concat(served, trained):
        return None
    n = len(served.layer_ids)
    return [mean_cosine(a, b, mask) for a, b in zip(served_feats.chunk(n, -1),
                                                    trained_feats.chunk(n, -1))]


def aux_cosine(out: TargetOutput, served: Wiring, trained: Wiring) -> list[float] | None:
    """slot_cosines on one target pass."""
    if not _same_concat(served, trained):
        return None
    return slot_cosines(draft_features(out, served), draft_features(out, trained), served,
                        trained, out.attention_mask)
