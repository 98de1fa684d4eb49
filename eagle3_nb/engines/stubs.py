"""The only stand-ins the probe puts into an engine's import chain, all in this one module.

An engine's model files import CUDA kernel packages at module level even though building a
draft and running its `load_weights` never calls a kernel. On a CPU machine those packages do
not exist (or, for torchvision, no build matching the CPU torch is on the package registry), so
the probe answers each listed top-level name with a permissive module: any attribute exists,
any call returns a stand-in, a call with one callable argument (a decorator) returns it
unchanged. Nothing else is stubbed: a package the import chain needs that has a CPU build is
installed in the side environment (tools/engine_env.sh), so a missing one fails loudly.

`install()` registers the finder once; `used()` names the stubbed modules that were actually
imported, which the probe reports.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
import types

from eagle3_nb.engines.registry import engines

# top-level name -> why it is stubbed (shown in the probe's output): every engine's list, since one
# engine's import chain may reach another's compiled packages (sglang before 0.5.8 imports vllm)
STUBS: dict[str, str] = {}


def _all_stubs() -> dict[str, str]:
    if not STUBS:
        for found in engines().values():
            STUBS.update(found.probe_stubs)
    return STUBS


_used: list[str] = []


class _Stand:
    """A value of a stubbed module: anything asked of it answers."""

    def __init__(self, name: str):
        self._name = name

    def __getattr__(self, item: str):
        if item.startswith("__") and item.endswith("__"):
            raise AttributeError(item)
        return _Stand(f"{self._name}.{item}")

    def __call__(self, *args, **kwargs):
        if len(args) == 1 and not kwargs and callable(args[0]):
            return args[0]
        return _Stand(f"{self._name}()")

    def __getitem__(self, item):
        return _Stand(f"{self._name}[]")

    def __iter__(self):
        return iter(())

    def __bool__(self):
        return False

    def __mro_entries__(self, bases):  # `class X(stub.Base)` gets a plain base
        return (object,)

    def __repr__(self):
        return f"<stub {self._name}>"


def _stub_module(fullname: str) -> types.ModuleType:
    mod = types.ModuleType(fullname, f"eagle3_nb probe stub: {fullname}")
    mod.__path__ = []  # a package: its submodules are stubs too
    mod.__version__ = "0.0.0+stub"
    mod.__getattr__ = lambda item: (_ for _ in ()).throw(AttributeError(item)) \
        if item.startswith("__") else _Stand(f"{fullname}.{item}")
    return mod


def _root_of(fullname: str) -> str | None:
    for root in STUBS:
        if fullname == root or fullname.startswith(root + "."):
            return root
    return None


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def __init__(self, names: tuple[str, ...]):
        self.names = names

    def find_spec(self, fullname, path=None, target=None):
        root = _root_of(fullname)
        if root is None or root not in self.names:
            return None
        return importlib.machinery.ModuleSpec(fullname, self, is_package=True)

    def create_module(self, spec):
        root = _root_of(spec.name)
        if root and root not in _used:
            _used.append(root)
        return _stub_module(spec.name)

    def exec_module(self, module):
        return None


_finder: _Finder | None = None


def install(names: tuple[str, ...] | None = None) -> None:
    """Answer the listed names (every engine's stubs by default) with stubs, ahead of real
    packages."""
    global _finder
    if _finder is not None:
        return
    _finder = _Finder(tuple(names or _all_stubs()))
    sys.meta_path.insert(0, _finder)


def install_torch_ops(ops: dict[str, tuple[str, ...]]) -> None:
    """Placeholders for the torch.ops (namespace -> names) that no loaded extension registered:
    ops a layer's __init__ looks up, but never calls, when the extension is stubbed."""
    import torch

    for namespace, names in ops.items():
        space = getattr(torch.ops, namespace)
        for name in names:
            try:
                getattr(space, name)
                continue
            except (AttributeError, RuntimeError):
                pass
            setattr(space, name, _Stand(f"torch.ops.{namespace}.{name}"))
            label = f"torch.ops.{namespace}.{name}"
            if label not in _used:
                _used.append(label)
            _all_stubs().setdefault(label, "op of a stubbed compiled extension, looked up by a layer's "
                                    "__init__, never called while loading weights")


def used() -> list[dict[str, str]]:
    return [{"module": name, "why": _all_stubs()[name]} for name in _used]
