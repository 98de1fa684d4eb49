"""Bounds a torch.save file before torch.load reads it (stdlib only: no torch import).

torch.save writes a zip archive whose members are stored uncompressed: the pickle, one record
per storage, and a few small text records. torch.load trusts the archive's central directory
and the sizes the pickle declares, so a crafted file can make it allocate far more than the file
holds (a compressed member that inflates, members whose byte ranges overlap, or more members
than any checkpoint has). This check reads only the central directory, which the file's size
bounds, and refuses such files before anything is allocated. The legacy (pre-zip) format is
refused outright: its storages are sized by the pickle alone.
"""

from __future__ import annotations

import zipfile
from pathlib import Path

from eagle3_nb.errors import UnsafeInputError

MAX_MEMBERS = 1 << 17        # a checkpoint has one member per storage plus a handful
_CENTRAL_ENTRY_BYTES = 46    # the fixed part of one central-directory record


def check_torch_file(path: Path) -> None:
    """Raise UnsafeInputError unless `path` is a torch zip archive whose members are stored,
    fit the file, and do not overlap."""
    size = path.stat().st_size
    if not zipfile.is_zipfile(path):
        raise UnsafeInputError("not a torch zip archive (the legacy torch.save format, or not a "
                               "torch file at all)", str(path),
                               "re-save it with a current torch (torch.save writes zip archives "
                               "since 1.6), or better as safetensors")
    try:
        with zipfile.ZipFile(path) as archive:
            members = _bounded_members(archive, size, path)
    except UnsafeInputError:
        raise
    except Exception as exc:  # noqa: BLE001 - zipfile raises many types on foreign bytes
        raise UnsafeInputError(f"the zip archive is damaged ({type(exc).__name__}: "
                               f"{str(exc)[:120]})", str(path),
                               "the file is truncated or not a torch checkpoint") from None
    _refuse_overlaps(members, size, path)


def _bounded_members(archive: zipfile.ZipFile, size: int, path: Path) -> list[zipfile.ZipInfo]:
    members = archive.infolist()
    if len(members) > MAX_MEMBERS or len(members) * _CENTRAL_ENTRY_BYTES > size:
        raise UnsafeInputError(f"{len(members)} archive members: more than a checkpoint has or "
                               "than the file can describe", str(path),
                               "this is not a torch checkpoint as torch.save writes one")
    for m in members:
        if m.compress_type != zipfile.ZIP_STORED:
            raise UnsafeInputError(f"member {m.filename[:80]!r} is compressed (torch.save stores "
                                   "every member as is): its real size is unknown until it is "
                                   "inflated", str(path), "re-save it with torch.save")
        if m.file_size != m.compress_size or m.header_offset + m.compress_size > size:
            raise UnsafeInputError(f"member {m.filename[:80]!r} declares {m.file_size} bytes, "
                                   "more than the file holds", str(path),
                                   "the file is damaged or crafted; re-save it")
    return members


def _refuse_overlaps(members: list[zipfile.ZipInfo], size: int, path: Path) -> None:
    """Members whose data ranges overlap would let one stretch of bytes count many times."""
    spans = sorted((m.header_offset, m.header_offset + 30 + len(m.filename) + m.compress_size)
                   for m in members)
    for (_, end), (start, _) in zip(spans, spans[1:]):
        if start < end:
            raise UnsafeInputError("archive members overlap: the same bytes are declared "
                                   "several times", str(path), "the file is crafted; re-save it")
    if sum(m.compress_size for m in members) > size:
        raise UnsafeInputError("the archive's members add up to more than the file", str(path),
                               "the file is damaged or crafted; re-save it")
