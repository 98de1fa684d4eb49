"""A draft checkpoint directory: its files, its tensor list (headers only) and its raw config.

Opening a checkpoint reads config.json and safetensors headers, nothing else: no tensor data,
no hashing, no torch (except for pickle checkpoints, which can only be listed by loading them,
and then only through `torch.load(weights_only=True)`). Nothing here ever writes.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Mapping

from eagle3_nb.config import DraftConfig, TargetInfo, parse_config, parse_target_config
from eagle3_nb.errors import CheckpointError, ConfigError, UnsafeInputError
from eagle3_nb.layouts import KeyMap
from eagle3_nb.io.torchfile import check_torch_file
from eagle3_nb.io.safetensors import TensorInfo, iter_chunks, read_header

INDEX_NAME = "model.safetensors.index.json"
PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".ckpt")
MAX_JSON_BYTES = 64 * 1024 * 1024
TORCH_DTYPE_NAMES = {  # torch dtype -> safetensors dtype code
    "torch.float32": "F32", "torch.float16": "F16", "torch.bfloat16": "BF16",
    "torch.float64": "F64", "torch.int64": "I64", "torch.int32": "I32", "torch.int16": "I16",
    "torch.int8": "I8", "torch.uint8": "U8", "torch.bool": "BOOL",
    "torch.float8_e4m3fn": "F8_E4M3", "torch.float8_e5m2": "F8_E5M2",
}

PARTIAL_HASH_BYTES = 64 << 20   # what is hashed of a file past the hash budget


@dataclass
class Checkpoint:
    path: Path
    config_raw: dict[str, Any]
    weight_files: list[str]            # relative to path
    format: str                        # "safetensors" | "safetensors-sharded" | "pickle"
    tensors: dict[str, TensorInfo]
    code_files: list[str] = field(default_factory=list)
    _pickled: dict[str, Any] | None = field(default=None, repr=False)
    # what checks derive from the headers (e.g. the named wirings' load plans), kept with the
    # checkpoint so that checks sharing it (open_once) derive it once
    derived: dict[Any, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def open(cls, path: str | os.PathLike) -> "Checkpoint":
        root = Path(path)
        if not root.exists():
            raise CheckpointError("no such directory", str(root), "pass a draft checkpoint directory")
        if not root.is_dir():
            raise CheckpointError("is a file, not a directory", str(root),
                                  "pass the directory that holds config.json and the weights")
        root = root.resolve()
        config_raw = read_json(root, "config.json")
        fmt, files = _find_weight_files(root)
        pickled = None
        if fmt == "pickle":
            pickled = _load_pickle(root, files[0])
            tensors = {name: _pickle_info(name, t, files[0]) for name, t in pickled.items()}
        else:
            tensors = _read_safetensors(root, fmt, files)
        code = sorted(p.name for p in root.glob("*.py"))
        return cls(root, config_raw, files, fmt, tensors, code, pickled)

    def file_path(self, rel: str) -> Path:
        return self.path / rel

    @property
    def declared_bytes(self) -> int:
        return sum(t.nbytes for t in self.tensors.values())

    @cached_property
    def config(self) -> DraftConfig:
        """config.json parsed once (ConfigError when it is not a draft config)."""
        return parse_config(self.config_raw, str(self.path / "config.json"))

    @cached_property
    def key_map(self) -> KeyMap:
        """Every tensor name split once: what the checks that share this checkpoint read."""
        return KeyMap.of(self.tensors)

    @property
    def canonical_keys(self) -> Mapping[str, str]:
        """canonical tensor name (wrapper prefixes stripped) -> the key as stored."""
        return self.key_map.stored

    @cached_property
    def auto_map(self) -> Any:
        return self.config_raw.get("auto_map")

    def pickled_tensor(self, name: str):
        """The torch tensor of a pickle checkpoint (already loaded with weights_only=True)."""
        if self._pickled is None:
            raise KeyError(name)
        return self._pickled[name]

    def read_array(self, name: str, max_bytes: int = 256 << 20):
        """One (small) tensor as a numpy array; bf16/fp8 widened to float32. Explicit reads only:
        opening a checkpoint never touches tensor data."""
        import numpy as np

        info = self.tensors[name]
        if info.nbytes > max_bytes:
            raise CheckpointError(f"tensor {name!r} is {info.nbytes} bytes, over the "
                                  f"{max_bytes}-byte limit for a direct read", info.file,
                                  "this read is meant for small tables such as d2t/t2d")
        if self.format == "pickle":
            tensor = self.pickled_tensor(name)
            if str(tensor.dtype) in ("torch.bfloat16", "torch.float8_e4m3fn", "torch.float8_e5m2"):
                tensor = tensor.float()
            return tensor.detach().cpu().numpy().copy()

        parts = [chunk.copy() for chunk in iter_chunks(self.path / info.file, info)]
        flat = np.concatenate(parts) if parts else np.zeros(0)
        return flat.reshape(info.shape)

    def hash_files(self) -> dict[str, str]:
        """sha256 of config.json and every weight file. Explicit: never done on open."""
        return {n: sha256_file(self.path / n) for n in self._hashed_names()}

    def hash_files_within(self, budget_bytes: int) -> tuple[dict[str, str], dict[str, dict]]:
        """As hash_files while the files read stay within `budget_bytes`; each file past it is
        described instead (size, and the sha256 of its first PARTIAL_HASH_BYTES), so a
        checkpoint declaring a petabyte costs a bounded read. Returns (hashed, partial)."""
        hashed: dict[str, str] = {}
        partial: dict[str, dict] = {}
        spent = 0
        for name in self._hashed_names():
            path = self.path / name
            size = path.stat().st_size
            if spent + size <= budget_bytes:
                hashed[name] = sha256_file(path)
                spent += size
            else:
                partial[name] = {"size": size, "first_bytes": min(size, PARTIAL_HASH_BYTES),
                                 "sha256_of_first_bytes": sha256_file(path, PARTIAL_HASH_BYTES)}
        return hashed, partial

    def _hashed_names(self) -> list[str]:
        names = ["config.json"] + self.weight_files
        if self.format == "safetensors-sharded":
            names.append(INDEX_NAME)
        return names


_OPENED: dict[Path, tuple[tuple, Checkpoint]] = {}
OPENED_KEPT = 2  # checkpoints a process keeps open: the draft, and one to compare it with


def open_once(path: str | os.PathLike) -> Checkpoint:
    """The checkpoint at PATH, opened once per process: every check of one run (the notebooks of
    a report share one kernel) gets the same object, with what it derived, while the directory's
    files are unchanged (name, size, mtime); after any change it is opened afresh. Errors are
    Checkpoint.open's."""
    root = Path(path)
    if not root.is_dir():
        return Checkpoint.open(root)
    root = root.resolve()
    state = directory_state(root)
    kept = _OPENED.pop(root, None)
    ckpt = kept[1] if kept and kept[0] == state else Checkpoint.open(root)
    _OPENED[root] = (state, ckpt)
    while len(_OPENED) > OPENED_KEPT:
        _OPENED.pop(next(iter(_OPENED)))
    return ckpt


def directory_state(root: Path) -> tuple:
    with os.scandir(root) as entries:
        files = [(e.name, e.stat()) for e in entries if e.is_file()]
    return tuple(sorted((name, st.st_size, st.st_mtime_ns) for name, st in files))


def sha256_file(path: Path, limit: int | None = None, chunk: int = 8 << 20) -> str:
    """sha256 of the file, or of its first `limit` bytes."""
    h = hashlib.sha256()
    left = limit
    with open(path, "rb") as fh:
        while left is None or left > 0:
            block = fh.read(chunk if left is None else min(chunk, left))
            if not block:
                break
            h.update(block)
            left = None if left is None else left - len(block)
    return h.hexdigest()


def read_json(root: Path, name: str) -> dict[str, Any]:
    """Read a JSON object that must live inside `root` (symlinks out of it are refused)."""
    path = inside(root, name)
    if not path.is_file():
        raise ConfigError(f"{name} not found", str(root),
                          "a draft checkpoint needs config.json next to its weights")
    if path.stat().st_size > MAX_JSON_BYTES:
        raise ConfigError(f"{name} is larger than {MAX_JSON_BYTES} bytes", str(path),
                          "this is not a model config")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except JSON_ERRORS as exc:
        raise ConfigError(f"{name} is not valid JSON ({json_problem(exc)})", str(path),
                          "fix or re-save it") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{name} is not a JSON object", str(path), "fix or re-save it")
    return data


def iter_jsonl(path: str | os.PathLike):
    """(line number, object) for each non-empty line of a JSON Lines file."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError("file not found", str(path), "pass a JSON Lines file")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ConfigError("is not UTF-8 text", str(path), "save it as UTF-8 JSON Lines") from None
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except JSON_ERRORS as exc:
            raise ConfigError(f"line {n} is not JSON ({json_problem(exc)})", str(path),
                              "write one JSON object per line") from None
        if not isinstance(row, dict):
            raise ConfigError(f"line {n} is not a JSON object", str(path),
                              "write one JSON object per line")
        yield n, row


# What json.loads raises on hostile text besides JSONDecodeError: ValueError for an integer of
# more than 4300 digits, RecursionError for nesting deeper than the interpreter's stack.
JSON_ERRORS = (ValueError, RecursionError)


def json_problem(exc: Exception) -> str:
    if isinstance(exc, RecursionError):
        return "nested too deeply"
    if isinstance(exc, json.JSONDecodeError):
        return f"{exc.msg} at line {exc.lineno} column {exc.colno}"
    return str(exc).split(";")[0]


def inside(root: Path, rel: str) -> Path:
    """Resolve `rel` under `root`, refusing absolute paths, '..' and symlinks leading out."""
    if os.path.isabs(rel):
        raise UnsafeInputError(f"path {rel!r} is absolute", str(root),
                               "file references must be relative to the checkpoint directory")
    resolved = (root / rel).resolve()
    if resolved != root and root not in resolved.parents:
        raise UnsafeInputError(f"{rel!r} resolves outside the checkpoint directory "
                               f"(to {resolved})", str(root),
                               "copy the file into the directory instead of linking out of it")
    return resolved


def normalised(root: Path, rel: str) -> str:
    """`rel` as the plain relative path of the file it names inside `root`."""
    return inside(root, rel).relative_to(root).as_posix()


def _find_weight_files(root: Path) -> tuple[str, list[str]]:
    if (root / INDEX_NAME).exists():
        return "safetensors-sharded", _index_files(root)
    single = sorted(p.name for p in root.glob("*.safetensors"))
    if len(single) == 1:
        inside(root, single[0])
        return "safetensors", single
    if len(single) > 1:
        raise CheckpointError(f"{len(single)} .safetensors files but no {INDEX_NAME}", str(root),
                              "add the shard index, or keep one weight file per directory")
    pickles = sorted(p.name for p in root.iterdir() if p.suffix in PICKLE_SUFFIXES)
    if len(pickles) == 1:
        inside(root, pickles[0])
        return "pickle", pickles
    if len(pickles) > 1:
        raise CheckpointError(f"several pickle weight files ({', '.join(pickles)})", str(root),
                              "keep one weight file per directory, or convert to safetensors")
    raise CheckpointError("no weight file (model.safetensors, shards with an index, or "
                          "pytorch_model.bin)", str(root), "point at the directory with the weights")


def _index_files(root: Path) -> list[str]:
    index = read_json(root, INDEX_NAME)
    weight_map = index.get("weight_map")
    if not isinstance(weight_map, dict) or not weight_map:
        raise CheckpointError("shard index has no weight_map", str(root / INDEX_NAME),
                              "re-save the checkpoint")
    return sorted(set(_shard_names(root, weight_map).values()))


def _shard_names(root: Path, weight_map: dict) -> dict[str, str]:
    """Each distinct shard entry of the index -> the file it names inside ROOT, resolved once
    per shard, not once per tensor (an 80-layer index names 8 shards 700 times). The names the
    kit uses (and convert writes) are the normalised ones: an entry such as
    x/../model.safetensors names the file inside the directory, never a path to join blindly."""
    names: dict[str, str] = {}
    for rel in weight_map.values():
        if not isinstance(rel, str):
            raise CheckpointError(f"shard entry {rel!r} is not a file name", str(root / INDEX_NAME),
                                  "re-save the checkpoint")
        if rel in names:
            continue
        if not inside(root, rel).is_file():
            raise CheckpointError(f"shard {rel!r} listed in the index does not exist",
                                  str(root / INDEX_NAME), "download the missing shard")
        names[rel] = normalised(root, rel)
    return names


def _read_safetensors(root: Path, fmt: str, files: list[str]) -> dict[str, TensorInfo]:
    tensors: dict[str, TensorInfo] = {}
    for rel in files:
        header = read_header(inside(root, rel), rel)
        for name, info in header.tensors.items():
            if name in tensors:
                raise CheckpointError(f"tensor {name!r} appears in {tensors[name].file} and {rel}",
                                      str(root), "re-save the checkpoint")
            tensors[name] = info
    if fmt == "safetensors-sharded":
        _check_index_agrees(root, tensors)
    return tensors


def _check_index_agrees(root: Path, tensors: dict[str, TensorInfo]) -> None:
    weight_map = read_json(root, INDEX_NAME)["weight_map"]
    shard = _shard_names(root, weight_map)
    for name, rel in weight_map.items():
        info = tensors.get(name)
        rel = shard[rel]
        if info is None or info.file != rel:
            where = "missing from every shard" if info is None else f"stored in {info.file}"
            raise CheckpointError(f"index maps {name!r} to {rel} but it is {where}",
                                  str(root / INDEX_NAME), "re-save the checkpoint")


def _load_pickle(root: Path, rel: str) -> dict[str, Any]:
    import pickle
    import warnings

    path = inside(root, rel)
    if not path.is_file():  # a FIFO or device would block torch.load
        raise CheckpointError("is not a regular file", str(path), "point at the real weight file")
    check_torch_file(path)  # before torch is even imported
    import torch  # only pickle checkpoints reach here

    try:
        with warnings.catch_warnings():  # torch warns about pickle protocols; our error says it all
            warnings.simplefilter("ignore")
            obj = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as exc:
        raise UnsafeInputError(f"the pickle needs more than plain tensors to load "
                               f"({_first_line(exc, 'unpickling refused')})", str(path),
                               "re-save it as safetensors from a trusted environment; "
                               "the kit never unpickles arbitrary objects") from None
    except Exception as exc:  # noqa: BLE001 - any reader error on foreign bytes is bad input
        why = _first_line(exc, type(exc).__name__)
        raise CheckpointError(f"cannot read the pickle ({why})", str(path),
                              "the file is truncated or not a torch checkpoint") from None
    if not isinstance(obj, dict) or not all(isinstance(k, str) for k in obj):
        raise CheckpointError("the pickle is not a flat {name: tensor} state dict", str(path),
                              "save model.state_dict() (or better, safetensors)")
    bad = [k for k, v in obj.items() if not isinstance(v, torch.Tensor)]
    if bad:
        raise CheckpointError(f"entries that are not tensors: {', '.join(bad[:5])}", str(path),
                              "save model.state_dict() (or better, safetensors)")
    return obj


def _first_line(exc: BaseException, fallback: str) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0][:200] if lines else fallback


def _pickle_info(name: str, tensor, rel: str) -> TensorInfo:
    dtype = TORCH_DTYPE_NAMES.get(str(tensor.dtype))
    if dtype is None:
        raise CheckpointError(f"tensor {name!r} has unsupported dtype {tensor.dtype}", rel,
                              "convert it to a standard float/int dtype")
    return TensorInfo(name, dtype, tuple(tensor.shape), rel, -1,
                      tensor.numel() * tensor.element_size())


def load_target_info(target_config: str | Path) -> TargetInfo:
    """A target config.json, or a directory holding one."""
    path = Path(target_config)
    if path.is_dir():
        raw = read_json(path.resolve(), "config.json")
        where = str(path / "config.json")
    elif path.is_file():
        raw = read_json(path.resolve().parent, path.name)
        where = str(path)
    else:
        raise ConfigError("target config not found", str(path),
                          "pass the target model's config.json or its directory")
    return parse_target_config(raw, where)
