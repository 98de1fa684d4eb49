"""Progress of a long simulation: a tqdm bar for someone watching it, none in a notebook the
report runs headless (a bar there is saved as a dead widget), and there, when the report relays
progress (PROGRESS_FILE_VARIABLE), a line now and then appended to the file it names: the
report prints those lines under the notebook's own (report/relay.py)."""

from __future__ import annotations

import os
import time
from pathlib import Path

from eagle3_nb.defaults import PROGRESS_FILE_VARIABLE, PROGRESS_VARIABLE

LINE_EVERY_S = 5.0   # a relayed line at most this often, and one when the run ends


def progress_bar(total: int, enabled: bool | None, desc: str):
    """A bar counting finished prompts when asked, or by default when the run is long enough to
    wait on (more than 8 prompts) and someone watches: relayed lines in a notebook the report
    runs, nothing when progress is off (PROGRESS_VARIABLE)."""
    if enabled is None:
        if total <= 8:
            return NoBar()
        relay = os.environ.get(PROGRESS_FILE_VARIABLE)
        if relay:
            return ProgressLines(total, desc, Path(relay))
        enabled = os.environ.get(PROGRESS_VARIABLE) != "off"
    if not enabled:
        return NoBar()
    from tqdm.auto import tqdm
    return tqdm(total=total, desc=desc, unit="prompt", leave=False)


class NoBar:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def update(self, n: int = 1) -> None:
        pass


class ProgressLines(NoBar):
    """update() as a bar's; "DESC: n/total prompts (s)" appended to PATH every LINE_EVERY_S
    seconds and when the last prompt is done. A line that cannot be written is dropped:
    progress never stops a run."""

    def __init__(self, total: int, desc: str, path: Path):
        self.total, self.desc, self.path = total, desc, path
        self.done, self.start = 0, time.monotonic()
        self.last = self.start

    def update(self, n: int = 1) -> None:
        self.done += n
        now = time.monotonic()
        if self.done >= self.total or now - self.last >= LINE_EVERY_S:
            self.last = now
            self._write(f"{self.desc}: {self.done}/{self.total} prompts "
                        f"({now - self.start:.0f} s)")

    def _write(self, line: str) -> None:
        try:
            with open(self.path, "a", encoding="utf-8") as out:
                out.write(line + "\n")
        except OSError:
            pass
