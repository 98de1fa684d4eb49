#!/usr/bin/env python3
"""The drafting settings each engine release uses when the user does not set them.

What tree (or chain) an engine drafts decides what the kit must simulate. The numbers are
read from each release's own code, at every published release from the first with EAGLE-3
(eagle3_nb/engines/releases.py), from a bare git directory with release tags or from wheels:

SGLang  `auto_choose_speculative_params` (srt/server_args.py) or, since the argument groups,
        `_auto_choose_speculative_params` (srt/arg_groups/speculative_hook.py) returns
        (num_steps, eagle_topk, num_draft_tokens) from the target's `architectures[0]`. The
        function's if/elif chain is parsed (`arch in [...]` lists, the STANDALONE test, the
        catch-all) together with its call site: the guard that decides when it runs, whether
        topk == 1 forces num_draft_tokens = num_steps + 1, whether page_size > 1 forces topk 1.
        Before the function existed the ServerArgs dataclass fields held the defaults.
vLLM    SpeculativeConfig (vllm/config.py, vllm/config/__init__.py, vllm/config/speculative.py):
        the default of `num_speculative_tokens`, whether startup fails without it, whether the
        draft config's n_predict stands in for it, and whether an EAGLE tree can be drafted
        (`speculative_token_tree` read by the EAGLE proposer, with a tree attention backend).

A release whose code does not have one of the shapes above stops the tool with the reason
(read the code, then teach the parser): nothing is guessed.

    python tools/drafting_defaults.py --sglang /tmp/survey/sglang.git --vllm /tmp/survey/vllm.git --write
    python tools/drafting_defaults.py --sglang GIT --wheel /tmp/wh/sglang-0.5.24-...whl --write

writes eagle3_nb/engines/data/drafting_{sglang,vllm}.json and prints where the rules change.
A release without a tag in the git directory is read from a --wheel (a .whl, an extracted
site-packages folder, or a folder of .whl files). Python 3.11, stdlib only.
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import json
import os
import re
import subprocess
import sys
import zipfile
from dataclasses import dataclass, field

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA_DIR = os.path.join(REPO_ROOT, "eagle3_nb", "engines", "data")
RELEASES_PY = os.path.join(REPO_ROOT, "eagle3_nb", "engines", "releases.py")

REPOSITORY = {"sglang": "github.com/sgl-project/sglang", "vllm": "github.com/vllm-project/vllm"}
GIT_PREFIX = {"sglang": "python/", "vllm": ""}  # where the importable package lies in the repo
SGLANG_FUNCTIONS = ("auto_choose_speculative_params", "_auto_choose_speculative_params")
VLLM_CONFIG_FILES = ("vllm/config/speculative.py", "vllm/config/__init__.py", "vllm/config.py")

FIELDS = {
    "sglang": {
        "auto": "true: the defaults are chosen per target architecture by the function in `source`; "
                "false: they are the ServerArgs dataclass fields (same for every architecture)",
        "by_architecture": "target architectures[0] -> [num_steps, eagle_topk, num_draft_tokens], "
                           "first matching branch of the function",
        "other": "the catch-all: any other architecture",
        "standalone": "what --speculative-algorithm STANDALONE gets whatever the architecture "
                      "(null: no such branch)",
        "auto_when": "the guard around the call (names without self./server_args./cfg.)",
        "auto_requires_unset": "the call asserts that topk and num_draft_tokens are unset too: "
                               "setting only one of the three fails at startup",
        "chain_tokens_forced": "when eagle_topk == 1, num_draft_tokens is set to num_steps + 1",
        "page_size_forces_topk1": "with page_size > 1 a topk > 1 is lowered to 1",
        "arch_from": "the expression the architecture is read from",
        "source": "file:function that holds the rule (repository path)",
        "called_from": "file:function that calls it",
        "read": "where this release's code was read (git tag, or wheel)",
    },
    "vllm": {
        "num_speculative_tokens": "the field's default (null: none)",
        "required": "startup fails when num_speculative_tokens is still unset",
        "from_draft_n_predict": "an n_predict in the draft's config.json stands in for it",
        "from_speculators_config": "a speculators-format checkpoint carries it "
                                   "(speculators_config.proposal_methods[0].speculative_tokens)",
        "tree": "an EAGLE draft can draft a tree: speculative_token_tree is read by the EAGLE "
                "proposer and a tree attention backend exists; it drafts one only when the user sets "
                "both the tree and that backend (TREE_ATTN), otherwise a chain",
        "tree_parts": "the pieces of that: the config field, the proposer file, the backend file",
        "default_tree": "what an unset speculative_token_tree becomes ('chain': [(0,), (0, 0), ...] "
                        "num_speculative_tokens deep; null: the field is absent, or nothing turns it into a chain "
                        "because the EAGLE proposer does not read it)",
        "source": "file:class that holds the rule",
        "read": "where this release's code was read (git tag, or wheel)",
    },
}


class ParseFailure(RuntimeError):
    """A release's code has a shape this tool does not know: read it, then extend the parser."""


def _load_releases() -> dict[str, tuple[tuple[str, str], ...]]:
    spec = importlib.util.spec_from_file_location("_e3_releases", RELEASES_PY)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.RELEASES


# ---------------------------------------------------------------- code of one release

class Code:
    """Read access to one release's package files; paths are package-relative
    ('sglang/srt/server_args.py')."""

    label = ""

    def read(self, path: str) -> str | None:
        raise NotImplementedError

    def files(self, under: str) -> list[str]:
        raise NotImplementedError

    def grep(self, pattern: str, under: str) -> list[str]:
        """Package-relative .py files under UNDER whose text matches the regex."""
        rx = re.compile(pattern)
        return [p for p in self.files(under) if p.endswith(".py") and rx.search(self.read(p) or "")]


class GitCode(Code):
    _blobs: dict[str, str] = {}

    def __init__(self, git_dir: str, tag: str, prefix: str):
        self.git_dir, self.tag, self.prefix = git_dir, tag, prefix
        self.label = f"git tag {tag}"
        self._listing: list[str] | None = None

    def _git(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run(["git", "--git-dir", self.git_dir, *args], capture_output=True, text=True)

    def read(self, path: str) -> str | None:
        r = self._git("rev-parse", "--verify", "-q", f"{self.tag}:{self.prefix}{path}")
        if r.returncode:
            return None
        blob = r.stdout.strip()
        if blob not in self._blobs:
            self._blobs[blob] = self._git("cat-file", "blob", blob).stdout
        return self._blobs[blob]

    def files(self, under: str) -> list[str]:
        if self._listing is None:
            r = self._git("ls-tree", "-r", "--name-only", self.tag, "--", self.prefix or ".")
            if r.returncode:
                raise ParseFailure(f"git ls-tree {self.tag} failed: {r.stderr.strip()}")
            self._listing = [p[len(self.prefix):] for p in r.stdout.splitlines() if p.startswith(self.prefix)]
        return [p for p in self._listing if p.startswith(under)]

    def grep(self, pattern: str, under: str) -> list[str]:
        r = self._git("grep", "-l", "-E", pattern, self.tag, "--", f"{self.prefix}{under}*.py")
        if r.returncode not in (0, 1):
            raise ParseFailure(f"git grep {self.tag} failed: {r.stderr.strip()}")
        head = f"{self.tag}:{self.prefix}"
        return sorted(line[len(head):] for line in r.stdout.splitlines() if line.startswith(head))


class WheelCode(Code):
    def __init__(self, path: str):
        self.path = path
        self.label = f"wheel {os.path.basename(path)}"
        self._zip = zipfile.ZipFile(path)
        self._names = set(self._zip.namelist())

    def read(self, path: str) -> str | None:
        return self._zip.read(path).decode("utf-8", "replace") if path in self._names else None

    def files(self, under: str) -> list[str]:
        return sorted(n for n in self._names if n.startswith(under))


class TreeCode(Code):
    """An installed or extracted package: a site-packages folder."""

    def __init__(self, root: str):
        self.root = root
        self.label = f"site-packages {root}"

    def read(self, path: str) -> str | None:
        full = os.path.join(self.root, path)
        if not os.path.isfile(full):
            return None
        with open(full, encoding="utf-8", errors="replace") as f:
            return f.read()

    def files(self, under: str) -> list[str]:
        out = []
        base = os.path.join(self.root, under)
        for dirpath, _, names in os.walk(base):
            for n in names:
                out.append(os.path.relpath(os.path.join(dirpath, n), self.root).replace(os.sep, "/"))
        return sorted(out)


_DIST = re.compile(r"^(sglang|vllm)-([0-9][^-]*?)(?:\.dist-info|-[^/]*\.whl)$")


def wheel_sources(paths: list[str]) -> dict[tuple[str, str], Code]:
    """(engine, version) -> code, from .whl files, folders of .whl files and site-packages."""
    found: dict[tuple[str, str], Code] = {}
    for path in paths:
        if os.path.isfile(path):
            m = _DIST.match(os.path.basename(path))
            if not m:
                raise ParseFailure(f"{path}: not an sglang or vllm wheel")
            found[(m.group(1), m.group(2))] = WheelCode(path)
            continue
        if not os.path.isdir(path):
            raise ParseFailure(f"{path}: no such file or folder")
        names = os.listdir(path)
        dists = [m for m in map(_DIST.match, names) if m and m.group(0).endswith(".dist-info")]
        if dists:
            for m in dists:
                found[(m.group(1), m.group(2))] = TreeCode(path)
            continue
        for n in sorted(names):
            m = _DIST.match(n)
            if m and n.endswith(".whl"):
                found[(m.group(1), m.group(2))] = WheelCode(os.path.join(path, n))
    return found


def git_tags(git_dir: str) -> set[str]:
    r = subprocess.run(["git", "--git-dir", git_dir, "tag"], capture_output=True, text=True)
    if r.returncode:
        raise ParseFailure(f"{git_dir}: not a git directory ({r.stderr.strip()})")
    return set(r.stdout.split())


# ---------------------------------------------------------------- ast helpers

_OWNER = re.compile(r"\b(?:self|server_args|cfg|args)\.")


def _norm(node: ast.AST) -> str:
    return _OWNER.sub("", ast.unparse(node))


def _parents(tree: ast.AST) -> dict[ast.AST, ast.AST]:
    out = {}
    for node in ast.walk(tree):
        for child in ast.iter_child_nodes(node):
            out[child] = node
    return out


def _qualname(node: ast.AST, parents: dict) -> str:
    names = []
    while node is not None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.append(node.name)
        node = parents.get(node)
    return ".".join(reversed(names)) or "<module>"


def _enclosing_function(node: ast.AST, parents: dict) -> ast.AST | None:
    while node is not None and not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        node = parents.get(node)
    return node


def _called_name(call: ast.Call) -> str | None:
    if isinstance(call.func, ast.Name):
        return call.func.id
    if isinstance(call.func, ast.Attribute):
        return call.func.attr
    return None


def _triple(node: ast.AST, where: str) -> list[int]:
    if (isinstance(node, ast.Return) and isinstance(node.value, ast.Tuple) and len(node.value.elts) == 3
            and all(isinstance(e, ast.Constant) and type(e.value) is int for e in node.value.elts)):
        return [e.value for e in node.value.elts]
    raise ParseFailure(f"{where}: expected `return (num_steps, topk, num_draft_tokens)` with three "
                       f"int literals, found `{ast.unparse(node)}`")


def _has(node_list: list[ast.stmt], kind: type) -> bool:
    return any(isinstance(n, kind) for stmt in node_list for n in ast.walk(stmt))


# ---------------------------------------------------------------- SGLang

@dataclass
class SglangRule:
    auto: bool
    by_architecture: dict[str, list[int]]
    other: list[int]
    standalone: list[int] | None
    auto_when: str | None
    auto_requires_unset: bool
    chain_tokens_forced: bool
    page_size_forces_topk1: bool
    arch_from: str | None
    source: str
    called_from: str | None
    read: str = ""

    def as_json(self) -> dict:
        return dict(self.__dict__)


def parse_choice_function(fn: ast.FunctionDef, where: str) -> tuple[dict, list[int], list[int] | None, str]:
    """(by_architecture, other, standalone, arch variable) from the function's if/elif chain."""
    by_arch: dict[str, list[int]] = {}
    other: list[int] | None = None
    standalone: list[int] | None = None
    arch_vars: set[str] = set()

    def branch_return(body: list[ast.stmt], test: str) -> list[int] | None:
        if len(body) == 1 and isinstance(body[0], ast.Return):
            return _triple(body[0], f"{where} branch `{test}`")
        if _has(body, ast.Return):
            raise ParseFailure(f"{where}: branch `{test}` does more than return a tuple")
        return None  # e.g. `if not os.path.exists(config_path): raise ...`

    def classify(test: ast.expr) -> tuple[str, object]:
        if (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.In)
                and isinstance(test.comparators[0], (ast.List, ast.Tuple, ast.Set))
                and isinstance(test.left, ast.Name)):
            elts = test.comparators[0].elts
            if not all(isinstance(e, ast.Constant) and isinstance(e.value, str) for e in elts):
                raise ParseFailure(f"{where}: architecture list with non-literal entries: {ast.unparse(test)}")
            return "arch", (test.left.id, [e.value for e in elts])
        if (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq)
                and isinstance(test.left, ast.Attribute) and test.left.attr == "speculative_algorithm"
                and isinstance(test.comparators[0], ast.Constant)):
            return "algorithm", test.comparators[0].value
        return "unknown", None

    def walk_chain(node: ast.If) -> None:
        nonlocal other, standalone
        while True:
            kind, value = classify(node.test)
            ret = branch_return(node.body, ast.unparse(node.test))
            if kind == "arch" and ret is not None:
                name, archs = value
                arch_vars.add(name)
                for a in archs:
                    by_arch.setdefault(a, ret)  # the first matching branch wins
            elif kind == "algorithm" and ret is not None:
                if value != "STANDALONE":
                    raise ParseFailure(f"{where}: a branch for algorithm {value!r}: teach the parser")
                standalone = standalone or ret
            elif ret is not None:
                raise ParseFailure(f"{where}: unknown test `{ast.unparse(node.test)}` returns {ret}")
            if not node.orelse:
                return
            if len(node.orelse) == 1 and isinstance(node.orelse[0], ast.If):
                node = node.orelse[0]
                continue
            if len(node.orelse) == 1 and isinstance(node.orelse[0], ast.Return):
                if other is None:
                    other = _triple(node.orelse[0], f"{where} else branch")
                return
            if _has(node.orelse, ast.Return):
                raise ParseFailure(f"{where}: else branch does more than return a tuple")
            return

    for stmt in fn.body:
        if other is not None:
            break  # unreachable after the catch-all
        if isinstance(stmt, ast.If):
            walk_chain(stmt)
        elif isinstance(stmt, ast.Return):
            other = _triple(stmt, f"{where} final return")
        elif _has([stmt], ast.Return):
            raise ParseFailure(f"{where}: a return inside `{type(stmt).__name__}`: teach the parser")
    if other is None:
        raise ParseFailure(f"{where}: no catch-all return")
    if len(arch_vars) > 1:
        raise ParseFailure(f"{where}: architecture tests on different names {sorted(arch_vars)}")
    return by_arch, other, standalone, next(iter(arch_vars), "")


_ARCH_FROM = re.compile(r"((?:\w+(?:\(\))?\.)*(?:get\(\s*['\"]architectures['\"][^)]*\)|architectures))\[0\]")


def _guard_facts(scope: ast.AST) -> tuple[bool, bool]:
    """(topk == 1 forces num_draft_tokens = num_steps + 1, page_size > 1 forces topk 1) in SCOPE."""
    chain = page = False
    for node in ast.walk(scope):
        if not isinstance(node, ast.If):
            continue
        test = _norm(node.test)
        body = "\n".join(_norm(s) for s in node.body)
        if ("speculative_eagle_topk == 1" in test
                and re.search(r"speculative_num_draft_tokens\s*=\s*speculative_num_steps \+ 1", body)):
            chain = True
        if ("page_size > 1" in test and "speculative_eagle_topk > 1" in test
                and re.search(r"speculative_eagle_topk\s*=\s*1\b", body)):
            page = True
    return chain, page


def analyze_sglang(code: Code) -> SglangRule:
    """The default-drafting rule of one SGLang release. Raises ParseFailure on unknown shapes."""
    prefix = GIT_PREFIX["sglang"]
    paths = code.grep(r"auto_choose_speculative_params", "sglang/srt/")
    modules: dict[str, tuple[ast.Module, dict]] = {}
    for p in paths:
        tree = ast.parse(code.read(p) or "")
        modules[p] = (tree, _parents(tree))

    defs: dict[str, list[tuple[str, ast.FunctionDef]]] = {}
    calls: list[tuple[str, ast.Call]] = []
    for p, (tree, parents) in modules.items():
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef) and node.name in SGLANG_FUNCTIONS:
                defs.setdefault(node.name, []).append((p, node))
            elif isinstance(node, ast.Call) and _called_name(node) in SGLANG_FUNCTIONS:
                calls.append((p, node))

    if not calls:
        if defs:
            raise ParseFailure(f"{code.label}: {sorted(defs)} defined but never called")
        return _sglang_static(code)
    if len(calls) > 1:
        raise ParseFailure(f"{code.label}: {len(calls)} calls of the auto-choice: "
                           + ", ".join(f"{p}:{c.lineno}" for p, c in calls))

    call_path, call = calls[0]
    name = _called_name(call)
    found = defs.get(name, [])
    local = [d for d in found if d[0] == call_path]
    if len(local) == 1:
        def_path, fn = local[0]
    elif len(found) == 1:
        def_path, fn = found[0]
    else:
        raise ParseFailure(f"{code.label}: {name} called in {call_path}, defined in "
                           f"{[p for p, _ in found] or 'no file read'}")
    where = f"{code.label} {def_path}:{fn.name}"
    by_arch, other, standalone, _ = parse_choice_function(fn, where)

    tree, parents = modules[call_path]
    caller = _enclosing_function(call, parents)
    if caller is None:
        raise ParseFailure(f"{code.label}: the call in {call_path}:{call.lineno} is not in a function")
    node, guard, guard_node = call, None, None
    while node is not caller:
        parent = parents[node]
        if isinstance(parent, ast.If) and guard is None:
            inside_body = any(node is s or node in ast.walk(s) for s in parent.body)
            guard = _norm(parent.test) if inside_body else f"not ({_norm(parent.test)})"
            guard_node = parent
        node = parent
    if guard is None or "speculative_num_steps is None" not in guard:
        raise ParseFailure(f"{code.label}: the auto-choice in {call_path}:{call.lineno} is not guarded "
                           f"by `speculative_num_steps is None` (guard: {guard})")
    requires_unset = any(
        isinstance(n, ast.Assert) and "speculative_eagle_topk is None" in _norm(n.test)
        and "speculative_num_draft_tokens is None" in _norm(n.test)
        for s in guard_node.body for n in ast.walk(s))

    # where the architecture comes from: the caller, the function, or a helper the caller calls
    helpers = {_called_name(n) for n in ast.walk(caller) if isinstance(n, ast.Call)}
    arch_text = "\n".join([ast.unparse(caller), ast.unparse(fn)] + [
        ast.unparse(n) for n in tree.body if isinstance(n, ast.FunctionDef) and n.name in helpers])
    m = _ARCH_FROM.search(arch_text)
    if not m:
        raise ParseFailure(f"{where}: cannot see where the architecture comes from (no architectures[0])")
    arch_from = _OWNER.sub("", m.group(0))
    chain, page = _guard_facts(caller)
    return SglangRule(
        auto=True, by_architecture=by_arch, other=other, standalone=standalone, auto_when=guard,
        auto_requires_unset=requires_unset, chain_tokens_forced=chain, page_size_forces_topk1=page,
        arch_from=arch_from, source=f"{prefix}{def_path}:{fn.name}",
        called_from=f"{prefix}{call_path}:{_qualname(caller, parents)}", read=code.label)


def _sglang_static(code: Code) -> SglangRule:
    path = "sglang/srt/server_args.py"
    text = code.read(path)
    if text is None:
        raise ParseFailure(f"{code.label}: neither the auto-choice nor {path}")
    tree = ast.parse(text)
    cls = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "ServerArgs"), None)
    if cls is None:
        raise ParseFailure(f"{code.label}: {path} has no ServerArgs")
    values: dict[str, object] = {}
    for stmt in cls.body:
        if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.value is not None:
            values[stmt.target.id] = stmt.value
    triple = []
    for name in ("speculative_num_steps", "speculative_eagle_topk", "speculative_num_draft_tokens"):
        v = values.get(name)
        if not (isinstance(v, ast.Constant) and type(v.value) is int):
            raise ParseFailure(f"{code.label}: ServerArgs.{name} is not an int literal "
                               f"({ast.unparse(v) if v is not None else 'missing'}) and no auto-choice")
        triple.append(v.value)
    post = next((n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "__post_init__"), cls)
    chain, page = _guard_facts(post)
    return SglangRule(
        auto=False, by_architecture={}, other=triple, standalone=None, auto_when=None,
        auto_requires_unset=False, chain_tokens_forced=chain, page_size_forces_topk1=page,
        arch_from=None, source=f"{GIT_PREFIX['sglang']}{path}:ServerArgs (dataclass field defaults)",
        called_from=None, read=code.label)


# ---------------------------------------------------------------- vLLM

@dataclass
class VllmRule:
    num_speculative_tokens: int | None
    required: bool
    from_draft_n_predict: bool
    from_speculators_config: bool
    tree: bool
    tree_parts: dict = field(default_factory=dict)
    default_tree: str | None = None
    source: str = ""
    read: str = ""

    def as_json(self) -> dict:
        return dict(self.__dict__)


def _field_default(value: ast.expr | None, where: str) -> int | None:
    if value is None:
        raise ParseFailure(f"{where}: num_speculative_tokens has no default expression")
    if isinstance(value, ast.Constant) and (value.value is None or type(value.value) is int):
        return value.value
    if isinstance(value, ast.Call) and _called_name(value) in ("field", "Field"):
        for kw in value.keywords:
            if kw.arg == "default":
                return _field_default(kw.value, where)
    raise ParseFailure(f"{where}: num_speculative_tokens default `{ast.unparse(value)}` not understood")


def analyze_vllm(code: Code) -> VllmRule:
    config_path, cls = None, None
    for path in VLLM_CONFIG_FILES:
        text = code.read(path)
        if text is None or "class SpeculativeConfig" not in text:
            continue
        tree = ast.parse(text)
        cls = next((n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == "SpeculativeConfig"),
                   None)
        if cls is not None:
            config_path = path
            break
    if cls is None:
        raise ParseFailure(f"{code.label}: no SpeculativeConfig in {VLLM_CONFIG_FILES}")
    where = f"{code.label} {config_path}:SpeculativeConfig"
    source = ast.unparse(cls)
    if "eagle3" not in source:
        raise ParseFailure(f"{where}: no eagle3 method (a release before EAGLE-3?)")

    fields = {s.target.id: s for s in cls.body if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)}
    if "num_speculative_tokens" not in fields:
        raise ParseFailure(f"{where}: no num_speculative_tokens field")
    default = _field_default(fields["num_speculative_tokens"].value, where)

    required = from_n_predict = False
    chain_default = False
    for node in ast.walk(cls):
        if not isinstance(node, ast.If):
            continue
        test = _norm(node.test)
        body = "\n".join(_norm(s) for s in node.body)
        if test == "num_speculative_tokens is None" and _has(node.body, ast.Raise):
            required = True
        if test == "num_speculative_tokens is None" and re.search(r"num_speculative_tokens = n_predict\b", body):
            from_n_predict = True
        if test == "speculative_token_tree is None" and "(i + 1) * (0,)" in body:
            chain_default = True
    if from_n_predict and not re.search(
            r"n_predict = getattr\(draft_model_config\.hf_config, 'n_predict', None\)", _norm(cls)):
        raise ParseFailure(f"{where}: n_predict read from somewhere other than the draft's hf_config")
    from_n_predict = from_n_predict or _speculator_n_predict(code)
    if default is None and not required:
        raise ParseFailure(f"{where}: num_speculative_tokens defaults to None and nothing raises: "
                           "read what the engine does then")

    tree_field = "speculative_token_tree" in fields
    proposers = code.grep(r"speculative_token_tree", "vllm/v1/spec_decode/") if tree_field else []
    backends = [p for p in code.files("vllm/") if re.search(r"(^|/)tree_attn\.py$", p)]
    if tree_field and not chain_default and (proposers or backends):
        raise ParseFailure(f"{where}: a tree field without the chain default: read the tree code")

    speculators = bool(code.grep(r"\[\s*['\"]num_speculative_tokens['\"]\s*\]\s*=\s*hf_config\.num_lookahead_tokens",
                                 "vllm/engine/")
                       or code.grep(r"get\(\s*['\"]speculative_tokens['\"]\s*\)",
                                    "vllm/transformers_utils/configs/speculators/"))
    return VllmRule(
        num_speculative_tokens=default, required=required, from_draft_n_predict=from_n_predict,
        from_speculators_config=speculators, tree=bool(tree_field and proposers and backends),
        tree_parts={"field": tree_field, "proposer": proposers, "backend": backends},
        default_tree="chain" if tree_field and chain_default else None,
        source=f"{config_path}:SpeculativeConfig", read=code.label)


# Since 0.34.0 SpeculativeConfig hands the draft to a speculator config class; the draft-model
# ones (EAGLE among them) take the n_predict fallback in DraftModelSpeculatorConfig.
SPECULATOR_CONFIG = "vllm/v1/worker/gpu/spec_decode/speculator_config.py"
EAGLE_SPECULATOR_CONFIG = "vllm/v1/worker/gpu/spec_decode/eagle/config.py"


def _speculator_n_predict(code: Code) -> bool:
    """The EAGLE speculator config inherits a resolve_num_speculative_tokens that defaults
    num_speculative_tokens to the draft hf_config's n_predict."""
    base, eagle = code.read(SPECULATOR_CONFIG), code.read(EAGLE_SPECULATOR_CONFIG)
    if base is None or eagle is None:
        return False
    where = f"{code.label} {SPECULATOR_CONFIG}"
    eagle_classes = [n for n in ast.parse(eagle).body if isinstance(n, ast.ClassDef)]
    if any(isinstance(f, ast.FunctionDef) and f.name == "resolve_num_speculative_tokens"
           for c in eagle_classes for f in c.body):
        raise ParseFailure(f"{code.label} {EAGLE_SPECULATOR_CONFIG}: overrides resolve_num_speculative_tokens")
    eagle_cls = next((c for c in eagle_classes if c.name == "EagleSpeculatorConfig"), None)
    if eagle_cls is None or "DraftModelSpeculatorConfig" not in [_norm(b) for b in eagle_cls.bases]:
        raise ParseFailure(f"{code.label} {EAGLE_SPECULATOR_CONFIG}: EagleSpeculatorConfig does not derive "
                           "from DraftModelSpeculatorConfig")
    draft_cls = next((n for n in ast.parse(base).body
                      if isinstance(n, ast.ClassDef) and n.name == "DraftModelSpeculatorConfig"), None)
    fn = next((f for f in (draft_cls.body if draft_cls else []) if isinstance(f, ast.FunctionDef)
               and f.name == "resolve_num_speculative_tokens"), None)
    if fn is None:
        raise ParseFailure(f"{where}: no DraftModelSpeculatorConfig.resolve_num_speculative_tokens")
    text = re.sub(r"\bspec\.", "", _norm(fn))
    if not (re.search(r"n_predict = getattr\(draft_model_config\.hf_config, 'n_predict', None\)", text)
            and re.search(r"if num_speculative_tokens is None:\s+num_speculative_tokens = n_predict\b", text)):
        raise ParseFailure(f"{where}: resolve_num_speculative_tokens has a shape this tool does not know")
    return True


ANALYZE = {"sglang": analyze_sglang, "vllm": analyze_vllm}


# ---------------------------------------------------------------- survey

def survey(engine: str, git_dir: str | None, wheels: dict[tuple[str, str], Code],
           releases: dict[str, tuple[tuple[str, str], ...]] | None = None) -> dict:
    releases = releases or _load_releases()
    tags = git_tags(git_dir) if git_dir else set()
    out: dict[str, dict] = {}
    for version, _ in releases[engine]:
        tag = f"v{version}"
        if tag in tags:
            code: Code = GitCode(git_dir, tag, GIT_PREFIX[engine])
        elif (engine, version) in wheels:
            code = wheels[(engine, version)]
        else:
            raise ParseFailure(f"{engine} {version}: no tag {tag} in {git_dir} and no --wheel for it "
                               f"(pip download {engine}=={version} --no-deps --only-binary :all:)")
        try:
            out[version] = ANALYZE[engine](code).as_json()
        except ParseFailure as error:
            raise ParseFailure(f"{engine} {version}: {error}") from None
    return out


_COMPARED = {"sglang": ("auto", "by_architecture", "other", "standalone", "auto_when", "auto_requires_unset",
                        "chain_tokens_forced", "page_size_forces_topk1", "source"),
             "vllm": ("num_speculative_tokens", "required", "from_draft_n_predict", "from_speculators_config",
                      "tree", "default_tree", "source")}


def changes(engine: str, table: dict[str, dict]) -> list[dict]:
    """Each release where a compared field differs from the release before."""
    out, previous = [], None
    for version, rule in table.items():
        if previous is None:
            out.append({"release": version, "changed": ["(first surveyed release)"]})
        else:
            diff = []
            for key in _COMPARED[engine]:
                if rule[key] == previous[key]:
                    continue
                if key == "by_architecture":
                    added = sorted(set(rule[key]) - set(previous[key]))
                    removed = sorted(set(previous[key]) - set(rule[key]))
                    moved = sorted(a for a in set(rule[key]) & set(previous[key]) if rule[key][a] != previous[key][a])
                    diff.append(f"by_architecture: +{added} -{removed} changed {moved}".replace(" +[] ", " ")
                                .replace(" -[]", "").replace(" changed []", ""))
                else:
                    diff.append(f"{key}: {previous[key]} -> {rule[key]}")
            if diff:
                out.append({"release": version, "changed": diff})
        previous = rule
    return out


def document(engine: str, table: dict[str, dict], git_dir: str | None, wheels: list[str]) -> dict:
    grafted = sorted(v for v, r in table.items() if not r["read"].startswith("git tag"))
    cmd = ["python tools/drafting_defaults.py"]
    if git_dir:
        cmd.append(f"--{engine} {git_dir}")
    cmd += [f"--wheel {w}" for w in wheels]
    return {
        "engine": engine,
        "generated_by": " ".join(cmd + ["--write"]),
        "source": {"repository": REPOSITORY[engine],
                   "releases": f"{next(iter(table))}..{next(reversed(table))} (eagle3_nb/engines/releases.py)",
                   "read_from_wheels": grafted},
        "fields": FIELDS[engine],
        "changes": changes(engine, table),
        "releases": table,
    }


def markdown(engine: str, doc: dict) -> str:
    lines = [f"## {engine}: where the drafting defaults change", ""]
    for c in doc["changes"]:
        rule = doc["releases"][c["release"]]
        lines.append(f"- **{c['release']}** (`{rule['source']}`): " + "; ".join(c["changed"]))
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sglang", metavar="GIT_DIR", help="bare git directory of SGLang with release tags")
    parser.add_argument("--vllm", metavar="GIT_DIR", help="bare git directory of vLLM with release tags")
    parser.add_argument("--wheel", action="append", default=[],
                        help="a wheel, a folder of wheels, or a site-packages folder (repeatable)")
    parser.add_argument("--engine", choices=("sglang", "vllm"), action="append",
                        help="only these engines (default: those with --sglang/--vllm or a wheel)")
    parser.add_argument("--write", action="store_true", help="write eagle3_nb/engines/data/drafting_*.json")
    args = parser.parse_args(argv)
    try:
        wheels = wheel_sources(args.wheel)
        engines = args.engine or [e for e in ("sglang", "vllm")
                                  if getattr(args, e) or any(k[0] == e for k in wheels)]
        if not engines:
            parser.error("give --sglang and/or --vllm (or --wheel)")
        for engine in engines:
            table = survey(engine, getattr(args, engine), wheels)
            doc = document(engine, table, getattr(args, engine),
                           [w for w in args.wheel if engine in os.path.basename(os.path.normpath(w))
                            or os.path.isdir(w)])
            print(markdown(engine, doc))
            if args.write:
                path = os.path.join(DATA_DIR, f"drafting_{engine}.json")
                with open(path, "w", encoding="utf-8") as f:
                    json.dump(doc, f, indent=1)
                    f.write("\n")
                print(f"wrote {os.path.relpath(path, REPO_ROOT)}", file=sys.stderr)
    except ParseFailure as error:
        print(f"drafting_defaults: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
