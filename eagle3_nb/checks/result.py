"""What a check returns: a result that says what it is.

A result declares its `kind` (one of findings.SUMMARY_KINDS) and the notebook that asks its
question. `to_json()` is its answer as `--json` prints it and the views show it; `summary()` is
its summary.json part (findings.summary_part), which the report reads by that kind. No torch, no
numpy: `inspect`'s path imports this.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from eagle3_nb.findings import SUMMARY_KINDS, summary_part


class CheckResult:
    kind: str = ""       # one of findings.SUMMARY_KINDS, set by each result class
    notebook: str = ""   # the notebook whose summary.json part this result is by default

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if cls.kind and cls.kind not in SUMMARY_KINDS:
            raise TypeError(f"{cls.__name__}.kind {cls.kind!r} is not one of {SUMMARY_KINDS}")

    def to_json(self) -> dict[str, Any]:
        raise NotImplementedError

    def summary_body(self) -> dict[str, Any]:
        """The part's fields besides its version, kind and notebook: the answer itself, unless
        the check digests it."""
        return self.to_json()

    def summary(self, notebook: str | None = None) -> dict[str, Any]:
        """The summary.json part of this answer, under NOTEBOOK (default: the check's own)."""
        return summary_part(self.kind, self.notebook if notebook is None else notebook,
                            self.summary_body())


@dataclass(frozen=True)
class JsonResult(CheckResult):
    """A check whose answer is built as JSON: the result holds that dict, and to_json returns
    it (not a copy)."""
    data: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        return self.data
