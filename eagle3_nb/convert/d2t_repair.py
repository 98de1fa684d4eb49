"""--fix-d2t: d2t rewritten as offsets, only when the evidence decides (eagle3_nb.vocab).

Absolute ids proven by t2d, or a missing d2t rebuilt from t2d. A table that is already offsets,
ambiguous or invalid is refused: the kit never "repairs" on a guess. numpy is imported only
here, and only when the repair is asked for.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from eagle3_nb.config import DraftConfig
from eagle3_nb.convert.plan import PlannedTensor
from eagle3_nb.errors import ConversionError, VerificationError
from eagle3_nb.findings import ABSOLUTE, ARANGE_SUBTRACTED, MISSING, OFFSET
from eagle3_nb.io.checkpoint import Checkpoint
from eagle3_nb.io.safetensors import TensorInfo


def fix_d2t(ckpt: Checkpoint, cfg: DraftConfig, entries: list[PlannedTensor]
            ) -> tuple[list[PlannedTensor], dict[str, Any]]:
    """The plan with d2t's bytes replaced by the offsets the evidence proves, and what decided."""
    import numpy as np

    from eagle3_nb.vocab import VocabMapping  # numpy: only --fix-d2t reads arrays

    mapping = VocabMapping.from_checkpoint(ckpt, cfg)
    evidence = mapping.evidence + mapping.problems
    if mapping.format in (ABSOLUTE, ARANGE_SUBTRACTED) and not mapping.problems:
        ids = mapping.intended_ids
    elif mapping.format == MISSING and mapping.t2d is not None and int(mapping.t2d.sum()) == cfg.Vd:
        ids = np.flatnonzero(mapping.t2d)
    else:
        raise ConversionError(f"--fix-d2t refused: the table reads as {mapping.format!r}, not as "
                              "something the evidence lets the kit repair (" + "; ".join(evidence)
                              + ")", str(ckpt.path),
                              "a correct offset table needs no fix; an ambiguous one needs a "
                              "person to check token ids (eagle3-nb vocab PATH --tokenizer ...)")
    data = (ids - np.arange(cfg.Vd)).astype("<i8").tobytes()
    old = next((e for e in entries if e.new == "d2t"), None)
    near = old or next((e for e in entries if e.new == "t2d"), entries[0])
    info = TensorInfo("d2t", "I64", (cfg.Vd,), near.out_file, -1, len(data))
    fixed = PlannedTensor(old.old if old else "", "d2t", info, near.out_file, data)
    rest = [e for e in entries if e is not old]
    return rest + [fixed], {"before": mapping.format, "evidence": evidence,
                            "rule": "d2t = target_ids - arange(draft_vocab_size)"}


def revalidate_d2t(tmp: Path) -> dict[str, Any]:
    """The written copy's d2t must now read as valid offsets."""
    from eagle3_nb.vocab import VocabMapping

    out = Checkpoint.open(tmp)
    mapping = VocabMapping.from_checkpoint(out, out.config)
    if mapping.format != OFFSET or not mapping.readings["offsets"].valid:
        raise VerificationError(f"the repaired d2t reads as {mapping.format}", str(tmp),
                                "report this as a bug; nothing was written")
    return {"format": mapping.format, "t2d_agrees": mapping.t2d_agrees}
