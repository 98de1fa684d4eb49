#!/usr/bin/env python3
"""Which target model classes can capture EAGLE-3 aux hidden states, per engine release.

An EAGLE-3 draft reads hidden states from three target layers. The engine asks the served
target class to capture them: SGLang calls `set_eagle3_layers_to_capture(layer_ids)`, vLLM
calls `set_aux_hidden_state_layers(layers)` on a `SupportsEagle3` model. This tool reads a
bare git directory of the engine (no network), and for every release tag

1. maps each served architecture to its class (SGLang: `EntryClass` of models/*.py;
   vLLM: the text-generation, multimodal and Transformers-backend dicts of registry.py),
2. resolves inheritance (C3 over bases found by name and imports) and delegation
   (`self.language_model.<hook>(ids)`, `self.model.<hook>(...)`) to the code that really
   decides which layers are captured,
3. classifies the layer-id rule from that code (see RULES), and whether the state after
   the last layer (id == num_layers) can be captured at all,
4. compresses releases into ranges per architecture, with the commits (and PR numbers)
   that added or changed the hook where git history exists.

    python tools/capture_table.py --sglang /tmp/survey/sglang.git --vllm /tmp/survey/vllm.git --write

writes eagle3_nb/engines/<engine>/data/capture.json and docs/target-capture.md, and prints
the markdown summary (`--data-dir DIR --doc FILE`: into DIR/capture_<engine>.json and FILE
instead, e.g. a scratch folder). Python 3.11, stdlib only.
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import json
import os
import re
import sys
from dataclasses import dataclass, field


def _load_engine_survey():
    """tools/ is not a package: load the sibling engine_survey.py by path."""
    if "engine_survey" in sys.modules:
        return sys.modules["engine_survey"]
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "engine_survey.py")
    spec = importlib.util.spec_from_file_location("engine_survey", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["engine_survey"] = module
    spec.loader.exec_module(module)
    return module


es = _load_engine_survey()

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ENGINES_DIR = os.path.join(REPO_ROOT, "eagle3_nb", "engines")
DOC_PATH = os.path.join(REPO_ROOT, "docs", "target-capture.md")

# What each rule means for a draft whose config lists layer id i (0-based decoder layers).
# "Entering layer k" is the residual stream before decoder layer k runs, i.e. the output of
# layer k-1, i.e. HF `hidden_states[k]`; k == num_layers is the state after the last layer.
RULES = {
    "plus_one": "SGLang: captures the state entering layer i+1 (= output of layer i, HF hidden_states[i+1]).",
    "plus_one_if_first_is_1": "SGLang: if ids[0] == 1 every id gets +1 (as plus_one), otherwise ids are used "
                              "as given (as_is).",
    "as_is_if_max_is_L": "SGLang: if max(ids) == num_layers ids are used as given (as_is), otherwise +1 "
                         "(as plus_one).",
    "as_is": "Captures the state entering layer i (= output of layer i-1, HF hidden_states[i]).",
    "fixed_default": "The hook takes no layer ids: the draft's ids are ignored and the model's default "
                     "capture points are used (SGLang: entering layers 2, L//2, L-3).",
    "of_language_model": "The wrapper delegates to a language model chosen at run time from "
                         "config.text_config.architectures: look that architecture up.",
    "unknown": "The hook's code did not match any known shape: read it (see note).",
}
STATUSES = ("capture", "no_capture", "not_served")


# ---------------------------------------------------------------- engines

@dataclass(frozen=True)
class Probe:
    """An engine-wide code fact, true or false per release (git grep)."""

    name: str
    meaning: str
    pattern: str
    paths: tuple[str, ...]


@dataclass(frozen=True)
class EngineSpec:
    name: str
    since: str
    hook: str  # the method the engine calls on the served target class
    capture_attr: str  # where the inner text model keeps the layer ids it captures at
    model_dirs: tuple[str, ...]  # folders whose .py files can hold model classes
    package_root: str  # path prefix in front of the importable package
    entry_dir: str | None = None  # SGLang: top-level modules here export EntryClass
    registry: str | None = None  # vLLM: registry.py
    registry_dicts: tuple[str, ...] = ()
    interface: str | None = None  # vLLM: capture needs this interface in the MRO
    probes: tuple[Probe, ...] = ()


SGLANG_MODELS = "python/sglang/srt/models/"
SGLANG_NOT_MODELS = ("python/sglang/srt/", f":(exclude){SGLANG_MODELS}")
VLLM_MODELS = "vllm/model_executor/models/"

ENGINES = {
    "sglang": EngineSpec(
        name="sglang", since="v0.4.4.post2", hook="set_eagle3_layers_to_capture",
        capture_attr="layers_to_capture", model_dirs=(SGLANG_MODELS,), package_root="python/",
        entry_dir=SGLANG_MODELS,
        probes=(
            Probe("runner_reads_draft_layer_ids",
                  "engine code outside models/ reads eagle_aux_hidden_state_layer_ids from the draft config "
                  "and hands it to the hook (before: the hook is called without ids, model defaults apply)",
                  r"eagle_aux_hidden_state_layer_ids", SGLANG_NOT_MODELS),
            Probe("hook_also_called_without_ids",
                  "some engine code (cuda_graph_runner.py, model_runner.py) also calls "
                  "set_eagle3_layers_to_capture() with no ids, which resets the capture points to the "
                  "model's defaults; whether that runs after the draft's ids were applied decides which "
                  "layers the CUDA graphs capture: read the call sites",
                  r"set_eagle3_layers_to_capture\(\)", SGLANG_NOT_MODELS),
        ),
    ),
    "vllm": EngineSpec(
        name="vllm", since="v0.8.5", hook="set_aux_hidden_state_layers",
        capture_attr="aux_hidden_state_layers", model_dirs=(VLLM_MODELS, "vllm/models/"), package_root="",
        registry=VLLM_MODELS + "registry.py",
        registry_dicts=("_TEXT_GENERATION_MODELS", "_MULTIMODAL_MODELS", "_TRANSFORMERS_MODELS",
                        "_TRANSFORMERS_SUPPORTED_MODELS", "_TRANSFORMERS_BACKEND_MODELS"),
        interface="SupportsEagle3",
        probes=(
            Probe("eagle3_gated_to_llama_model_type",
                  "SpeculativeConfig rejects method eagle3 unless 'llama' is in the target's "
                  "hf_text_config.model_type",
                  r"Eagle3 is only supported for Llama models", ("vllm/config.py", "vllm/config/")),
            Probe("draft_layer_ids_honored",
                  "the GPU model runner reads eagle_aux_hidden_state_layer_ids from the draft config "
                  "(before: always the target's get_eagle3_aux_hidden_state_layers() defaults)",
                  r"eagle_aux_hidden_state_layer_ids", ("vllm/v1/worker/",)),
            Probe("supports_eagle3_interface",
                  "the runner requires supports_eagle3(model) (SupportsEagle3 in the class's MRO)",
                  r"def supports_eagle3", (VLLM_MODELS + "interfaces.py",)),
        ),
    ),
}

# The families people serve with EAGLE-3: kept in the shipped table even when they never capture.
FAMILIES = re.compile(r"^(Llama|LLaMA|Llama4|Mllama4|Qwen2|Qwen3|Qwen2_5|Deepseek|DeepSeek|Kimi|GptOss|"
                      r"MiniMax|Glm|GLM|ChatGLM|Mistral|Ministral|Mixtral)")


# ---------------------------------------------------------------- module summaries (pure)

@dataclass
class Hook:
    """The capture hook as defined in one class: its normalised source."""

    lineno: int
    params: list[str]
    source: str  # ast.unparse of the whole def


@dataclass
class ClassInfo:
    name: str
    lineno: int
    bases: list[str]
    hook: Hook | None = None
    inner_hook: Hook | None = None  # vLLM: _set_aux_hidden_state_layers on an inner model
    # self.<attr> = <construction> in __init__: a list of specs (kind, value)
    attrs: dict[str, list[tuple[str, str]]] = field(default_factory=dict)
    # method or class attribute -> what it returns / holds, for ("method", name) specs
    returns: dict[str, list[tuple[str, str]]] = field(default_factory=dict)
    # keyword=Name passed to super().__init__(...) in __init__ (class parameters of a base)
    super_kwargs: dict[str, str] = field(default_factory=dict)
    # __init__ parameter defaults that are names: language_model_cls=Qwen3LLMModel
    param_defaults: dict[str, str] = field(default_factory=dict)
    capture: dict[str, bool] = field(default_factory=dict)  # see capture_features
    defines_forward: bool = False
    has_interface_flag: bool = False  # supports_eagle3 = True


@dataclass
class ModuleInfo:
    name: str
    classes: dict[str, ClassInfo] = field(default_factory=dict)
    imports: dict[str, str] = field(default_factory=dict)  # local name -> "module:Name" or "module"
    aliases: dict[str, str] = field(default_factory=dict)  # module-level Name = Other
    entry: list[str] | None = None
    duplicates: list[str] = field(default_factory=list)
    parse_error: str | None = None


def summarize_module(source: str, module: str, hook: str, capture_attr: str,
                     is_package: bool = False) -> ModuleInfo:
    """Everything the resolver needs from one file, small enough to cache per blob."""
    info = ModuleInfo(name=module)
    source = source.removeprefix("\ufeff")  # a UTF-8 BOM is valid for Python files
    try:
        tree = ast.parse(source)
    except SyntaxError as error:
        info.parse_error = f"line {error.lineno}: {error.msg}"
        return info
    package = module if is_package else module.rpartition(".")[0]
    may_capture = capture_attr in source or "_maybe_add_hidden_state(" in source
    local_imports: list[ast.stmt] = []
    for node in _top_level(tree.body):
        if isinstance(node, ast.ClassDef):
            if node.name in info.classes:
                info.duplicates.append(node.name)
            info.classes[node.name] = summarize_class(node, hook, capture_attr, may_capture, local_imports)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            info.imports.update(_imports(node, package))
        elif isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            _module_assign(node, info)
    for node in local_imports:  # `from .llama4 import X` inside __init__; module level wins
        for name, target in _imports(node, package).items():
            info.imports.setdefault(name, target)
    return info


def _top_level(body: list[ast.stmt]):
    """Module statements, looking into if/try blocks (TYPE_CHECKING, optional imports)."""
    for node in body:
        if isinstance(node, (ast.If, ast.Try)):
            yield from _top_level(node.body)
            yield from _top_level(node.orelse)
            for handler in getattr(node, "handlers", []):
                yield from _top_level(handler.body)
            yield from _top_level(getattr(node, "finalbody", []))
        else:
            yield node


def _imports(node: ast.Import | ast.ImportFrom, package: str) -> dict[str, str]:
    found = {}
    if isinstance(node, ast.Import):
        for alias in node.names:
            if alias.asname:
                found[alias.asname] = alias.name
            else:
                head = alias.name.split(".")[0]
                found[head] = head
        return found
    base = node.module or ""
    if node.level:
        parts = package.split(".")
        parts = parts[:len(parts) - (node.level - 1)] if node.level > 1 else parts
        base = ".".join(p for p in parts + ([node.module] if node.module else []) if p)
    for alias in node.names:
        if alias.name != "*":
            found[alias.asname or alias.name] = f"{base}:{alias.name}"
    return found


def _module_assign(node: ast.Assign | ast.AnnAssign, info: ModuleInfo) -> None:
    for target in (node.targets if isinstance(node, ast.Assign) else [node.target]):
        if not isinstance(target, ast.Name):
            continue
        if target.id == "EntryClass":
            values = node.value.elts if isinstance(node.value, (ast.List, ast.Tuple)) else [node.value]
            info.entry = [dotted(v) for v in values if dotted(v)]
        elif dotted(node.value):
            info.aliases[target.id] = dotted(node.value)


def dotted(node: ast.AST) -> str | None:
    """'a.b.C' for Name/Attribute chains (and the value of a subscript: Generic[T] -> Generic)."""
    if isinstance(node, ast.Subscript):
        return dotted(node.value)
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        head = dotted(node.value)
        return f"{head}.{node.attr}" if head else None
    return None


def summarize_class(node: ast.ClassDef, hook: str, capture_attr: str, may_capture: bool = True,
                    local_imports: list | None = None) -> ClassInfo:
    info = ClassInfo(name=node.name, lineno=node.lineno,
                     bases=[d for d in (dotted(b) for b in node.bases) if d])
    capture_text: list[str] = []
    local_imports = [] if local_imports is None else local_imports
    for item in node.body:
        if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
            _summarize_method(item, info, hook, capture_attr if may_capture else None, capture_text,
                              local_imports)
        elif isinstance(item, (ast.Assign, ast.AnnAssign)):
            _class_assign(item, info)
    info.capture = capture_features("\n".join(capture_text), capture_attr)
    return info


def _statements(body: list[ast.stmt]):
    """Statements of a function, into compound statements but not into expressions or defs."""
    for stmt in body:
        yield stmt
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        for name in ("body", "orelse", "finalbody"):
            yield from _statements(getattr(stmt, name, []))
        for handler in getattr(stmt, "handlers", []):
            yield from _statements(handler.body)
        for case in getattr(stmt, "cases", []):
            yield from _statements(case.body)


def _summarize_method(item: ast.FunctionDef, info: ClassInfo, hook: str, capture_attr: str | None,
                      capture_text: list[str], local_imports: list) -> None:
    if item.name in (hook, "_" + hook):
        params = [a.arg for a in item.args.args[1:] + item.args.kwonlyargs]
        found = Hook(lineno=item.lineno, params=params, source=ast.unparse(item))
        if item.name == hook:
            info.hook = found
        else:
            info.inner_hook = found
        return
    if item.name == "__init__":
        _summarize_init(item, info, local_imports)
        return
    if item.name == "forward":
        info.defines_forward = True
    if "forward" in item.name:  # the capture loop lives in forward (or a _forward_* helper)
        if capture_attr is not None:
            text = ast.unparse(item)
            if capture_attr in text or "_maybe_add_hidden_state(" in text:
                capture_text.append(text)
        return
    specs = [s for stmt in _statements(item.body) if isinstance(stmt, ast.Return) and stmt.value is not None
             for s in construction_specs(stmt.value)]
    if specs:
        info.returns[item.name] = specs


def _summarize_init(func: ast.FunctionDef, info: ClassInfo, local_imports: list) -> None:
    """self.<attr> = <construction>, super().__init__(kw=Name), parameter defaults, local imports."""
    for stmt in _statements(func.body):
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            local_imports.append(stmt)
        elif isinstance(stmt, (ast.Assign, ast.AnnAssign)) and stmt.value is not None:
            _self_assignment(stmt, info.attrs)
        elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
            info.super_kwargs.update(_init_call_kwargs(stmt.value))
    info.param_defaults = _param_defaults(func)


def _self_assignment(stmt: ast.Assign | ast.AnnAssign, attrs: dict[str, list[tuple[str, str]]]) -> None:
    targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
    for target in targets:
        if isinstance(target, ast.Attribute) and dotted(target.value) == "self":
            specs = construction_specs(stmt.value)
            if specs:
                known = attrs.setdefault(target.attr, [])
                known.extend(s for s in specs if s not in known)


def _init_call_kwargs(call: ast.Call) -> dict[str, str]:
    """keyword=Name of `super().__init__(...)` / `Base.__init__(self, ...)`."""
    if not (isinstance(call.func, ast.Attribute) and call.func.attr == "__init__"):
        return {}
    return {k.arg: dotted(k.value) for k in call.keywords if k.arg and dotted(k.value)}


def _class_assign(item: ast.Assign | ast.AnnAssign, info: ClassInfo) -> None:
    targets = item.targets if isinstance(item, ast.Assign) else [item.target]
    for target in targets:
        if not isinstance(target, ast.Name) or item.value is None:
            continue
        if target.id == "supports_eagle3":
            info.has_interface_flag = True
        elif dotted(item.value):
            info.returns[target.id] = [("class", dotted(item.value))]


def construction_specs(value: ast.AST) -> list[tuple[str, str]]:
    """What an expression builds: ("class", Name), ("registry", Arch), ("method", name),
    ("param", name) or ("runtime", why). Empty when it builds nothing we can follow."""
    if isinstance(value, ast.IfExp):
        return construction_specs(value.body) + construction_specs(value.orelse)
    if not isinstance(value, ast.Call):
        return []
    func = dotted(value.func)
    if func is None:
        return []
    keywords = {k.arg: k.value for k in value.keywords if k.arg}
    if func.endswith("init_vllm_registered_model"):
        archs = keywords.get("architectures")
        first = archs.elts[0] if isinstance(archs, (ast.List, ast.Tuple)) and archs.elts else None
        if isinstance(first, ast.Constant):
            return [("registry", str(first.value))]
        return [("runtime", "config.text_config.architectures")]
    if func.endswith("initialize_model"):
        model_class = keywords.get("model_class")
        return [("class", dotted(model_class))] if model_class is not None and dotted(model_class) else \
            [("runtime", "initialize_model without model_class")]
    if func.startswith("self.") and func.count(".") == 1:
        return [("method", func[5:])]
    if "." not in func and func[:1].islower():
        return [("param", func)]  # a constructor passed in: resolved via __init__ defaults
    return [("class", func)]


def _param_defaults(func: ast.FunctionDef) -> dict[str, str]:
    args = func.args
    pairs = list(zip(args.args[len(args.args) - len(args.defaults):], args.defaults))
    pairs += [(a, d) for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is not None]
    return {a.arg: dotted(d) for a, d in pairs if dotted(d)}


def capture_features(text: str, attr: str) -> dict[str, bool]:
    """Where a model's forward (source of its forward methods) captures aux hidden states.

    Inside the loop over decoder layers, each capture test is placed relative to the statement
    that runs the layer:
      before: `if idx in self.<attr>` before layer idx runs, or handed to layer idx as its input
              capture (SGLang `capture_output=...`): id idx -> the state entering layer idx
      after:  `idx + 1 in self.<attr>` / `_maybe_add_hidden_state(..., idx + 1, ...)` after layer
              idx: id idx+1 -> the state entering layer idx+1; id num_layers is the last output
      odd:    any other placement (the ids would mean something else: never guessed)
    final: `after`, or an explicit test outside the loop (`self.end_layer in self.<attr>`, ...).
    """
    if not text:
        return {}
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return {"mentions": True}
    found = {"mentions": True, "before": False, "after": False, "odd": False, "final": False}
    in_loops: set[int] = set()
    for loop in (n for n in ast.walk(tree) if isinstance(n, ast.For)):
        for kind, node in _loop_captures(loop, attr):
            found[kind] = True
            in_loops.add(id(node))
    for node in ast.walk(tree):
        index = _capture_index(node, attr)
        if index is not None and id(node) not in in_loops and _is_final_index(index):
            found["final"] = True
    found["final"] = found["final"] or found["after"]
    return found


def _capture_index(node: ast.AST, attr: str) -> str | None:
    """The id expression a node tests: `X in self.<attr>` or _maybe_add_hidden_state(_, X, ...)."""
    if (isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], ast.In)
            and dotted(node.comparators[0]) == f"self.{attr}"):
        return ast.unparse(node.left)
    if (isinstance(node, ast.Call) and dotted(node.func) == "self._maybe_add_hidden_state"
            and len(node.args) >= 2):
        return ast.unparse(node.args[1])
    return None


def _is_final_index(index: str) -> bool:
    return index in ("self.end_layer", "len(self.layers)", "self.num_layers", "num_layers",
                     "self.config.num_hidden_layers", "len(self.layers) - 1 + 1")


def _loop_captures(loop: ast.For, attr: str):
    """(kind, node) for each capture test in this loop, placed against the call that runs the layer."""
    layer_names = _loop_layer_names(loop)
    nodes = [n for stmt in loop.body for n in ast.walk(stmt)]
    runs = [n for n in nodes if isinstance(n, ast.Call) and _runs_layer(n, layer_names)]
    if not runs:
        return
    first, last = min(runs, key=_position), max(runs, key=_end)
    for node in nodes:
        index = _capture_index(node, attr)
        if index is None:
            continue
        plain = re.fullmatch(r"\w+", index) is not None
        plus_one = re.fullmatch(r"\(?\w+ \+ 1\)?", index) is not None
        in_call = any(_inside(node, run) for run in runs)  # handed to the layer as its input capture
        before = in_call or _position(node) < _position(first)
        after = not in_call and _position(node) > _end(last)
        if before and plain:
            yield "before", node
        elif after and plus_one:
            yield "after", node
        else:
            yield "odd", node


def _position(node: ast.AST) -> tuple[int, int]:
    return node.lineno, node.col_offset


def _end(node: ast.AST) -> tuple[int, int]:
    return node.end_lineno, node.end_col_offset


def _inside(node: ast.AST, outer: ast.AST) -> bool:
    return _position(outer) <= _position(node) and _end(node) <= _end(outer)


def _loop_layer_names(loop: ast.For) -> set[str]:
    names = {n.id for n in ast.walk(loop.target) if isinstance(n, ast.Name)}
    for node in (n for stmt in loop.body for n in ast.walk(stmt)):  # layer = self.layers[i]
        if isinstance(node, ast.Assign) and "self.layers" in ast.unparse(node.value):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    return names


def _runs_layer(call: ast.Call, layer_names: set[str]) -> bool:
    func = call.func
    if isinstance(func, ast.Name):
        return func.id in layer_names
    return isinstance(func, ast.Subscript) and dotted(func.value) == "self.layers"


# ---------------------------------------------------------------- hook classification (pure)

@dataclass
class HookShape:
    """What a hook body does with the ids it receives.

    kind: "rule" (sets capture ids itself, by `rule`), "delegate" (passes the ids unchanged to
    `path`'s hook), "holder" (vLLM: stores ids on `path`'s aux_hidden_state_layers, the forward
    decides), "interface" (vLLM SupportsEagle3 default body), "recorder" (vLLM Transformers
    backend), "stub" (no body) or "unknown".
    """

    kind: str
    rule: str | None = None
    path: str | None = None  # the attribute the ids go to ("" = self)
    inner: str | None = None  # rule: transformed ids passed on to `inner`'s hook
    guard: str | None = None  # delegate: "raise" or "skip" when the inner lacks the hook
    note: str | None = None


SELF_PATH = r"self((?:\.\w+)*?)"


def _strip_none_branches(func: ast.FunctionDef, param: str) -> list[ast.stmt]:
    """Drop the `if <param> is None:` (default ids) branches, keep what runs for given ids."""
    def walk(body: list[ast.stmt]) -> list[ast.stmt]:
        out = []
        for node in body:
            if isinstance(node, ast.If) and _is_none_test(node.test, param) is not None:
                kept = node.orelse if _is_none_test(node.test, param) else node.body
                out += walk(kept)
            elif isinstance(node, ast.If):
                node.body, node.orelse = walk(node.body), walk(node.orelse)
                out.append(node)
            else:
                out.append(node)
        return out
    return walk(func.body)


def _is_none_test(test: ast.AST, param: str) -> bool | None:
    """True for `param is None`, False for `param is not None`, None otherwise."""
    if (isinstance(test, ast.Compare) and isinstance(test.left, ast.Name) and test.left.id == param
            and len(test.ops) == 1 and isinstance(test.comparators[0], ast.Constant)
            and test.comparators[0].value is None):
        if isinstance(test.ops[0], ast.Is):
            return True
        if isinstance(test.ops[0], ast.IsNot):
            return False
    return None


def _body_text(hook: Hook) -> tuple[str, str | None]:
    func = ast.parse(hook.source).body[0]
    param = hook.params[0] if hook.params else None
    body = _strip_none_branches(func, param) if param else func.body
    body = [s for s in body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
    return "\n".join(ast.unparse(s) for s in body), param


def classify_sglang_hook(hook: Hook, hook_name: str = "set_eagle3_layers_to_capture",
                         attr: str = "layers_to_capture") -> HookShape:
    if not hook.params:
        return HookShape("rule", rule="fixed_default", path=_assigned_path(hook.source, attr))
    text, p = _body_text(hook)
    passed = re.search(rf"{SELF_PATH}\.{hook_name}\(\s*{p}\s*\)", text)
    if passed and not re.search(rf"\.{attr}\s*=", text):
        guard = "raise" if re.search(r"\braise\b", text) else "skip" if "hasattr(" in text else None
        return HookShape("delegate", path=passed.group(1).lstrip("."), guard=guard)
    rule = _sglang_rule(text, p)
    if rule is None:
        return HookShape("unknown", note="no known id transformation in the hook body")
    inner = re.search(rf"{SELF_PATH}\.{hook_name}\(", text)
    path = _assigned_path(text, attr)
    if inner and path is None:
        return HookShape("rule", rule=rule, inner=inner.group(1).lstrip("."))
    return HookShape("rule", rule=rule, path=path, inner=inner.group(1).lstrip(".") if inner else None)


def _sglang_rule(text: str, p: str) -> str | None:
    plus = re.search(rf"\[\s*(\w+) \+ 1 for \1 in {p}\s*\]", text)
    as_is = re.search(rf"(?:list|tuple)\(\s*{p}\s*\)|=\s*{p}\s*$|\.\w+\(\s*{p}\s*\)", text, re.M)
    first_is_1 = re.search(rf"\b{p}\[0\] == 1\b", text)
    max_is_l = re.search(rf"\bmax\(\s*{p}\s*\) ==", text)
    other = re.search(rf"\[\s*(\w+) (?:[-*/] |\+ (?!1 for))\S+ for \1 in {p}\s*\]", text)
    if other or (first_is_1 and max_is_l):
        return None
    if plus and as_is and first_is_1:
        return "plus_one_if_first_is_1"
    if plus and as_is and max_is_l:
        return "as_is_if_max_is_L"
    if plus and not as_is and not (first_is_1 or max_is_l):
        return "plus_one"
    if as_is and not plus and not (first_is_1 or max_is_l):
        return "as_is"
    return None


def _assigned_path(text: str, attr: str) -> str | None:
    found = re.search(rf"{SELF_PATH}\.{attr}\s*=", text)
    return found.group(1).lstrip(".") if found else None


def classify_vllm_hook(hook: Hook, hook_name: str = "set_aux_hidden_state_layers",
                       attr: str = "aux_hidden_state_layers") -> HookShape:
    text, p = _body_text(hook)
    if not text.strip() or text.strip() in ("...", "pass"):
        return HookShape("stub", note="interface stub: a no-op")
    if "parent_ref" in text and "_set_aux_hidden_state_layers" in text:
        return HookShape("interface")
    if re.search(r"_layer_names\[\s*\w+ - 1\s*\]", text):
        return HookShape("recorder", rule="as_is")
    text = text.replace("self.get_language_model()", "self.language_model")
    passed = re.search(rf"{SELF_PATH}\.{hook_name}\(\s*{p}\s*\)", text)
    if passed:
        return HookShape("delegate", path=passed.group(1).lstrip("."))
    stored = re.search(rf"{SELF_PATH}\.(?:{attr}\s*=\s*{p}\s*$|_{hook_name}\(\s*{p}\s*\))", text, re.M)
    if stored and not re.search(r"[-+] 1\b", text):
        return HookShape("holder", path=stored.group(1).lstrip("."))
    return HookShape("unknown", note="no known shape in the hook body")


# ---------------------------------------------------------------- a model tree at one release

@dataclass(frozen=True)
class ClassRef:
    module: str
    name: str


@dataclass(frozen=True)
class Runtime:
    why: str


class ModelTree:
    """Classes of one release: lazy module summaries, name resolution, MRO, attribute classes.

    `paths` maps dotted module names to file paths; `load(module)` returns its ModuleInfo.
    `registry` maps vLLM architecture names to (module, class) for init_vllm_registered_model.
    """

    def __init__(self, paths: dict[str, str], load, registry: dict[str, tuple[str, str]] | None = None,
                 class_index=None):
        self.paths, self._load, self.registry = paths, load, registry or {}
        self._modules: dict[str, ModuleInfo | None] = {}
        self._class_index = class_index  # name -> [modules], built on demand for fallbacks
        self._mro: dict[ClassRef, list[ClassRef]] = {}
        self.notes: set[str] = set()

    def module(self, name: str) -> ModuleInfo | None:
        if name not in self._modules:
            info = self._load(name) if name in self.paths else None
            if info is not None and info.parse_error:
                self.notes.add(f"{self.paths[name]}: not parsed ({info.parse_error}); "
                               f"its classes are unknown")
            self._modules[name] = info
        return self._modules[name]

    def info(self, ref: ClassRef) -> ClassInfo:
        return self.module(ref.module).classes[ref.name]

    def path(self, ref: ClassRef) -> str:
        return self.paths[ref.module]

    # ------------------------------------------------------------ names

    def resolve(self, module: str, name: str, depth: int = 0) -> ClassRef | None:
        """The class that `name` (maybe dotted) means inside `module`, following imports."""
        info = self.module(module)
        if info is None or depth > 12:
            return None
        head, _, rest = name.partition(".")
        if not rest and head in info.classes:
            if head in info.duplicates:
                self.notes.add(f"{self.paths[module]}: class {head} is defined twice; the last one is used")
            return ClassRef(module, head)
        if head in info.aliases and info.aliases[head] != name:
            return self.resolve(module, info.aliases[head] + (f".{rest}" if rest else ""), depth + 1)
        target = info.imports.get(head)
        if target is None:
            return None
        source, _, imported = target.partition(":")
        if imported:
            if f"{source}.{imported}" in self.paths:  # `from pkg import module`
                return self.resolve(f"{source}.{imported}", rest, depth + 1) if rest else None
            return self.resolve(source, imported + (f".{rest}" if rest else ""), depth + 1)
        return self._resolve_in_package(source, rest, depth)

    def _resolve_in_package(self, module: str, rest: str, depth: int) -> ClassRef | None:
        parts = rest.split(".") if rest else []
        for cut in range(len(parts) - 1, -1, -1):  # longest module prefix first
            candidate = ".".join([module] + parts[:cut])
            if candidate in self.paths and cut < len(parts):
                return self.resolve(candidate, ".".join(parts[cut:]), depth + 1)
        return None

    def resolve_base(self, owner: ClassRef, base: str) -> ClassRef | None:
        found = self.resolve(owner.module, base)
        if found is not None or "." in base:
            return found
        info = self.module(owner.module)
        if base in info.imports or base in info.aliases:
            return None  # imported from outside the models tree (torch, transformers, ...)
        return self._by_name_only(owner, base)

    def _by_name_only(self, owner: ClassRef, name: str) -> ClassRef | None:
        if self._class_index is None:
            return None
        modules = self._class_index(name)
        if len(modules) == 1:
            self.notes.add(f"{self.paths[owner.module]} {owner.name}: base {name} found by name only "
                           f"in {self.paths[modules[0]]}")
            return ClassRef(modules[0], name)
        if modules:
            self.notes.add(f"{self.paths[owner.module]} {owner.name}: base {name} is ambiguous "
                           f"({len(modules)} modules define it); not followed")
        return None

    # ------------------------------------------------------------ inheritance

    def mro(self, ref: ClassRef, seen: frozenset = frozenset()) -> list[ClassRef]:
        """C3 linearisation over the bases found in the models tree (others are leaves)."""
        if ref not in self._mro:
            self._mro[ref] = self._linearize(ref, seen)
        return self._mro[ref]

    def _linearize(self, ref: ClassRef, seen: frozenset) -> list[ClassRef]:
        if ref in seen:
            self.notes.add(f"{self.paths[ref.module]} {ref.name}: inheritance cycle")
            return [ref]
        bases = [b for b in (self.resolve_base(ref, name) for name in self.info(ref).bases) if b]
        lines = [self.mro(b, seen | {ref}) for b in bases]
        merged = c3_merge(lines + [bases])
        if merged is None:
            self.notes.add(f"{self.paths[ref.module]} {ref.name}: no consistent MRO; depth-first order used")
            merged = list(dict.fromkeys(c for line in lines for c in line))
        return [ref] + merged

    def first_with_hook(self, ref: ClassRef, inner: bool = False) -> ClassRef | None:
        kind = "inner_hook" if inner else "hook"
        return next((c for c in self.mro(ref) if getattr(self.info(c), kind) is not None), None)

    def has_base(self, ref: ClassRef, name: str) -> bool:
        return any(c.name == name for c in self.mro(ref))

    # ------------------------------------------------------------ attributes

    def attr_class(self, ref: ClassRef, path: str) -> ClassRef | Runtime | None:
        """The class of `self.<path>` for an instance of `ref` (a.b: attribute of attribute)."""
        current: ClassRef | Runtime | None = ref
        for attr in [a for a in path.split(".") if a]:
            if not isinstance(current, ClassRef):
                return current
            current = self._one_attr(current, attr)
        return current

    def _one_attr(self, ref: ClassRef, attr: str) -> ClassRef | Runtime | None:
        mro = self.mro(ref)
        for owner in mro:
            specs = self.info(owner).attrs.get(attr)
            if specs:
                found = {self._spec_class(ref, mro, owner, s) for s in specs}
                found.discard(None)
                if len(found) > 1:
                    self.notes.add(f"{self.paths[owner.module]} {owner.name}.{attr}: built from "
                                   f"{len(found)} different classes; first one used")
                return sorted(found, key=str)[0] if found else None
        return None

    def _spec_class(self, ref: ClassRef, mro: list[ClassRef], owner: ClassRef, spec: tuple[str, str],
                    depth: int = 0) -> ClassRef | Runtime | None:
        kind, value = spec
        if depth > 6:
            return None
        if kind == "class":
            return self.resolve(owner.module, value)
        if kind == "registry":
            target = self.registry.get(value)
            return self.resolve(target[0], target[1]) if target else None
        if kind == "runtime":
            return Runtime(value)
        if kind == "method":
            for cls in mro:  # the instance's class first: subclasses override factories
                specs = self.info(cls).returns.get(value)
                if specs:
                    return self._spec_class(ref, mro, cls, specs[0], depth + 1)
            return None
        if kind == "param":
            return self._param_class(mro, owner, value)
        return None

    def _param_class(self, mro: list[ClassRef], owner: ClassRef, param: str) -> ClassRef | Runtime | None:
        for cls in mro[:mro.index(owner)]:  # a subclass passing super().__init__(param=X)
            passed = self.info(cls).super_kwargs.get(param)
            if passed:
                return self.resolve(cls.module, passed)
        default = self.info(owner).param_defaults.get(param)
        if default:
            return self.resolve(owner.module, default)
        return Runtime(f"{param}(...) chosen at run time in {owner.name}.__init__")

    def capture_of(self, ref: ClassRef) -> tuple[ClassRef, dict[str, bool]] | None:
        """The first class in ref's MRO whose methods touch the capture attribute."""
        for cls in self.mro(ref):
            if self.info(cls).capture.get("mentions"):
                return cls, self.info(cls).capture
        return None


def c3_merge(sequences: list[list]) -> list | None:
    sequences = [list(s) for s in sequences if s]
    merged = []
    while sequences:
        for seq in sequences:
            head = seq[0]
            if not any(head in s[1:] for s in sequences):
                break
        else:
            return None
        merged.append(head)
        sequences = [[c for c in s if c != head] for s in sequences]
        sequences = [s for s in sequences if s]
    return merged


# ---------------------------------------------------------------- verdicts

@dataclass(frozen=True)
class Verdict:
    status: str
    rule: str | None = None
    hook: str | None = None  # "path Class.method" the engine calls
    delegate: str | None = None  # where a delegating hook ends up
    final_boundary: bool | None = None
    note: str | None = None

    def to_json(self) -> dict:
        out = {"status": self.status, "rule": self.rule, "hook": self.hook}
        if self.delegate:
            out["delegate"] = self.delegate
        out["final_boundary"] = self.final_boundary
        if self.note:
            out["note"] = self.note
        return out


def hook_label(tree: ModelTree, ref: ClassRef, method: str) -> str:
    return f"{tree.path(ref)} {ref.name}.{method}"


def class_label(tree: ModelTree, ref: ClassRef | Runtime) -> str:
    return f"runtime: {ref.why}" if isinstance(ref, Runtime) else f"{tree.path(ref)} {ref.name}"


class Analyzer:
    """Decides the Verdict of one architecture class in one ModelTree."""

    def __init__(self, spec: EngineSpec, tree: ModelTree, interface_required: bool = False):
        self.spec, self.tree, self.interface_required = spec, tree, interface_required

    def verdict(self, ref: ClassRef) -> Verdict:
        if self.spec.name == "sglang":
            return self.sglang(ref, ref, 0)
        return self.vllm(ref)

    # ------------------------------------------------------------ SGLang

    def sglang(self, ref: ClassRef, instance: ClassRef, depth: int) -> Verdict:
        owner = self.tree.first_with_hook(instance)
        if owner is None:
            return Verdict("no_capture")
        hook = hook_label(self.tree, owner, self.spec.hook)
        shape = classify_sglang_hook(self.tree.info(owner).hook, self.spec.hook, self.spec.capture_attr)
        if shape.kind == "delegate":
            return self._sglang_delegate(instance, hook, shape, depth)
        if shape.kind != "rule":
            return Verdict("capture", "unknown", hook, note=shape.note)
        if shape.inner is not None:
            return self._sglang_inner(instance, hook, shape)
        return self._sglang_capture(hook, shape.rule, instance, shape.path or "")

    def _sglang_delegate(self, instance: ClassRef, hook: str, shape: HookShape, depth: int) -> Verdict:
        target = self.tree.attr_class(instance, shape.path)
        if not isinstance(target, ClassRef) or depth > 4:
            why = target.why if isinstance(target, Runtime) else "class not resolved"
            return Verdict("capture", "unknown", hook, note=f"delegates to self.{shape.path}: {why}")
        inner = self.sglang(target, target, depth + 1)
        if inner.status == "no_capture":
            why = {"raise": "raises AttributeError",
                   "skip": "silently does nothing"}.get(shape.guard, "fails")
            return Verdict("no_capture", hook=hook, delegate=class_label(self.tree, target),
                           note=f"delegates to self.{shape.path}, which has no hook: startup {why}")
        return Verdict(inner.status, inner.rule, hook, inner.delegate or inner.hook, inner.final_boundary,
                       inner.note)

    def _sglang_inner(self, instance: ClassRef, hook: str, shape: HookShape) -> Verdict:
        target = self.tree.attr_class(instance, shape.inner)
        owner = self.tree.first_with_hook(target) if isinstance(target, ClassRef) else None
        if owner is None and shape.path is not None:  # `if hasattr(inner, hook) ... else: store`
            return self._sglang_capture(hook, shape.rule, instance, shape.path)
        if owner is None:
            return Verdict("capture", "unknown", hook,
                           note=f"passes ids on to self.{shape.inner}: its hook was not found")
        inner_shape = classify_sglang_hook(self.tree.info(owner).hook, self.spec.hook, self.spec.capture_attr)
        if inner_shape.kind != "rule" or inner_shape.rule != "as_is":
            inner = hook_label(self.tree, owner, self.spec.hook)
            return Verdict("capture", "unknown", hook, note=f"inner hook {inner} is not a plain store")
        return self._sglang_capture(hook, shape.rule, target, inner_shape.path or "",
                                    hook_label(self.tree, owner, self.spec.hook))

    # ------------------------------------------------------------ vLLM

    def vllm(self, ref: ClassRef) -> Verdict:
        mro = self.tree.mro(ref)
        owner = self.tree.first_with_hook(ref)
        if self.interface_required and not self._has_interface(mro):
            note = "defines the hook but is not SupportsEagle3" if owner else None
            return Verdict("no_capture", note=note)
        if owner is None:
            return Verdict("no_capture")
        return self._vllm_hook(ref, owner, 0)

    def _has_interface(self, mro: list[ClassRef]) -> bool:
        return any(c.name == self.spec.interface or self.tree.info(c).has_interface_flag for c in mro)

    def _vllm_hook(self, instance: ClassRef, owner: ClassRef, depth: int) -> Verdict:
        hook = hook_label(self.tree, owner, self.spec.hook)
        shape = classify_vllm_hook(self.tree.info(owner).hook, self.spec.hook, self.spec.capture_attr)
        if shape.kind == "stub":
            return Verdict("no_capture", hook=hook, note="only the SupportsEagle3 stub: a no-op")
        if shape.kind == "recorder":
            needs = re.search(r"check_version\(\s*'([^']+)'", self.tree.info(owner).hook.source)
            return Verdict("capture", "as_is", hook, final_boundary=True,
                           note="Transformers backend: records the output of decoder layer id-1"
                                + (f"; needs transformers >= {needs.group(1)}" if needs else ""))
        if shape.kind == "unknown":
            return Verdict("capture", "unknown", hook, note=shape.note)
        if shape.kind == "delegate":
            return self._vllm_delegate(instance, hook, shape, depth)
        path = self._interface_holder(instance) if shape.kind == "interface" else shape.path
        holder = self.tree.attr_class(instance, path) if path else instance
        if shape.kind == "interface" and isinstance(holder, ClassRef) and \
                "EagleModelMixin" in self.tree.info(owner).hook.source and \
                not self.tree.has_base(holder, "EagleModelMixin"):
            return Verdict("no_capture", hook=hook, delegate=class_label(self.tree, holder),
                           note=f"SupportsEagle3 asserts self.{path} is an EagleModelMixin; "
                                f"{holder.name} is not: startup fails")
        holder, path = self._follow_inner_setters(holder, path)
        return self._vllm_holder(hook, None, path, holder)

    def _follow_inner_setters(self, holder, path: str):
        """An inner model may pass `_set_aux_hidden_state_layers` on to a sub-module (Plamo3)."""
        for _ in range(4):
            owner = self.tree.first_with_hook(holder, inner=True) if isinstance(holder, ClassRef) else None
            if owner is None:
                break
            shape = classify_vllm_hook(self.tree.info(owner).inner_hook, self.spec.hook,
                                       self.spec.capture_attr)
            if shape.kind != "holder" or not shape.path:
                break
            holder, path = self.tree.attr_class(holder, shape.path), f"{path}.{shape.path}".lstrip(".")
        return holder, path

    def _vllm_delegate(self, instance: ClassRef, hook: str, shape: HookShape, depth: int) -> Verdict:
        target = self.tree.attr_class(instance, shape.path)
        if isinstance(target, Runtime):
            return Verdict("capture", "of_language_model", hook, class_label(self.tree, target))
        owner = self.tree.first_with_hook(target) if isinstance(target, ClassRef) else None
        if owner is None or depth > 4:
            why = "class not resolved" if target is None else "it has no hook"
            return Verdict("capture", "unknown", hook, note=f"delegates to self.{shape.path}: {why}")
        inner = self._vllm_hook(target, owner, depth + 1)
        return Verdict(inner.status, inner.rule, hook, inner.delegate or inner.hook, inner.final_boundary,
                       inner.note)

    def _interface_holder(self, instance: ClassRef) -> str:
        """SupportsEagle3's default body: language_model (or self), then its .model if it has one."""
        language_model = self.tree.attr_class(instance, "language_model")
        base = "language_model" if language_model is not None else ""
        holder = self.tree.attr_class(instance, base) if base else instance
        if isinstance(holder, ClassRef) and self.tree.attr_class(holder, "model") is not None:
            return f"{base}.model".lstrip(".")
        return base

    def _vllm_holder(self, hook: str, delegate: str | None, path: str, holder) -> Verdict:
        if isinstance(holder, Runtime):
            return Verdict("capture", "of_language_model", hook, class_label(self.tree, holder))
        found = self.tree.capture_of(holder) if isinstance(holder, ClassRef) else None
        what = f"self.{path}" if path else "the class"
        if found is None and isinstance(holder, ClassRef) and \
                any(self.tree.info(c).defines_forward for c in self.tree.mro(holder)):
            return Verdict("no_capture", hook=hook, delegate=class_label(self.tree, holder),
                           note=f"ids stored on {what}, whose forward never reads them: no aux states")
        if found is None:
            return Verdict("capture", "unknown", hook, delegate,
                           note=f"ids stored on {what}; no forward that reads them was found")
        cls, features = found
        ok = (features.get("before") or features.get("after")) and not features.get("odd")
        rule = "as_is" if ok else "unknown"
        final = features.get("final")
        where = class_label(self.tree, cls) + ".forward"
        if rule == "unknown":
            return Verdict("capture", rule, hook, delegate, None,
                           note=f"capture loop not recognised: {where}")
        return Verdict("capture", rule, hook, delegate, final)

    def _sglang_capture(self, hook: str, rule: str, instance: ClassRef, path: str,
                        delegate: str | None = None) -> Verdict:
        """The hook's rule, checked against the forward of the model that holds the ids."""
        holder = self.tree.attr_class(instance, path) if path else instance
        found = self.tree.capture_of(holder) if isinstance(holder, ClassRef) else None
        if found and found[1].get("odd"):
            return Verdict("capture", "unknown", hook, delegate,
                           note=f"capture loop not recognised: {class_label(self.tree, found[0])}.forward")
        return Verdict("capture", rule, hook, delegate, found[1].get("final") if found else None)


# ---------------------------------------------------------------- git-backed releases

class GitSource:
    """Reads releases of one engine from a bare git directory; caches summaries per blob."""

    def __init__(self, git_dir: str, spec: EngineSpec):
        self.repo, self.spec = es.Repo(git_dir), spec
        self.survey = es.Survey(self.repo, es.ENGINES[spec.name])
        self._summaries: dict[str, ModuleInfo] = {}
        self._grafted: dict[str, bool] = {}
        self._names: dict[tuple[str, str], list[str]] = {}

    def tags(self, since: str | None, until: str | None) -> list[str]:
        return es.select_range(es.release_tags(self.repo), self.repo, since or self.spec.since, until)

    def module_files(self, tag: str) -> dict[str, tuple[str, str]]:
        """dotted module -> (path, blob id) for every .py under the model folders."""
        out = self.repo.git("ls-tree", "-r", tag, "--", *self.spec.model_dirs)
        files = {}
        for line in out.splitlines():
            meta, _, path = line.partition("\t")
            if path.endswith(".py"):
                files[module_name(path, self.spec.package_root)] = (path, meta.split()[2])
        return files

    def summary(self, module: str, tag: str, path: str, blob: str) -> ModuleInfo:
        """Parsed once per file version (blob), whatever the tag."""
        if blob not in self._summaries:
            text = self.repo.show(tag, path) or ""
            self._summaries[blob] = summarize_module(text, module, self.spec.hook, self.spec.capture_attr,
                                                     is_package=path.endswith("/__init__.py"))
        return self._summaries[blob]

    def tree(self, tag: str) -> ModelTree:
        files = self.module_files(tag)
        paths = {m: p for m, (p, _) in files.items()}
        tree = ModelTree(paths, lambda m: self.summary(m, tag, *files[m]),
                         class_index=lambda name: self._class_index(tag, paths, name))
        if self.spec.registry:
            tree.registry = registry_map(self.repo.show(tag, self.spec.registry) or "", None)
        return tree

    def _class_index(self, tag: str, paths: dict[str, str], name: str) -> list[str]:
        if (tag, name) not in self._names:
            by_path = {p: m for m, p in paths.items()}
            hits = self.repo.grep_files(tag, rf"^class {name}\b", list(self.spec.model_dirs))
            self._names[(tag, name)] = sorted(by_path[p] for p in hits if p in by_path)
        return self._names[(tag, name)]

    def is_grafted(self, tag: str) -> bool:
        if tag not in self._grafted:
            self._grafted[tag] = self.survey.is_grafted(tag)
        return self._grafted[tag]

    def probe_named(self, tag: str, name: str) -> bool:
        return any(self.probe(tag, p) for p in self.spec.probes if p.name == name)

    def probe(self, tag: str, probe: Probe) -> bool:
        return bool(self.repo.grep_files(tag, probe.pattern, list(probe.paths)))


def module_name(path: str, package_root: str) -> str:
    path = path[len(package_root):] if path.startswith(package_root) else path
    path = path[:-len("/__init__.py")] if path.endswith("/__init__.py") else path[:-3]
    return path.replace("/", ".")


def package_name(folder: str, package_root: str) -> str:
    folder = folder[len(package_root):] if folder.startswith(package_root) else folder
    return folder.strip("/").replace("/", ".")


def registry_map(source: str, dicts: tuple[str, ...] | None) -> dict[str, tuple[str, str]]:
    """Architecture -> (dotted module, class) from registry.py's dict literals (all or `dicts`)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return {}
    found: dict[str, tuple[str, str]] = {}
    for node in tree.body:
        target = node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else \
            node.target if isinstance(node, ast.AnnAssign) else None
        if not isinstance(target, ast.Name) or not isinstance(node.value, ast.Dict):
            continue
        if dicts is not None and target.id not in dicts:
            continue
        for key, value in zip(node.value.keys, node.value.values):
            entry = _registry_entry(key, value)
            if entry:
                found.setdefault(entry[0], (_registry_module(entry[1]), entry[2]))
    return found


def _registry_entry(key, value) -> tuple[str, str, str] | None:
    if not (isinstance(key, ast.Constant) and isinstance(value, ast.Tuple) and len(value.elts) >= 2):
        return None
    module, cls = value.elts[:2]
    if isinstance(module, ast.Constant) and isinstance(cls, ast.Constant):
        return str(key.value), str(module.value), str(cls.value)
    return None


def _registry_module(module: str) -> str:
    return module if "." in module else "vllm.model_executor.models." + module


NOT_GENERATION = re.compile(r"Embedding|Classification|Reward|Pooling|ForMTP$")


def served_architectures(spec: EngineSpec, tree: ModelTree,
                         registry_source: str = "") -> dict[str, ClassRef | None]:
    """Architecture name -> class, as the engine's registry would find it."""
    if spec.registry:
        return {arch: tree.resolve(module, cls) for arch, (module, cls) in
                registry_map(registry_source, spec.registry_dicts).items() if not NOT_GENERATION.search(arch)}
    return entry_classes(tree, package_name(spec.entry_dir, spec.package_root))


def analyze_tree(spec: EngineSpec, tree: ModelTree, registry_source: str = "",
                 interface_required: bool = False) -> dict[str, Verdict]:
    """The Verdict of every served architecture of one release."""
    analyzer = Analyzer(spec, tree, interface_required=interface_required)
    verdicts = {}
    for arch, ref in served_architectures(spec, tree, registry_source).items():
        if ref is None:
            verdicts[arch] = Verdict("no_capture", note="class not found in the models tree")
        else:
            verdicts[arch] = analyzer.verdict(ref)
    return verdicts


def tree_from_sources(sources: dict[str, str], spec: EngineSpec, registry_source: str = "") -> ModelTree:
    """A ModelTree over in-memory files {path: source} (tests, quick experiments)."""
    paths = {module_name(p, spec.package_root): p for p in sources}

    def load(module: str) -> ModuleInfo:
        path = paths[module]
        return summarize_module(sources[path], module, spec.hook, spec.capture_attr,
                                is_package=path.endswith("/__init__.py"))
    return ModelTree(paths, load, registry_map(registry_source, None) if registry_source else {})


def entry_classes(tree: ModelTree, package: str) -> dict[str, ClassRef | None]:
    """SGLang: EntryClass of each top-level module; the architecture is the class's own name."""
    archs: dict[str, ClassRef | None] = {}
    for module in sorted(tree.paths):
        if module.rpartition(".")[0] != package or tree.paths[module].endswith("__init__.py"):
            continue
        info = tree.module(module)
        for name in (info.entry or []) if info else []:
            ref = tree.resolve(module, name)
            arch = ref.name if ref else name.split(".")[-1]
            if arch in archs and archs[arch] != ref:
                tree.notes.add(f"{tree.paths[module]}: EntryClass {arch} also exported by another module")
                continue
            archs[arch] = ref
    return archs


# ---------------------------------------------------------------- ranges

def version_of(tag: str) -> str:
    return tag[1:] if tag.startswith("v") else tag


def compress_ranges(versions: list[str], states: list[dict]) -> list[dict]:
    """Merge consecutive releases with equal state into {"from", "until" (exclusive), **state}."""
    ranges: list[dict] = []
    for i, (version, state) in enumerate(zip(versions, states)):
        if ranges and _same(ranges[-1], state):
            continue
        if ranges:
            ranges[-1]["until"] = version
        ranges.append({"from": version, "until": None, **state})
    return ranges


def _same(current: dict, state: dict) -> bool:
    return all(current.get(k) == v for k, v in state.items()) and \
        all(k in state for k in current if k not in ("from", "until"))


# ---------------------------------------------------------------- history

HISTORY_PATTERN = r"def {hook}|{attr}|SupportsEagle3|\b{hook}\("


class History:
    """Commits (and PR numbers) that added or changed a hook between two releases."""

    def __init__(self, source: GitSource):
        self.source, self.repo = source, source.repo

    def added(self, old: str | None, new: str, path: str, string: str) -> list[dict]:
        revisions = self._revisions(old, new, path)
        if revisions is None:
            return []
        out = self.repo.git("log", "-S", string, "--format=%x00%h%x1f%s", "-p", "--unified=0",
                            *revisions, "--", path, check=False)
        return [c for c in _parse_patch_log(out) if any(string in line for line in c.pop("plus"))][:1]

    def changed(self, old: str | None, new: str, paths: list[str], pattern: str) -> list[dict]:
        commits: list[dict] = []
        for path in dict.fromkeys(paths):
            revisions = self._revisions(old, new, path)
            if revisions is None:
                continue
            out = self.repo.git("log", "-G", pattern, "--format=%x00%h%x1f%s", *revisions, "--", path,
                                check=False)
            commits += [{k: v for k, v in c.items() if k != "plus"} for c in _parse_patch_log(out)]
        unique = list({c["commit"]: c for c in commits}.values())
        return unique[:3]

    def _revisions(self, old: str | None, new: str, path: str) -> list[str] | None:
        """git revisions covering old..new for path; via the history branch for grafted tags."""
        if not self.source.is_grafted(new) and (old is None or not self.source.is_grafted(old)):
            return [f"{old}..{new}"] if old else [new]
        introductions = self.source.survey.introductions(path)
        end = introductions.get(self.repo.blob_id(new, path) or "")
        if end is None:
            return None
        start = introductions.get(self.repo.blob_id(old, path) or "") if old else None
        if old and self.repo.blob_id(old, path) and start is None:
            return None
        if start and not self.repo.is_ancestor(start, end):
            return None
        return ["--first-parent", f"{start}..{end}" if start else end]


def _parse_patch_log(out: str) -> list[dict]:
    commits = []
    for chunk in out.split("\0")[1:]:
        head, _, patch = chunk.partition("\n")
        sha, _, subject = head.partition("\x1f")
        plus = [line[1:] for line in patch.splitlines()
                if line.startswith("+") and not line.startswith("+++")]
        prs = [int(n) for n in es.PR_NUMBER.findall(subject)]
        commits.append({"commit": sha, "pr": prs[-1] if prs else None, "subject": subject[:120],
                        "plus": plus})
    return commits


# ---------------------------------------------------------------- the whole table

def build_table(git_dir: str, engine: str, since: str | None = None, until: str | None = None,
                keep_all: bool = False, log=None, command: str | None = None) -> dict:
    spec = ENGINES[engine]
    source = GitSource(git_dir, spec)
    tags = source.tags(since, until)
    if not tags:
        raise es.SurveyError("no release tags in range")
    per_tag, notes = [], set()
    for tag in tags:
        verdicts, tree_notes = release_verdicts(source, tag)
        per_tag.append(verdicts)
        notes |= {f"{version_of(tag)}: {n}" for n in tree_notes}
        if log:
            log(f"{engine} {tag}: {len(verdicts)} architectures, "
                f"{sum(v.status == 'capture' for v in verdicts.values())} capture")
    versions = [version_of(t) for t in tags]
    architectures = collect_ranges(versions, per_tag, keep_all)
    add_history(History(source), tags, architectures, spec)
    return {
        "engine": engine,
        "generated_by": command or generated_by(engine, git_dir, since, until),
        "source": source_info(source, tags),
        "hook": spec.hook,
        "rules": RULES,
        "fields": FIELDS,
        "releases": versions,
        "engine_facts": engine_facts(source, tags),
        "architectures": architectures,
        "resolution_notes": _trim_notes(notes),
    }


FIELDS = {
    "from/until": "release range; until is exclusive, null = still so in the newest release surveyed",
    "status": "capture | no_capture (no hook: startup fails, or a wrapper skips) | not_served",
    "rule": "how the draft's layer ids become capture points (see rules)",
    "hook": "file and Class.method the engine calls (found through the class's MRO)",
    "delegate": "where a delegating hook ends up (file Class.method, or the runtime-chosen model)",
    "final_boundary": "whether the capturing forward can return the state after the last layer "
                      "(capture point num_layers); null when not determined",
    "added_by": "first release of a capture range: the commit(s) between the previous release and this one "
                "that added or changed the hook; [] when the history is not available",
}


def release_verdicts(source: GitSource, tag: str) -> tuple[dict[str, Verdict], set[str]]:
    spec = source.spec
    tree = source.tree(tag)
    registry_source = source.repo.show(tag, spec.registry) or "" if spec.registry else ""
    interface = spec.interface is not None and source.probe_named(tag, "supports_eagle3_interface")
    return analyze_tree(spec, tree, registry_source, interface), tree.notes


def collect_ranges(versions: list[str], per_tag: list[dict[str, Verdict]], keep_all: bool) -> dict:
    names = sorted({a for verdicts in per_tag for a in verdicts})
    table = {}
    for arch in names:
        states = [v[arch].to_json() if arch in v else {"status": "not_served", "rule": None, "hook": None,
                                                         "final_boundary": None} for v in per_tag]
        if keep_all or FAMILIES.match(arch) or any(s["status"] == "capture" for s in states):
            table[arch] = compress_ranges(versions, states)
    return table


def add_history(history: History, tags: list[str], architectures: dict, spec: EngineSpec) -> None:
    by_version = {version_of(t): t for t in tags}
    cache: dict[tuple, list[dict]] = {}
    for ranges in architectures.values():
        previous = None
        for entry in ranges:
            if entry["status"] == "capture" and _hook_changed(previous, entry):
                new = by_version[entry["from"]]
                old = tags[tags.index(new) - 1] if tags.index(new) > 0 else None
                key = (old, new, entry["hook"], entry.get("delegate"))
                if key not in cache:
                    cache[key] = commits_for(history, old, new, entry, spec)
                entry["added_by"] = cache[key]
            previous = entry


def _hook_changed(previous: dict | None, entry: dict) -> bool:
    if previous is None or previous["status"] != "capture":
        return True
    return any(previous.get(k) != entry.get(k) for k in ("rule", "hook", "delegate", "final_boundary"))


def commits_for(history: History, old: str | None, new: str, entry: dict, spec: EngineSpec) -> list[dict]:
    labels = (entry["hook"], entry.get("delegate"))
    paths = [p.split(" ")[0] for p in labels if p and not p.startswith("runtime")]
    commits = []
    for path in paths:
        commits += history.added(old, new, path, f"def {spec.hook}")
    if not commits:
        pattern = HISTORY_PATTERN.format(hook=spec.hook, attr=spec.capture_attr)
        commits = history.changed(old, new, paths, pattern)
    return list({c["commit"]: c for c in commits}.values())


def engine_facts(source: GitSource, tags: list[str]) -> list[dict]:
    facts = []
    versions = [version_of(t) for t in tags]
    for probe in source.spec.probes:
        states = [{"value": source.probe(t, probe)} for t in tags]
        facts.append({"fact": probe.name, "meaning": probe.meaning, "pattern": probe.pattern,
                      "paths": list(probe.paths), "ranges": compress_ranges(versions, states)})
    return facts


def source_info(source: GitSource, tags: list[str]) -> dict:
    grafted = [version_of(t) for t in tags if source.is_grafted(t)]
    return {"repository": {"sglang": "github.com/sgl-project/sglang",
                           "vllm": "github.com/vllm-project/vllm"}[source.spec.name],
            "tags": f"{tags[0]}..{tags[-1]} (release tags only; rc/dev skipped)",
            "grafted_from_wheels": grafted,
            "history_branch": "main"}


def generated_by(engine: str, git_dir: str, since: str | None, until: str | None) -> str:
    args = [f"--{engine} {git_dir}"] + [f"--{k} {v}" for k, v in (("since", since), ("until", until)) if v]
    return f"python tools/capture_table.py {' '.join(args)} --write"


def _trim_notes(notes: set[str]) -> list[str]:
    """One line per distinct note text (the first release it was seen in)."""
    first: dict[str, str] = {}
    for note in sorted(notes, key=lambda n: es.release_key("v" + n.split(":")[0])):
        version, _, text = note.partition(": ")
        first.setdefault(text, version)
    return [f"from {v}: {t}" for t, v in first.items()][:60]


# ---------------------------------------------------------------- markdown

def markdown_summary(table: dict, only: re.Pattern | None = None) -> str:
    rows = [f"### {table['engine']} ({table['releases'][0]} .. {table['releases'][-1]}, "
            f"{len(table['releases'])} releases)", "",
            "| architecture | releases | status | rule | final | hook (delegate) | added by |",
            "|---|---|---|---|---|---|---|"]
    for arch, ranges in sorted(table["architectures"].items()):
        if only is not None and not only.match(arch):
            continue
        for entry in ranges:
            rows.append(_markdown_row(arch, entry))
    return "\n".join(rows) + "\n"


def _markdown_row(arch: str, entry: dict) -> str:
    span = f"{entry['from']} – {entry['until'] or 'now'}"
    hook = _short(entry.get("hook"))
    if entry.get("delegate"):
        hook += f" → {_short(entry['delegate'])}"
    final = {True: "yes", False: "no", None: "–"}[entry.get("final_boundary")]
    added = ", ".join(f"#{c['pr']}" if c.get("pr") else c["commit"] for c in entry.get("added_by", []))
    note = f" ({entry['note']})" if entry.get("note") and entry["status"] != "not_served" else ""
    rule = f"{entry.get('rule') or '–'}{note}"
    return f"| {arch} | {span} | {entry['status']} | {rule} | {final} | {hook or '–'} | {added or '–'} |"


def _short(label: str | None) -> str:
    if not label:
        return ""
    path, _, rest = label.partition(" ")
    return f"{path.rsplit('/', 1)[-1]} {rest}".strip() if not label.startswith("runtime") else label


def engine_facts_markdown(table: dict) -> str:
    rows = [f"Engine-wide facts ({table['engine']}):", ""]
    for fact in table["engine_facts"]:
        spans = "; ".join(f"{r['from']}–{r['until'] or 'now'}: {'yes' if r['value'] else 'no'}"
                          for r in fact["ranges"])
        rows.append(f"- `{fact['fact']}`: {fact['meaning']}. {spans}")
    return "\n".join(rows) + "\n"


DOC_HEADER = """# Target classes that capture EAGLE-3 aux hidden states

Generated by `tools/capture_table.py` from the engines' own source at every release tag
(no network, no engine installed). Regenerate with:

```
{commands}
```

The data the kit ships is `eagle3_nb/engines/sglang/data/capture.json` and
`eagle3_nb/engines/vllm/data/capture.json`; this page is their summary. Rules (draft layer id *i*, *L* = num_layers):

{rules}

"final" tells whether the capturing forward can return the state after the last layer (capture
point *L*), which a draft trained on the final hidden state needs.

**Limits.** Static reading only: classes are resolved by name through imports and C3 over
bases found in the models folder; `self.x = Cls(...)` in `__init__` (and simple factories) decide
what `self.x` is; a wrapper that picks its language model from `config.text_config` at run time
gets rule `of_language_model`. Hook bodies are classified by their shape (AST + regex); anything
else is `unknown`, never guessed. Engine-wide switches (which ids the runner passes, CUDA-graph
re-capture, vLLM's early llama-only gate) are listed per engine below and are not folded into
the per-class rows. Releases after the last real tag (SGLang ≥ 0.5.19, vLLM ≥ 0.10.1) were
grafted from wheels: their commits are recovered from the main branch only where the file
versions match it. Only architectures that capture in some release, plus the families served
with EAGLE-3 (Llama, Qwen, DeepSeek, Kimi, gpt-oss, MiniMax, GLM, Mistral), are kept. Kimi K2
checkpoints declare `DeepseekV3ForCausalLM`; look them up under that name.

"""


def write_doc(tables: list[dict], path: str) -> str:
    commands = "\n".join(dict.fromkeys(t["generated_by"] for t in tables))
    rules = "\n".join(f"- `{k}`: {v}" for k, v in RULES.items())
    parts = [DOC_HEADER.format(commands=commands, rules=rules)]
    for table in tables:
        parts += [f"## {table['engine']}", "", engine_facts_markdown(table), markdown_summary(table), ""]
    text = "\n".join(parts).rstrip() + "\n"
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(text)
    return text


def data_path(engine: str, directory: str | None = None) -> str:
    """The kit's table (eagle3_nb/engines/<engine>/data/capture.json), or DIR/capture_<engine>.json."""
    if directory is None:
        return os.path.join(ENGINES_DIR, engine, "data", "capture.json")
    return os.path.join(directory, f"capture_{engine}.json")


def write_json(table: dict, directory: str | None = None) -> str:
    path = data_path(table["engine"], directory)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as handle:
        json.dump(table, handle, indent=1, ensure_ascii=False)
        handle.write("\n")
    os.replace(tmp, path)
    return path


def load_tables(directory: str | None = None) -> list[dict]:
    tables = []
    for engine in ENGINES:
        path = data_path(engine, directory)
        if os.path.exists(path):
            with open(path, encoding="utf-8") as handle:
                tables.append(json.load(handle))
    return tables


# ---------------------------------------------------------------- command line

def command_line(args: argparse.Namespace) -> str:
    """The command that regenerates the shipped files (recorded in them)."""
    parts = ["python tools/capture_table.py"]
    parts += [f"--{e} {getattr(args, e)}" for e in ENGINES if getattr(args, e)]
    parts += [f"--{k} {getattr(args, k)}" for k in ("since", "until") if getattr(args, k)]
    parts += ["--all"] * args.all + ["--write"]
    return " ".join(parts)


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sglang", metavar="GIT_DIR", help="bare git directory of SGLang")
    parser.add_argument("--vllm", metavar="GIT_DIR", help="bare git directory of vLLM")
    parser.add_argument("--since", help="first release tag (default: per engine)")
    parser.add_argument("--until", help="last release tag (default: the newest)")
    parser.add_argument("--write", action="store_true",
                        help="write the JSON data and regenerate docs/target-capture.md")
    parser.add_argument("--data-dir", default=None,
                        help="write DIR/capture_<engine>.json instead of the kit's "
                             "eagle3_nb/engines/<engine>/data/capture.json")
    parser.add_argument("--doc", default=DOC_PATH)
    parser.add_argument("--all", action="store_true", help="keep every architecture, not only the kept ones")
    parser.add_argument("--quiet", action="store_true", help="no progress on stderr")
    args = parser.parse_args(argv)
    if not args.sglang and not args.vllm:
        parser.error("give --sglang GIT_DIR and/or --vllm GIT_DIR")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    log = None if args.quiet else (lambda line: print(line, file=sys.stderr, flush=True))
    tables = []
    try:
        for engine in ENGINES:
            git_dir = getattr(args, engine)
            if git_dir:
                tables.append(build_table(git_dir, engine, args.since, args.until, args.all, log,
                                          command_line(args)))
    except es.SurveyError as error:
        print(f"capture_table: error: {error}", file=sys.stderr)
        return 2
    for table in tables:
        if args.write:
            print(f"wrote {write_json(table, args.data_dir)}", file=sys.stderr)
        sys.stdout.write(engine_facts_markdown(table) + "\n" + markdown_summary(table) + "\n")
    if args.write:
        write_doc(load_tables(args.data_dir), args.doc)
        print(f"wrote {args.doc}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
