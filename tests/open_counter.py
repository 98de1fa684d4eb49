"""Counts, in whichever process installs it, every Checkpoint.open (by directory) and every
engine load plan (by profile), one JSON line each to the file $EAGLE3NB_COUNT_LOG. Installed
in the test process and, through an IPython startup file, in the report's kernel."""

from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path

LOG_VARIABLE = "EAGLE3NB_COUNT_LOG"
STARTUP = ("import sys\nsys.path.insert(0, {tests!r})\n"
           "import open_counter\nopen_counter.install()\n")


def _record(event: str, what: str) -> None:
    with open(os.environ[LOG_VARIABLE], "a", encoding="utf-8") as f:
        f.write(json.dumps({"pid": os.getpid(), "event": event, "what": what}) + "\n")


# every module that plans, imported before the patch (and before a test saves what it restores)
PLANNING_MODULES = ("eagle3_nb.checks.load", "eagle3_nb.wirings")


def import_planners() -> None:
    import importlib

    for name in PLANNING_MODULES:
        importlib.import_module(name)


def install() -> None:
    import_planners()
    from eagle3_nb.engines import planner
    from eagle3_nb.io.checkpoint import Checkpoint

    opened = Checkpoint.open.__func__

    def counted_open(cls, path):
        _record("open", str(Path(path).resolve()))
        return opened(cls, path)

    planned = planner.plan_load

    def counted_plan(profile, cfg, shapes, *args, **kwargs):
        # the keys tell the draft's plan from a convert preview's plan of its renamed copy
        keys = hashlib.sha256(" ".join(sorted(shapes)).encode()).hexdigest()[:12]
        _record("plan", f"{profile.key} keys {keys}")
        return planned(profile, cfg, shapes, *args, **kwargs)

    Checkpoint.open = classmethod(counted_open)
    for module in list(sys.modules.values()):
        if (getattr(module, "__name__", "") or "").startswith("eagle3_nb") \
                and getattr(module, "plan_load", None) is planned:
            module.plan_load = counted_plan


def write_startup(ipython_dir: Path) -> None:
    """An IPython profile whose startup file installs the counter in every kernel it starts."""
    startup = ipython_dir / "profile_default" / "startup"
    startup.mkdir(parents=True)
    (startup / "00-count.py").write_text(STARTUP.format(tests=str(Path(__file__).parent)))


def read(log: Path) -> list[dict]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
