"""The proof a converted copy must pass before it is renamed into place.

`verify_copy` re-opens the finished directory with `Checkpoint.open`, compares the sha256 of every
tensor's data bytes with the source's, checks names, dtypes, shapes and files, parses the new
config with `parse_config` and checks that the kit still reads the same aux layers from it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from eagle3_nb.config import DraftConfig, parse_config
from eagle3_nb.convert.plan import PlannedTensor, Target
from eagle3_nb.engines.planner import trained_aux_indices
from eagle3_nb.errors import ConversionError, Eagle3NbError, VerificationError
from eagle3_nb.io.checkpoint import Checkpoint
from eagle3_nb.io.safetensors import tensor_sha256
from eagle3_nb.layouts import detect_layout


def verify_copy(tmp: Path, ckpt: Checkpoint, entries: list[PlannedTensor],
                src_hashes: dict[str, str], src_cfg: DraftConfig, target: Target) -> dict[str, Any]:
    """The checks the written copy in `tmp` passed (module docstring); VerificationError on any
    difference from the plan or the source."""
    try:
        out = Checkpoint.open(tmp)
    except Eagle3NbError as exc:
        raise VerificationError(f"the written copy does not open as a checkpoint ({exc})",
                                str(tmp), "report this as a bug; nothing was written") from None
    expected = {e.new: e for e in entries}
    if set(out.tensors) != set(expected):
        missing = sorted(set(expected) - set(out.tensors))
        extra = sorted(set(out.tensors) - set(expected))
        raise VerificationError(f"written keys differ from the plan (missing {missing[:5]}, "
                                f"extra {extra[:5]})", str(tmp), "report this as a bug")
    want_format = "safetensors-sharded" if ckpt.format == "safetensors-sharded" else "safetensors"
    if out.format != want_format:
        raise VerificationError(f"written format {out.format}, expected {want_format}", str(tmp),
                                "report this as a bug")
    for name, e in expected.items():
        info = out.tensors[name]
        if (info.dtype, info.shape) != (e.info.dtype, e.info.shape):
            raise VerificationError(f"tensor {name!r} is {info.dtype}{list(info.shape)} in the "
                                    f"copy, {e.info.dtype}{list(e.info.shape)} in the source",
                                    str(tmp), "report this as a bug")
        if e.out_file != info.file and ckpt.format != "pickle":
            raise VerificationError(f"tensor {name!r} landed in {info.file}, not {e.out_file}",
                                    str(tmp), "report this as a bug")
        got = tensor_sha256(out.file_path(info.file), info, ConversionError)
        if got != src_hashes[name]:
            raise VerificationError(f"tensor {name!r}: data bytes differ from the source "
                                    f"({e.old!r})", str(tmp),
                                    "check the disk and rerun; nothing was written")
    try:
        new_cfg = parse_config(out.config_raw, str(tmp / "config.json"))
    except Eagle3NbError as exc:
        raise VerificationError(f"the written config does not parse ({exc})", str(tmp),
                                "report this as a bug") from None
    want_dialect = src_cfg.dialect if target.config == "keep" else target.config
    if new_cfg.dialect != want_dialect:
        raise VerificationError(f"written config reads as {new_cfg.dialect}, not {want_dialect}",
                                str(tmp), "report this as a bug")
    aux_before, _ = trained_aux_indices(src_cfg, None)
    aux_after, why_after = trained_aux_indices(new_cfg, None)
    layout = detect_layout(list(out.tensors))
    return {"tensors_checked": len(expected), "tensor_bytes_identical": True,
            "names_dtypes_shapes": True, "format": out.format, "config_parses": True,
            "config_dialect": new_cfg.dialect, "layout": layout.describe(),
            "aux_hidden_states_before": aux_before, "aux_hidden_states_after": aux_after,
            "aux_reading_after": why_after, "aux_same": aux_before == aux_after}
