"""Engine facts: one folder per engine (engines/<engine>/), each registering one Engine record
(engines/registry.py); the generic planner applies any engine's profiles."""

from __future__ import annotations

import re
from dataclasses import fields, replace

from eagle3_nb.errors import EngineSpecError
from eagle3_nb.engines.profile import EngineProfile, is_plain_release, release_key
from eagle3_nb.engines.registry import Engine, engine, engines, names



def all_profiles() -> tuple[EngineProfile, ...]:
    return tuple(p for e in engines().values() for p in e.profiles)


def all_releases() -> dict[str, tuple[tuple[str, str], ...]]:
    return {n: e.releases for n, e in engines().items()}


def first_eagle3() -> dict[str, str]:
    """The first release that ships an EAGLE-3 draft model (its llama_eagle3.py), per engine, as
    tools/engine_survey.py found it in the release tags: docs/engine-survey.md."""
    return {n: e.releases[0][0] for n, e in engines().items()}


# The engine folders register on first use, not at import: an engine folder may import the
# generic helpers of this package, and the header path loads no engine table it is not asked for.
_LAZY = {"ENGINES": engines, "PROFILES": all_profiles, "RELEASES": all_releases,
         "FIRST_EAGLE3": first_eagle3}


def __getattr__(name: str):
    if name in _LAZY:
        return _LAZY[name]()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


_BOOKKEEPING = ("version", "covers", "evidence", "cites", "based_on", "eagle3_since")


def range_changes(profile: EngineProfile) -> list[str]:
    """The fields in which a range differs from the engine's previous range (its MLA draft class
    counted as one field); empty for the first range."""
    mine = sorted(engine(profile.name).profiles,
                  key=lambda p: release_key(p.covers[0]))
    i = next(i for i, p in enumerate(mine) if p.covers == profile.covers)
    if i == 0:
        return []
    before = mine[i - 1]
    return [f.name for f in fields(EngineProfile)
            if f.name not in _BOOKKEEPING and getattr(before, f.name) != getattr(profile, f.name)]


def releases_in(profile: EngineProfile) -> list[str]:
    return [r for r, _ in engine(profile.name).releases if profile.covers_release(r)]


_RESOLVED: dict[tuple[str, str], EngineProfile] = {}


def published_release(name: str, version: str) -> str | None:
    """The published release VERSION names ('0.33' -> '0.33.0'), or None for a build that was
    never published (a dev or rc build, a local build, a release after the survey). A
    pre-release counts only where the engine lists it among its releases (an engine whose
    newest line ships as release candidates)."""
    found = engines().get(name)
    if found is None:
        return None
    if not is_plain_release(version):
        return next((r for r, _ in found.releases if r == str(version).strip()), None)
    key = release_key(version)
    return next((r for r, _ in found.releases if release_key(r) == key), None)


# NAME==VERSION, NAME:VERSION (papermill cannot show a "=" in a parameter's help comment, so the
# notebooks document this one), and the older NAME@VERSION and "NAME VERSION"
_SEPARATOR = re.compile(r"\s*(?:==|:|@)\s*|\s+")


def split_spec(spec: str) -> tuple[str, str]:
    """'NAME==VERSION' or 'NAME:VERSION' -> (name, version); a bare 'NAME' -> (name, ""), which
    resolve_engine answers with that engine's newest releases. The one place the kit reads an
    engine release; the name is checked where it is resolved (registry.engine)."""
    parts = _SEPARATOR.split(str(spec).strip(), maxsplit=1)
    name, version = parts[0].strip().lower(), "".join(parts[1:]).strip()
    if not name or (len(parts) > 1 and not version):  # "sglang==": an unset $VERSION, say
        what = "names no engine" if not name else "has a separator but no version"
        raise EngineSpecError(f"engine {str(spec)[:40]!r} {what}", "--engine",
                              f"NAME, NAME==VERSION or NAME:VERSION, e.g. {_example()}; "
                              f"engines: {', '.join(names())}")
    return name, version


def canonical_spec(spec: str) -> str:
    """Any accepted form -> 'NAME==VERSION' ('NAME' when no version is given)."""
    name, version = split_spec(spec)
    return f"{name}=={version}" if version else name


def wiring_name(name: str) -> str:
    """A wiring named as an engine release in any form split_spec reads ('sglang:0.5.9') ->
    its preset's name (NAME==VERSION); any other wiring name as given."""
    try:
        engine_name, version = split_spec(name)
    except EngineSpecError:  # no engine release: a wiring name the presets answer for
        return name
    return f"{engine_name}=={version}" if version and engine_name in engines() else name


def _example() -> str:
    first = next(iter(engines().values()))
    return f"{first.name}=={first.newest} or {first.name}:{first.newest}"


def resolve_engine(spec: str) -> EngineProfile:
    """'NAME==VERSION' (or NAME:VERSION) -> the profile for that release, its `version` set to
    the release; a bare 'NAME' -> that engine's newest profile (what a check without --engine
    answers for).

    Never refused: a build inside a profile's range that is not a published release (a dev or
    rc build, an unknown post release) and a release no profile covers (newer than the survey)
    get the nearest profile, with `based_on` naming it so every plan warns; a release before the
    engine had EAGLE-3 also gets `eagle3_since`."""
    name, version = split_spec(spec)
    if not version:
        return newest_profile(engine(name))
    key = release_key(version)
    mine = list(engine(name).profiles)
    published = published_release(name, version)
    cache_key = (name, published or version)
    if cache_key not in _RESOLVED:
        _RESOLVED[cache_key] = _answer(mine, name, published or version, key, bool(published))
    return _RESOLVED[cache_key]


def _answer(mine: list[EngineProfile], name: str, version: str, key: tuple[int, ...],
            published: bool) -> EngineProfile:
    covering = [p for p in mine if p.covers_release(version)]
    if covering and published:
        same = release_key(covering[0].version) == key
        return covering[0] if same else replace(covering[0], version=version)
    older = [p for p in mine if release_key(p.covers[0]) <= key]
    nearest = covering[0] if covering else (
        max(older, key=lambda p: release_key(p.covers[0])) if older else
        min(mine, key=lambda p: release_key(p.covers[0])))
    first = engine(name).releases[0][0]
    before = key < release_key(first)
    return replace(nearest, version=version, based_on=nearest.key,
                   eagle3_since=first if before else "",
                   evidence=f"not read: answered with the {nearest.key} profile")


def newest_profile(found: Engine) -> EngineProfile:
    return max(found.profiles, key=lambda p: release_key(p.covers[1]))


def newest_profiles() -> list[EngineProfile]:
    """The profile of each engine's newest surveyed releases: what a check without --engine
    answers for (older releases only when named, or with --engine all)."""
    return [newest_profile(e) for e in engines().values()]


def resolve_engines(specs: list[str] | None) -> list[EngineProfile]:
    if not specs:
        return newest_profiles()
    if specs == ["all"]:
        return list(all_profiles())
    out: list[EngineProfile] = []
    for spec in specs:
        profile = resolve_engine(spec)
        if profile not in out:
            out.append(profile)
    return out


def parse_engines(engine: str | list[str] | None) -> list[str] | None:
    """A notebook's `engine` parameter -> `inspect_checkpoint(engines=...)`.

    "all", "" or None: every profile. Otherwise comma-separated engines, each NAME:VERSION,
    NAME==VERSION or a bare NAME (split_spec's grammar), returned as NAME==VERSION."""
    if engine is None:
        return None
    items = [str(i).strip() for i in (engine if isinstance(engine, list) else
                                      str(engine).split(","))]
    if "all" in items:
        return ["all"]
    return [canonical_spec(i) for i in items if i] or None
