"""Errors the kit raises on bad input.

Every message says what was wrong, where, and what to do. The CLI turns an Eagle3NbError into
one line on stderr and exit code 2, never a traceback.
"""

from __future__ import annotations


class Eagle3NbError(Exception):
    """Base class: a problem with the user's input that the user can act on."""

    def __init__(self, what: str, where: str | None = None, todo: str | None = None):
        self.what = what
        self.where = where
        self.todo = todo
        super().__init__(self.one_line())

    def one_line(self) -> str:
        parts = [self.what]
        if self.where:
            parts.insert(0, f"{self.where}:")
        if self.todo:
            parts.append(f"({self.todo})")
        return " ".join(parts)


class CheckpointError(Eagle3NbError):
    """The checkpoint directory or its files cannot be read as a draft checkpoint."""


class SafetensorsFormatError(CheckpointError):
    """A .safetensors file is truncated, corrupt or inconsistent."""


class ConfigError(Eagle3NbError):
    """config.json is missing, not JSON, or lacks what the kit needs."""


class UnsafeInputError(CheckpointError):
    """The input would need code execution, or points outside its directory."""


class EngineSpecError(Eagle3NbError):
    """An engine name or version that no profile covers."""


class OutputExistsError(Eagle3NbError):
    """A destination that must be new already exists."""


class ConversionError(Eagle3NbError):
    """A conversion that cannot be done, or failed while writing; nothing was written."""


class VerificationError(ConversionError):
    """The written copy does not prove equal to the source; it was removed."""


class DumpFormatError(Eagle3NbError):
    """A hidden-state dump file lacks a key, has inconsistent shapes, or cannot be read."""


class DraftIdOutOfRange(Eagle3NbError):
    """A drafted token maps (through d2t) outside the target vocabulary: engines index their
    embedding with it and stop on a device-side assert (docs/domain.md "d2t")."""


class ServingError(Eagle3NbError):
    """The server could not be reached or answered something the kit cannot use."""
