"""Which target model classes hand aux hidden states to an EAGLE-3 draft, per engine release.

The data (engines/<engine>/data/capture.json) is generated from the engines' own code at every
release tag by tools/capture_table.py (docs/target-capture.md): for each served architecture
name, contiguous release ranges with the class whose hook it gets (SGLang
`set_eagle3_layers_to_capture`, vLLM `SupportsEagle3`) and the layer-id rule that hook applies.
A table marked "partial" (TensorRT-LLM's, read by hand: engines/trtllm/data/capture.json) lists
only the classes that were read: any other class stays unchecked there, never refused.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache

from eagle3_nb.engines.profile import release_key
from eagle3_nb.engines.registry import engines

CAPTURE, NO_CAPTURE, NOT_SERVED = "capture", "no_capture", "not_served"


@dataclass(frozen=True)
class CaptureFact:
    architecture: str
    release: str                 # the surveyed release the answer comes from
    status: str                  # CAPTURE | NO_CAPTURE | NOT_SERVED
    rule: str                    # an AUX_RULES name, "unknown", or "" without capture
    hook: str                    # file and class.method that decides it ("" when none)
    final_boundary: bool | None  # can the state after the last layer be captured
    since: str                   # first release of the range this answer belongs to
    until: str | None            # first release after that range (None: still current)
    change: str                  # commit / PR that started the range, when known
    next_capture: str | None     # first later release where the class captures, if any


@lru_cache(maxsize=None)
def capture_table(engine: str) -> dict:
    path = engines()[engine].data("capture.json") if engine in engines() else None
    if path is None or not path.is_file():
        return {"releases": [], "architectures": {}}
    return json.loads(path.read_text(encoding="utf-8"))


def _table_release(engine: str, version: str) -> str | None:
    """The newest release in the table not after VERSION (VERSION itself when it is there)."""
    key = release_key(version)
    older = [r for r in capture_table(engine)["releases"] if release_key(r) <= key]
    return max(older, key=release_key) if older else None


def surveyed_release(engine: str, version: str) -> str | None:
    """The newest release not after VERSION whose survey lists every class the engine serves
    (VERSION itself when it was surveyed); None for a partial table, whose silence about a
    class says nothing."""
    return None if capture_table(engine).get("partial") else _table_release(engine, version)


def capture_fact(engine: str, version: str, architecture: str) -> CaptureFact | None:
    """What the engine release does with a target of this class; None when the table cannot
    say (no survey reaches the release, or the class is not in the table)."""
    table = capture_table(engine)
    release = _table_release(engine, version)
    ranges = table["architectures"].get(architecture)
    if release is None or ranges is None:
        return None
    key = release_key(release)
    for i, r in enumerate(ranges):
        if release_key(r["from"]) <= key and (r["until"] is None or key < release_key(r["until"])):
            later = next((x["from"] for x in ranges[i + 1:] if x["status"] == CAPTURE), None)
            return CaptureFact(architecture, release, r["status"], r.get("rule") or "",
                               r.get("hook") or "", r.get("final_boundary"), r["from"],
                               r["until"], r.get("change") or "", later)
    first = min((r["from"] for r in ranges), key=release_key, default=None)
    later = next((x["from"] for x in ranges if x["status"] == CAPTURE), None)
    return CaptureFact(architecture, release, NOT_SERVED, "", "", None, "", first, "", later)


