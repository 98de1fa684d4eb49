"""Paths taken out of a report that is to be shared (`eagle3-nb report --redact-paths`).

Every path the report writes (pages, executed notebooks and their injected parameters,
summary.json, findings' next steps and commands) is rewritten before it lands:

- under the draft's parent directory: relative to it (`my-draft/config.json`; that folder is `.`);
- an input given elsewhere: the placeholder the findings' commands use for it when it is not
  given (`TARGET_DIR`, `TARGET_CONFIG`, `DUMPS_DIR`, `TOKENIZER`, ...), `REPORT_DIR` for --out;
- the kit's own files as `eagle3_nb/...`, this Python's as `SITE_PACKAGES/...`, `PYTHON_STDLIB/...`,
  `PYTHON_ENV/...`; the working directory as `WORKING_DIR`, the home directory as `~`, the
  temporary directory as `TMPDIR`;
- any other absolute path under one of this machine's top-level directories: `…/` + its last
  part (the user's name and the machine's layout go; what the file was stays).

Hashes, numbers and relative paths are left as they are.

    redactor = report_redactor(opts, staging)
    redactor.text("/home/ann/drafts/d/config.json")   # "d/config.json"
    redactor.tree(Path("report/01_checkpoint_keys"))  # every file in it, rewritten in place
"""

from __future__ import annotations

import functools
import json
import os
import re
import sys
import sysconfig
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from eagle3_nb.io.files import atomic_write_text

RELATIVE = ""  # the draft's parent: paths under it are written relative to it
ELIDED = "…"   # any other absolute path: this, a slash and its last part
# The report's path options, and the placeholder each becomes when it lies outside the draft's
# parent (the names findings.NEXT_COMMANDS uses for the same inputs).
INPUT_PLACEHOLDERS = {"target": "TARGET_DIR", "hidden_states": "DUMPS_DIR",
                      "target_config": "TARGET_CONFIG", "tokenizer": "TOKENIZER",
                      "corpus": "CORPUS", "prompts": "PROMPTS", "observed": "OBSERVED",
                      "log": "LOG", "launch": "LAUNCH"}
_NAME_CHAR = r"[\w.@+~%=-]"
_ANSI = r"\x1b\[[0-9;]*m"  # a traceback's colour codes may stand right before a path
# Where a path not otherwise known may start: common tops of other machines (a serving command
# given with --launch names the serving machine's), besides this one's. Any "/x/y" would do
# more, and would also rewrite the JavaScript the pages embed (plotly.js: "/WebKit/.test").
_USUAL_TOPS = ("home", "Users", "root", "tmp", "var", "private", "work", "workspace", "workdir",
               "data", "datasets", "models", "checkpoints", "ckpt", "ckpts", "mnt", "opt", "srv",
               "scratch", "usr", "media", "nfs", "gpfs", "lustre", "fsx", "efs", "nvme", "raid",
               "shared", "storage", "project", "projects", "cache", "etc", "bin", "lib")


@dataclass(frozen=True)
class PathRedactor:
    roots: tuple[tuple[str, str], ...]   # (absolute path, what it becomes), longest first
    tops: tuple[str, ...]                # top-level directories any other absolute path may use
    used: set[str] = field(default_factory=set, compare=False)  # what text() has written

    def text(self, text: str) -> str:
        """TEXT with every known root replaced, then every other absolute path shortened."""
        if "/" not in text:
            return text
        text = self._roots_re().sub(self._root_sub, text)
        shortened = self._tops_re().sub(_elide, text)
        if shortened != text:
            self.used.add(ELIDED)
        return shortened

    def data(self, value: Any) -> Any:
        """A JSON value with every string (dict keys too) redacted."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, list):
            return [self.data(v) for v in value]
        if isinstance(value, dict):
            return {self.text(k) if isinstance(k, str) else k: self.data(v)
                    for k, v in value.items()}
        return value

    def file(self, path: Path) -> None:
        """Rewrite one file in place: JSON (.json, .ipynb) value by value, other text as
        text; a file that is not UTF-8 text is left alone."""
        try:
            raw = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, ValueError):
            return
        if path.suffix in (".json", ".ipynb"):
            try:
                new = json.dumps(self.data(json.loads(raw)), indent=1, ensure_ascii=False) + "\n"
            except ValueError:
                new = self.text(raw)
        else:
            new = self.text(raw)
        if new != raw:
            atomic_write_text(path, new)

    def tree(self, folder: Path) -> None:
        for path in sorted(p for p in Path(folder).rglob("*") if p.is_file()
                           and not p.is_symlink()):
            self.file(path)

    def describe(self) -> dict[str, Any]:
        """What the placeholders in a redacted report stand for (its summary.json says it)."""
        return {"relative_to": "the draft's parent directory",
                "placeholders": {to: PLACEHOLDER_MEANINGS.get(to, f"-p {to.lower()}")
                                 for to in sorted(self.used - {RELATIVE})}}

    def _roots_re(self) -> re.Pattern:
        return _roots_pattern(tuple(r for r, _ in self.roots))

    def _tops_re(self) -> re.Pattern:
        return _tops_pattern(self.tops)

    def _root_sub(self, m: re.Match) -> str:
        to = dict(self.roots)[m.group("root")]
        self.used.add(to)
        if to == RELATIVE:
            return "" if m.group("slash") else "."
        return to + (m.group("slash") or "")


@functools.lru_cache(maxsize=8)
def _roots_pattern(roots: tuple[str, ...]) -> re.Pattern:
    alternatives = "|".join(map(re.escape, roots)) or r"(?!)"
    # A root ends at a "/" that goes on into a name, or where no name character follows.
    return re.compile(rf"(?P<root>{alternatives})"
                      rf"(?:(?P<slash>/)(?={_NAME_CHAR})|(?!{_NAME_CHAR}))")


@functools.lru_cache(maxsize=8)
def _tops_pattern(tops: tuple[str, ...]) -> re.Pattern:
    alternatives = "|".join(map(re.escape, tops)) or r"(?!)"
    # Not inside a word, a relative path ("pkg/v1/worker/...") or a URL ("https://host/usr").
    return re.compile(rf"(?P<pre>^|{_ANSI}|[^\w./~:\\-])"
                      rf"(?P<path>/(?:{alternatives})(?:/{_NAME_CHAR}+)*)(?!{_NAME_CHAR})",
                      re.MULTILINE)


def _elide(m: re.Match) -> str:
    return m.group("pre") + ELIDED + "/" + m.group("path").rstrip("/").rsplit("/", 1)[-1]


# ----------------------------------------------------------------------------- building one

def report_redactor(opts: Any, *also_report: Path) -> PathRedactor:
    """The redactor of one report: OPTS are its resolved ReportOptions; ALSO_REPORT are other
    folders that stand for --out (the staging folder the report is built in)."""
    from eagle3_nb.report.notebooks import PATH_PARAMETERS

    named: list[tuple[Path, str]] = [(Path(opts.checkpoint).parent, RELATIVE)]
    for name, placeholder in INPUT_PLACEHOLDERS.items():
        value = getattr(opts, name, None)
        if value is not None and os.path.isabs(str(value)):
            named.append((Path(value), placeholder))
    for name, value in (opts.extra or {}).items():
        if name in PATH_PARAMETERS and os.path.isabs(str(value)):
            named.append((Path(value), name.upper()))
    named += [(Path(p), "REPORT_DIR") for p in (opts.out, *also_report) if p is not None]
    return redactor_for(named)


def redactor_for(named: list[tuple[Path, str]]) -> PathRedactor:
    """NAMED: (path, placeholder) in priority order (RELATIVE for the base folder), then the
    kit's, this Python's, the working, home and temporary directories. A root inside the base
    folder is written relative to it, whatever it stands for."""
    base = next((p for p, to in named if to == RELATIVE), None)
    ordered: dict[str, str] = {}
    for path, to in [*named, *_machine_roots()]:
        for form in _forms(path):
            if form == "/" or form in ordered:
                continue
            if base is not None and to != RELATIVE and _inside(form, base):
                continue
            ordered[form] = to
    roots = tuple(sorted(ordered.items(), key=lambda kv: -len(kv[0])))
    return PathRedactor(roots, _tops())


PLACEHOLDER_MEANINGS = {
    "TARGET_DIR": "--target", "DUMPS_DIR": "--hidden-states", "TARGET_CONFIG": "--target-config",
    "TOKENIZER": "--tokenizer", "CORPUS": "--corpus", "PROMPTS": "--prompts",
    "OBSERVED": "--observed", "LOG": "--log", "LAUNCH": "--launch", "REPORT_DIR": "--out",
    "eagle3_nb": "the kit's installed package", "SITE_PACKAGES": "this Python's site-packages",
    "PYTHON_STDLIB": "this Python's standard library", "PYTHON_ENV": "this Python's environment",
    "PYTHON_HOME": "this Python's installation", "WORKING_DIR": "the working directory",
    "~": "the home directory", "TMPDIR": "the temporary directory",
    ELIDED: "any other absolute path: its last part only"}


def _machine_roots() -> list[tuple[Path, str]]:
    package = Path(__file__).resolve().parents[1]
    paths = sysconfig.get_paths()
    roots = [(package / name, f"eagle3_nb/{name}") for name in ("data_samples", "notebooks")]
    roots.append((package, "eagle3_nb"))
    roots += [(Path(paths[k]), "SITE_PACKAGES") for k in ("purelib", "platlib") if k in paths]
    roots += [(Path(paths[k]), "PYTHON_STDLIB") for k in ("stdlib", "platstdlib") if k in paths]
    roots += [(Path(sys.prefix), "PYTHON_ENV"), (Path(sys.base_prefix), "PYTHON_HOME"),
              (Path.cwd(), "WORKING_DIR"), (Path.home(), "~"),
              (Path(tempfile.gettempdir()), "TMPDIR")]
    return roots


def _forms(path: Path) -> list[str]:
    """The path as given (made absolute) and with its links resolved."""
    given = os.path.abspath(str(path))
    try:
        resolved = str(Path(given).resolve())
    except OSError:
        resolved = given
    return list(dict.fromkeys((given, resolved)))


def _inside(path: str, folder: Path) -> bool:
    return any(path == f or path.startswith(f.rstrip("/") + "/") for f in _forms(folder))


def _tops() -> tuple[str, ...]:
    try:
        here = [e.name for e in os.scandir("/") if e.is_dir()]
    except OSError:
        here = []
    return tuple(sorted(set(here) | set(_USUAL_TOPS), key=lambda t: (-len(t), t)))
