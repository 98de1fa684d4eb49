"""The engine registry: one `Engine` record per folder of eagle3_nb/engines/.

Each engine folder (engines/sglang/, engines/vllm/, ...) registers one record in its
`__init__.py` with everything that engine means to the kit; the generic code asks the registry
and never names an engine. A new engine is a new folder: `engines()` finds every subpackage of
this package and imports it once (docs/adding-an-engine.md). What only some commands need (the
folder's log, metrics, observe, launch, drafting and advice modules) the record names as a
`Later`, imported on first use: `inspect` loads the profiles, releases, bugs and path rule.
"""

from __future__ import annotations

import difflib
import importlib
import pkgutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from eagle3_nb.engines.profile import EngineProfile, release_key
from eagle3_nb.errors import EngineSpecError

HERE = Path(__file__).resolve().parent


@dataclass(frozen=True)
class Reader:
    """One format an engine reports its acceptance in (a log, metrics text, JSON).

    `can_read(text)` looks for the format's signature; `read(text, source, **options)` returns
    an ObservedMetrics (eagle3_nb.observation). JSON readers take the parsed value instead.
    Readers are tried by rank over every engine: logs (0) before metrics text (1)."""
    name: str
    kind: str                                  # "text" or "json"
    rank: int
    can_read: Callable[[Any], bool]
    read: Callable[..., Any]
    signature: str = ""                        # what the format looks like, for error messages


@dataclass(frozen=True)
class LaunchDialect:
    """How the engine's serving command reads (engines/launch.py applies it)."""
    starts: Callable[[str], bool]              # the joined words start this engine's server
    parse: Callable[[list[str]], Any]          # words -> LaunchSettings
    # (launch, cfg, profile, ev, target's layer count or None) -> [(code, sev, msg, ev)]
    checks: Callable[..., list[tuple]]
    draft_tensor_parallel: Callable[[Any], int | None]
    tensor_parallel_fix: str                   # the way out of a draft TP size that fails
    tensor_parallel_cite: str                  # where the engine asserts the draft's TP sizes
    example: str                               # a command, for error messages
    # the drafting settings in the engine's own words, for help texts and notes
    setting_names: dict[str, str] = field(default_factory=dict)
    # (target, draft) -> the engine's serving command for an EAGLE-3 draft, as a person runs it
    # (the false-alarm matrix inspects every draft with it); None: the kit writes none
    serve: Callable[[str, str], str] | None = None
    # text -> LaunchSettings, or None: a config file given as --launch in place of a command
    # (an engine whose drafting settings live in a file, TensorRT-LLM's --config YAML)
    read_text: Callable[[str], Any] | None = None


@dataclass(frozen=True)
class Signature:
    """A text the engine really prints (an exception, a warning, a log line), what it means and
    what to do: data in the engine's folder (engines/<engine>/log.py), cited by where the text
    comes from (the engine's file and function, the probe's run, or a public thread).

    `pattern` is searched in an exception's "Type: message" (kind "error") or in each log line
    (kind "line"); `frame`, when set, must match one of the exception's frames ("file:line
    function"). Named groups are evidence."""
    id: str
    pattern: str
    code: str                                  # the kit finding it corresponds to ("": evidence)
    severity: str
    meaning: str                               # may use the pattern's named groups: {param}
    next_step: str
    source: str                                # where the text was read
    first: str | None = None                   # releases that print it (None: open ended)
    last: str | None = None
    kind: str = "error"                        # "error" or "line"
    frame: str = ""                            # searched in each frame's "file:line function"
    ab_plan: bool = False                      # a crash the A/B plan narrows down

    def covers(self, version: str | None) -> bool:
        return in_releases(version, self.first, self.last)


def in_releases(version: str | None, first: str | None, last: str | None) -> bool:
    """VERSION within FIRST..LAST (None: open ended); an unknown VERSION is within any range."""
    if version is None:
        return True
    key = release_key(version)
    return (first is None or release_key(first) <= key) and \
        (last is None or key <= release_key(last))


@dataclass(frozen=True)
class Toggle:
    """One serving setting to change, alone, when a crash is unexplained: what it rules out if
    the crash goes away. `read_in`: the releases whose flags table was read to find it."""
    setting: str
    rules_out: str
    first: str
    last: str | None
    read_in: tuple[str, ...]

    def covers(self, version: str | None) -> bool:
        return in_releases(version, self.first, self.last)


@dataclass(frozen=True)
class LogDialect:
    """How the engine's server log reads (eagle3_nb.checks.log applies it)."""
    markers: tuple[str, ...]                   # texts only this engine's logs hold
    versions: tuple[Any, ...]                  # compiled patterns whose group 1 is the release
    server_args: Callable[[str], dict | None]  # the resolved arguments, as observe records them
    signatures: tuple[Signature, ...] = ()
    toggles: tuple[Toggle, ...] = ()           # the A/B plan, most telling first

    def mentions(self, text: str) -> int:
        return sum(marker in text for marker in self.markers)

    def version(self, text: str) -> str | None:
        for pattern in self.versions:
            m = pattern.search(text)
            if m:
                return m.group(1)
        return None


@dataclass(frozen=True)
class Later:
    """A field's value kept in a module of the engine folder, imported when the field is first
    read: `later(__name__, "log:DIALECT")` in the folder's __init__ (no ":NAME": the module)."""
    module: str
    attribute: str = ""

    def load(self) -> Any:
        found = importlib.import_module(self.module)
        return getattr(found, self.attribute) if self.attribute else found


def later(package: str, spec: str) -> Later:
    """'MODULE:NAME' of the engine folder PACKAGE, read on first use."""
    module, _, attribute = spec.partition(":")
    return Later(f"{package}.{module}", attribute)


@dataclass(frozen=True)
class Engine:
    """One engine. A field given as a `Later` holds its value once first read (the module is
    imported then); `has(field)` says whether it is set without importing anything."""
    name: str                                  # the --engine name
    title: str                                 # how people write it
    repository: str                            # owner/name of the upstream repository
    releases: tuple[tuple[str, str], ...]      # every published release with EAGLE-3, and its date
    read: tuple[str, str]                      # newest release whose code was read, date read
    profiles: tuple[EngineProfile, ...]
    folder: Path
    bugs: tuple = ()                           # engines.bugs.KnownBug records
    launch: LaunchDialect | None = None
    drafting_rule: Callable[..., Any] | None = None  # engines.drafting.default_drafting's rule
    flag_advice: Callable[..., list] | None = None   # (summary data, its profiles) -> rows
    source: str = ""                           # the release whose files the advice cites
    draft_rope: dict = field(default_factory=dict)
    tree_drafting: dict = field(default_factory=dict)
    readers: tuple[Reader, ...] = ()
    observe: Any = None                        # the module with measure() and server_args()
    log: LogDialect | None = None
    probe: str = ""                            # the probe adapter's module (imported by probe)
    probe_stubs: dict[str, str] = field(default_factory=dict)  # modules stubbed, and why
    package: str = ""                          # the pip distribution ("": the name)
    # releases the demo report answers for beside the newest (report.run.demo_engines)
    demo_releases: tuple[str, ...] = ()
    # releases the bundled sample drafts' recorded expectations are for (samples' manifest)
    sample_releases: tuple[str, ...] = ()
    # what the engine calls the kit's figures (ObservedMetrics fields), for labels
    figure_names: dict[str, str] = field(default_factory=dict)
    # (draft path as served, release, the draft's folder here) -> (what the engine does with a
    # path of that name, the way out), or ("", ""): a rule on the path's words, applied before
    # the engine reads config.json (path_misread)
    path_rule: Callable[[str, str, Path], tuple[str, str]] | None = None

    def __post_init__(self):
        if not self.package:
            object.__setattr__(self, "package", self.name)

    def __getattribute__(self, name: str) -> Any:
        value = object.__getattribute__(self, name)
        if type(value) is Later:
            value = value.load()
            object.__setattr__(self, name, value)
        return value

    def has(self, name: str) -> bool:
        """Whether field NAME is set (a Later counts), without importing its module."""
        return bool(object.__getattribute__(self, name))

    @property
    def newest(self) -> str:
        return self.releases[-1][0]

    def path_misread(self, path: str, version: str, files_at: Path) -> str:
        """What release VERSION does with a draft served from PATH (its files: those at
        FILES_AT here) when it misreads the path's words, and the way out; "" when it does not."""
        if not self.has("path_rule"):
            return ""
        what, way_out = self.path_rule(path, version, files_at)
        return f"{self.title} {version} {what} (path: {path}); {way_out}" if what else ""

    def data(self, name: str) -> Path:
        return self.folder / "data" / name


_ENGINES: dict[str, Engine] = {}
_FOUND = False


def register(engine: Engine) -> Engine:
    """Called once by each engine folder's __init__."""
    if engine.name in _ENGINES and _ENGINES[engine.name] is not engine:
        raise ValueError(f"engine {engine.name!r} registered twice")
    if not engine.releases or not engine.profiles:
        raise ValueError(f"engine {engine.name!r} has no releases or no profiles")
    if any(p.name != engine.name for p in engine.profiles):
        raise ValueError(f"engine {engine.name!r} holds another engine's profile")
    if release_key(engine.read[0]) > release_key(engine.newest):
        raise ValueError(f"engine {engine.name!r} read {engine.read[0]}, after its newest release")
    _ENGINES[engine.name] = engine
    return engine


def engines() -> dict[str, Engine]:
    """Every registered engine by name, in name order; the folders are imported on first use."""
    global _FOUND
    if not _FOUND:
        _FOUND = True
        for info in pkgutil.iter_modules([str(HERE)]):
            if info.ispkg and not info.name.startswith("_"):
                importlib.import_module(f"{__package__}.{info.name}")
    return dict(sorted(_ENGINES.items()))


def names() -> tuple[str, ...]:
    return tuple(engines())


def engine(name: str, where: str | None = "--engine") -> Engine:
    """The engine called NAME, or an error that names the nearest ones."""
    found = engines()
    key = str(name).strip().lower()
    if key in found:
        return found[key]
    near = difflib.get_close_matches(key, list(found), n=2, cutoff=0.5)
    hint = f"did you mean {' or '.join(near)}? " if near else ""
    raise EngineSpecError(f"no engine called {str(name)[:40]!r}", where,
                          f"{hint}known: {', '.join(found)}")


def readers(kind: str) -> list[tuple[Engine, Reader]]:
    """Every engine's readers of one kind ("text" or "json"), in the order they are tried."""
    found = [(e, r) for e in engines().values() for r in e.readers if r.kind == kind]
    return sorted(found, key=lambda pair: (pair[1].rank, pair[0].name))


def figure_names() -> dict[str, str]:
    """'mean_accept_length' -> "SGLang's accept len": each figure in every engine's own words."""
    out: dict[str, list[str]] = {}
    for e in engines().values():
        for figure, name in e.figure_names.items():
            out.setdefault(figure, []).append(f"{e.title}'s {name}")
    return {figure: ", ".join(names) for figure, names in out.items()}


def setting_names(setting: str) -> str:
    """'num_steps' -> 'SGLang --speculative-num-steps, vLLM num_speculative_tokens': one drafting
    setting in each engine's own words, for help texts."""
    out = [f"{e.title} {e.launch.setting_names[setting]}" for e in engines().values()
           if e.launch and setting in e.launch.setting_names]
    return ", ".join(out)
