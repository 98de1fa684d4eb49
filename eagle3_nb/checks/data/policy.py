"""Checks 6 and 9 (torch): are the supervised answers the target's own, and do the hidden-state
dumps agree with the rows?

Check 6 applies the target's final norm and lm_head to each dump's last hidden state
(speculators' last captured layer is pre-norm; SpecForge's `hidden_state` is already normed:
target.HiddenStateSample.last_hidden_kind) and counts how often the recorded next token is the
target's argmax on supervised positions. A temperature-0 regeneration gives about 1.0; answers
written by people or another model give far less. Only the head's two tensors are read from the
target, never the whole model. Without dumps, a small local target can be run on the rows.

Check 9 is speculators' `check_hidden_states` (data_generation/offline.py): the dump's token ids
equal the row's, the values are finite; and the aux slot count equals the draft config's.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import torch

from eagle3_nb.errors import Eagle3NbError
from eagle3_nb.findings import ERROR, Finding

NORM_KEYS = ("model.norm.weight", "model.language_model.norm.weight")
HEAD_KEYS = ("lm_head.weight", "model.embed_tokens.weight")  # the second when tied


def head_weights(target: str | Path) -> tuple[torch.Tensor, torch.Tensor, float]:
    """(final norm weight, lm_head weight, rms eps) read from the target's safetensors by name."""
    from safetensors import safe_open

    root = Path(target)
    cfg = json.loads((root / "config.json").read_text(encoding="utf-8"))
    text = cfg.get("text_config") if isinstance(cfg.get("text_config"), dict) else cfg
    found: dict[str, torch.Tensor] = {}
    for f in sorted(root.glob("*.safetensors")):
        with safe_open(str(f), "pt") as handle:
            for key in handle.keys():
                if key in NORM_KEYS + HEAD_KEYS and key not in found:
                    found[key] = handle.get_tensor(key)
    norm = next((found[k] for k in NORM_KEYS if k in found), None)
    head = found.get("lm_head.weight")
    if head is None and text.get("tie_word_embeddings", cfg.get("tie_word_embeddings")):
        head = found.get("model.embed_tokens.weight")
    if norm is None or head is None:
        raise Eagle3NbError("the target's final norm or lm_head weight is not in its "
                            "safetensors", str(root), "pass the target model directory "
                            "(model.norm.weight and lm_head.weight)")
    return norm.float(), head.float(), float(text.get("rms_norm_eps", 1e-6))


def _agreement_stats(rows: list[tuple[int, int]]) -> dict[str, Any]:
    """rows: (agreeing, scored) per row -> the share and its standard errors (per position, and
    per row: positions within a row are not independent)."""
    hits, n = sum(a for a, _ in rows), sum(b for _, b in rows)
    if not n:
        return {"agreement": None, "positions": 0, "rows": 0}
    p = hits / n
    means = [a / b for a, b in rows if b]
    spread = sum((m - sum(means) / len(means)) ** 2 for m in means) / max(len(means) - 1, 1)
    return {"agreement": p, "positions": n, "rows": len(means),
            "se_positions": math.sqrt(p * (1 - p) / n),
            "se_rows": math.sqrt(spread / len(means))}


def _scored(ids: torch.Tensor, mask: torch.Tensor, predicted: torch.Tensor,
            skip_tail: list[int]) -> tuple[int, int]:
    """Supervised positions p >= 1 (predicted from p-1), less each span's closing marker (template
    text, not an answer token) when the span ends with it."""
    keep = mask.clone().bool()
    keep[0] = False
    n = len(skip_tail)
    if n:
        for end in (torch.nonzero(mask[:-1].bool() & ~mask[1:].bool()).flatten() + 1).tolist() + \
                ([len(mask)] if bool(mask[-1]) else []):
            if end >= n and ids[end - n:end].tolist() == skip_tail:
                keep[end - n:end] = False
    hit = predicted[:-1][keep[1:]] == ids[1:][keep[1:]]
    return int(hit.sum()), int(keep[1:].sum())


def policy_on_dumps(samples, rows: list[tuple[list[int], list[int]]], target: str | Path,
                    skip_tail: list[int]) -> dict[str, Any]:
    """Check 6 on dumps paired with rows by index; dumps whose ids differ are left out (check 9
    says so)."""
    norm, head, eps = head_weights(target)
    per_row = []
    for sample, (ids, mask) in zip(samples, rows):
        if sample.last_hidden_state is None or sample.token_ids.tolist() != ids:
            continue
        h = sample.last_hidden_state.float()
        if sample.last_hidden_kind == "pre_norm":
            h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps) * norm
        predicted = (h @ head.T).argmax(-1)
        per_row.append(_scored(torch.tensor(ids), torch.tensor(mask), predicted, skip_tail))
    return {"source": "dumps", **_agreement_stats(per_row)}


def policy_on_target(rows: list[tuple[list[int], list[int]]], target: str | Path,
                     skip_tail: list[int]) -> dict[str, Any]:
    """Check 6 by running a local target on the rows (small targets only)."""
    from eagle3_nb.target import TargetModel

    model = TargetModel.load(target)
    per_row = []
    with torch.no_grad():
        for ids, mask in rows:
            predicted = model.forward_hidden(torch.tensor(ids)).next_tokens
            per_row.append(_scored(torch.tensor(ids), torch.tensor(mask), predicted, skip_tail))
    return {"source": "target", **_agreement_stats(per_row)}


def dump_findings(samples, rows: list[tuple[list[int], list[int]]], num_aux: int | None
                  ) -> tuple[dict[str, Any], list[Finding]]:
    """Check 9: token ids, aux slot count, finite values, dump by dump."""
    bad_ids, bad_slots, non_finite, examples = 0, 0, 0, []
    for i, sample in enumerate(samples):
        ids = rows[i][0] if i < len(rows) else None
        problems = []
        if ids is None or sample.token_ids.tolist() != ids:
            bad_ids += 1
            problems.append("token ids differ from the row's" if ids is not None
                            else "no row for this dump")
        slots = sample.num_aux(sample.hidden_size) if sample.hidden_size else None
        if num_aux and slots is not None and slots != num_aux:
            bad_slots += 1
            problems.append(f"{slots} aux slots, the draft config has {num_aux}")
        states = [sample.aux_hidden_states] + ([sample.last_hidden_state]
                                               if sample.last_hidden_state is not None else [])
        if not all(bool(torch.isfinite(t.float()).all()) for t in states):
            non_finite += 1
            problems.append("non-finite values")
        if problems and len(examples) < 3:
            examples.append({"dump": sample.source, "problems": problems})
    result = {"dumps": len(samples), "rows": len(rows), "token_ids_differ": bad_ids,
              "aux_slots_differ": bad_slots, "non_finite": non_finite, "examples": examples}
    if not (bad_ids or bad_slots or non_finite):
        return result, []
    return result, [Finding("DUMP_MISMATCH", ERROR,
                            f"of {len(samples)} dumps, {bad_ids} hold other token ids than their "
                            f"row, {bad_slots} another aux slot count than the draft config, "
                            f"{non_finite} non-finite values: training read other states than "
                            "the rows say", result)]
