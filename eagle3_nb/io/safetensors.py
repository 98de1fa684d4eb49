"""Bounded safetensors header parsing, lazy torch-free tensor access, and a byte-copying writer.

Listing tensors reads the 8-byte length and the JSON header only, so a 600 GB sharded checkpoint
costs the same as a 6 MB one. Every offset, dtype and shape is checked against the file size
before anything is mapped. Tensor data is read only through `iter_chunks`, in bounded pieces.

`write_safetensors` writes a new file whose tensors' data bytes are copied from their source
files in bounded chunks (no torch), in the reference writer's order; `save_torch_tensors` is
the one path that goes through torch (a pickle source).
"""

from __future__ import annotations

import hashlib
import json
import mmap
import os
import stat
import struct
from dataclasses import dataclass
from math import prod
from pathlib import Path
from typing import Any, Callable, Iterator

from eagle3_nb.errors import Eagle3NbError, SafetensorsFormatError

MAX_HEADER_BYTES = 100 * 1024 * 1024  # the safetensors reference implementation's own bound
# Far above the tensor count of any model file the kit is meant for, and counted in the raw bytes
# before parsing, so a header of a million entries costs a scan, not gigabytes.
MAX_TENSORS_PER_FILE = 1 << 17
MAX_NAME_CHARS = 1024

# dtype -> (bytes per element, numpy dtype name or None when numpy has no native type)
DTYPES: dict[str, tuple[int, str | None]] = {
    "BOOL": (1, "bool"), "U8": (1, "uint8"), "I8": (1, "int8"),
    "F8_E4M3": (1, None), "F8_E5M2": (1, None),
    "I16": (2, "int16"), "U16": (2, "uint16"), "F16": (2, "float16"), "BF16": (2, None),
    "I32": (4, "int32"), "U32": (4, "uint32"), "F32": (4, "float32"),
    "I64": (8, "int64"), "U64": (8, "uint64"), "F64": (8, "float64"),
}
FLOAT_DTYPES = {"F8_E4M3", "F8_E5M2", "F16", "BF16", "F32", "F64"}
INT_DTYPES = {"U8", "I8", "I16", "U16", "I32", "U32", "I64", "U64"}


@dataclass(frozen=True)
class TensorInfo:
    name: str
    dtype: str
    shape: tuple[int, ...]
    file: str          # path relative to the checkpoint directory
    data_start: int    # absolute byte offset in the file
    nbytes: int

    @property
    def numel(self) -> int:
        return prod(self.shape)


@dataclass(frozen=True)
class SafetensorsHeader:
    path: Path
    tensors: dict[str, TensorInfo]
    metadata: dict[str, str]
    file_size: int


def read_header(path: Path, rel_name: str | None = None) -> SafetensorsHeader:
    """Parse and validate one .safetensors header without touching tensor data."""
    path = Path(path)
    rel = rel_name or path.name
    try:
        st = path.stat()
        if not stat.S_ISREG(st.st_mode):  # a FIFO or device would block or never end
            raise _bad(rel, "is not a regular file", "point at the real weight file")
        size = st.st_size
        with open(path, "rb") as fh:
            head = fh.read(8)
            if len(head) < 8:
                raise _bad(rel, f"file is {size} bytes, shorter than the 8-byte header length",
                           "the file is truncated; re-download or re-save it")
            (n,) = struct.unpack("<Q", head)
            if n > MAX_HEADER_BYTES:
                raise _bad(rel, f"header length {n} exceeds the {MAX_HEADER_BYTES}-byte bound",
                           "this is not a safetensors file or it is corrupt")
            if 8 + n > size:
                raise _bad(rel, f"header length {n} runs past the end of the {size}-byte file",
                           "the file is truncated; re-download or re-save it")
            raw = fh.read(n)
    except OSError as exc:
        raise SafetensorsFormatError(f"cannot read file: {exc.strerror}", rel,
                                     "check the path and permissions") from None
    if raw.count(b'"data_offsets"') > MAX_TENSORS_PER_FILE:
        raise _bad(rel, f"header declares more than {MAX_TENSORS_PER_FILE} tensors",
                   "this is not a model checkpoint shard, or it is corrupt")
    header = _parse_json(raw, rel)
    metadata = header.pop("__metadata__", None) or {}
    if not isinstance(metadata, dict):
        raise _bad(rel, "__metadata__ is not a JSON object", "re-save the file")
    data_start = 8 + n
    tensors = {name: _tensor_info(name, spec, rel, data_start, size - data_start)
               for name, spec in header.items()}
    _check_no_overlap(tensors, rel, data_start)
    return SafetensorsHeader(path, tensors, {str(k): str(v) for k, v in metadata.items()}, size)


def _bad(rel: str, what: str, todo: str) -> SafetensorsFormatError:
    return SafetensorsFormatError(what, rel, todo)


def _parse_json(raw: bytes, rel: str) -> dict:
    try:
        header = json.loads(raw.decode("utf-8"))
    except RecursionError:
        raise _bad(rel, "header JSON is nested too deeply", "the file is corrupt") from None
    except ValueError as exc:  # not UTF-8, not JSON, or an integer Python will not read
        raise _bad(rel, f"header is not valid UTF-8 JSON ({str(exc).split(';')[0]})",
                   "the file is corrupt") from None
    if not isinstance(header, dict):
        raise _bad(rel, "header is not a JSON object", "the file is corrupt")
    return header


def _tensor_info(name: str, spec, rel: str, data_start: int, data_size: int) -> TensorInfo:
    if len(name) > MAX_NAME_CHARS:
        raise _bad(rel, f"a tensor name of {len(name)} characters ({name[:40]!r}...)",
                   "the file is corrupt or not a model checkpoint")
    if not isinstance(spec, dict):
        raise _bad(rel, f"tensor {name!r}: entry is not an object", "the file is corrupt")
    dtype = spec.get("dtype")
    if not isinstance(dtype, str) or dtype not in DTYPES:
        raise _bad(rel, f"tensor {name!r}: unknown dtype {dtype!r}",
                   f"supported: {', '.join(DTYPES)}")
    shape = spec.get("shape")
    if not isinstance(shape, list) or not all(_u64(d) for d in shape):
        raise _bad(rel, f"tensor {name!r}: shape {str(shape)[:60]} is not a list of unsigned "
                        "64-bit ints", "the file is corrupt")
    offsets = spec.get("data_offsets")
    if not isinstance(offsets, list) or len(offsets) != 2 or not all(_u64(o) for o in offsets):
        raise _bad(rel, f"tensor {name!r}: data_offsets {offsets!r} is not two ints",
                   "the file is corrupt")
    begin, end = offsets
    expected = prod(shape) * DTYPES[dtype][0]
    if not 0 <= begin <= end:
        raise _bad(rel, f"tensor {name!r}: data_offsets {offsets} are not ordered",
                   "the file is corrupt")
    if end > data_size:
        raise _bad(rel, f"tensor {name!r}: data ends at byte {end} past the {data_size}-byte "
                        "data section", "the file is truncated; re-download or re-save it")
    if end - begin != expected:
        raise _bad(rel, f"tensor {name!r}: {end - begin} bytes stored for shape {shape} "
                        f"{dtype} ({expected} expected)", "the file is corrupt")
    return TensorInfo(name, dtype, tuple(shape), rel, data_start + begin, expected)


def _u64(value) -> bool:
    """What safetensors accepts for a dimension or an offset (a JSON true is not one)."""
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 1 << 64


def _check_no_overlap(tensors: dict[str, TensorInfo], rel: str, data_start: int) -> None:
    spans = sorted((t.data_start, t.data_start + t.nbytes, t.name) for t in tensors.values()
                   if t.nbytes)
    for (b0, e0, n0), (b1, _, n1) in zip(spans, spans[1:]):
        if b1 < e0:
            raise _bad(rel, f"tensors {n0!r} and {n1!r} overlap (bytes {b1 - data_start}.."
                            f"{e0 - data_start} of the data section)", "the file is corrupt")


def iter_chunks(path: Path, info: TensorInfo, chunk_bytes: int = 64 << 20) -> Iterator:
    """Yield the tensor's values as flat numpy arrays, a bounded chunk at a time (mmap, no torch).

    Native dtypes come back as views of the file (float16/float32/int64/bool...); float formats
    numpy lacks (bf16, fp8) are widened to float32. Each chunk maps only its own window of the
    file, and the mapping lives exactly as long as the caller holds the chunk: resident memory
    stays at about one chunk however large the tensor is, and holding on to a chunk is safe.
    """
    import numpy as np

    itemsize = DTYPES[info.dtype][0]
    step = max(itemsize, chunk_bytes - chunk_bytes % itemsize)
    if info.nbytes == 0:
        return
    gran = mmap.ALLOCATIONGRANULARITY
    with open(path, "rb") as fh:
        for off in range(0, info.nbytes, step):
            n = min(step, info.nbytes - off)
            start = info.data_start + off
            base = start - start % gran
            try:
                mm = mmap.mmap(fh.fileno(), start - base + n, access=mmap.ACCESS_READ,
                               offset=base)
            except (ValueError, OSError) as exc:
                raise _bad(info.file, f"tensor {info.name!r}: cannot map bytes {start}.."
                                      f"{start + n} ({exc})",
                           "the file changed or was truncated after it was opened") from None
            raw = np.frombuffer(mm, dtype=np.uint8, count=n, offset=start - base)
            del mm  # `raw` keeps the window mapped; it is unmapped when the last view goes
            yield decode(raw, info.dtype)
            del raw


def read_rows(path: Path, info: TensorInfo, rows: list[int]):
    """Rows of a 2-D tensor as a float32 numpy array [len(rows), cols], one small read each."""
    import numpy as np

    cols = info.shape[1]
    width = cols * DTYPES[info.dtype][0]
    out = np.empty((len(rows), cols), dtype=np.float32)
    with open(path, "rb") as fh:
        for i, row in enumerate(rows):
            fh.seek(info.data_start + row * width)
            raw = np.frombuffer(fh.read(width), dtype=np.uint8)
            if raw.size != width:
                raise _bad(info.file, f"tensor {info.name!r}: row {row} is cut short",
                           "the file is truncated")
            out[i] = decode(raw, info.dtype)
    return out


def decode(raw, dtype: str):
    """Reinterpret little-endian bytes of a safetensors dtype as a numpy array."""
    import numpy as np

    native = DTYPES[dtype][1]
    if native is not None:
        return raw.view(np.dtype(native).newbyteorder("<"))
    if dtype == "BF16":  # bf16 is the top half of a float32; shift in place: one allocation
        wide = raw.view("<u2").astype(np.uint32)
        np.left_shift(wide, 16, out=wide)
        return wide.view(np.float32)
    return _fp8_table(dtype)[raw]


_FP8_TABLES: dict = {}


def _fp8_table(dtype: str):
    """Lookup table of the 256 float8 values (OCP E4M3FN: no inf, 0x7f/0xff NaN; E5M2: IEEE-like)."""
    import numpy as np

    if dtype not in _FP8_TABLES:
        exp_bits, man_bits, bias = (4, 3, 7) if dtype == "F8_E4M3" else (5, 2, 15)
        table = np.empty(256, dtype=np.float32)
        for byte in range(256):
            sign = -1.0 if byte & 0x80 else 1.0
            e = (byte >> man_bits) & ((1 << exp_bits) - 1)
            m = byte & ((1 << man_bits) - 1)
            top = (1 << exp_bits) - 1
            if dtype == "F8_E4M3" and e == top and m == (1 << man_bits) - 1:
                val = float("nan")
            elif dtype == "F8_E5M2" and e == top:
                val = float("nan") if m else float("inf")
            elif e == 0:
                val = m / (1 << man_bits) * 2.0 ** (1 - bias)
            else:
                val = (1 + m / (1 << man_bits)) * 2.0 ** (e - bias)
            table[byte] = sign * val
        _FP8_TABLES[dtype] = table
    return _FP8_TABLES[dtype]


def file_size(path: Path) -> int:
    return os.stat(path).st_size


# ----------------------------------------------------------------------------- writing

COPY_CHUNK_BYTES = 16 << 20          # bounded read size when copying / hashing tensor data

# The reference writer (safetensors 0.8, Rust) orders tensors by dtype, descending in its enum
# order, then by name; the order is by item size first, so every tensor stays aligned. Same order
# here: a copy that renames nothing reproduces the reference writer's file byte for byte.
WRITE_ORDER = ("U64", "I64", "F64", "F32", "U32", "I32", "BF16", "F16", "U16", "I16",
               "F8_E4M3", "F8_E5M2", "I8", "U8", "BOOL")


@dataclass(frozen=True)
class TensorSource:
    """One tensor of a file to write: its name there, and its dtype, shape and bytes as `info`
    says they lie in the file `path`; or, with `data`, those bytes instead."""
    name: str
    info: TensorInfo
    path: Path | None = None
    data: bytes | None = None


def copy_range(fh, start: int, nbytes: int, sink: Callable[[bytes], Any], where: str,
               error: type[Eagle3NbError] = SafetensorsFormatError) -> None:
    """Feed `nbytes` bytes at `start` to sink(bytes), COPY_CHUNK_BYTES at a time."""
    fh.seek(start)
    left = nbytes
    while left:
        block = fh.read(min(COPY_CHUNK_BYTES, left))
        if not block:
            raise error(f"file ended {left} bytes early while reading tensor data", where,
                        "the file is truncated, or it changed while it was being copied")
        sink(block)
        left -= len(block)


def tensor_sha256(path: Path, info: TensorInfo,
                  error: type[Eagle3NbError] = SafetensorsFormatError) -> str:
    """sha256 of one tensor's data bytes, read in bounded chunks."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        copy_range(fh, info.data_start, info.nbytes, h.update, str(path), error)
    return h.hexdigest()


def copy_tensor(src_fh, out_fh, info: TensorInfo, where: str,
                error: type[Eagle3NbError] = SafetensorsFormatError) -> str:
    """Copy one tensor's data bytes; return their sha256."""
    h = hashlib.sha256()

    def sink(block: bytes) -> None:
        h.update(block)
        out_fh.write(block)
    copy_range(src_fh, info.data_start, info.nbytes, sink, where, error)
    return h.hexdigest()


def _write_rank(dtype: str) -> tuple[int, int]:
    if dtype in WRITE_ORDER:
        return (-DTYPES[dtype][0], WRITE_ORDER.index(dtype))
    return (-DTYPES[dtype][0], len(WRITE_ORDER))


def header_bytes(items: list[tuple[str, TensorInfo]], metadata: dict[str, str]) -> bytes:
    """The 8-byte length and the JSON header of a file holding these tensors in this order."""
    header: dict[str, Any] = {"__metadata__": metadata}
    offset = 0
    for name, info in items:
        header[name] = {"dtype": info.dtype, "shape": list(info.shape),
                        "data_offsets": [offset, offset + info.nbytes]}
        offset += info.nbytes
    raw = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    raw += b" " * (-len(raw) % 8)   # the reference writer pads with spaces to 8 bytes
    return struct.pack("<Q", len(raw)) + raw


def write_safetensors(out_path: Path, tensors: list[TensorSource], metadata: dict[str, str],
                      error: type[Eagle3NbError] = SafetensorsFormatError) -> dict[str, str]:
    """A new file (never an existing one) holding `tensors` in the reference writer's order,
    fsynced; returns name -> sha256 of its data bytes."""
    items = sorted(tensors, key=lambda t: (_write_rank(t.info.dtype), t.name))
    hashes: dict[str, str] = {}
    handles: dict[Path, Any] = {}
    try:
        with open(out_path, "xb") as out:
            out.write(header_bytes([(t.name, t.info) for t in items], metadata))
            for t in items:
                if t.data is not None:
                    out.write(t.data)
                    hashes[t.name] = hashlib.sha256(t.data).hexdigest()
                    continue
                fh = handles.get(t.path)
                if fh is None:
                    fh = handles[t.path] = open(t.path, "rb")
                hashes[t.name] = copy_tensor(fh, out, t.info, str(t.path), error)
            out.flush()
            os.fsync(out.fileno())
    finally:
        for fh in handles.values():
            fh.close()
    return hashes


def tensor_bytes(tensor) -> bytes:
    """A torch tensor's data bytes as a safetensors file stores them."""
    t = tensor.detach().contiguous().reshape(-1)
    import torch

    return t.view(torch.uint8).numpy().tobytes() if t.numel() else b""


def save_torch_tensors(out_path: Path, tensors: dict) -> dict[str, str]:
    """torch tensors (no shared storage) -> a new safetensors file through safetensors.torch,
    fsynced; returns name -> sha256 of its data bytes."""
    from safetensors.torch import save_file

    hashes = {name: hashlib.sha256(tensor_bytes(t)).hexdigest() for name, t in tensors.items()}
    save_file(tensors, str(out_path), metadata={"format": "pt"})
    with open(out_path, "rb") as fh:
        os.fsync(fh.fileno())
    return hashes
