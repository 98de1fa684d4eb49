"""What an engine reported about speculative decoding, in a form every engine's reader fills.

The common result (`ObservedMetrics`), its error, and the parts of the formats no engine owns:
bounded number reading, JSON, and the Prometheus text exposition. The engines' own formats (their
log lines, JSON answers and metric names) are read in their folders
(eagle3_nb/engines/<engine>/metrics.py); eagle3_nb.observed.metrics picks the reader.

Conventions (what each number means)
------------------------------------
* **Accept length** (``ObservedMetrics.mean_accept_length``): tokens emitted per verify step =
  accepted draft tokens + 1 bonus token from the target, range 1..k+1.
* **Mean acceptance length** (``ObservedMetrics.mean_acceptance_length``):
  ``1 + accepted / num_drafts``. It counts the same thing (accepted + 1 bonus per step), so on the
  same steps both conventions give the same number. Differences come from *what* is averaged: a
  per-request figure of ``completion_tokens / verify steps`` also counts the first token (sampled
  at prefill, no verify step) and sits about ``1/verify steps`` above ``1 + accepted / verify
  steps``, the exact per-step figure. Where the counts exist the readers fill
  ``mean_acceptance_length`` from them.
* **Accept rate**: the formula differs by engine and release; ``accept_rate`` is always the figure
  as the source printed or reported it and ``accept_rate_convention`` says which formula it uses.
  ``draft_acceptance_rate`` is the engine-independent one (accepted draft tokens / drafted tokens,
  bonus excluded), filled where it can be derived.
* **Per-position acceptance** alpha_i: accepted at position i / drafts. From a histogram of correct
  drafts per step it is P(correct drafts >= i + 1), the same quantity for chain drafting.

Nothing here returns a silent zero: a NaN figure, a malformed sample or a value that is not a
number raises :class:`MetricsFormatError` (an :class:`~eagle3_nb.errors.Eagle3NbError`) naming
what was expected.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import asdict, dataclass, field
from typing import Any

from eagle3_nb.config import MAX_NUM_STEPS
from eagle3_nb.errors import Eagle3NbError
from eagle3_nb.io.checkpoint import json_problem


class MetricsFormatError(Eagle3NbError):
    """Engine metrics text or JSON that cannot be read as what it claims to be."""


def finite(value: Any, what: str, where: str | None = None, *, minimum: float | None = 0.0
            ) -> float:
    """A finite float from a JSON/Prometheus/log value, or a MetricsFormatError naming it."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise MetricsFormatError(f"{what} is {value!r}, expected a number", where)
    try:
        out = float(value)
    except ValueError:
        raise MetricsFormatError(f"{what} is {value!r}, expected a number", where) from None
    if not math.isfinite(out):
        raise MetricsFormatError(f"{what} is {value!r}: a NaN/Inf figure cannot be used", where,
                                 "speculative decoding may have produced no verify steps yet")
    if minimum is not None and out < minimum:
        raise MetricsFormatError(f"{what} is {out!r}, expected at least {minimum}", where)
    return out


def count(value: Any, what: str, where: str | None = None) -> int:
    out = finite(value, what, where)
    if abs(out - round(out)) > 1e-6:
        raise MetricsFormatError(f"{what} is {value!r}, expected a whole count", where)
    return int(round(out))


# What one draft step can produce, whatever an engine's figures claim: the kit builds one list
# entry per draft position, so a position label of 300000000 must be refused, not allocated.
# The same limits as the drafting settings the kit simulates (config.py).
MAX_DRAFT_POSITIONS = MAX_NUM_STEPS


def draft_position(value: Any, what: str, where: str | None = None) -> int:
    """A 0-based draft position (a Prometheus `position` label, a histogram index), bounded."""
    pos = count(value, what, where)
    if pos >= MAX_DRAFT_POSITIONS:
        raise MetricsFormatError(f"{what} is {pos}: no draft reaches that deep (the kit reads "
                                 f"positions 0..{MAX_DRAFT_POSITIONS - 1})", where,
                                 "is this the engine's own output? a real one lists one entry "
                                 "per speculative step")
    return pos


def check_positions(n: int, what: str, where: str | None = None, extra: int = 0) -> None:
    """A per-position list of N entries (EXTRA more allowed, e.g. a histogram's zero bin)."""
    if n > MAX_DRAFT_POSITIONS + extra:
        raise MetricsFormatError(f"{what} has {n} entries: no draft has that many positions "
                                 f"(the kit reads at most {MAX_DRAFT_POSITIONS + extra})", where,
                                 "is this the engine's own output? a real one lists one entry "
                                 "per speculative step")


@dataclass
class ObservedMetrics:
    """What an engine reported about speculative decoding, in every convention it allows.

    ``mean_accept_length``: SGLang convention, accepted + 1 bonus per verify step.
    ``mean_acceptance_length``: ``1 + accepted / drafts`` (same quantity; filled from counts
    where they exist, see the module docstring for why it can differ slightly from SGLang's
    per-request figure). ``accept_rate`` is as reported; ``accept_rate_convention`` names its
    formula.
    ``draft_acceptance_rate``: accepted draft tokens / drafted tokens, bonus excluded.
    ``n_verify_steps``: verify steps (vLLM: one per draft, so equal to ``n_drafts``).
    ``n_accepted`` / ``n_drafted``: draft tokens accepted / proposed (bonus excluded).
    """

    engine: str
    source: str
    mean_accept_length: float | None = None
    mean_acceptance_length: float | None = None
    accept_rate: float | None = None
    accept_rate_convention: str | None = None
    draft_acceptance_rate: float | None = None
    per_position_acceptance: list[float] | None = None
    accept_length_histogram: dict[str, int] | None = None
    n_verify_steps: int | None = None
    n_drafts: int | None = None
    n_accepted: int | None = None
    n_drafted: int | None = None
    n_requests: int | None = None
    draft_tokens_per_step: int | None = None
    version_detected: str | None = None
    notes: list[str] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)
    per_request: list[dict[str, Any]] | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent, allow_nan=False)

    def headline(self) -> str:
        parts = [f"{self.engine} ({self.source})"]
        if self.mean_accept_length is not None:
            parts.append(f"accept length {self.mean_accept_length:.2f}")
        if self.mean_acceptance_length is not None:
            parts.append(f"mean acceptance length {self.mean_acceptance_length:.2f}")
        if self.draft_acceptance_rate is not None:
            parts.append(f"draft acceptance {self.draft_acceptance_rate:.1%}")
        return ", ".join(parts)


def histogram_to_lengths(hist: list[int]) -> dict[str, int]:
    """Correct-drafts histogram (index = correct drafts) -> accept-length histogram (+1)."""
    return {str(i + 1): int(c) for i, c in enumerate(hist)}


def per_position_from_histogram(hist: list[int]) -> list[float] | None:
    total = sum(hist)
    if total <= 0 or len(hist) < 2:
        return None
    # alpha_i = P(correct drafts >= i + 1)
    return [sum(hist[i + 1:]) / total for i in range(len(hist) - 1)]


def load_json(obj: Any, what: str) -> Any:
    if isinstance(obj, (bytes, bytearray)):
        obj = obj.decode("utf-8", errors="replace")
    if isinstance(obj, str):
        try:
            return json.loads(obj)
        except (ValueError, RecursionError) as e:
            raise MetricsFormatError(f"not JSON ({json_problem(e)})", what) from None
    return obj


def int_list(value: Any, what: str, where: str) -> list[int]:
    """A histogram over correct drafts per step (index 0..depth): bounded by the draft depth."""
    if not isinstance(value, list) or not value:
        raise MetricsFormatError(f"{what} is {as_text(value)!r}, expected a non-empty list of "
                                 "counts", where)
    check_positions(len(value), what, where, extra=1)
    return [count(v, f"{what}[{i}]", where) for i, v in enumerate(value)]


# ------------------------------------------------------------------------------------------------
# Prometheus text exposition

_PROM_NAME_RE = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_PROM_LABEL_RE = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")


@dataclass
class PromSample:
    name: str
    labels: dict[str, str]
    value: float
    timestamp: int | None = None
    type: str | None = None  # from the family's # TYPE line


def _prom_value(tok: str, where: str) -> float:
    special = {"nan": math.nan, "+inf": math.inf, "inf": math.inf, "-inf": -math.inf}
    if tok.lower() in special:
        return special[tok.lower()]
    try:
        return float(tok)
    except ValueError:
        raise MetricsFormatError(f"sample value {tok!r} is not a number", where) from None


def _prom_labels(s: str, i: int, where: str) -> tuple[dict[str, str], int]:
    """Parse ``{a="x",b="y\\"z"}`` starting at s[i] == '{'; return the labels and the index
    after the closing brace."""
    labels: dict[str, str] = {}
    i += 1
    n = len(s)
    while True:
        while i < n and s[i] in " \t":
            i += 1
        if i < n and s[i] == "}":
            return labels, i + 1
        m = _PROM_LABEL_RE.match(s, i)
        if not m:
            raise MetricsFormatError(f"bad label name at column {i + 1}", where)
        name = m.group(0)
        i = m.end()
        while i < n and s[i] in " \t":
            i += 1
        if i + 1 >= n or s[i] != "=" or s[i + 1] != '"':
            raise MetricsFormatError(f"label {name!r}: expected =\"...\" at column {i + 1}", where)
        i += 2
        buf = []
        while True:
            if i >= n:
                raise MetricsFormatError(f"label {name!r}: unterminated value", where)
            c = s[i]
            if c == "\\":
                if i + 1 >= n:
                    raise MetricsFormatError(f"label {name!r}: dangling backslash", where)
                nxt = s[i + 1]
                buf.append({"n": "\n", "\\": "\\", '"': '"'}.get(nxt, "\\" + nxt))
                i += 2
            elif c == '"':
                i += 1
                break
            else:
                buf.append(c)
                i += 1
        if name in labels:
            raise MetricsFormatError(f"label {name!r} repeated", where)
        labels[name] = "".join(buf)
        while i < n and s[i] in " \t":
            i += 1
        if i < n and s[i] == ",":
            i += 1
            continue
        if i < n and s[i] == "}":
            return labels, i + 1
        raise MetricsFormatError(f"expected ',' or '}}' after label {name!r} at column {i + 1}",
                                 where)


def parse_prometheus(text: str) -> list[PromSample]:
    """Samples of a Prometheus text exposition (``# HELP``/``# TYPE`` comments, labels with escaped
    quotes, ``NaN``/``+Inf`` values, optional timestamps). A ``_total``/``_created``/``_bucket``...
    sample gets the type of its family's ``# TYPE`` line. Raises on a malformed sample line."""
    types: dict[str, str] = {}
    out: list[PromSample] = []
    for no, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line:
            continue
        where = f"Prometheus line {no}"
        if line.startswith("#"):
            parts = line[1:].split(None, 3)
            if len(parts) >= 3 and parts[0] == "TYPE":
                types[parts[1]] = parts[2]
            continue
        m = _PROM_NAME_RE.match(line)
        if not m:
            raise MetricsFormatError(f"not a metric name at the start: {line[:60]!r}", where)
        name = m.group(0)
        i = m.end()
        labels: dict[str, str] = {}
        if i < len(line) and line[i] == "{":
            labels, i = _prom_labels(line, i, where)
        rest = line[i:].split()
        if not rest or len(rest) > 2:
            raise MetricsFormatError(f"expected 'value [timestamp]' after {name}, got "
                                     f"{line[i:][:60]!r}", where)
        value = _prom_value(rest[0], where)
        ts = None
        if len(rest) == 2:
            try:
                ts = int(float(rest[1]))
            except ValueError:
                raise MetricsFormatError(f"bad timestamp {rest[1]!r}", where) from None
        typ = types.get(name)
        if typ is None:
            for suf in ("_total", "_created", "_bucket", "_count", "_sum", "_info"):
                if name.endswith(suf) and name[: -len(suf)] in types:
                    typ = types[name[: -len(suf)]]
                    break
        out.append(PromSample(name, labels, value, ts, typ))
    return out



def as_float(v: Any, what: str) -> float:
    if isinstance(v, bool):
        raise MetricsFormatError(f"{what} is {v!r}, expected a number", "metrics")
    try:
        return float(v)
    except (TypeError, ValueError):
        raise MetricsFormatError(f"{what} is {v!r}, expected a number", "metrics") from None


def normalize_samples(samples: Any) -> list[PromSample]:
    """PromSamples, Prometheus text, or an engine's offline metric objects (``.name`` with ``.value`` or
    ``.values``, e.g. ``vllm.v1.metrics.reader.Counter``/``Vector``) or dicts like them."""
    if isinstance(samples, (str, bytes, bytearray)):
        text = samples.decode("utf-8", "replace") if not isinstance(samples, str) else samples
        return parse_prometheus(text)
    out: list[PromSample] = []
    for i, s in enumerate(samples):
        if isinstance(s, PromSample):
            out.append(s)
            continue
        get = s.get if isinstance(s, dict) else (lambda k, d=None, _s=s: getattr(_s, k, d))
        name = get("name")
        if not isinstance(name, str):
            raise MetricsFormatError(f"metric {i} has no name: {s!r}", "metrics")
        labels = dict(get("labels") or {})
        values = get("values")
        if values is not None:  # Vector: one value per position
            values = values if hasattr(values, "__len__") else list(values)
            check_positions(len(values), f"{name} values", "metrics")
            for pos, v in enumerate(values):
                out.append(PromSample(name, {**labels, "position": str(pos)},
                                      as_float(v, f"{name}[{pos}]")))
            continue
        v = get("value")
        if v is None:
            raise MetricsFormatError(f"metric {name} has neither value nor values", "metrics")
        out.append(PromSample(name, labels, as_float(v, name)))
    return out


def choose_model(samples: list[PromSample], prefix: str, model_name: str | None, where: str
                  ) -> tuple[list[PromSample], str | None]:
    rel = [s for s in samples if s.name.startswith(prefix)]
    models = sorted({s.labels["model_name"] for s in rel if "model_name" in s.labels})
    if model_name is not None:
        if model_name not in models:
            raise MetricsFormatError(f"no {prefix}* sample for model_name={model_name!r} "
                                     f"(models: {models})", where)
        rel = [s for s in rel if s.labels.get("model_name") == model_name]
        return rel, model_name
    if len(models) > 1:
        raise MetricsFormatError(f"{prefix}* samples for several models {models}", where,
                                 "pass model_name= to pick one")
    return rel, (models[0] if models else None)


def as_text(value: Any) -> str | None:
    """A server's answer field as bounded text (None stays None)."""
    return None if value is None else str(value)[:500]


def as_int(value: Any) -> int | None:
    """A server's answer field as an int, or None when it is not one."""
    if isinstance(value, bool):
        return None
    try:
        return int(value)
    except (TypeError, ValueError, OverflowError):  # OverflowError: a JSON Infinity
        return None
