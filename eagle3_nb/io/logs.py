"""A server log or a pasted traceback, read within bounds: text only, no meaning.

What the text says (the engine, its release, its arguments, what an exception means) is read by
the engines' own log dialects (eagle3_nb/engines/<engine>/log.py); this module only bounds the
reading and finds the exceptions and their frames.

A log of any size is read as its head (where engines print their version and arguments) and its
tail (where the crash is): HEAD_BYTES + TAIL_BYTES at most, whatever the file's size.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from eagle3_nb.errors import Eagle3NbError

HEAD_BYTES = 4 << 20
TAIL_BYTES = 16 << 20
MAX_ERRORS = 50          # the last ones are kept: a crash loop repeats itself
MAX_MESSAGE_LINES = 6    # an exception message that goes on over several lines

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_TRACEBACK = "Traceback (most recent call last):"
_FRAME = re.compile(r'^\s*File "([^"]+)", line (\d+), in (\S+)')
_RAISED = re.compile(r"^([A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt|Failure|Fault)|"
                     r"AssertionError|KeyError|StopIteration)(?::\s?(.*))?$")
# an exception a logger printed on one line, without its traceback; pydantic's wrapping of a
# validator's error ("Value error, <message> [type=value_error, ...]"); a CUDA kernel's device
# assertion (its message, then usually "RuntimeError: CUDA error: device-side assert triggered")
_LOGGED = re.compile(r"\b([A-Z]\w*(?:Error|Exception))\b: (.+)$")
_PYDANTIC = re.compile(r"\b(Value|Assertion|Type) error, (.+?)(?:\s*\[type=\w+.*)?$")
_DEVICE_ASSERT = re.compile(r"(\S+\.cu:\d+).*Assertion `(.+)` failed")


class LogReadError(Eagle3NbError):
    """The log cannot be read."""


@dataclass
class LogText:
    text: str
    source: str
    size: int                 # bytes of the whole log
    skipped: int = 0          # bytes between the head and the tail that were not read

    def note(self) -> str:
        if not self.skipped:
            return f"{self.source}: {self.size} bytes, read whole"
        return (f"{self.source}: {self.size} bytes; its first {HEAD_BYTES >> 20} MB and last "
                f"{TAIL_BYTES >> 20} MB read, {self.skipped} bytes between them skipped")


@dataclass
class Frame:
    file: str
    line: int
    function: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line} {self.function}"


@dataclass
class RaisedError:
    """One exception the log shows: its type, message, frames (innermost last) and line."""
    type: str
    message: str
    line_no: int
    frames: list[Frame] = field(default_factory=list)

    def text(self) -> str:
        return f"{self.type}: {self.message}" if self.message else self.type

    def to_json(self) -> dict:
        return {"type": self.type, "message": self.message, "line": self.line_no,
                "frames": [str(f) for f in self.frames]}


def read_log(path: str | os.PathLike) -> LogText:
    """The log at PATH, its head and tail when it is larger than both together."""
    p = Path(path)
    if not p.is_file():
        raise LogReadError("no such file", str(p), "pass the server's log file or a saved "
                           "traceback")
    size = p.stat().st_size
    with p.open("rb") as handle:
        if size <= HEAD_BYTES + TAIL_BYTES:
            return LogText(_clean(handle.read()), str(p), size)
        head = handle.read(HEAD_BYTES)
        handle.seek(size - TAIL_BYTES)
        tail = handle.read(TAIL_BYTES)
    skipped = size - HEAD_BYTES - TAIL_BYTES
    marker = f"\n[eagle3-nb: {skipped} bytes not read]\n"
    return LogText(_clean(head) + marker + _clean(tail), str(p), size, skipped)


def log_text(text: str, source: str = "text") -> LogText:
    """Pasted text, bounded the same way as a file."""
    data = text.encode("utf-8", errors="replace")
    if len(data) <= HEAD_BYTES + TAIL_BYTES:
        return LogText(_clean(data), source, len(data))
    skipped = len(data) - HEAD_BYTES - TAIL_BYTES
    return LogText(_clean(data[:HEAD_BYTES]) + f"\n[eagle3-nb: {skipped} bytes not read]\n"
                   + _clean(data[-TAIL_BYTES:]), source, len(data), skipped)


def _clean(data: bytes) -> str:
    text = data.decode("utf-8", errors="replace").replace("\r\n", "\n").replace("\r", "\n")
    return _ANSI.sub("", text) if "\x1b[" in text else text


def raised_errors(text: str) -> list[RaisedError]:
    """Every exception in the text: tracebacks with their frames, and exceptions a logger
    printed on one line. The last MAX_ERRORS, each (type, message) once, its last occurrence."""
    lines = text.split("\n")
    found: list[RaisedError] = []
    inside: set[int] = set()
    i = 0
    while i < len(lines):
        if _TRACEBACK in lines[i]:
            error, end = _traceback(lines, i)
            inside.update(range(i, end))
            if error is not None:
                found.append(error)
            i = max(end, i + 1)
            continue
        i += 1
    for no, line in enumerate(lines):
        if no in inside:
            continue
        if " error, " in line and (m := _PYDANTIC.search(line)):
            found.append(RaisedError(f"{m.group(1)}Error", m.group(2).strip(), no + 1))
        elif "Assertion `" in line and (m := _DEVICE_ASSERT.search(line)):
            found.append(RaisedError("CUDA device assertion", f"{m.group(2)} ({m.group(1)})",
                                     no + 1))
        elif "Error" in line or "Exception" in line:
            m = _LOGGED.search(line)
            if m:
                found.append(RaisedError(m.group(1), m.group(2).strip(), no + 1))
    latest: dict[tuple[str, str], RaisedError] = {}
    for error in sorted(found, key=lambda e: e.line_no):
        latest.pop((error.type, error.message), None)
        latest[(error.type, error.message)] = error
    return list(latest.values())[-MAX_ERRORS:]


def traceback_spans(lines: list[str]) -> list[tuple[int, int]]:
    """[start, end) line ranges of the tracebacks: the header, the frames, the exception and
    its message lines."""
    spans: list[tuple[int, int]] = []
    i = 0
    while i < len(lines):
        if _TRACEBACK in lines[i]:
            end = max(_traceback(lines, i)[1], i + 1)
            spans.append((i, end))
            i = end
        else:
            i += 1
    return spans


# vLLM's worker processes prefix every line they print: "(VllmWorker TP0 pid=123) "
_PROCESS_PREFIX = re.compile(r"^\((?:[\w.-]+ )*[\w.-]+ pid=\d+\) ?")


def _traceback(lines: list[str], start: int) -> tuple[RaisedError | None, int]:
    frames: list[Frame] = []
    i = start + 1
    while i < len(lines):
        line = _PROCESS_PREFIX.sub("", lines[i])
        m = _FRAME.match(line)
        if m:
            frames.append(Frame(m.group(1), int(m.group(2)), m.group(3)))
        elif line.strip() and not line[:1].isspace():
            raised = _RAISED.match(line.strip())
            if raised and frames:
                message = [raised.group(2) or ""]
                j = i + 1
                while j < len(lines) and len(message) < MAX_MESSAGE_LINES and lines[j].strip() \
                        and _TRACEBACK not in lines[j] and not _log_prefixed(lines[j]) \
                        and not _PROCESS_PREFIX.match(lines[j]):
                    message.append(lines[j].strip())
                    j += 1
                return RaisedError(raised.group(1), " ".join(m for m in message if m).strip(),
                                   i + 1, frames), j
            return None, i
        i += 1
    return None, i


def _log_prefixed(line: str) -> bool:
    """A new log record ([2026-12-01 10:00:00] ..., INFO 12-01 ..., ERROR ...)."""
    return bool(re.match(r"^(\[\d{4}-|\(\w+ pid=|\s*(INFO|WARNING|ERROR|DEBUG|CRITICAL)\b)", line))


def last_line_with(text: str, marker: str) -> tuple[str, int] | None:
    """The last line holding MARKER, from MARKER on, and its line number (1-based)."""
    at = text.rfind(marker)
    if at < 0:
        return None
    end = text.find("\n", at)
    return text[at:end if end >= 0 else len(text)], text.count("\n", 0, at) + 1


def literal_keywords(call: str) -> dict[str, object]:
    """'ServerArgs(model_path='m', tp_size=8, x=<object>)' -> {'model_path': 'm', 'tp_size': 8}:
    the keywords whose values are Python literals, read with ast (nothing is evaluated); the
    others, and a call cut short, are left out."""
    import ast

    try:
        node = ast.parse(call.strip(), mode="eval").body
    except (SyntaxError, ValueError, RecursionError):
        return _keywords_by_text(call)
    if not isinstance(node, ast.Call):
        return {}
    out: dict[str, object] = {}
    for kw in node.keywords:
        try:
            out[kw.arg] = ast.literal_eval(kw.value)
        except (ValueError, TypeError, SyntaxError, RecursionError):
            continue
    return out


def _keywords_by_text(call: str) -> dict[str, object]:
    """The simple keyword values (strings, numbers, booleans, None) of a repr that does not parse
    whole (a value with a non-literal repr, a line cut short)."""
    out: dict[str, object] = {}
    for m in re.finditer(r"(?:\(|, )(\w+)=('(?:[^'\\]|\\.)*'|-?\d+(?:\.\d+)?|True|False|None)",
                         call):
        raw = m.group(2)
        out[m.group(1)] = (raw[1:-1] if raw.startswith("'") else None if raw == "None" else
                           raw == "True" if raw in ("True", "False") else
                           float(raw) if "." in raw else int(raw))
    return out


def literal_dict(text: str) -> dict:
    """A printed dict ({'model': 'm', ...}) read with ast.literal_eval; {} when it is not one."""
    import ast

    start = text.find("{")
    if start < 0:
        return {}
    try:
        value = ast.literal_eval(text[start:].strip())
    except (ValueError, TypeError, SyntaxError, RecursionError, MemoryError):
        return {}
    return value if isinstance(value, dict) else {}
