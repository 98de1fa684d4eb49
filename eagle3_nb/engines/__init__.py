"""Engine profiles (data) and the generic planner."""

from __future__ import annotations

from ..errors import EngineSpecError
from .profile import EngineProfile, parse_version
from .sglang import PROFILES as _SGLANG
from .vllm import PROFILES as _VLLM

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
