"""What every probe adapter shares: the adapter's result, its errors, and the steps of building
a draft in one CPU process (world size 1, gloo). Each engine's adapter is engines/<engine>/probe.py
(its `build(draft, target, d2t_param) -> Built`); eagle3_nb.probe runs it.

The checkpoint directory's code is never run: configs are read with trust_remote_code=False, and
only the engine's own model files are imported.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import re
import shutil
import socket
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from eagle3_nb.errors import Eagle3NbError
from eagle3_nb.engines.registry import engine as registered

class EngineNotInstalled(Eagle3NbError):
    """The engine cannot be imported in this Python."""


class BuildError(Exception):
    """The engine refused to build the draft (its own exception is the cause)."""


@dataclass
class Built:
    model: Any
    load: Callable
    watch_attrs: list[str] = field(default_factory=list)
    cls: str = ""
    notes: list[str] = field(default_factory=list)


def install_hint(engine: str) -> str:
    return (f"make engine-env ENGINE={engine} (creates .cache/engines/{engine}-<version>/ on top "
            f"of .venv), then run the probe with that environment's Python: "
            f".cache/engines/{engine}-<version>/bin/eagle3-nb probe DRAFT "
            f"--engine {engine}")


def engine_version(engine: str) -> str:
    """The installed engine's version, importing as little as possible."""
    package = registered(engine).package
    from importlib import metadata
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        raise EngineNotInstalled(f"{engine} is not installed in this Python", "--engine",
                                 install_hint(engine)) from None


_SCRATCH: list[Path] = []   # the temporary directories of the probe in progress


def scratch_dir(purpose: str) -> Path:
    """A temporary directory an adapter needs while the probe runs (a placeholder config, a
    sitecustomize for the engine's child Pythons); the probe removes it when it ends, however
    it ends (remove_scratch in its finally)."""
    path = Path(tempfile.mkdtemp(prefix=f"eagle3nb-{purpose}-"))
    _SCRATCH.append(path)
    return path


def remove_scratch() -> None:
    while _SCRATCH:
        shutil.rmtree(_SCRATCH.pop(), ignore_errors=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def prepare_process() -> None:
    """The single-rank distributed environment, and no network: local directories only."""
    for key, value in (("MASTER_ADDR", "127.0.0.1"), ("RANK", "0"), ("WORLD_SIZE", "1"),
                       ("LOCAL_RANK", "0")):
        os.environ.setdefault(key, value)
    os.environ.setdefault("MASTER_PORT", str(free_port()))
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    # torch's compile cache (else a torchinductor_<user> folder left in the temp directory):
    # the probe compiles nothing, so it lives and goes with the probe's own scratch
    cache = os.environ.get("TORCHINDUCTOR_CACHE_DIR", "")
    if not cache or "eagle3nb-inductor-" in cache:   # unset, or an earlier probe's (gone)
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(scratch_dir("inductor"))


def line(exc: BaseException) -> str:
    """The exception in one line: its type and its first message lines (pydantic puts the
    reason on the third)."""
    text = [ln.strip() for ln in str(exc).strip().splitlines() if ln.strip()
            and not ln.strip().startswith("For further information")]
    return f"{type(exc).__name__}: {' | '.join(text[:3])}"[:500]


class ProbeSetupError(Eagle3NbError):
    """The probe could not bring up the engine's single-process state (not a draft problem)."""


def setup(engine: str, step: Callable[[], None]) -> None:
    try:
        step()
    except Eagle3NbError:
        raise
    except Exception as exc:
        raise ProbeSetupError(f"could not set up {engine}'s single-process CPU state: "
                              f"{line(exc)}", "probe",
                              "this build's start-up differs from what the probe knows; "
                              "report it with the engine version") from None


def import_module(engine: str, module: str):
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise EngineNotInstalled(f"{engine} is installed but {module} does not import here "
                                 f"({type(exc).__name__}: {exc})", "--engine",
                                 install_hint(engine)) from None


def draft_class(engine: str, models_pkg: str, arch: str | None):
    """architectures[0] -> the engine's EAGLE-3 draft class, found by reading the engine's
    *eagle3*.py model files for `class ARCH(` (then importing only that file)."""
    if not arch:
        raise BuildError("config.json has no architectures[0]")
    spec = importlib.util.find_spec(models_pkg)
    folder = Path(next(iter(spec.submodule_search_locations)))
    pattern = re.compile(rf"^class {re.escape(arch)}\(", re.M)
    for path in sorted(folder.glob("*eagle3*.py")):
        if pattern.search(path.read_text(encoding="utf-8", errors="replace")):
            module = import_module(engine, f"{models_pkg}.{path.stem}")
            return getattr(module, arch)
    raise BuildError(f"architectures[0] {arch!r} is no EAGLE-3 draft class of this {engine} "
                     f"(none of {models_pkg}/*eagle3*.py defines it): the engine would not "
                     "build an EAGLE-3 draft from this config")


