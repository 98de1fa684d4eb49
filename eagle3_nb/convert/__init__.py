"""Non-destructive layout conversion between the two draft checkpoint formats.

    eagle        SafeAILab / SpecForge / SGLang: decoder keys `midlayer.*`, flat LlamaConfig
    speculators  speculators / vLLM: decoder keys `layers.N.*`, nested speculators config

`convert_checkpoint(src, dst, to=..., engine=...)` never writes into SRC. It

1. refuses a DST that exists (`OutputExistsError`) and hashes every source file;
2. writes everything into a temporary directory next to DST (same filesystem): new
   safetensors files whose headers carry the renamed keys and whose data sections are the
   source tensors' bytes, copied byte for byte in bounded chunks (no torch; a pickle source is
   the one exception: it is read with `torch.load(weights_only=True)` when it is opened and
   written with `safetensors.torch.save_file`), a rewritten config.json and, for a sharded
   source, a new index with the same shard split;
3. proves the result: re-opens the finished directory with `Checkpoint.open`, compares the sha256
   of every tensor's data bytes with the source's, checks names, dtypes and shapes, parses the new
   config with `parse_config` and checks that the kit still reads the same aux layers from it;
4. hashes the source again (it must not have changed), writes `eagle3_nb_provenance.json`
   (source hashes before and after, every key rename, every config change with its reason,
   warnings, output hashes) and renames the directory to DST atomically (no-replace rename).
   The proof runs just before that rename; a rename does not touch file contents.

On any failure the temporary directory is removed and nothing is left behind. Checkpoint code
(`*.py`, `auto_map`) is never copied or written. Files other than config.json and the weights are
not copied either; they are listed in the warnings and the provenance.

Choosing the target: `to="eagle"` or `to="speculators"`; or, with `to=None`, an engine
`NAME==VERSION`, resolved to its profile (eagle3_nb.engines): a profile that builds only
`model.midlayer.*` gets `midlayer.*` keys, one that reads a single config dialect gets that
dialect, and everything else keeps its layout (wrapper prefixes are always stripped). When both
`to` and `engine` are given, `to` decides and the engine is only recorded.

`fix_d2t=True` rewrites d2t as offsets, and only when the evidence decides (eagle3_nb.vocab):
absolute ids proven by t2d, or a missing d2t rebuilt from t2d. A table that is already offsets,
ambiguous or invalid is refused: the kit never "repairs" on a guess.

The steps, one module each: plan (target and key names), dialects (the config rewrite),
d2t_repair, verify (the proof), provenance; the byte-copying writer is eagle3_nb.io.safetensors.
This module runs them in order and keeps the staging directory.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from eagle3_nb.config import DraftConfig, parse_config
from eagle3_nb.convert import d2t_repair
from eagle3_nb.convert.dialects import (ABSENT, ConfigChange, build_config,
                                        ids_where_the_engine_reads)
from eagle3_nb.convert.plan import (PlannedTensor, Target, plan_keys, resolve_target,
                                    target_for_engine)
from eagle3_nb.convert.provenance import (PROVENANCE_NAME, earlier_provenance, provenance_record,
                                          renames_of, source_record)
from eagle3_nb.convert.verify import verify_copy
from eagle3_nb.engines import resolve_engine
from eagle3_nb.engines.facts import CONVERSION as FACTS
from eagle3_nb.errors import ConversionError, Eagle3NbError, OutputExistsError, VerificationError
from eagle3_nb.io.checkpoint import INDEX_NAME, Checkpoint, inside, read_json, sha256_file
from eagle3_nb.io.files import (OWNER_NAME, cleanup_on_signals, default_dir_mode, fsync_dir,
                                remove_stale_staging, rename_noreplace, staging_dir)
from eagle3_nb.io.safetensors import (TensorSource, read_header, save_torch_tensors,
                                      write_safetensors)

__all__ = ["ABSENT", "PROVENANCE_NAME", "ConfigChange", "ConversionError", "ConversionResult",
           "Target", "VerificationError", "convert_checkpoint", "preview", "resolve_target"]


@dataclass
class ConversionResult:
    dst: Path
    source: Path
    target: Target
    renames: dict[str, str]              # old key -> new key, only keys whose name changed
    config_changes: list[ConfigChange]
    warnings: list[str]
    verified: bool
    checks: dict[str, Any]
    source_hashes: dict[str, str]
    output_hashes: dict[str, str]
    tensor_sha256: dict[str, str]        # new key -> sha256 of its data bytes (equal in src/dst)
    provenance: Path

    def to_json(self) -> dict[str, Any]:
        return {"dst": str(self.dst), "source": str(self.source),
                "target": {"keys": self.target.keys, "config": self.target.config,
                           "reason": self.target.reason},
                "renames": self.renames,
                "config_changes": [c.to_json() for c in self.config_changes],
                "warnings": self.warnings, "verified": self.verified, "checks": self.checks,
                "output_sha256": self.output_hashes, "provenance": str(self.provenance)}


def preview(ckpt: Checkpoint, profile) -> tuple[DraftConfig, dict[str, tuple[int, ...]]] | None:
    """What `convert CKPT NEW --engine PROFILE` would write, from headers and JSON only: the
    copy's parsed config and its tensor shapes by name; None when the conversion is refused.
    Advice that names the conversion is checked against it (checks.load)."""
    try:
        target = target_for_engine(profile)
        entries, _ = plan_keys(ckpt, target)
        config, _, _ = build_config(ckpt, ckpt.config, target, entries)
        ids_where_the_engine_reads(profile, ckpt, config)
        return parse_config(config), {e.new: tuple(e.info.shape) for e in entries}
    except Eagle3NbError:
        return None


def convert_checkpoint(src: str | os.PathLike, dst: str | os.PathLike, to: str | None = None,
                       engine: str | None = None, fix_d2t: bool = False) -> ConversionResult:
    """Write a converted copy of SRC to the new directory DST and prove it (module docstring)."""
    target = resolve_target(to, engine, fix_d2t)
    src_path, dst_path = Path(src), Path(dst)
    dst_abs = _check_destination(dst_path, src_path)
    ckpt = Checkpoint.open(src_path)
    dst_abs = _check_destination(dst_path, ckpt.path)   # again, against the resolved source
    src_cfg = ckpt.config
    entries, key_warnings = plan_keys(ckpt, target)
    d2t_fix = None
    if fix_d2t:
        entries, d2t_fix = d2t_repair.fix_d2t(ckpt, src_cfg, entries)
    new_config, changes, cfg_warnings = build_config(ckpt, src_cfg, target, entries)
    if engine is not None and to is None:
        changes += ids_where_the_engine_reads(resolve_engine(engine), ckpt, new_config)
    warnings = key_warnings + cfg_warnings
    earlier = earlier_provenance(ckpt, warnings)
    left = _files_not_copied(ckpt, earlier is not None, warnings)
    _check_free_space(ckpt, dst_abs)
    hashes_before = _hash_source(ckpt)
    remove_stale_staging(dst_abs)
    # the owner file inside lets the next run remove what a SIGKILLed one left
    tmp = staging_dir(dst_abs, "eagle3-nb convert", ConversionError)
    with cleanup_on_signals():  # SIGTERM/SIGHUP unwind through the rollback below
        try:
            tensor_hashes, checks = _write_and_prove(tmp, ckpt, entries, new_config, target,
                                                     d2t_fix, warnings)
            hashes_after = _source_unchanged(ckpt, hashes_before, checks)
            output_hashes = {p.relative_to(tmp).as_posix(): sha256_file(p)
                             for p in sorted(tmp.rglob("*")) if p.is_file()
                             and p.name != OWNER_NAME}
            renames = renames_of(entries)
            provenance = provenance_record(
                source=source_record(ckpt, src_cfg, hashes_before, hashes_after, left),
                request={"to": to, "engine": engine}, target=target, entries=entries,
                tensor_hashes=tensor_hashes, changes=changes, warnings=warnings, checks=checks,
                output_hashes=output_hashes, d2t_fix=d2t_fix, earlier=earlier)
            _write_json(tmp / PROVENANCE_NAME, provenance)
            _move_into_place(tmp, dst_abs)
        except BaseException as exc:
            shutil.rmtree(tmp, ignore_errors=True)
            if isinstance(exc, Eagle3NbError) or not isinstance(exc, Exception):
                raise
            detail = f"{type(exc).__name__}: {exc}".splitlines()[0]
            raise ConversionError(f"conversion failed and was rolled back ({detail})", str(dst_abs),
                                  "nothing was written; fix the cause (disk, permissions) and rerun"
                                  ) from exc
    return ConversionResult(dst_abs, ckpt.path, target, renames, changes, warnings, True, checks,
                            hashes_before, output_hashes, tensor_hashes,
                            dst_abs / PROVENANCE_NAME)


def _check_destination(dst: Path, src: Path) -> Path:
    if os.path.lexists(dst):
        raise OutputExistsError("destination already exists", str(dst),
                                "choose a new directory; conversion never overwrites or merges")
    parent = dst.absolute().parent
    if not parent.is_dir():
        raise ConversionError("the destination's parent directory does not exist", str(dst),
                              f"create {parent} first")
    dst_abs = parent.resolve() / dst.name
    src_abs = src.resolve()
    if src_abs == dst_abs or src_abs in dst_abs.parents:
        raise ConversionError("the destination is inside the source checkpoint", str(dst),
                              "write the conversion somewhere outside the directory it reads")
    return dst_abs


def _files_not_copied(ckpt: Checkpoint, has_provenance: bool, warnings: list[str]) -> list[str]:
    """The source's files other than config, weights, index, code and its provenance: named in
    the warnings (code files too), never copied."""
    used = {"config.json", INDEX_NAME, *ckpt.code_files,
            *(Path(rel).parts[0] for rel in ckpt.weight_files)}
    if has_provenance:
        used.add(PROVENANCE_NAME)
    left = sorted(p.name for p in ckpt.path.iterdir() if p.name not in used)
    if ckpt.code_files:
        warnings.append(f"checkpoint code not copied (never executed or written): "
                        f"{', '.join(ckpt.code_files)}")
    if left:
        warnings.append(f"other files not copied: {', '.join(left)}")
    return left


def _check_free_space(ckpt: Checkpoint, dst_abs: Path) -> None:
    free = shutil.disk_usage(dst_abs.parent).free
    if free < ckpt.declared_bytes + (1 << 20):
        raise ConversionError(f"{free} bytes free, the copy needs about {ckpt.declared_bytes}",
                              str(dst_abs.parent), "free some space or choose another place")


def _hash_source(ckpt: Checkpoint) -> dict[str, str]:
    try:
        return ckpt.hash_files()
    except OSError as exc:
        raise ConversionError(f"cannot read a source file ({exc.strerror})", str(exc.filename),
                              "check that the checkpoint is complete and readable") from None


def _write_and_prove(tmp: Path, ckpt: Checkpoint, entries: list[PlannedTensor],
                     new_config: dict[str, Any], target: Target, d2t_fix: dict | None,
                     warnings: list[str]) -> tuple[dict[str, str], dict[str, Any]]:
    """Weights and config.json into tmp, then the proof: (tensor sha256 by new key, checks)."""
    tensor_hashes = _write_weights(ckpt, entries, tmp)
    _write_json(tmp / "config.json", new_config)
    checks = verify_copy(tmp, ckpt, entries, tensor_hashes, ckpt.config, target)
    if d2t_fix is not None:
        checks["d2t_after"] = d2t_repair.revalidate_d2t(tmp)
    if not checks["aux_same"]:
        before = checks["aux_hidden_states_before"]
        after = checks["aux_hidden_states_after"]
        warnings.append(
            f"the flat form of these aux ids is ambiguous: the source means hidden_states"
            f"{before}, the kit reads the written config as hidden_states{after} "
            f"({checks['aux_reading_after']}). " + FACTS["flat_ids_reading"])
    return tensor_hashes, checks


def _source_unchanged(ckpt: Checkpoint, hashes_before: dict[str, str],
                      checks: dict[str, Any]) -> dict[str, str]:
    """The source's hashes after the copy (equal to before, or ConversionError)."""
    hashes_after = ckpt.hash_files()
    checks["source_unchanged"] = hashes_after == hashes_before
    if not checks["source_unchanged"]:
        changed = sorted(n for n in hashes_before if hashes_after.get(n) != hashes_before[n])
        raise ConversionError(f"source files changed during the conversion: "
                              f"{', '.join(changed)}", str(ckpt.path),
                              "stop whatever writes to the source and convert again")
    return hashes_after


def _move_into_place(tmp: Path, dst_abs: Path) -> None:
    (tmp / OWNER_NAME).unlink()
    fsync_dir(tmp)
    os.chmod(tmp, default_dir_mode())
    rename_noreplace(tmp, dst_abs)
    fsync_dir(dst_abs.parent)


def _write_weights(ckpt: Checkpoint, entries: list[PlannedTensor], tmp: Path) -> dict[str, str]:
    """The copy's weight files (the source's shard split) and, when sharded, its index."""
    if ckpt.format == "pickle":
        return save_torch_tensors(tmp / "model.safetensors", _torch_tensors(ckpt, entries))
    hashes: dict[str, str] = {}
    by_file: dict[str, list[PlannedTensor]] = {}
    for e in entries:
        by_file.setdefault(e.out_file, []).append(e)
    for rel in ckpt.weight_files:
        src_meta = read_header(ckpt.file_path(rel), rel).metadata
        metadata = {"format": "pt", **src_meta}
        dest = inside(tmp.resolve(), rel)  # never outside the temp dir, whatever rel says
        dest.parent.mkdir(parents=True, exist_ok=True)
        sources = [TensorSource(e.new, e.info, ckpt.file_path(e.info.file)
                                if e.data is None else None, e.data)
                   for e in by_file.get(rel, [])]
        hashes.update(write_safetensors(dest, sources, metadata, ConversionError))
    if ckpt.format == "safetensors-sharded":
        index = read_json(ckpt.path, INDEX_NAME)
        meta = dict(index.get("metadata") or {}) if isinstance(index.get("metadata"), dict) else {}
        meta["total_size"] = sum(e.info.nbytes for e in entries)
        weight_map = {e.new: e.out_file for e in sorted(entries, key=lambda e: e.new)}
        new_index = {"metadata": meta, "weight_map": weight_map}
        _write_json(tmp / INDEX_NAME, new_index)
    return hashes


def _torch_tensors(ckpt: Checkpoint, entries: list[PlannedTensor]) -> dict[str, Any]:
    """A pickle source's tensors under their new names, each with its own storage."""
    import torch

    tensors = {}
    for e in entries:
        if e.data is not None:
            tensors[e.new] = torch.frombuffer(bytearray(e.data), dtype=torch.int64)
        else:
            tensors[e.new] = ckpt.pickled_tensor(e.old).detach().contiguous().clone()
    return tensors


def _write_json(path: Path, data: dict[str, Any]) -> None:
    with open(path, "x", encoding="utf-8") as fh:
        fh.write(json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n")
        fh.flush()
        os.fsync(fh.fileno())
