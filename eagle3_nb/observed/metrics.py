"""Whatever the user has about an engine's acceptance, read: a number, a saved `observe` result,
or the engine's own text or JSON, by the first engine reader that recognises it.

The formats themselves are the engines' (eagle3_nb/engines/<engine>/metrics.py, each a `Reader`
with `can_read` and `read`); the common result and its conventions are eagle3_nb.observation.
"""

from __future__ import annotations

import json
import math
import os
import re
from dataclasses import fields
from pathlib import Path
from typing import Any

from eagle3_nb.config import MAX_DRAFT_TOKENS, MAX_NUM_STEPS
from eagle3_nb.engines.registry import readers
from eagle3_nb.io.checkpoint import MAX_JSON_BYTES
from eagle3_nb.observation import (MetricsFormatError, ObservedMetrics, check_positions, count,
                                   finite)

__all__ = ["MetricsFormatError", "ObservedMetrics", "parse_observed", "saved_text",
           "is_saved_observation", "SAVED_KIND"]

_NUMBER_RE = re.compile(r"^\s*[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?\s*$")
_SAVED = {"engine", "source", "mean_accept_length", "accept_rate_convention"}
SAVED_KIND = "eagle3-nb observe"   # the "kind" of what `eagle3-nb observe --out` writes


def _from_number(x: float, source: str) -> ObservedMetrics:
    if not math.isfinite(x):
        raise MetricsFormatError(f"observed accept length {x} is not finite", source)
    if x < 1.0:
        raise MetricsFormatError(
            f"observed accept length {x} is below 1; accept lengths count accepted + 1 bonus "
            "token per verify step (1..k+1)", source,
            "if this is an accept rate, pass the accept length (or the log line) instead")
    obs = ObservedMetrics(engine="unknown", source=source, mean_accept_length=float(x),
                          mean_acceptance_length=float(x))
    obs.notes.append("a bare number, read as the mean accept length (accepted + 1 bonus per "
                     "verify step; every engine's accept length counts this way)")
    return obs


def saved_text(obs: ObservedMetrics) -> str:
    """What `eagle3-nb observe --out` writes: the figures, marked with their kind."""
    return json.dumps({"kind": SAVED_KIND, **obs.to_dict()}, indent=2, allow_nan=False) + "\n"


def is_saved_observation(path: Path) -> bool:
    """True when PATH is a regular file holding what `eagle3-nb observe --out` wrote (its kind,
    or the fields of one written before the kind was recorded)."""
    try:
        if path.is_symlink() or not path.is_file() or path.stat().st_size > MAX_JSON_BYTES:
            return False
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return False
    if not isinstance(data, dict):
        return False
    names = {f.name for f in fields(ObservedMetrics)}
    return data.get("kind") == SAVED_KIND or _SAVED <= set(data) <= names


def _from_saved(data: dict[str, Any], source: str) -> ObservedMetrics:
    data = dict(data)
    kind = data.pop("kind", SAVED_KIND)
    if kind != SAVED_KIND:
        raise MetricsFormatError(f"kind is {str(kind)[:60]!r}, not {SAVED_KIND!r}", source,
                                 "pass a file written by eagle3-nb observe --out")
    names = {f.name for f in fields(ObservedMetrics)}
    unknown = sorted(set(data) - names)
    if unknown:
        raise MetricsFormatError(f"saved figures with unknown fields {unknown[:8]}", source,
                                 "write them again with this version's eagle3-nb observe --out")
    obs = ObservedMetrics(**_checked_saved(data, source))
    obs.notes = [*obs.notes, f"read from {source} (written by eagle3-nb observe)"]
    return obs


# The saved figures are read back as the types the kit wrote: a hand-edited or foreign file gets
# a MetricsFormatError naming the field, never a traceback further on.
_TEXTS = ("engine", "source")
_OPTIONAL_TEXTS = ("accept_rate_convention", "version_detected")
_FIGURES = ("mean_accept_length", "mean_acceptance_length", "accept_rate",
            "draft_acceptance_rate")
_COUNTS = ("n_verify_steps", "n_drafts", "n_accepted", "n_drafted", "n_requests")
_SETTINGS = {"num_steps": MAX_NUM_STEPS, "topk": MAX_DRAFT_TOKENS,
             "num_draft_tokens": MAX_DRAFT_TOKENS}


def _checked_saved(data: dict[str, Any], where: str) -> dict[str, Any]:
    out = dict(data)
    for name in _TEXTS:
        _expect(isinstance(out.get(name), str), name, out.get(name), "a string", where)
    for name in _OPTIONAL_TEXTS:
        _expect(out.get(name) is None or isinstance(out[name], str), name, out.get(name),
                "a string or null", where)
    for name in _FIGURES:
        if out.get(name) is not None:
            out[name] = finite(out[name], name, where)
    for name in _COUNTS:
        if out.get(name) is not None:
            out[name] = count(out[name], name, where)
    if out.get("draft_tokens_per_step") is not None:
        out["draft_tokens_per_step"] = _setting(out["draft_tokens_per_step"],
                                                "draft_tokens_per_step", MAX_DRAFT_TOKENS, where)
    out["per_position_acceptance"] = _figure_list(out.get("per_position_acceptance"), where)
    out["accept_length_histogram"] = _histogram(out.get("accept_length_histogram"), where)
    notes = out.get("notes", [])
    _expect(isinstance(notes, list) and all(isinstance(n, str) for n in notes), "notes", notes,
            "a list of strings", where)
    out["details"] = _details(out.get("details", {}), where)
    per_request = out.get("per_request")
    _expect(per_request is None or (isinstance(per_request, list)
                                    and all(isinstance(r, dict) for r in per_request)),
            "per_request", per_request, "a list of objects or null", where)
    return out


def _expect(ok: bool, name: str, value: Any, expected: str, where: str) -> None:
    if not ok:
        shown = repr(value) if len(repr(value)) <= 60 else repr(value)[:60] + "..."
        raise MetricsFormatError(f"{name} is {shown}, expected {expected}", where,
                                 "pass the file eagle3-nb observe --out wrote, unedited (or "
                                 "measure again)")


def _setting(value: Any, name: str, high: int, where: str) -> int:
    ok = isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= high
    _expect(ok, name, value, f"a whole number from 1 to {high}", where)
    return value


def _figure_list(value: Any, where: str) -> list[float] | None:
    if value is None:
        return None
    _expect(isinstance(value, list), "per_position_acceptance", value, "a list of numbers",
            where)
    check_positions(len(value), "per_position_acceptance", where)
    return [finite(v, f"per_position_acceptance[{i}]", where) for i, v in enumerate(value)]


def _histogram(value: Any, where: str) -> dict[str, int] | None:
    if value is None:
        return None
    _expect(isinstance(value, dict), "accept_length_histogram", value,
            "an object of accept length -> count", where)
    check_positions(len(value), "accept_length_histogram", where, extra=1)
    return {str(k): count(v, f"accept_length_histogram[{k!r}]", where) for k, v in value.items()}


def _details(value: Any, where: str) -> dict[str, Any]:
    _expect(isinstance(value, dict), "details", value, "an object", where)
    settings = value.get("settings")
    if settings is None:
        return value
    _expect(isinstance(settings, dict), "details.settings", settings, "an object", where)
    checked = {k: None if settings.get(k) is None else
               _setting(settings[k], f"details.settings.{k}", high, where)
               for k, high in _SETTINGS.items()}
    return {**value, "settings": {**settings, **checked}}


def _signatures(kind: str) -> str:
    return ", ".join(r.signature for _, r in readers(kind) if r.signature)


def _from_json(data: Any, source: str, options: dict[str, Any]) -> ObservedMetrics:
    if isinstance(data, dict) and (_SAVED <= set(data) or data.get("kind") == SAVED_KIND):
        return _from_saved(data, source)  # what `eagle3-nb observe --out` wrote
    for _, reader in readers("json"):
        if reader.can_read(data):
            return reader.read(data, source, **options)
    if not isinstance(data, dict):
        raise MetricsFormatError(f"JSON {type(data).__name__} is none of the known formats", source)
    raise MetricsFormatError(f"JSON object with keys {sorted(data)[:12]} is none of: "
                             f"{_signatures('json')}", source)


def _from_text(text: str, source: str, options: dict[str, Any]) -> ObservedMetrics:
    stripped = text.strip()
    if not stripped:
        raise MetricsFormatError("empty input: no engine metrics to read", source)
    if stripped[0] in "[{":
        data = _json_or_lines(stripped)
        if data is not None:
            return _from_json(data, source, options)
    for _, reader in readers("text"):
        if reader.can_read(text):
            return reader.read(text, source, **options)
    raise MetricsFormatError(
        f"cannot tell what this is: expected a number (mean accept length), {_signatures('text')}"
        f", or {_signatures('json')}", source)


def _json_or_lines(text: str) -> Any:
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        if text[0] != "{":
            return None
    try:  # JSON Lines
        return [json.loads(line) for line in text.splitlines() if line.strip()]
    except (ValueError, RecursionError):
        return None


def _file_text(path: Path) -> tuple[str, str, str]:
    """(text, path, note) of a file, read bounded as a log is (io.logs: its head and its tail,
    where an engine's acceptance lines are); JSON too large to read whole is refused."""
    from eagle3_nb.io.logs import read_log

    log = read_log(path)
    if log.skipped and log.text.lstrip()[:1] in ("{", "["):
        raise MetricsFormatError(f"JSON of {log.size} bytes: too large to read whole", str(path),
                                 "pass the engine's log, its metrics text, or the file eagle3-nb "
                                 "observe --out wrote")
    return log.text, str(path), log.note() if log.skipped else ""


def _text_of(observed: Any) -> tuple[str, str, str]:
    """(text, where it came from, what of it was read) of a path, bytes or a string that may
    itself name a file."""
    if isinstance(observed, os.PathLike):
        path = Path(observed)
        if not path.is_file():
            raise MetricsFormatError("file not found", str(path))
        return _file_text(path)
    if isinstance(observed, (bytes, bytearray)):
        return observed.decode("utf-8", errors="replace"), "text", ""
    if not isinstance(observed, str):
        raise MetricsFormatError(f"cannot read {type(observed).__name__} as engine metrics",
                                 "observed", "give a number, a file path, or the engine's text")
    one_line = observed.strip()
    if one_line and "\n" not in one_line and len(one_line) < 4096:
        p = Path(one_line).expanduser()
        try:
            is_file = p.is_file()
        except OSError:
            is_file = False
        if is_file:
            return _file_text(p)
        if re.search(r"\.(log|txt|json|jsonl|prom|out)$", one_line) or one_line.startswith(
                ("/", "./", "~")):
            raise MetricsFormatError("file not found", one_line)
    return observed, "text", ""


def parse_observed(observed: Any, *, version: str | None = None,
                   num_draft_tokens: int | None = None, num_speculative_tokens: int | None = None,
                   model_name: str | None = None) -> ObservedMetrics:
    """Whatever the user has about the engine's acceptance -> :class:`ObservedMetrics`.

    Accepts a number (``1.9`` or ``"1.9"``: the mean accept length), an :class:`ObservedMetrics`,
    a path to a file, or the text itself: any engine's log, Prometheus text or JSON that one of
    the registered readers recognises (``eagle3-nb engines`` lists them). Keyword arguments pass
    to the reader that matches.
    """
    if isinstance(observed, ObservedMetrics):
        return observed
    if isinstance(observed, bool):
        raise MetricsFormatError(f"observed is {observed!r}", "observed",
                                 "give a number, a file, or the engine's text")
    if isinstance(observed, (int, float)):
        return _from_number(float(observed), "number")
    options = {"version": version, "num_draft_tokens": num_draft_tokens,
               "num_speculative_tokens": num_speculative_tokens, "model_name": model_name}
    if isinstance(observed, (dict, list)):
        return _from_json(observed, "JSON object", options)
    text, source, read = _text_of(observed)
    if source == "text" and _NUMBER_RE.match(text):
        return _from_number(float(text), "number")
    obs = _from_text(text, source, options)
    if read:
        obs.notes.append(read)
    return obs
