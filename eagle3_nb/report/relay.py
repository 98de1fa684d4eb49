"""The notebooks' progress on the report's terminal: while the report's kernel runs, it writes
progress lines to a file only this run knows (eagle3_nb.progress, PROGRESS_FILE_VARIABLE, which
the kernel inherits), and a thread prints each new line under the notebook's own line."""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator

from eagle3_nb.defaults import PROGRESS_FILE_VARIABLE

POLL_S = 0.5
INDENT = "      "


class ProgressRelay:
    """Prints the lines appended to PATH with SAY; `drain()` prints what has come so far (the
    report drains before it prints a notebook's closing line, so its lines stay above it)."""

    def __init__(self, path: Path, say: Callable[[str], None]):
        self.path, self.say = path, say
        self._offset, self._partial = 0, b""
        self._lock = threading.Lock()

    def drain(self) -> None:
        with self._lock:
            try:
                with open(self.path, "rb") as source:
                    source.seek(self._offset)
                    data = source.read()
            except OSError:
                return
            self._offset += len(data)
            *lines, self._partial = (self._partial + data).split(b"\n")
            for line in lines:
                self.say(INDENT + line.decode("utf-8", "replace"))

    def follow(self, stop: threading.Event) -> None:
        while not stop.wait(POLL_S):
            self.drain()


@contextmanager
def relayed_progress(say: Callable[[str], None]) -> Iterator[ProgressRelay]:
    """PROGRESS_FILE_VARIABLE set for the kernels started inside (restored after), and a thread
    printing their lines with SAY."""
    folder = Path(tempfile.mkdtemp(prefix="eagle3nb-progress-"))
    relay = ProgressRelay(folder / "lines", say)
    relay.path.touch()
    saved = os.environ.get(PROGRESS_FILE_VARIABLE)
    os.environ[PROGRESS_FILE_VARIABLE] = str(relay.path)
    stop = threading.Event()
    thread = threading.Thread(target=relay.follow, args=(stop,), daemon=True)
    thread.start()
    try:
        yield relay
    finally:
        stop.set()
        thread.join()
        relay.drain()
        if saved is None:
            os.environ.pop(PROGRESS_FILE_VARIABLE, None)
        else:
            os.environ[PROGRESS_FILE_VARIABLE] = saved
        shutil.rmtree(folder, ignore_errors=True)
