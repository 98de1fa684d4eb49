"""eagle3_nb: find out why an EAGLE-3 draft gets an accept length of ~1.0.

Import is light: heavy modules (torch, plotly, transformers) load only when a function needs them.
"""

from __future__ import annotations

import os
import sys


def _drop_working_directory_from_path() -> None:
    """`python -m eagle3_nb.cli` puts the working directory first on sys.path, so run from inside
    a downloaded checkpoint it would import that checkpoint's json.py, argparse.py or sglang.py
    before the real module. The kit is installed; it never needs the working directory."""
    if sys.flags.safe_path or not sys.argv or sys.argv[0] != "-m" or not sys.path:
        return
    if sys.path[0] in ("", os.getcwd()):
        del sys.path[0]


_drop_working_directory_from_path()

from eagle3_nb.errors import Eagle3NbError  # noqa: E402  (after the guard, on purpose)

__version__ = "0.1.0"
__all__ = ["Eagle3NbError", "__version__", "inspect_checkpoint"]


def __getattr__(name: str):
    if name == "inspect_checkpoint":
        from eagle3_nb.checks.load import inspect_checkpoint
        return inspect_checkpoint
    raise AttributeError(f"module 'eagle3_nb' has no attribute {name!r}")
