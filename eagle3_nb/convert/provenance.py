"""`eagle3_nb_provenance.json`: what a conversion read, changed, checked and wrote.

Source hashes before and after, every key rename, every config change with its reason,
warnings, the proof's checks and the output's hashes. A source that was itself converted
carries its own provenance file: it is kept, as data, in the new one (the chain of conversions).
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from eagle3_nb.config import DraftConfig
from eagle3_nb.convert.dialects import ConfigChange
from eagle3_nb.convert.plan import PlannedTensor, Target
from eagle3_nb.errors import Eagle3NbError
from eagle3_nb.io.checkpoint import Checkpoint, read_json
from eagle3_nb.layouts import detect_layout

PROVENANCE_NAME = "eagle3_nb_provenance.json"


def earlier_provenance(ckpt: Checkpoint, warnings: list[str]) -> dict[str, Any] | None:
    """The source's own provenance file (it was converted before), kept as data in the chain."""
    if not (ckpt.path / PROVENANCE_NAME).is_file():
        return None
    try:
        return read_json(ckpt.path, PROVENANCE_NAME)
    except Eagle3NbError as exc:
        warnings.append(f"the source's {PROVENANCE_NAME} is unreadable and not carried over "
                        f"({exc})")
        return None


def _kit_version() -> str:
    try:
        from importlib.metadata import version

        return version("eagle3_nb")
    except Exception:  # noqa: BLE001 - not installed: still convert
        return "unknown"


def source_record(ckpt: Checkpoint, cfg: DraftConfig, sha256_before: dict[str, str],
                  sha256_after: dict[str, str], not_copied: list[str]) -> dict[str, Any]:
    return {"path": str(ckpt.path), "format": ckpt.format,
            "layout": detect_layout(list(ckpt.tensors)).describe(),
            "config_dialect": cfg.dialect,
            "sha256_before": sha256_before, "sha256_after": sha256_after,
            "code_files_not_copied": ckpt.code_files,
            "other_files_not_copied": not_copied}


def provenance_record(*, source: dict[str, Any], request: dict[str, str | None], target: Target,
                      entries: list[PlannedTensor], tensor_hashes: dict[str, str],
                      changes: list[ConfigChange], warnings: list[str], checks: dict[str, Any],
                      output_hashes: dict[str, str], d2t_fix: dict[str, Any] | None,
                      earlier: dict[str, Any] | None) -> dict[str, Any]:
    """The provenance file's content; `request` is what was asked for (to, engine)."""
    record = {
        "tool": "eagle3_nb", "version": _kit_version(), "operation": "convert",
        "created_utc": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "source": source,
        "target": {**request, "keys": target.keys, "config": target.config,
                   "reason": target.reason},
        "renames": renames_of(entries),
        "tensors": {e.new: {"source_key": e.old, "dtype": e.info.dtype,
                            "shape": list(e.info.shape), "file": e.out_file,
                            "sha256": tensor_hashes[e.new]}
                    for e in sorted(entries, key=lambda e: e.new)},
        "config_changes": [c.to_json() for c in changes],
        "warnings": warnings,
        "verification": checks,
        "output": {"sha256": output_hashes},
    }
    if d2t_fix is not None:
        record["d2t_fix"] = d2t_fix
    if earlier is not None:
        record["source_provenance"] = earlier   # the chain of earlier conversions
    return record


def renames_of(entries: list[PlannedTensor]) -> dict[str, str]:
    """old key -> new key, for the keys whose name changed."""
    return {e.old: e.new for e in entries if e.old and e.old != e.new}
