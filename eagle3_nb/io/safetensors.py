"""Bounded safetensors header parsing and lazy, torch-free tensor access.

Listing tensors reads the 8-byte length and the JSON header only, so a 600 GB sharded checkpoint
costs the same as a 6 MB one. Every offset, dtype and shape is checked against the file size
before anything is mapped. Tensor data is read only through `iter_chunks`, in bounded pieces.
"""

from __future__ import annotations

import json
import mmap
import os
import stat
import struct
from dataclasses import dataclass
from math import prod
from pathlib import Path
from typing import Iterator

from eagle3_nb.errors import SafetensorsFormatError

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
