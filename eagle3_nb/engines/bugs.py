"""Known engine bugs that hurt EAGLE-3 drafts, by the releases they affect: the record here, the
data in each engine's folder (engines/<engine>/bugs.py).

Each bug names the first affected release and the first fixed one (None: not fixed in any
surveyed release), the condition under which a draft is affected (a name the planner evaluates:
planner.BUG_CONDITIONS), the symptom, and the upstream issue or PR. Behaviour that a profile
field already models (a flag not read, ids not read, fc width) is not repeated here. Ranges come
from the release survey (docs/engine-survey.md): the code at the tags on both sides.

A bug whose effect the planner can apply (`effect`, a planner.BUG_EFFECTS key) changes the plan
itself from `effect_from` on (the release where the buggy path is what the engine runs by
default), so the plan and the bug finding never disagree. `ways_out` gives the way out by
release, when it changes (an option a later release removed)."""

from __future__ import annotations

from dataclasses import dataclass

from eagle3_nb.engines.profile import EngineProfile, release_key
from eagle3_nb.engines.registry import engine


@dataclass(frozen=True)
class KnownBug:
    id: str
    engine: str
    first: str            # first affected release
    fixed: str | None     # first release with the fix; None: open in every surveyed release
    condition: str        # planner.BUG_CONDITIONS key
    severity: str
    symptom: str
    cite: str
    effect: str = ""                          # planner.BUG_EFFECTS key, "" for none
    effect_from: str | None = None            # first release whose plan applies the effect
    ways_out: tuple[tuple[str, str], ...] = ()  # (first release, the way out from it), oldest first
    # evidence beyond the draft the condition needs ("launch_method_unset": the serving command
    # names no method); without it the finding says it is conditional, as info
    needs: str = ""

    def way_out(self, version: str) -> str:
        """The way out in this release ("" when the entry names none)."""
        found = [text for since, text in self.ways_out if release_key(since) <= release_key(version)]
        return found[-1] if found else ""

    def applies_effect(self, version: str) -> bool:
        return bool(self.effect) and self.effect_from is not None and \
            release_key(self.effect_from) <= release_key(version)


def affects(bug: KnownBug, version: str) -> bool:
    v = release_key(version)
    return release_key(bug.first) <= v and (bug.fixed is None or v < release_key(bug.fixed))


def bugs_in(profile: EngineProfile) -> list[KnownBug]:
    """The known bugs that affect any release of the profile's range."""
    first, last = (release_key(v) for v in profile.covers)
    return [b for b in engine(profile.name).bugs if release_key(b.first) <= last
            and (b.fixed is None or release_key(b.fixed) > first)]
