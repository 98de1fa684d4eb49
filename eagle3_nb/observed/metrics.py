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

from eagle3_nb.engines.registry import readers
from eagle3_nb.observation import MetricsFormatError, ObservedMetrics, finite

__all__ = ["MetricsFormatError", "ObservedMetrics", "parse_observed"]

_NUMBER_RE = re.compile(r"^\s*[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?\s*$")
_SAVED = {"engine", "source", "mean_accept_length", "accept_rate_convention"}


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


def _from_saved(data: dict[str, Any], source: str) -> ObservedMetrics:
    names = {f.name for f in fields(ObservedMetrics)}
    unknown = sorted(set(data) - names)
    if unknown:
        raise MetricsFormatError(f"saved figures with unknown fields {unknown[:8]}", source,
                                 "write them again with this version's eagle3-nb observe --out")
    obs = ObservedMetrics(**data)
    if obs.mean_accept_length is not None:
        obs.mean_accept_length = finite(obs.mean_accept_length, "mean_accept_length", source)
    obs.notes = [*obs.notes, f"read from {source} (written by eagle3-nb observe)"]
    return obs


def _signatures(kind: str) -> str:
    return ", ".join(r.signature for _, r in readers(kind) if r.signature)


def _from_json(data: Any, source: str, options: dict[str, Any]) -> ObservedMetrics:
    if isinstance(data, dict) and _SAVED <= set(data):
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


def _text_of(observed: Any) -> tuple[str, str]:
    """(text, where it came from) of a path, bytes or a string that may itself name a file."""
    if isinstance(observed, os.PathLike):
        path = Path(observed)
        if not path.is_file():
            raise MetricsFormatError("file not found", str(path))
        return path.read_text(encoding="utf-8", errors="replace"), str(path)
    if isinstance(observed, (bytes, bytearray)):
        return observed.decode("utf-8", errors="replace"), "text"
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
            return p.read_text(encoding="utf-8", errors="replace"), str(p)
        if re.search(r"\.(log|txt|json|jsonl|prom|out)$", one_line) or one_line.startswith(
                ("/", "./", "~")):
            raise MetricsFormatError("file not found", one_line)
    return observed, "text"


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
    text, source = _text_of(observed)
    if source == "text" and _NUMBER_RE.match(text):
        return _from_number(float(text), "number")
    return _from_text(text, source, options)
