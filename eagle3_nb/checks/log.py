"""What the engine's own log says: its engine and release, the arguments it resolved, its
acceptance, and every exception, explained by the engine's signatures or said to be unknown.

    eagle3-nb log FILE        (and inspect --log FILE, report --log FILE, notebook 00's `log`)

The signatures are data in each engine's folder (engines/<engine>/log.py); nothing here names an
engine. An exception no signature explains is reported as unknown, with the frames that matter,
never guessed at.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from eagle3_nb.engines import newest_profiles, resolve_engine, split_spec
from eagle3_nb.engines.launch import launch_findings, launch_from_args
from eagle3_nb.engines.registry import (Engine, Signature, engine as registered, engines,
                                        readers)
from eagle3_nb.errors import Eagle3NbError
from eagle3_nb.findings import ERROR, WARNING, Finding, sort_findings
from eagle3_nb.io.logs import (LogReadError, LogText, RaisedError, log_text, raised_errors,
                               read_log, traceback_spans)
from eagle3_nb.observation import MetricsFormatError

KIND = "log"
SCHEMA = 1
_FRAMES_SHOWN = 4


@dataclass
class LogReading:
    """A typed result: what one log says."""
    source: str
    note: str                                  # how much of it was read
    engine: str | None                         # the engine's name, None when no engine's text
    version: str | None                        # the release the log names
    version_source: str                        # "the log", "--engine", or why it is unknown
    server_args: dict[str, Any] | None
    acceptance: dict[str, Any] | None          # ObservedMetrics.to_dict() of its acceptance lines
    errors: list[RaisedError] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    evidence: list[dict[str, Any]] = field(default_factory=list)  # lines that only inform
    ab_plan: list[dict[str, str]] = field(default_factory=list)   # for an unexplained crash
    had: dict[str, str] = field(default_factory=dict)             # findings.evidence_line

    @property
    def profile(self) -> str | None:
        """The key of the profile that answers for the log's release (inspect's engine key)."""
        if not (self.engine and self.version):
            return None
        return resolve_engine(f"{self.engine}=={self.version}").key

    def to_json(self) -> dict[str, Any]:
        return {"kind": KIND, "schema": SCHEMA, "source": self.source, "read": self.note,
                "engine": self.engine, "version": self.version,
                "version_source": self.version_source, "server_args": self.server_args,
                "acceptance": self.acceptance, "errors": [e.to_json() for e in self.errors],
                "evidence": self.evidence, "ab_plan": self.ab_plan, "had": self.had,
                "findings": [f.to_json() for f in sort_findings(self.findings)]}

    def summary(self) -> str:
        who = (f"{registered(self.engine).title} {self.version or '(release unknown)'}"
               if self.engine else "no engine recognised")
        errors = sum(f.severity == ERROR for f in self.findings)
        return f"{self.source}: {who}; {len(self.errors)} exception(s), {errors} error finding(s)"


def check_log(log: str | Path | LogText, engine: str | None = None,
              launch_checks: bool = True) -> LogReading:
    """Read a log file (or a LogText) and explain it. ENGINE (NAME, NAME==VERSION or
    NAME:VERSION) names the engine when the log does not, and its release when the log names
    none. LAUNCH_CHECKS: run the serving-command checks on the arguments the log shows (inspect
    runs them itself, with the draft's config)."""
    text = log if isinstance(log, LogText) else read_log(log)
    found, version, how = _identify(text.text, engine, text.source)
    reading = LogReading(text.source, text.note(), found.name if found else None, version, how,
                         None, None, raised_errors(text.text))
    if found is not None and found.log is not None:
        reading.server_args = found.log.server_args(text.text)
    reading.had = _had(reading, bool(engine and split_spec(engine)[0]))
    if found is None:
        reading.findings += [_unknown(e, None, None) for e in reading.errors]
        return reading
    reading.acceptance = _acceptance(text.text, version, found)
    _explain(reading, found, text.text)
    if any(f.code == "LOG_UNRECOGNISED" or f.evidence.get("ab_plan") for f in reading.findings):
        reading.ab_plan = ab_plan(found, version)
    if reading.server_args and launch_checks:
        reading.findings += _launch_checks(reading.server_args, found, version)
    return reading


def _had(reading: LogReading, engine_named: bool) -> dict[str, str]:
    """What this reading had (findings.evidence_line): the log, and where the engine, its
    release and its arguments came from; the draft itself is inspect's to bring."""
    if engine_named:
        engine = "named (--engine)"
    else:
        engine = "from the log" if reading.engine else "not recognised (--engine NAME)"
    if reading.version is None:
        release = f"not given (--engine {reading.engine or 'NAME'}==VERSION)"
    else:
        release = "from the log" if reading.version_source.startswith("the log") else \
            "named (--engine)"
    return {"log": "given", "engine": engine, "engine release": release,
            "server arguments": "from the log" if reading.server_args else
            "not in the log (eagle3-nb inspect DRAFT --log LOG --launch COMMAND)",
            "checkpoint": "not given (eagle3-nb inspect DRAFT --log LOG)"}


def check_log_text(text: str, engine: str | None = None, source: str = "text") -> LogReading:
    return check_log(log_text(text, source), engine)


def _identify(text: str, given: str | None,
              source: str = "the log") -> tuple[Engine | None, str | None, str]:
    """(engine, release, where the release came from) from the log itself, else from GIVEN."""
    name, version = split_spec(given) if given else ("", "")
    if name:
        found = registered(name, "--engine")
    else:
        found = _writer(text, source)
        if found is None:
            return None, None, "no engine recognised: pass --engine NAME==VERSION"
    said = found.log.version(text) if found.log else None
    if said and version.strip() and version.strip() != said:
        return found, said, f"the log (it says {said}; --engine said {version.strip()})"
    if said:
        return found, said, "the log"
    if version.strip():
        return found, version.strip(), "--engine"
    return found, None, (f"the log names no {found.title} release: pass --engine "
                         f"{found.name}==VERSION")


def _writer(text: str, source: str) -> Engine | None:
    """The engine whose text the log is, by its markers. A log holding lines of two engines is
    refused: read as either one, the other's lines would be explained by the wrong signatures."""
    dialects = {e.name: e for e in engines().values() if e.log}
    scores = {n: e.log.mentions(text) for n, e in dialects.items()}
    if sum(1 for s in scores.values() if s) > 1:
        owners = _lines_by_engine(text, dialects)
        if len(owners) > 1:
            lines = text.split("\n")
            said = "; ".join(f"{dialects[n].title} (line {no}: {_short(lines[no - 1].strip(), 80)})"
                             for n, no in owners.items())
            raise LogReadError(f"the log holds lines of more than one engine: {said}", source,
                               "split it into one log per server, or pass --engine NAME "
                               f"({', '.join(owners)}) to read it as that engine's")
        if owners:
            return registered(next(iter(owners)))
    best = max(scores.values(), default=0)
    leaders = [n for n, s in scores.items() if s == best]
    return registered(leaders[0]) if best and len(leaders) == 1 else None


def _lines_by_engine(text: str, dialects: dict[str, Engine]) -> dict[str, int]:
    """Engine -> the first line only its text holds: a line with its markers alone, or a
    traceback, which is the engine's of its first marked line (an engine's traceback passes
    through the libraries it calls, another engine's among them)."""
    lines = text.split("\n")

    def marked(line: str) -> list[str]:
        return [n for n, e in dialects.items() if e.log.mentions(line)]

    owners: dict[str, int] = {}
    covered: set[int] = set()
    for start, end in traceback_spans(lines):
        covered.update(range(start, end))
        first = next((names for names in map(marked, lines[start:end]) if names), [])
        if len(first) == 1:
            owners.setdefault(first[0], start + 1)
    for no, line in enumerate(lines):
        names = marked(line) if no not in covered else []
        if len(names) == 1:
            owners.setdefault(names[0], no + 1)
    return dict(sorted(owners.items(), key=lambda item: item[1]))


def _acceptance(text: str, version: str | None, found: Engine) -> dict[str, Any] | None:
    """The acceptance the engine's own lines report, read by its own readers only (another
    engine's lines in the same text are not its figures)."""
    options = {"version": version, "num_draft_tokens": None, "num_speculative_tokens": None,
               "model_name": None}
    for owner, reader in readers("text"):
        if owner.name != found.name or not reader.can_read(text):
            continue
        try:
            return reader.read(text, "text", **options).to_dict()
        except (MetricsFormatError, Eagle3NbError):
            return None
    return None


def _explain(reading: LogReading, found: Engine, text: str) -> None:
    every = found.log.signatures if found.log else ()
    signatures = [s for s in every if s.covers(reading.version)]
    others = [s for s in every if s.kind == "error" and s not in signatures]
    profile = reading.profile or found.name
    for error in reading.errors:
        hit = _match(error, [s for s in signatures if s.kind == "error"])
        if hit:
            reading.findings.append(_explained(error, *hit, profile, reading))
        else:
            elsewhere = _match(error, others)
            reading.findings.append(_unknown(error, found, reading.version,
                                             elsewhere[0] if elsewhere else None))
    lines = text.split("\n")
    for signature in (s for s in signatures if s.kind == "line"):
        for no, line in enumerate(lines, 1):
            m = re.search(signature.pattern, line)
            if m:
                _line_hit(reading, signature, m, no, line, profile)


def _match(error: RaisedError, signatures: list[Signature]) -> tuple[Signature, re.Match] | None:
    for s in signatures:
        m = re.search(s.pattern, error.text())
        if m and (not s.frame or any(re.search(s.frame, str(f)) for f in error.frames)):
            return s, m
    return None


def _explained(error: RaisedError, s: Signature, m: re.Match, profile: str,
               reading: LogReading) -> Finding:
    meaning = s.meaning.format(**{k: v for k, v in m.groupdict().items() if v is not None})
    return Finding(s.code, s.severity, f"the log (line {error.line_no}): "
                   f"{_short(error.text())}: {meaning}",
                   {"signature": s.id, "line": error.line_no, "next_step": s.next_step,
                    "source": s.source, "frames": [str(f) for f in error.frames[-_FRAMES_SHOWN:]],
                    **m.groupdict(), "release_from": reading.version_source,
                    "ab_plan": s.ab_plan}, profile)


def _line_hit(reading: LogReading, s: Signature, m: re.Match, no: int, line: str,
              profile: str) -> None:
    meaning = s.meaning.format(**{k: v for k, v in m.groupdict().items() if v is not None})
    record = {"signature": s.id, "line": no, "text": _short(line.strip()), "meaning": meaning,
              "source": s.source}
    if s.code:
        reading.findings.append(Finding(s.code, s.severity, f"the log says (line {no}): "
                                        f"{_short(m.group(0))}: {meaning}",
                                        {**record, "next_step": s.next_step}, profile))
    else:
        reading.evidence.append(record)


def _unknown(error: RaisedError, found: Engine | None, version: str | None,
             elsewhere: Signature | None = None) -> Finding:
    frames = error.frames[-_FRAMES_SHOWN:]
    who = f"{found.title} {version or '(release unknown)'}" if found else "any engine"
    why = (f"no signature the kit has for {who} explains it; not guessed at" if elsewhere is None
           else f"this is {found.title}'s text of releases {elsewhere.first or '...'} to "
                f"{elsewhere.last or 'now'} ({elsewhere.id}), not of {version}: is that the "
                "release that wrote the log?")
    return Finding("LOG_UNRECOGNISED", WARNING,
                   f"the log (line {error.line_no}): {_short(error.text())}: {why}",
                   {"line": error.line_no, "frames": [str(f) for f in frames],
                    "decides": "the draft's own findings (eagle3-nb inspect DRAFT --log LOG "
                               "--target-config TARGET); the frames above name the engine code "
                               "that raised"},
                   f"{found.name}=={version}" if found and version else
                   (found.name if found else None))


def ab_plan(found: Engine, version: str | None) -> list[dict[str, str]]:
    """One setting at a time, most telling first: what each rules out if the crash goes away,
    and in which releases the flag was read."""
    out = []
    for t in (found.log.toggles if found.log else ()):
        if not t.covers(version):
            continue
        read = ", ".join(t.read_in)
        where = (f"read in {found.title} {read}" if version is None or version in t.read_in else
                 f"read in {found.title} {read}, not in {version} itself")
        out.append({"setting": t.setting, "rules_out": t.rules_out, "releases": where})
    return out


def _launch_checks(args: dict[str, Any], found: Engine, version: str | None) -> list[Finding]:
    launch = launch_from_args({**args, "engine": found.name})
    profiles = [resolve_engine(f"{found.name}=={version}")] if version else \
        [p for p in newest_profiles() if p.name == found.name]
    return launch_findings(launch, None, profiles)


def _short(text: str, limit: int = 300) -> str:
    return text if len(text) <= limit else text[:limit] + " ..."
