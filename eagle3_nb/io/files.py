"""Atomic files and directories: what the kit writes appears whole or not at all, and never
replaces what is already there unless asked. Used by convert and the report alike."""

from __future__ import annotations

import ctypes
import errno
import os
from pathlib import Path

from eagle3_nb.errors import OutputExistsError


def rename_noreplace(tmp: Path, dst: Path) -> None:
    """Atomic rename that never replaces an existing DST (renameat2 RENAME_NOREPLACE on Linux)."""
    try:
        fn = ctypes.CDLL(None, use_errno=True).renameat2
        fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
        fn.restype = ctypes.c_int
    except (OSError, AttributeError):
        fn = None
    if fn is not None:
        at_fdcwd, rename_noreplace = -100, 1
        if fn(at_fdcwd, os.fsencode(tmp), at_fdcwd, os.fsencode(dst), rename_noreplace) == 0:
            return
        err = ctypes.get_errno()
        if err == errno.EEXIST:
            raise OutputExistsError("destination appeared during the conversion", str(dst),
                                    "choose a new directory")
        if err not in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP):
            raise OSError(err, os.strerror(err), str(dst))
    if os.path.lexists(dst):
        raise OutputExistsError("destination appeared during the conversion", str(dst),
                                "choose a new directory")
    os.rename(tmp, dst)


def fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def default_dir_mode() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return 0o777 & ~mask


def atomic_write_text(path: Path, text: str) -> None:
    """Write next to the destination, then rename: readers never see half a file."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
