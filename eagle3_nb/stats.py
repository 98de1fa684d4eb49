"""Tensor statistics: a budgeted, bounded-memory scan that finds NaN and never-trained weights.

safetensors checkpoints are read with numpy through `safetensors_io.iter_chunks` (one mapped
window per chunk), so memory stays at a few chunks whatever the tensor size, and no torch is
imported. Pickle checkpoints are already in memory (loaded with `weights_only=True`); their
tensors are converted to numpy and go through the same accumulator.

The most telling tensors are scanned first (lm_head, fc, embed_tokens, d2t, t2d, norms, then the
rest by name), and a tensor that would take the scan past its byte budget is skipped and listed,
never half-scanned.

Conventions: min/max/mean/std/norm of float tensors are over their finite values (NaN and Inf
are counted separately); std is the population standard deviation (ddof=0); norm is the L2 norm
of the flattened tensor. Sums run in float64 and chunks are combined with Chan's parallel
variance update, so results do not depend on the chunk size.
"""

from __future__ import annotations

import math
import re
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Iterable

from eagle3_nb.findings import ERROR, INFO, WARNING, Finding
from eagle3_nb.layouts import KeyMap, split_key
from eagle3_nb.io.safetensors import FLOAT_DTYPES, INT_DTYPES, TensorInfo, iter_chunks

DEFAULT_BUDGET_BYTES = 1 << 30
MAX_PROBES = 64
DEFAULT_CHUNK_BYTES = 1 << 20   # on-disk bytes per chunk (float64 work arrays are 2-8x this);
                                # 1 MB keeps them in cache: fastest in benchmarks/README.md

# canonical names scanned first, in this order; then norms; then everything else by name
PRIORITY_NAMES = ("lm_head.weight", "fc.weight", "embed_tokens.weight", "d2t", "t2d")
_NORM = re.compile(r"(^|\.)[A-Za-z0-9_]*norm(\.\d+)?\.weight$")  # norm.weight, fc_norm.0.weight
_MAX_LISTED = 20  # names spelled out in a finding message; evidence always has all of them


@dataclass
class TensorStats:
    name: str
    dtype: str
    shape: tuple[int, ...]
    numel: int
    n_nan: int = 0
    n_inf: int = 0
    n_zero: int = 0
    min: float | int | None = None     # ints stay ints; over finite values for floats
    max: float | int | None = None
    mean: float | None = None
    std: float | None = None           # population (ddof=0)
    norm: float | None = None          # L2 norm of the finite values
    constant: bool = False             # at least one finite value and all finite values equal
    n_true: int | None = None          # bool tensors only

    @property
    def kind(self) -> str:
        if self.dtype in FLOAT_DTYPES:
            return "float"
        if self.dtype in INT_DTYPES:
            return "int"
        return "bool"

    @property
    def n_finite(self) -> int:
        return self.numel - self.n_nan - self.n_inf

    def to_json(self, key_map: KeyMap | None = None) -> dict[str, Any]:
        out = asdict(self)
        out["shape"] = list(self.shape)
        out["kind"] = self.kind
        out["flags"] = [list(f) for f in tensor_flags(out, key_map)]
        return out


@dataclass
class StatsResult:
    stats: dict[str, TensorStats] = field(default_factory=dict)  # in scan order
    skipped: list[str] = field(default_factory=list)            # over budget, in priority order
    budget_bytes: int = DEFAULT_BUDGET_BYTES
    scanned_bytes: int = 0
    seconds: float = 0.0
    skipped_bytes: int = 0
    # first chunk of each skipped float tensor: catches NaN-initialised embeddings that the
    # budget leaves out (an 8B speculators draft's embed_tokens alone is over 1 GB)
    probes: dict[str, TensorStats] = field(default_factory=dict)
    key_map: KeyMap | None = field(default=None, repr=False, compare=False)  # the checkpoint's

    def to_json(self) -> dict[str, Any]:
        return {"budget_bytes": self.budget_bytes, "scanned_bytes": self.scanned_bytes,
                "skipped_bytes": self.skipped_bytes, "seconds": round(self.seconds, 6),
                "skipped": list(self.skipped),
                "stats": {name: s.to_json(self.key_map) for name, s in self.stats.items()},
                "probes": {name: s.to_json(self.key_map) for name, s in self.probes.items()}}


# ----------------------------------------------------------------------------- scan order

def canonical(name: str, key_map: KeyMap | None = None) -> str:
    """The bare speculators-style name (wrapper prefixes stripped); the name itself otherwise.
    Read from KEY_MAP, the checkpoint's map, when given."""
    if key_map is not None:
        return key_map.canonical_or_name(name)
    return split_key(name).canonical or name


def is_norm(name: str, key_map: KeyMap | None = None) -> bool:
    return bool(_NORM.search(canonical(name, key_map)))


def scan_order(names: Iterable[str], key_map: KeyMap | None = None) -> list[str]:
    """lm_head, fc, embed_tokens, d2t, t2d, then norm weights, then the rest, each by name."""
    def key(name: str):
        canon = canonical(name, key_map)
        if canon in PRIORITY_NAMES:
            group = PRIORITY_NAMES.index(canon)
        elif _NORM.search(canon):
            group = len(PRIORITY_NAMES)
        else:
            group = len(PRIORITY_NAMES) + 1
        return group, canon, name
    return sorted(names, key=key)


# ----------------------------------------------------------------------------- the scan

def scan_stats(ckpt, budget_bytes: int = DEFAULT_BUDGET_BYTES, *,
               chunk_bytes: int = DEFAULT_CHUNK_BYTES) -> StatsResult:
    """Scan tensors in priority order until the byte budget is spent.

    A tensor whose bytes would take the total past `budget_bytes` is skipped (and listed in
    `skipped`); smaller ones after it are still scanned. `chunk_bytes` bounds how much of a
    tensor is decoded at once.
    """
    import numpy  # noqa: F401  (imported here so its import time is not counted as scanning)

    t0 = time.perf_counter()
    result = StatsResult(budget_bytes=budget_bytes, key_map=ckpt.key_map)
    scratch = _Scratch()
    for name in scan_order(ckpt.tensors, ckpt.key_map):
        info: TensorInfo = ckpt.tensors[name]
        if result.scanned_bytes + info.nbytes > budget_bytes:
            result.skipped.append(name)
            result.skipped_bytes += info.nbytes
            if info.dtype in FLOAT_DTYPES and len(result.probes) < MAX_PROBES:
                result.probes[name] = tensor_stats(ckpt, info, chunk_bytes=chunk_bytes,
                                                   _scratch=scratch, max_chunks=1)
            continue
        result.stats[name] = tensor_stats(ckpt, info, chunk_bytes=chunk_bytes, _scratch=scratch)
        result.scanned_bytes += info.nbytes
    result.seconds = time.perf_counter() - t0
    return result


def tensor_stats(ckpt, info: TensorInfo, *, chunk_bytes: int = DEFAULT_CHUNK_BYTES,
                 _scratch: "_Scratch | None" = None, max_chunks: int | None = None) -> TensorStats:
    """Statistics of one tensor of `ckpt` (safetensors: streamed; pickle: from memory).
    With max_chunks, only the tensor's head is read and `numel` counts what was read."""
    acc = _Accumulator(info, _scratch or _Scratch())
    if ckpt.format == "pickle":
        chunks = _pickle_chunks(ckpt.pickled_tensor(info.name), info, chunk_bytes)
    else:
        chunks = iter_chunks(ckpt.file_path(info.file), info, chunk_bytes)
    seen = 0
    for i, chunk in enumerate(chunks):
        seen += chunk.size
        acc.update(chunk)
        del chunk
        if max_chunks is not None and i + 1 >= max_chunks:
            chunks.close()
            acc.s.numel = seen
            break
    return acc.result()


def _pickle_chunks(tensor, info: TensorInfo, chunk_bytes: int):
    import torch  # pickle checkpoints were loaded with torch already

    t = tensor.detach().reshape(-1)
    widen = t.dtype.is_floating_point and t.dtype not in (torch.float16, torch.float32,
                                                          torch.float64)  # bf16, fp8
    step = max(1, chunk_bytes // max(1, t.element_size()))
    for start in range(0, t.numel(), step):
        part = t[start:start + step]
        yield (part.float() if widen else part).numpy()


class _Scratch:
    """Work arrays reused from chunk to chunk: fresh allocations cost more than the arithmetic."""

    def __init__(self):
        self._bufs: dict = {}

    def get(self, dtype, n: int):
        import numpy as np

        buf = self._bufs.get(np.dtype(dtype))
        if buf is None or buf.size < n:
            buf = self._bufs[np.dtype(dtype)] = np.empty(n, dtype)
        return buf[:n]


class _Accumulator:
    """Streaming statistics over flat numpy chunks; float64 sums, Chan's parallel combine."""

    def __init__(self, info: TensorInfo, scratch: _Scratch):
        self.s = TensorStats(info.name, info.dtype, tuple(info.shape), info.numel)
        self.kind = self.s.kind
        self.scratch = scratch
        self.count = 0        # finite values seen
        self.mean = 0.0
        self.m2 = 0.0         # sum of squared deviations from the mean
        self.lo = None
        self.hi = None
        if self.kind == "bool":
            self.s.n_true = 0

    def update(self, x) -> None:
        import numpy as np

        x = np.ascontiguousarray(x).reshape(-1)
        n = x.size
        if n == 0:
            return
        if self.kind == "bool":
            self.s.n_true += int(np.count_nonzero(x))
            return
        if self.kind == "float":
            # +0.0 and -0.0 both count as zero: shift the sign bit out of the raw bits
            # (several times faster than comparing floats)
            bits = x.view(f"u{x.itemsize}")
            shifted = self.scratch.get(bits.dtype, n)
            np.left_shift(bits, 1, out=shifted)
            self.s.n_zero += n - int(np.count_nonzero(shifted))
        else:
            self.s.n_zero += n - int(np.count_nonzero(x))
        lo, hi = x.min(), x.max()
        if self.kind == "float" and not (np.isfinite(lo) and np.isfinite(hi)):
            finite = np.isfinite(x)
            n_fin = int(np.count_nonzero(finite))
            n_nan = int(np.count_nonzero(np.isnan(x)))
            self.s.n_nan += n_nan
            self.s.n_inf += n - n_nan - n_fin
            x = x[finite]
            n = n_fin
            if n == 0:
                return
            lo, hi = x.min(), x.max()
        lo = int(lo) if self.kind == "int" else float(lo)
        hi = int(hi) if self.kind == "int" else float(hi)
        self.lo = lo if self.lo is None else min(self.lo, lo)
        self.hi = hi if self.hi is None else max(self.hi, hi)

        # exact two-pass mean and M2 within the chunk, in float64
        x64 = self.scratch.get(np.float64, n)
        np.copyto(x64, x)
        mean_c = float(x64.sum()) / n
        np.subtract(x64, mean_c, out=x64)
        m2_c = float(np.dot(x64, x64))
        if self.count == 0:
            self.count, self.mean, self.m2 = n, mean_c, m2_c
        else:  # Chan, Golub & LeVeque: combine two (count, mean, M2) summaries
            total = self.count + n
            delta = mean_c - self.mean
            self.mean += delta * n / total
            self.m2 += m2_c + delta * delta * self.count * n / total
            self.count = total

    def result(self) -> TensorStats:
        s = self.s
        if self.kind == "bool":
            s.n_zero = s.numel - s.n_true
            if s.numel:
                s.mean = s.n_true / s.numel
                s.constant = s.n_true in (0, s.numel)
            return s
        if self.count:
            s.min, s.max = self.lo, self.hi
            s.mean = self.mean
            var = max(self.m2, 0.0) / self.count
            s.std = math.sqrt(var)
            s.norm = math.sqrt(max(self.m2, 0.0) + self.count * self.mean * self.mean)
            s.constant = self.lo == self.hi
        return s


# ----------------------------------------------------------------------------- findings

def _probe_findings(result: StatsResult) -> list[Finding]:
    bad = [s for s in result.probes.values() if s.n_nan or s.n_inf]
    if not bad:
        return []
    return [Finding(
        "NAN_WEIGHTS", ERROR,
        f"NaN or Inf already in the first values of {_count(bad, 'tensor')} the byte budget "
        "left unscanned: " + _listing(bad, lambda s: f"{s.name} ({_nan_text(s)} in the first "
                                      f"{s.numel} values)")
        + ". speculators fills embed_tokens/lm_head with NaN until the verifier's weights are "
        "loaded; an engine that uses the draft's own copy computes NaN. Rescan with a larger "
        "--stats-budget for the full count.",
        {"probed": {s.name: {"nan": s.n_nan, "inf": s.n_inf, "values_read": s.numel}
                    for s in bad}})]


def stats_findings(result: StatsResult, ckpt=None) -> list[Finding]:
    """NAN_WEIGHTS for NaN/Inf, all-zero, constant and untouched-looking tensors; STATS_SKIPPED.

    `ckpt` (optional) only supplies tensor sizes for the skipped list.
    """
    findings: list[Finding] = []
    key_map = result.key_map
    floats = [s for s in result.stats.values() if s.kind == "float"]
    findings += _probe_findings(result)

    bad = [s for s in floats if s.n_nan or s.n_inf]
    if bad:
        findings.append(Finding(
            "NAN_WEIGHTS", ERROR,
            f"{_count(bad, 'tensor')} {_verb(bad, 'contains', 'contain')} NaN or Inf values: "
            + _listing(bad, lambda s: f"{s.name} ({_nan_text(s)})")
            + f". The draft computes NaN logits from {_verb(bad, 'it', 'them')} and every draft "
            "token is rejected "
            "(accept length ~1.0). speculators fills embed_tokens/lm_head with NaN until the "
            "verifier's weights are loaded: load them (or copy the target's) before saving. "
            "Otherwise re-export from the last good training checkpoint; if training itself "
            "produced NaN, lower the learning rate or check the loss for overflow.",
            {"tensors": {s.name: {"nan": s.n_nan, "inf": s.n_inf, "numel": s.numel}
                         for s in bad}}))

    zero = [s for s in floats if s.numel and s.n_zero == s.numel and not (s.n_nan or s.n_inf)
            and canonical(s.name, key_map).endswith("weight")]
    if zero:
        findings.append(Finding(
            "NAN_WEIGHTS", ERROR,
            f"{_count(zero, 'weight')} {_verb(zero, 'is', 'are')} all zeros: "
            + _listing(zero, lambda s: f"{s.name} {list(s.shape)}")
            + ". A zero linear or embedding weight was never initialised or never trained, "
            "and a zero norm weight silences its layer. Check that the export saved the trained "
            "module's state_dict (not a freshly built model) and that these keys were not "
            "zero-filled by a conversion script; re-export from the training checkpoint.",
            {"tensors": {s.name: {"shape": list(s.shape), "numel": s.numel} for s in zero}}))

    zero_names = {s.name for s in zero}
    constant = [s for s in floats if s.constant and s.numel > 1 and s.name not in zero_names
                and not (s.n_nan or s.n_inf) and not is_norm(s.name, key_map)]
    if constant:
        findings.append(Finding(
            "NAN_WEIGHTS", ERROR,
            f"{_count(constant, 'tensor')} {_verb(constant, 'holds', 'hold')} a single "
            "repeated value: "
            + _listing(constant, lambda s: f"{s.name} (all {s.min!r})")
            + ". Trained weights are never constant: this is a fill value (torch.full, "
            "nn.init.constant_) left by an initialiser or a conversion that never received the "
            "trained values. Re-export from the training checkpoint and compare with it.",
            {"tensors": {s.name: {"value": s.min, "shape": list(s.shape)} for s in constant}}))

    ones = [s for s in floats if is_norm(s.name, key_map) and s.constant and s.min == 1.0
            and not (s.n_nan or s.n_inf)]
    if ones:
        findings.append(Finding(
            "NAN_WEIGHTS", WARNING,
            f"{_count(ones, 'norm weight')} {_verb(ones, 'is', 'are')} exactly 1.0 "
            "everywhere, their initial value: "
            + _listing(ones, lambda s: s.name)
            + ". After training RMSNorm weights drift from 1.0, so these look untouched: never "
            "trained, frozen, or never loaded. Expected only if training froze them; otherwise "
            "check that the exporter saved them from the trained model. (An engine that runs a "
            "norm the checkpoint never trained, such as a hidden_norm in layers >= 1, is "
            "reported by the engine plan, not here.)",
            {"tensors": sorted(s.name for s in ones)}))

    findings += _fresh_layer_findings(floats, _init_std(ckpt), key_map)
    findings += _random_init_findings(floats, _init_std(ckpt), ckpt, findings, key_map)

    if result.skipped:
        sizes = {}
        if ckpt is not None:
            sizes = {n: ckpt.tensors[n].nbytes for n in result.skipped if n in ckpt.tensors}
        skipped_bytes = sum(sizes.values()) if sizes else result.skipped_bytes
        findings.append(Finding(
            "STATS_SKIPPED", INFO,
            f"{_count(result.skipped, 'tensor')} ({_gb(skipped_bytes)}) "
            f"{_verb(result.skipped, 'was', 'were')} not scanned for "
            f"NaN/zero/constant values: scanning {_verb(result.skipped, 'it', 'them')} would "
            f"exceed the {_gb(result.budget_bytes)} "
            f"statistics budget ({_gb(result.scanned_bytes)} scanned, most telling tensors "
            "first). Unscanned: " + _listing(result.skipped, str)
            + ". Raise the budget to scan them too (`eagle3-nb inspect --stats-budget 8G`, "
            "or scan_stats(ckpt, budget_bytes=...)).",
            {"skipped": list(result.skipped), "skipped_bytes": skipped_bytes,
             "budget_bytes": result.budget_bytes, "scanned_bytes": result.scanned_bytes}))
    return findings


_LAYER = re.compile(r"^(layers\.\d+)\.")
_INIT_STD_TOLERANCE = 0.05  # std within 5% of initializer_range
DEFAULT_INIT_STD = 0.02     # transformers' initializer_range when the config has none


def _init_std(ckpt) -> float:
    raw = getattr(ckpt, "config_raw", None) or {}
    value = raw.get("initializer_range") if isinstance(raw, dict) else None
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and 0 < value < 1
    return float(value) if ok else DEFAULT_INIT_STD


def _fresh_layer_findings(floats: list, init_std: float, key_map: KeyMap | None) -> list[Finding]:
    """A decoder layer whose norms are all exactly 1.0 and whose linear weights all look like
    normal(0, initializer_range) draws was initialised and never trained: a conversion that
    saved a freshly built layer for keys it could not match looks exactly like this."""
    layers: dict[str, list] = {}
    for s in floats:
        m = _LAYER.match(canonical(s.name, key_map))
        if m:
            layers.setdefault(m.group(1), []).append(s)
    fresh = {}
    for layer, stats in sorted(layers.items()):
        norms = [s for s in stats if is_norm(s.name, key_map)]
        linears = [s for s in stats if not is_norm(s.name, key_map) and len(s.shape) == 2]
        if not norms or not linears:
            continue
        untouched = all(s.constant and s.min == 1.0 for s in norms)
        drawn = all(s.std is not None and abs(s.std - init_std) <= _INIT_STD_TOLERANCE * init_std
                    and abs(s.mean or 0.0) <= 0.1 * init_std for s in linears)
        if untouched and drawn:
            fresh[layer] = {s.name: round(s.std, 6) for s in linears}
    if not fresh:
        return []
    return [Finding("NAN_WEIGHTS", ERROR, f"{', '.join(fresh)} look freshly initialised: every "
                    "norm is exactly 1.0 and every linear weight has mean 0 and std "
                    f"{init_std:g} (initializer_range, as transformers draws it): never trained, "
                    "or replaced by a conversion that built the layer anew for keys it could not "
                    "match. Re-export from the training checkpoint.",
                    {"layers": fresh, "initializer_range": init_std})]


# Rows of an i.i.d. normal(0, s) weight with n columns have norms s*sqrt(n) within a relative
# spread of 1/sqrt(2n); trained weights' rows differ far more (tens of percent). A tensor whose
# rows are this alike, at the initialiser's mean and std, was never trained.
_ROW_SPREAD_FACTOR = 4.0
_SAMPLED_ROWS = 64


def _random_init_findings(floats: list, init_std: float, ckpt, found: list,
                          key_map: KeyMap | None) -> list[Finding]:
    """Linear weights at their random initialisation under trained norms (a conversion that
    lost a key remap and saved strict=False init): mean 0, std initializer_range, and rows with
    no structure. Read from sampled rows of each candidate only (safetensors)."""
    if ckpt is None or getattr(ckpt, "format", None) != "safetensors":
        return []
    seen = {name for f in found if f.code == "NAN_WEIGHTS"
            for layer in (f.evidence.get("layers") or {}).values() for name in layer}
    # embed_tokens is left to EMBED_DIFFERS: only some releases serve the draft's own copy
    candidates = [s for s in floats if len(s.shape) == 2 and not is_norm(s.name, key_map)
                  and s.name not in seen and canonical(s.name, key_map) != "embed_tokens.weight"
                  and s.std is not None and s.shape[1] >= 16
                  and abs(s.std - init_std) <= _INIT_STD_TOLERANCE * init_std
                  and abs(s.mean or 0.0) <= 0.1 * init_std]
    drawn = {s.name: spread for s in candidates
             if (spread := _row_norm_spread(ckpt, s.name)) is not None
             and spread <= _ROW_SPREAD_FACTOR / math.sqrt(2 * s.shape[1])}
    if not drawn:
        return []
    return [Finding("NAN_WEIGHTS", ERROR, f"{_count(list(drawn), 'weight')} "
                    f"{_verb(list(drawn), 'looks', 'look')} like a random initialisation: "
                    f"{', '.join(list(drawn)[:_MAX_LISTED])} (mean 0, std {init_std:g} = "
                    "initializer_range, and every sampled row has the same norm, which no "
                    "trained weight has). A conversion that lost a key remap and loaded with "
                    "strict=False saves exactly this (speculators#1114): every draft token is "
                    "rejected. Re-export from the training checkpoint.",
                    {"tensors": {n: {"row_norm_spread": round(v, 4)} for n, v in drawn.items()},
                     "initializer_range": init_std})]


def _row_norm_spread(ckpt, name: str) -> float | None:
    """The relative spread (std / mean) of the norms of up to _SAMPLED_ROWS rows."""
    from eagle3_nb.io.safetensors import read_rows

    info = ckpt.tensors.get(name)
    if info is None or len(info.shape) != 2 or not info.shape[0]:
        return None
    step = max(1, info.shape[0] // _SAMPLED_ROWS)
    rows = list(range(0, info.shape[0], step))[:_SAMPLED_ROWS]
    norms = [float((r.astype("float64") ** 2).sum()) ** 0.5
             for r in read_rows(ckpt.path / info.file, info, rows)]
    mean = sum(norms) / len(norms)
    if mean <= 0 or len(norms) < 8:
        return None
    return (sum((x - mean) ** 2 for x in norms) / len(norms)) ** 0.5 / mean


def _count(items, noun: str) -> str:
    return f"{len(items)} {noun}{'' if len(items) == 1 else 's'}"


def _verb(items, one: str, many: str) -> str:
    return one if len(items) == 1 else many


def _listing(items, fmt) -> str:
    shown = [fmt(s) for s in items[:_MAX_LISTED]]
    more = len(items) - len(shown)
    return ", ".join(shown) + (f" and {more} more" if more > 0 else "")


def _nan_text(s: TensorStats) -> str:
    parts = []
    if s.n_nan:
        parts.append(f"{s.n_nan} NaN")
    if s.n_inf:
        parts.append(f"{s.n_inf} Inf")
    share = (s.n_nan + s.n_inf) / s.numel if s.numel else 0.0
    return " + ".join(parts) + f" of {s.numel}" + (", all of it" if share == 1 else "")


def _gb(n: int) -> str:
    if n >= 1 << 30:
        return f"{n / (1 << 30):.2f} GiB"
    if n >= 1 << 20:
        return f"{n / (1 << 20):.1f} MiB"
    return f"{n} bytes"


def tensor_flags(s: dict[str, Any], key_map: KeyMap | None = None) -> list[tuple[str, str]]:
    """(label, severity) of what looks wrong in one tensor's statistics (NaN/Inf, all zeros,
    constant, a norm weight still at its initial 1.0): one tensor's JSON row in (KEY_MAP: its
    checkpoint's map, when at hand), the labels the notebook shows beside it out (stats_findings
    says the same as findings)."""
    out: list[tuple[str, str]] = []
    numel = s.get("numel") or 0
    if not _is_float_dtype(s.get("dtype", "")) or s.get("n_true") is not None or not numel:
        return out
    if s.get("n_nan") or s.get("n_inf"):
        out.append(("NaN/Inf", "error"))
        return out
    name = s.get("name", "")
    if s.get("n_zero") == numel and name.endswith("weight"):
        out.append(("all zeros: never trained?", "error"))
    elif s.get("constant") and numel > 1 and not is_norm(name, key_map):
        out.append((f"constant {s.get('min'):.4g}: never trained?", "error"))
    elif s.get("constant") and is_norm(name, key_map) and s.get("min") == 1.0:
        out.append(("all 1.0: untouched norm?", "warning"))
    return out


def _is_float_dtype(dtype: str) -> bool:
    return str(dtype).upper() in FLOAT_DTYPES
