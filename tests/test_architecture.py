"""The house rules of DESIGN.md, executable: an AST walk over the package (no import runs).

- no import cycle between modules, counting imports inside functions;
- no upward import: a module imports only from its own layer or the layers below (LAYERS);
- viz is pure: it imports only findings, errors and viz itself;
- the header path (inspect: cli, checks.load and what they import at module level) pulls in no
  torch, plotly or transformers;
- inspect's own path (cli, checks.load and every engine folder's __init__) imports of each engine
  folder only the facts it answers from, no view, and none of io.files' writing machinery;
- nothing imports samples;
- no module over MAX_LINES lines, except declared data tables;
- each notebook imports only its question's entry points (NOTEBOOK_IMPORTS);
- no engine name or release literal outside engines/ (string constants other than docstrings,
  identifiers and imported module paths): the generic code asks the registry. In samples/, whose
  prose tells what each release is recorded to do with each bundled draft, no NAME==VERSION
  spec: the engine folders name the releases.
"""

from __future__ import annotations

import ast
import re
import shutil
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "eagle3_nb"

# The design's rungs (DESIGN.md's package map), lowest first, each with the modules that hold it
# today in their order within the rung. A module belongs to the first group whose name is itself
# or a package above it; it may import its own group and everything below it (earlier groups of
# its rung, and every lower rung).
RUNGS: list[tuple[str, list[tuple[str, ...]]]] = [
    ("foundation: errors, the kit's defaults and progress, findings and summary kinds",
     [("errors", "defaults", "progress"), ("findings",)]),
    ("pure parsing: draft and target configs, key layouts, statistics of uncertainty",
     [("config", "layouts", "uncertainty")]),
    ("bytes on disk: checkpoints, dumps, logs, atomic writes", [("io",)]),
    ("engine knowledge: every engine fact, and the observed-metrics record they fill",
     [("observation",), ("engines",)]),
    ("tables read from a checkpoint: vocabulary mapping, tensor statistics",
     [("vocab", "stats")]),
    ("models: the draft, the target, hidden-state dumps",
     [("draft_blocks",), ("model",), ("hidden_dumps",), ("target",)]),
    ("simulation: features, decoding, the greedy fast path, acceptance, what-if",
     [("features", "trace", "drift", "tree"), ("decoding",), ("greedy",),
      ("acceptance", "wirings"), ("whatif",)]),
    ("session: one run's device, threads, draft and target; a live engine's figures",
     [("session",), ("observed",)]),
    ("checks: one module per question, convert, the engines' own loaders",
     [("checks", "convert"), ("probe",)]),
    ("presentation: pure views, widgets over them", [("viz",), ("widgets",)]),
    ("runs: the report", [("report",)]),
    ("entry point: the command line", [("cli",)]),
    ("the samples builder: nothing imports it", [("samples",)]),
]
LAYERS: list[tuple[str, ...]] = [group for _, groups in RUNGS for group in groups]
VIZ_MAY_IMPORT = ("findings", "errors", "viz")
HEADER_PATH = ("cli", "checks.load", "checks.vocab", "engines", "io", "config", "layouts")
HEAVY = ("torch", "plotly", "transformers")
# inspect --no-stats, engines and log read headers and text only: not even numpy at module level
# (checks.vocab reads the d2t table with it, so it is on the header path but not on this one)
TEXT_PATH = ("cli", "checks.load", "checks.log", "engines", "io", "config", "layouts")
TEXT_HEAVY = ("numpy",)
# `inspect --no-stats` answers from each engine folder's profiles, releases and bugs; the folder's
# log, metrics, observe, launch, drafting, advice and probe modules (the registry's Later fields)
# load when a command reads them. Views load in the command that prints one, and io.files'
# writers import ctypes, signal, socket and tempfile where they write (#26: start-up time).
INSPECT_PATH = ("cli", "checks.load")
# config_readers: the config rules a folder's profiles keep apart (engines/vllm)
ENGINE_FOLDER_FACTS = ("profiles", "releases", "bugs", "config_readers")
# loaded only when inspect is given a log, a launch command or statistics to scan
INSPECT_LATER = ("viz", "stats", "checks.log", "engines.launch")
INSPECT_STDLIB_LATER = ("ctypes", "signal", "socket", "tempfile")
ENGINE_HOME, LITERAL_EXEMPT = "engines", ("samples",)
RELEASE = re.compile(r"(?<![\w.])\d+\.\d+\.\d+(?:\.?post\d+|rc\d+)?(?![\w.])|==\d")
FACADE = ""  # the package __init__: a lazy public API that may name any module
MAX_LINES = 600  # a module over this holds several ideas: split it by idea
DATA_TABLES: tuple[str, ...] = ()  # modules declared as data tables, exempt from MAX_LINES
NOTEBOOKS = PACKAGE.parent / "notebooks"
# What each notebook imports: the public entry points of its question (a check and its options,
# the views and widgets that show it, the report's notebook helpers), no more and no fewer. A
# check's result gives its JSON and its summary part itself (checks/result.py). Notebooks never
# parse a file or plan a load themselves (DESIGN.md, notebook conventions).
_SHOWN = ("report.notebooks:sample_default", "report.notebooks:write_summary")
NOTEBOOK_IMPORTS: dict[str, set[str]] = {
    "00_triage": {*_SHOWN, "checks.load:inspection_of", "checks.triage:Triage",
                  "engines:parse_engines", "viz:triage"},
    "01_checkpoint_keys": {*_SHOWN, "checks.load:inspection_of", "checks.diff:diff_drafts",
                           "engines:parse_engines", "findings:verdict_line", "viz.diff:diff_html",
                           "viz:keys", "widgets:engine_explorer", "widgets:engine_view_html",
                           "widgets:first_engine"},
    "02_d2t_mapping": {*_SHOWN, "checks.vocab:check_vocab", "vocab:load_tokenizer", "viz:vocab",
                       "widgets:first_lookup", "widgets:lookup_view_html", "widgets:vocab_lookup"},
    "03_hidden_state_shapes": {*_SHOWN, "checks.hidden:check_hidden_states",
                               "checks.options:HiddenStateOptions", "viz.keys:findings_html",
                               "viz:hidden"},
    "04_acceptance": {*_SHOWN, "checks.acceptance:check_acceptance",
                      "checks.options:AcceptanceOptions", "viz.keys:findings_html",
                      "viz:acceptance"},
    "05_training_data": {*_SHOWN, "checks.data:check_data_parameters", "viz:data"},
}


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def imports_of(path: Path, root: Path) -> tuple[set[str], set[str], set[str]]:
    """(package modules imported anywhere, package modules imported at module level, external
    top-level packages imported at module level) of one file; names relative to the package."""
    me = module_name(path, root)
    is_package = path.name == "__init__.py"
    anywhere, top, external = set(), set(), set()

    def resolve(node: ast.ImportFrom) -> list[str]:
        if node.level:
            base = me.split(".") if me else []
            if not is_package:
                base = base[:-1]
            base = base[:len(base) - (node.level - 1)]
            mod = ".".join(base + ([node.module] if node.module else []))
        elif node.module and (node.module == root.name or node.module.startswith(root.name + ".")):
            mod = node.module[len(root.name) + 1:]
        else:
            return []
        # `from pkg import name`: name may itself be a module
        return [f"{mod}.{a.name}".strip(".") if (root / Path(*f"{mod}.{a.name}".strip(".")
                .split("."))).with_suffix(".py").exists() or (root / Path(*f"{mod}.{a.name}"
                .strip(".").split("."))).is_dir() else mod for a in node.names]

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            nested = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef))
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                continue
            found: list[str] = []
            if isinstance(child, ast.ImportFrom):
                found = resolve(child)
                if not found and not child.level and not in_function:
                    external.add(child.module.split(".")[0])
            elif isinstance(child, ast.Import):
                for a in child.names:
                    if a.name.startswith(root.name + "."):
                        found.append(a.name[len(root.name) + 1:])
                    elif not in_function:
                        external.add(a.name.split(".")[0])
            anywhere.update(found)
            if not nested:
                top.update(found)
            visit(child, nested)

    visit(ast.parse(path.read_text(encoding="utf-8")), False)
    return anywhere - {me}, top - {me}, external


def import_graph(root: Path) -> dict[str, tuple[set[str], set[str], set[str]]]:
    return {module_name(p, root): imports_of(p, root) for p in sorted(root.rglob("*.py"))}


def _owner(module: str, candidates) -> str | None:
    for c in candidates:
        if module == c or module.startswith(c + "."):
            return c
    return None


def layer_of(module: str) -> int:
    for i, group in enumerate(LAYERS):
        if _owner(module, group):
            return i
    raise AssertionError(f"module {module!r} has no layer: add it to LAYERS")


def find_cycles(graph) -> list[list[str]]:
    """Every strongly connected component with more than one module (Tarjan)."""
    edges = {m: {t for t in deps[0] if t in graph} for m, deps in graph.items()}
    index, low, stack, on_stack, out = {}, {}, [], set(), []

    def strong(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in edges[v]:
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            strong(v)
    return out


def violations(root: Path = PACKAGE) -> list[str]:
    graph = import_graph(root)
    graph = {m: deps for m, deps in graph.items() if m != "__main__"}
    problems = [f"import cycle: {' <-> '.join(c)}" for c in find_cycles(graph)]
    for mod, (anywhere, _, _) in graph.items():
        if mod == FACADE:
            continue
        for dep in sorted(anywhere):
            if dep.split(".")[0] == "samples" and mod.split(".")[0] != "samples":
                problems.append(f"{mod} imports {dep}: nothing outside samples may")
            elif mod.startswith("viz") and not _owner(dep, VIZ_MAY_IMPORT):
                problems.append(f"{mod} imports {dep}: viz imports only {VIZ_MAY_IMPORT}")
            elif dep in graph and layer_of(dep) > layer_of(mod):
                problems.append(f"{mod} imports {dep}, a layer above it")
    problems += heavy_on_header_path(graph)
    problems += heavy_on_header_path(graph, TEXT_PATH, TEXT_HEAVY)
    problems += beyond_inspect(graph, root)
    problems += engine_literals(root)
    problems += oversized(root)
    return problems


def oversized(root: Path = PACKAGE) -> list[str]:
    """Modules over MAX_LINES lines that are not declared data tables."""
    problems = []
    for path in sorted(root.rglob("*.py")):
        mod, lines = module_name(path, root), len(path.read_text(encoding="utf-8").splitlines())
        if lines > MAX_LINES and mod not in DATA_TABLES:
            problems.append(f"{mod} has {lines} lines, over {MAX_LINES}: split it by idea (or "
                            "declare it in DATA_TABLES if it is a data table)")
    return problems


def notebook_imports(notebook: Path) -> set[str]:
    """The package names a notebook's code cells import, as "module:name" ("module" for a
    plain import), module paths relative to the package."""
    import json

    found = set()
    for cell in json.loads(notebook.read_text(encoding="utf-8"))["cells"]:
        if cell["cell_type"] != "code":
            continue
        for node in ast.walk(ast.parse("".join(cell["source"]))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("eagle3_nb"):
                module = node.module[len("eagle3_nb"):].lstrip(".")
                found |= {f"{module}:{a.name}" for a in node.names}
            elif isinstance(node, ast.Import):
                found |= {a.name[len("eagle3_nb"):].lstrip(".") for a in node.names
                          if a.name.startswith("eagle3_nb")}
    return found


def notebook_violations(folder: Path = NOTEBOOKS) -> list[str]:
    problems = []
    for notebook in sorted(folder.glob("[0-9][0-9]_*.ipynb")):
        allowed = NOTEBOOK_IMPORTS.get(notebook.stem)
        if allowed is None:
            problems.append(f"{notebook.name} has no import whitelist: add it to NOTEBOOK_IMPORTS")
            continue
        imported = notebook_imports(notebook)
        for name in sorted(imported - allowed):
            problems.append(f"{notebook.name} imports {name}, not one of its entry points: "
                            "call a check (or add the entry point it needs to the package)")
        for name in sorted(allowed - imported):
            problems.append(f"{notebook.name} no longer imports {name}: drop it from "
                            "NOTEBOOK_IMPORTS")
    return problems


def engine_names(root: Path) -> list[str]:
    """Every engine folder's name (engines/<name>/__init__.py) and the title it registers."""
    names = []
    for init in sorted((root / ENGINE_HOME).glob("*/__init__.py")):
        names.append(init.parent.name)
        titles = re.findall(r"title=\"([^\"]+)\"", init.read_text(encoding="utf-8"))
        names += titles
    return names


def _docstrings(tree: ast.AST) -> set[int]:
    out = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr) and \
                isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
            out.add(id(body[0].value))
    return out


def _named_texts(node: ast.AST) -> list[str]:
    """The identifiers and module paths a node names."""
    if isinstance(node, ast.Name):
        return [node.id]
    if isinstance(node, ast.Attribute):
        return [node.attr]
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [node.name]
    if isinstance(node, ast.ImportFrom):
        return [node.module or "", *(a.name for a in node.names)]
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    if isinstance(node, ast.arg):
        return [node.arg]
    return []


def _is_own_version(node: ast.AST) -> bool:
    return isinstance(node, ast.Assign) and any(
        isinstance(t, ast.Name) and t.id == "__version__" for t in node.targets)


def engine_literals(root: Path) -> list[str]:
    """Engine names and release literals in the package outside engines/; in samples/ (whose
    prose tells each sample's story per engine) the NAME==VERSION specs only."""
    names = engine_names(root)
    word = re.compile(r"(?i)(?<![a-z])(" + "|".join(map(re.escape, names)) + r")(?![a-z])")
    spec = re.compile(r"(?i)\b(" + "|".join(map(re.escape, names)) + r")\s*==\s*\d")
    problems = []
    for path in sorted(root.rglob("*.py")):
        mod = module_name(path, root)
        if _owner(mod, (ENGINE_HOME,)):
            continue
        if _owner(mod, LITERAL_EXEMPT):
            problems += _engine_specs(path, mod, spec)
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docs = _docstrings(tree)
        own = {id(n.value) for n in ast.walk(tree) if _is_own_version(n)}
        for node in ast.walk(tree):
            texts = _named_texts(node)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and \
                    id(node) not in docs and id(node) not in own:
                texts.append(node.value)
                if RELEASE.search(node.value):
                    problems.append(f"{mod}:{node.lineno} release literal {node.value[:60]!r}: "
                                    f"engine facts live in engines/")
            for text in texts:
                found = word.search(text.replace("_", " "))
                if found:
                    problems.append(f"{mod}:{node.lineno} names engine {found.group(1)!r} in "
                                    f"{text[:60]!r}: ask the registry (engines/)")
    return problems


def _engine_specs(path: Path, mod: str, spec: re.Pattern) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docs = _docstrings(tree)
    return [f"{mod}:{node.lineno} release literal {node.value[:60]!r}: the engine folders name "
            "the releases (engines/)" for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str)
            and id(node) not in docs and spec.search(node.value)]


def heavy_on_header_path(graph, roots=HEADER_PATH, heavy_packages=HEAVY) -> list[str]:
    """Heavy packages the header path imports at module level, transitively (package __init__
    files of every imported module included, as Python runs them)."""
    problems, seen = [], set()
    todo = [m for m in graph if _owner(m, roots)]
    while todo:
        mod = todo.pop()
        if mod in seen or mod not in graph:
            continue
        seen.add(mod)
        _, top, external = graph[mod]
        for heavy in sorted(set(heavy_packages) & external):
            problems.append(f"{mod} imports {heavy} at module level, on the header path")
        parents = [".".join(mod.split(".")[:i]) for i in range(1, mod.count(".") + 1)]
        todo += [*top, *parents, ""]
    return problems


def beyond_inspect(graph, root: Path = PACKAGE) -> list[str]:
    """What inspect's path imports at module level (transitively, package __init__ files
    included) that it does not answer from: engine-folder modules other than
    ENGINE_FOLDER_FACTS, views, io.files' writing machinery."""
    folders = [f"{ENGINE_HOME}.{p.parent.name}" for p in (root / ENGINE_HOME).glob("*/__init__.py")]
    problems, seen = [], set()
    todo = [m for m in graph if _owner(m, INSPECT_PATH)] + folders
    while todo:
        mod = todo.pop()
        if mod in seen or mod not in graph:
            continue
        seen.add(mod)
        folder = _owner(mod, folders)
        if folder and mod != folder and mod[len(folder) + 1:] not in ENGINE_FOLDER_FACTS:
            problems.append(f"{mod} on the inspect path: an engine folder's "
                            f"{mod[len(folder) + 1:]} loads when asked (registry.later)")
        if _owner(mod, INSPECT_LATER):
            problems.append(f"{mod} on the inspect path: import it where it is used (a view "
                            "where it is printed, a reader where its input is given)")
        for name in sorted(set(INSPECT_STDLIB_LATER) & graph[mod][2]):
            problems.append(f"{mod} imports {name} at module level, on the inspect path")
        parents = [".".join(mod.split(".")[:i]) for i in range(1, mod.count(".") + 1)]
        todo += [*graph[mod][1], *parents, ""]
    return problems


def test_the_package_keeps_the_house_rules():
    assert violations() == []


def test_notebooks_import_only_their_entry_points():
    assert notebook_violations() == []


@pytest.mark.parametrize("line, expected", [
    ("from eagle3_nb.engines.planner import plan_load",
     "imports engines.planner:plan_load, not one of its entry points"),
    ("from eagle3_nb.io.checkpoint import Checkpoint",
     "imports io.checkpoint:Checkpoint, not one of its entry points"),
    ("import eagle3_nb.target", "imports target, not one of its entry points"),
])
def test_a_notebook_importing_past_its_entry_points_is_caught(tmp_path, line, expected):
    import json

    folder = tmp_path / "notebooks"
    shutil.copytree(NOTEBOOKS, folder)
    path = folder / "02_d2t_mapping.ipynb"
    nb = json.loads(path.read_text(encoding="utf-8"))
    nb["cells"].append({"cell_type": "code", "metadata": {}, "outputs": [],
                        "execution_count": None, "source": [line]})
    path.write_text(json.dumps(nb), encoding="utf-8")
    found = notebook_violations(folder)
    assert [v for v in found if expected in v and v.startswith("02_d2t_mapping")], found


def test_a_whitelist_entry_a_notebook_no_longer_imports_is_caught(tmp_path):
    folder = tmp_path / "notebooks"
    shutil.copytree(NOTEBOOKS, folder)
    path = folder / "02_d2t_mapping.ipynb"
    text = path.read_text(encoding="utf-8")
    line = '"from eagle3_nb.vocab import load_tokenizer\\n",'
    assert line in text
    path.write_text(text.replace(line, ""), encoding="utf-8")
    found = notebook_violations(folder)
    assert found == ["02_d2t_mapping.ipynb no longer imports vocab:load_tokenizer: drop it from "
                     "NOTEBOOK_IMPORTS"], found


def test_a_module_over_the_size_rule_is_caught(tmp_path):
    root = tmp_path / "eagle3_nb"
    shutil.copytree(PACKAGE, root, symlinks=True, ignore=shutil.ignore_patterns("__pycache__"))
    grown = root / "checks" / "triage.py"
    lines = len(grown.read_text(encoding="utf-8").splitlines())
    grown.write_text(grown.read_text(encoding="utf-8") + "\n" * (MAX_LINES - lines + 1))
    assert [v for v in violations(root) if v.startswith("checks.triage has 601 lines")]


def test_the_architecture_page_names_every_rung_and_module_group():
    """docs/architecture.md's map is this file's RUNGS, row for row."""
    page = (PACKAGE.parent / "docs" / "architecture.md").read_text(encoding="utf-8")
    rows = {line.split("|")[1].strip(): line.split("|")[2].strip()
            for line in page.splitlines() if line.startswith("| ") and line.count("|") == 3}
    for title, groups in RUNGS:
        assert title in rows, title
        listed = [[name.strip(" `") for name in group.split(",")]
                  for group in rows[title].split(";")]
        assert listed == [list(g) for g in groups], (title, listed)


def test_every_module_has_a_layer():
    for mod in import_graph(PACKAGE):
        if mod not in ("", "__main__"):
            layer_of(mod)


@pytest.mark.parametrize("file, line, expected", [
    ("model.py", "from eagle3_nb.checks.hidden import check_hidden_states",
     "import cycle"),
    ("engines/planner.py", "def _f():\n    from eagle3_nb.target import TargetModel",
     "engines.planner imports target, a layer above it"),
    ("viz/keys.py", "from eagle3_nb.io.checkpoint import Checkpoint",
     "viz.keys imports io.checkpoint: viz imports only"),
    ("io/files.py", "import torch", "io.files imports torch at module level"),
    ("checks/load.py", "from eagle3_nb.vocab import VocabMapping",
     "vocab imports numpy at module level"),
    ("report/run.py", "from eagle3_nb.samples import build_samples",
     "report.run imports samples: nothing outside samples may"),
    ("checks/load.py", "ENGINE = 'vllm'", "checks.load:"),
    ("report/run.py", "def _f():\n    return parse('0.5.16')", "release literal '0.5.16'"),
    ("viz/keys.py", "def sglang_rows():\n    pass", "names engine 'sglang'"),
    ("cli/commands.py", "from eagle3_nb.engines.vllm import probe", "names engine 'vllm'"),
    ("samples/build.py", "RELEASES = ('sglang==0.5.9',)", "release literal 'sglang==0.5.9'"),
    ("engines/vllm/__init__.py", "from eagle3_nb.engines.vllm import metrics",
     "engines.vllm.metrics on the inspect path"),
    ("cli/commands.py", "from eagle3_nb.viz.text import evidence_lines",
     "viz.text on the inspect path"),
    ("io/files.py", "import socket", "io.files imports socket at module level, on the inspect"),
])
def test_a_planted_violation_is_caught(tmp_path, file, line, expected):
    root = tmp_path / "eagle3_nb"
    shutil.copytree(PACKAGE, root, symlinks=True, ignore=shutil.ignore_patterns("__pycache__"))
    target = root / file
    target.write_text(target.read_text(encoding="utf-8") + "\n" + line + "\n", encoding="utf-8")
    found = violations(root)
    assert any(expected in v for v in found), found
    if expected == "import cycle":
        assert any("checks.hidden" in v and "model" in v for v in found), found
