"""The house rules of DESIGN.md, executable: an AST walk over the package (no import runs).

- no import cycle between modules, counting imports inside functions;
- no upward import: a module imports only from its own layer or the layers below (LAYERS);
- viz is pure: it imports only findings, errors and viz itself;
- the header path (inspect: cli, checks.load and what they import at module level) pulls in no
  torch, plotly or transformers;
- nothing imports samples;
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

# Lowest first. A module belongs to the first group whose name is itself or a package above it.
LAYERS: list[tuple[str, ...]] = [
    ("errors", "defaults"),
    ("findings",),
    ("config", "layouts", "uncertainty"),
    ("io",),
    ("observation",),
    ("engines",),
    ("vocab", "stats"),
    ("model",),
    ("target",),
    ("features", "trace", "drift", "tree"),
    ("decoding",),
    ("greedy",),
    ("acceptance", "wirings"),
    ("whatif",),
    ("session",),
    ("observed",),
    ("checks", "convert"),
    ("probe",),
    ("viz",),
    ("widgets",),
    ("report",),
    ("cli",),
    ("samples",),
]
VIZ_MAY_IMPORT = ("findings", "errors", "viz")
HEADER_PATH = ("cli", "checks.load", "checks.vocab", "engines", "io", "config", "layouts")
HEAVY = ("torch", "plotly", "transformers")
# inspect --no-stats, engines and log read headers and text only: not even numpy at module level
# (checks.vocab reads the d2t table with it, so it is on the header path but not on this one)
TEXT_PATH = ("cli", "checks.load", "checks.log", "engines", "io", "config", "layouts")
TEXT_HEAVY = ("numpy",)
ENGINE_HOME, LITERAL_EXEMPT = "engines", ("samples",)
RELEASE = re.compile(r"(?<![\w.])\d+\.\d+\.\d+(?:\.?post\d+|rc\d+)?(?![\w.])|==\d")
FACADE = ""  # the package __init__: a lazy public API that may name any module


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
    problems += engine_literals(root)
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


def test_the_package_keeps_the_house_rules():
    assert violations() == []


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
    ("cli.py", "from eagle3_nb.engines.vllm import probe", "names engine 'vllm'"),
    ("samples/build.py", "RELEASES = ('sglang==0.5.9',)", "release literal 'sglang==0.5.9'"),
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
