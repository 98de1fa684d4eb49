"""io.files.json_text writes what json.dumps writes with an indent, byte for byte, NaN and
infinities as null: the inspections of the bundled drafts (statistics included, nan-head's NaN
among them) and the shapes an inspection never has (empty, nested, non-string keys, objects
written with str)."""

from __future__ import annotations

import enum
import json
import math
from pathlib import Path

import pytest

from conftest import DRAFTS, SAMPLES
from eagle3_nb.checks.load import inspect_checkpoint
from eagle3_nb.io.files import json_text


def stdlib(obj, indent=2) -> str:
    """What json_text wrote before it had its own indenting writer."""
    def finite(o):
        if isinstance(o, float):
            return o if math.isfinite(o) else None
        if isinstance(o, dict):
            return {k: finite(v) for k, v in o.items()}
        if isinstance(o, (list, tuple)):
            return [finite(v) for v in o]
        return o
    return json.dumps(finite(obj), indent=indent, default=str, allow_nan=False)


@pytest.mark.parametrize("draft", ["good", "nan-head", "mla-draft", "multilayer-flat",
                                   "good-speculators"])
def test_an_inspection_is_written_as_json_dumps_writes_it(draft):
    data = inspect_checkpoint(DRAFTS / draft, ["all"], SAMPLES / "target" / "config.json",
                              stats=True).to_json()
    for indent in (2, None, 4):
        assert json_text(data, indent) == stdlib(data, indent)
    if draft == "nan-head":   # the non-finite statistics became null, not NaN
        def refuse(constant):
            raise AssertionError(f"{constant} written")
        json.loads(json_text(data), parse_constant=refuse)
        assert '"mean": null' in json_text(data)


class Kind(enum.IntEnum):
    ONE = 1


class Named:
    def __str__(self):
        return "named"


@pytest.mark.parametrize("obj", [
    1, "x", None, True, 1.5, float("nan"), [], {}, [[]], [{}], {"a": []}, {"a": {}}, (1, (2, 3)),
    {1: 2, 2.5: "x", True: 1, None: [1], False: {}}, {"é": "ü\u2028", "q": "\"\\\n"},
    [Path("/x"), Named()], {"p": Path("/y"), "s": {1}}, [float("inf"), -float("inf"), 1e300, -0.0],
    {"k": [1, [2, [3, {"z": float("nan")}]], {}]}, [True, False, 3, Kind.ONE], {"e": Kind.ONE},
    [{"a": 1, "b": "},\n{"}, {"c": "x}", "d": None}, {}], {"a": {"b": {"c": {"d": [None]}}}},
])
@pytest.mark.parametrize("indent", [2, 0, 1, 4])
def test_every_shape_is_written_as_json_dumps_writes_it(obj, indent):
    assert json_text(obj, indent) == stdlib(obj, indent)


def test_keys_json_cannot_write_are_refused_as_json_dumps_refuses_them():
    with pytest.raises(TypeError, match="keys must be str"):
        json_text({"rows": [1, {(1, 2): 3}]})
