"""eagle3_nb: find out why an EAGLE-3 draft gets an accept length of ~1.0.

Import is light: heavy modules (torch, plotly, transformers) load only when a function needs them.
"""

from __future__ import annotations

from eagle3_nb.errors import Eagle3NbError

__version__ = "0.1.0"
__all__ = ["Eagle3NbError", "__version__", "inspect_checkpoint"]


def __getattr__(name: str):
    if name == "inspect_checkpoint":
        from eagle3_nb.checks.load import inspect_checkpoint
        return inspect_checkpoint
    raise AttributeError(f"module 'eagle3_nb' has no attribute {name!r}")
