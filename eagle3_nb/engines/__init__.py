"""Engine profiles (data) and the generic planner."""

from __future__ import annotations

import re
from dataclasses import replace

from eagle3_nb.errors import EngineSpecError
from eagle3_nb.engines.profile import EngineProfile, parse_version
from eagle3_nb.engines.sglang import PROFILES as _SGLANG
from eagle3_nb.engines.vllm import PROFILES as _VLLM

PROFILES: tuple[EngineProfile, ...] = _SGLANG + _VLLM


def known_ranges() -> str:
    return "; ".join(p.range_text() for p in PROFILES)


# The first release that ships an EAGLE-3 draft model (its llama_eagle3.py), per engine, as
# tools/engine_survey.py found it in the release tags: docs/engine-survey.md.
FIRST_EAGLE3 = {"sglang": "0.4.4.post2", "vllm": "0.8.5"}


def resolve_engine(spec: str) -> EngineProfile:
    """'NAME==VERSION' -> the profile whose range contains VERSION. A release no profile covers
    is never refused: it gets the nearest profile (the newest one not after it, else the oldest),
    marked unverified so every plan says so; a release before EAGLE-3 existed gets that too."""
    name, sep, version = spec.partition("==")
    name, version = name.strip().lower(), version.strip()
    if not sep or not name or not version:
        raise EngineSpecError(f"engine {spec!r} is not NAME==VERSION", "--engine",
                              f"for example sglang==0.5.23; known: {known_ranges()}")
    v = parse_version(version)
    mine = [p for p in PROFILES if p.name == name]
    if not mine:
        raise EngineSpecError(f"no engine called {name!r}", "--engine",
                              f"known: {', '.join(sorted({p.name for p in PROFILES}))}")
    for profile in mine:
        if profile.covers_version(v):
            return profile
    older = [p for p in mine if parse_version(p.covers[0]) <= v]
    nearest = max(older, key=lambda p: parse_version(p.covers[0])) if older else \
        min(mine, key=lambda p: parse_version(p.covers[0]))
    before = _with_post(version) < _with_post(FIRST_EAGLE3[name])
    return replace(nearest, version=version, based_on=nearest.key,
                   eagle3_since=FIRST_EAGLE3[name] if before else "",
                   evidence=f"not read: answered with the {nearest.key} profile")


def _with_post(version: str) -> tuple[int, ...]:
    """parse_version plus the post-release number: 0.4.4 and 0.4.4.post1 precede 0.4.4.post2."""
    post = re.search(r"post(\d{1,9})", version)
    return (*parse_version(version), int(post.group(1)) if post else 0)


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
