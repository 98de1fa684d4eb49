"""Engine profiles (data) and the generic planner."""

from __future__ import annotations

import re

from eagle3_nb.errors import EngineSpecError
from eagle3_nb.engines.profile import EngineProfile, parse_version
from eagle3_nb.engines.sglang import PROFILES as _SGLANG
from eagle3_nb.engines.vllm import PROFILES as _VLLM

PROFILES: tuple[EngineProfile, ...] = _SGLANG + _VLLM


def known_ranges() -> str:
    return "; ".join(p.range_text() for p in PROFILES)


def resolve_engine(spec: str) -> EngineProfile:
    """'NAME==VERSION' -> the profile whose range contains VERSION."""
    name, sep, version = spec.partition("==")
    name = name.strip().lower()
    if not sep or not name or not version.strip():
        raise EngineSpecError(f"engine {spec!r} is not NAME==VERSION", "--engine",
                              f"for example sglang==0.5.23; known: {known_ranges()}")
    v = parse_version(version)
    for profile in PROFILES:
        if profile.name == name and profile.covers_version(v):
            return profile
    raise EngineSpecError(f"no profile covers {name} {version.strip()}", "--engine",
                          f"known ranges: {known_ranges()}")


def resolve_engines(specs: list[str] | None) -> list[EngineProfile]:
    if not specs or specs == ["all"]:
        return list(PROFILES)
    out: list[EngineProfile] = []
    for spec in specs:
        profile = resolve_engine(spec)
        if profile not in out:
            out.append(profile)
    return out


def parse_engines(engine: str | list[str] | None) -> list[str] | None:
    """A notebook's `engine` parameter -> `inspect_checkpoint(engines=...)`.

    "all", "" or None: every profile. Otherwise comma-separated engines, each NAME==VERSION or,
    because papermill cannot read a "=" in a parameter's help comment, NAME:VERSION,
    NAME@VERSION or "NAME VERSION"."""
    if engine is None:
        return None
    items = engine if isinstance(engine, list) else str(engine).split(",")
    out = []
    for item in (i.strip() for i in items):
        if not item or item == "all":
            continue
        if "==" not in item:
            parts = re.split(r"[:@\s]+", item, maxsplit=1)
            if len(parts) == 2 and parts[1]:
                item = f"{parts[0]}=={parts[1]}"
        out.append(item)  # anything else: resolve_engines says what is wrong
    return out or None
