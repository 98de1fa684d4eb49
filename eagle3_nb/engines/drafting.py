"""The drafting settings an engine release uses when the user does not set them.

The data (engines/<engine>/data/drafting.json) is generated from each release's own code by
tools/drafting_defaults.py: SGLang's `auto_choose_speculative_params` (server_args.py; since
0.5.14 `_auto_choose_speculative_params` in srt/arg_groups/speculative_hook.py), which picks
(num_steps, eagle_topk, num_draft_tokens) from the target's `architectures[0]`, and vLLM's
SpeculativeConfig, where `num_speculative_tokens` has no default for an EAGLE-3 draft.

Numbers follow SGLang's names: num_steps draft forwards, topk beams per step, num_draft_tokens
verified tokens counting the last committed one (a chain of k drafted tokens is (k, 1, k + 1)).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache

from eagle3_nb.engines.profile import release_key
from eagle3_nb.engines.registry import engine as _engine, engines


@dataclass(frozen=True)
class DraftingDefault:
    num_steps: int | None         # draft forwards per round (vLLM: num_speculative_tokens)
    topk: int | None              # branches kept per step (1: a chain)
    num_draft_tokens: int | None  # tokens verified per round, counting the committed one;
                                  # None: the engine makes the user set it
    source: str                   # repository, file:function, and the release read
    note: str
    release: str | None = None    # the surveyed release whose rule this is


@lru_cache(maxsize=None)
def drafting_table(engine: str) -> dict:
    path = engines()[engine].data("drafting.json") if engine in engines() else None
    if path is None or not path.is_file():
        return {"releases": {}}
    return json.loads(path.read_text(encoding="utf-8"))


def _surveyed(engine: str, version: str) -> tuple[str, str]:
    """(the surveyed release whose rule applies, a note when it is not VERSION itself)."""
    releases = sorted(drafting_table(engine)["releases"], key=release_key)
    if not releases:
        raise ValueError(f"no drafting table for {engine}: run tools/drafting_defaults.py")
    key = release_key(version)
    older = [r for r in releases if release_key(r) <= key]
    if not older:
        raise ValueError(f"{engine} {version} predates EAGLE-3 in {engine} "
                         f"(first release with it: {releases[0]})")
    release = older[-1]
    if release_key(release) == key:
        return release, ""
    if release == releases[-1]:
        return release, (f"{engine} {version} is newer than the newest release surveyed ({release}): "
                         f"its code was not read; {release}'s rule is assumed. ")
    return release, (f"{engine} {version} was not surveyed (not a published release?): "
                     f"the rule of {release}, the release before it, is used. ")


def cite(engine: str, source: str, release: str) -> str:
    return f"github.com/{_engine(engine).repository} {source} @ v{release}"


def default_drafting(engine: str, version: str, architecture: str | None,
                     algorithm: str = "EAGLE3", page_size: int = 1) -> DraftingDefault:
    """What ENGINE VERSION drafts for a target whose config.json `architectures[0]` is
    ARCHITECTURE when none of the drafting flags is given. PAGE_SIZE matters for SGLang releases
    that lowered topk to 1 when page_size > 1 (0.4.4.post4 to 0.4.8.post1)."""
    found = engines().get(engine.lower())
    if found is None or found.drafting_rule is None:
        raise ValueError(f"no drafting rule for engine {engine!r}: "
                         f"{', '.join(n for n, e in engines().items() if e.drafting_rule)}")
    release, note = _surveyed(found.name, version)
    rule = drafting_table(found.name)["releases"][release]
    return found.drafting_rule(release, rule, architecture, algorithm.upper(), page_size, note)
