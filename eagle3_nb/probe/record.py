"""Watch an engine's own `load_weights` fill a model: which key wrote which parameter.

Engine-agnostic by construction: nothing is wrapped or patched. Before each call every parameter
(and buffer) is filled with a sentinel (NaN for floats, the smallest integer for integer
tensors); after the call, a tensor holding anything else was written. Each checkpoint key is
fed alone to a fresh call, so each write is attributed to exactly one key and a key that makes
the loader raise is known with its message. A last call with every key in checkpoint order,
as the engine makes it, says whether the real load raises and which parameters stay unwritten.

Tensor attributes that are not parameters (SGLang keeps d2t as `hot_token_id`, a plain
attribute) are watched by identity: a key that replaces one wrote it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

from eagle3_nb.probe.budget import raise_if_out_of_memory


@dataclass
class ObservedKey:
    name: str
    fate: str                       # "filled" | "ignored" | "error"
    params: dict[str, float] = field(default_factory=dict)  # written -> share of its elements
    error: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "fate": self.fate, "params": self.params, "error": self.error}


@dataclass
class Observation:
    keys: list[ObservedKey]
    params: list[str]                         # every engine parameter (and watched attribute)
    unwritten: dict[str, float]               # after the full load: param -> share never written
    raised: str = ""                          # the full load's exception, "" when it returned
    build_error: str = ""                     # building the model failed: nothing was loaded
    returned: list[str] | None = None         # what load_weights returned, when a set of names

    def to_json(self) -> dict[str, Any]:
        return {"keys": [k.to_json() for k in self.keys], "params": self.params,
                "unwritten": self.unwritten, "raised": self.raised,
                "build_error": self.build_error, "returned": self.returned}


def _error_text(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"[:500]


def _tracked(model) -> dict[str, Any]:
    """name -> tensor for every parameter and buffer (shared ones once, by first name)."""
    out: dict[str, Any] = {}
    seen: set[int] = set()
    for name, t in list(model.named_parameters()) + list(model.named_buffers()):
        if id(t) in seen or t is None:
            continue
        seen.add(id(t))
        out[name] = t
    return out


def _tensor_attrs(model, watch: Iterable[str]) -> dict[str, int | None]:
    """id of each watched plain attribute (dotted path from the model), None when not a tensor."""
    import torch

    out = {}
    for path in watch:
        obj = model
        for part in path.split("."):
            obj = getattr(obj, part, None)
        out[path] = id(obj) if isinstance(obj, torch.Tensor) else None
    return out


def _sentinel(t, second: bool = False):
    """The fill value; each call is observed twice, with NaN and then a finite sentinel, so a
    tensor that itself holds NaN (a broken head) still shows as written."""
    import torch

    if t.dtype.is_floating_point or t.dtype.is_complex:
        return -torch.finfo(t.dtype).max if second else float("nan")
    if t.dtype == torch.bool:
        return None
    return torch.iinfo(t.dtype).max if second else torch.iinfo(t.dtype).min


def _fill(tensors: dict[str, Any], second: bool = False) -> None:
    import torch

    with torch.no_grad():
        for t in tensors.values():
            if t.is_meta:
                raise ValueError("parameters on the meta device cannot be observed: build on CPU")
            value = _sentinel(t, second)
            if value is not None:
                t.data.fill_(value)


def _still(t, second: bool = False):
    """Mask of the elements still holding the sentinel (None: not observable)."""
    import math

    import torch

    value = _sentinel(t, second)
    if value is None:
        return None
    with torch.no_grad():
        data = t.data
        if isinstance(value, float) and math.isnan(value):
            return torch.isnan(data)
        return data == value


def _run_twice(tracked, call) -> tuple[dict[str, float], str, Any]:
    """call() under both sentinels: param -> share written, the error text, call's result."""
    masks: dict[str, Any] = {}
    error, result = "", None
    for second in (False, True):
        _fill(tracked, second)
        try:
            result = call()
        except Exception as exc:  # the engine's own error, recorded (running out of memory is not)
            raise_if_out_of_memory(exc, "while the engine loaded the weights")
            error = _error_text(exc)
        for name, t in tracked.items():
            still = _still(t, second)
            if still is not None:
                masks[name] = still if name not in masks else masks[name] & still
    shares = {n: 1.0 - float(m.sum()) / m.numel() if m.numel() else 1.0
              for n, m in masks.items()}
    return shares, error, result


def observe_load(model, load: Callable[[Iterable], Any], weights: list[tuple[str, Any]],
                 watch_attrs: Iterable[str] = ()) -> Observation:
    """Feed `weights` (name, tensor) to `load` (the engine's load_weights, bound) key by key,
    then all at once; see the module text."""
    watch_attrs = list(watch_attrs)
    tracked = _tracked(model)
    keys: list[ObservedKey] = []
    for name, tensor in weights:
        for a in watch_attrs:
            _reset_attr(model, a)
        before = _tensor_attrs(model, watch_attrs)
        shares, error, _ = _run_twice(tracked, lambda: load(iter([(name, tensor.clone())])))
        after = _tensor_attrs(model, watch_attrs)
        written = {p: round(s, 4) for p, s in shares.items() if s > 0}
        written.update({a: 1.0 for a in watch_attrs if after[a] is not None
                        and after[a] != before[a]})
        fate = "error" if error else ("filled" if written else "ignored")
        keys.append(ObservedKey(name, fate, written, error))
    for a in watch_attrs:  # the full pass starts from the model as built
        _reset_attr(model, a)
    shares, raised, result = _run_twice(
        tracked, lambda: load(iter([(n, t.clone()) for n, t in weights])))
    returned = sorted(str(r) for r in result) if isinstance(result, (set, list, tuple)) else None
    own = {name for name, _ in model.named_parameters()}
    unwritten = {p: round(1.0 - s, 4) for p, s in shares.items() if p in own and s < 1}
    attrs = _tensor_attrs(model, watch_attrs)
    unwritten.update({a: 1.0 for a in watch_attrs if attrs[a] is None})
    params = sorted(own) + [a for a in watch_attrs if a not in own]
    return Observation(keys, params, unwritten, raised, returned=returned)


def _reset_attr(model, path: str) -> None:
    """Put a watched attribute back to None (how the engines build it) before the full pass."""
    *parents, last = path.split(".")
    obj = model
    for part in parents:
        obj = getattr(obj, part)
    import torch

    if isinstance(getattr(obj, last, None), torch.Tensor) and last not in dict(
            obj.named_parameters(recurse=False)):
        setattr(obj, last, None)
