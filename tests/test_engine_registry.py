"""The engine registry: an engine is one folder of eagle3_nb/engines/ and nothing else.

A toy third engine written into one folder of a copy of the package shows up in `engines`,
answers `inspect --engine`, gets its badge and its column in notebook 01's static renders, and
keeps the house rules (tests/test_architecture.py) without a line changed anywhere else.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from eagle3_nb.engines import ENGINES, PROFILES, engine, names
from eagle3_nb.engines.registry import readers
from eagle3_nb.errors import EngineSpecError

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "eagle3_nb"
GOOD = ROOT / "data_samples" / "drafts" / "good"

TOY = '''"""A toy engine: the newest vLLM range's facts under another name."""

from dataclasses import replace
from pathlib import Path

from eagle3_nb.engines.registry import Engine, register
from eagle3_nb.engines.vllm import ENGINE as BASE

PROFILE = replace(BASE.profiles[-1], name="toyserve", version="1.0.0", covers=("1.0.0", "1.0.0"))
ENGINE = register(Engine(
    name="toyserve", title="ToyServe", repository="example/toyserve",
    releases=(("1.0.0", "2026-12-01"),), read=("1.0.0", "2026-12-02"), profiles=(PROFILE,),
    folder=Path(__file__).resolve().parent))
'''


def test_every_engine_folder_registers_one_engine():
    folders = sorted(p.parent.name for p in (PACKAGE / "engines").glob("*/__init__.py"))
    assert list(names()) == folders
    for name, found in ENGINES.items():
        assert found.name == name and found.folder.name == name
        assert all(p.name == name for p in found.profiles)
        assert found.read[0] in [r for r, _ in found.releases]
    assert len(PROFILES) == sum(len(e.profiles) for e in ENGINES.values())


def test_an_unknown_engine_names_the_nearest():
    with pytest.raises(EngineSpecError, match="did you mean vllm"):
        engine("vlm")


def test_readers_are_tried_logs_first():
    ranks = [r.rank for _, r in readers("text")]
    assert ranks == sorted(ranks) and readers("json")


@pytest.fixture(scope="module")
def toy_package(tmp_path_factory):
    root = tmp_path_factory.mktemp("toy")
    shutil.copytree(PACKAGE, root / "eagle3_nb", ignore=shutil.ignore_patterns("__pycache__"))
    folder = root / "eagle3_nb" / "engines" / "toyserve"
    folder.mkdir()
    (folder / "__init__.py").write_text(TOY, encoding="utf-8")
    return root


def _run(root: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(root)}
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, env=env,
                          cwd=root, timeout=300)


def test_a_toy_engine_from_one_folder(toy_package):
    listed = _run(toy_package, "-m", "eagle3_nb.cli", "engines")
    assert listed.returncode == 0, listed.stderr
    assert "ToyServe: code read up to 1.0.0 on 2026-12-02" in listed.stdout
    assert "toyserve 1.0.0" in listed.stdout

    inspected = _run(toy_package, "-m", "eagle3_nb.cli", "inspect", str(GOOD), "--no-stats",
                     "--engine", "toyserve==1.0.0", "--json")
    assert inspected.returncode in (0, 1), inspected.stderr
    data = json.loads(inspected.stdout)
    assert [e["profile"] for e in data["engines"]] == ["toyserve==1.0.0"]
    assert not any(f["code"] == "ENGINE_UNVERIFIED" for f in data["findings"])

    # without --engine the toy's newest range is answered beside the others
    default = json.loads(_run(toy_package, "-m", "eagle3_nb.cli", "inspect", str(GOOD),
                              "--no-stats", "--json").stdout)
    assert "toyserve==1.0.0" in [e["profile"] for e in default["engines"]]

    render = _run(toy_package, "-c", "\n".join([
        "import sys",
        "from eagle3_nb.checks.load import inspect_checkpoint",
        "from eagle3_nb.viz import keys as vk",
        "from eagle3_nb.widgets import engine_view_html",
        f"data = inspect_checkpoint({str(GOOD)!r}, engines=['toyserve==1.0.0'],"
        " stats=False).to_json()",
        "print(vk.verdict_html(data))",
        "print(engine_view_html(data, 'toyserve==1.0.0'))",
    ]))
    assert render.returncode == 0, render.stderr
    assert render.stdout.count("toyserve==1.0.0") >= 2


def test_the_toy_engine_keeps_the_house_rules(toy_package):
    sys.path.insert(0, str(ROOT / "tests"))
    try:
        from test_architecture import violations
    finally:
        sys.path.remove(str(ROOT / "tests"))
    assert violations(toy_package / "eagle3_nb") == []


def test_every_field_an_engine_defers_resolves_to_what_it_names():
    """A field an engine folder gives as `later(__name__, "MODULE:NAME")` is imported when first
    read: each one resolves, to the kind the Engine record documents (a misspelt name would
    otherwise surface only in the command that reads it)."""
    from types import ModuleType

    from eagle3_nb.engines.registry import LaunchDialect, LogDialect, Reader

    kinds = {"launch": LaunchDialect, "log": LogDialect, "observe": ModuleType, "source": str,
             "figure_names": dict}
    for e in ENGINES.values():
        for name, kind in kinds.items():
            value = getattr(e, name)
            assert value is None or isinstance(value, kind), (e.name, name, value)
            assert e.has(name) == bool(value), (e.name, name)
        for name in ("drafting_rule", "flag_advice", "path_rule"):
            assert getattr(e, name) is None or callable(getattr(e, name)), (e.name, name)
        assert all(isinstance(r, Reader) for r in e.readers), e.name
        assert e.launch and e.log and e.readers and e.flag_advice, e.name   # every engine has them
        if e.observe:
            assert e.observe.OPTIONS is not None and callable(e.observe.measure), e.name


def _modules_after(*argv: str) -> dict[str, set[str]]:
    """The modules of each engine folder loaded by one `eagle3-nb ARGV` in a fresh process."""
    code = ("import sys, io, contextlib\n"
            "from eagle3_nb.cli import main\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n"
            f"    main({list(argv)!r})\n"
            "print('\\n'.join(m for m in sys.modules if m.startswith('eagle3_nb.engines.')))\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    loaded: dict[str, set[str]] = {name: set() for name in names()}
    for module in proc.stdout.split():
        parts = module.split(".")
        if len(parts) == 4 and parts[2] in loaded:
            loaded[parts[2]].add(parts[3])
    return loaded


def test_inspect_loads_of_each_engine_folder_only_the_facts_it_answers_from():
    """#26: `inspect` answers from the profiles, releases and bugs (and the path rule, and the
    config rules a profile keeps apart); the folder's log, metrics, observe, launch, drafting
    and advice modules load when asked."""
    loaded = _modules_after("inspect", str(GOOD), "--no-stats", "--json", "--engine", "all")
    for name, modules in loaded.items():
        assert {"profiles", "releases", "bugs"} <= modules <= {"profiles", "releases", "bugs",
                                                                "paths", "config_readers"}, \
            (name, modules)


def test_a_command_that_reads_an_engine_log_loads_that_folders_log_module():
    log = ROOT / "tests" / "recordings" / "sglang-0.5.23-broken-decode.log"
    loaded = _modules_after("log", str(log), "--json")
    assert all("log" in modules for modules in loaded.values()), loaded   # every dialect tried
