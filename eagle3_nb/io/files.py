"""Atomic files and directories: what the kit writes appears whole or not at all, and never
replaces what is already there unless asked. Used by convert and the report alike."""

from __future__ import annotations

import contextlib
import errno
import json
import math
import os
from pathlib import Path
from typing import Any, Iterator

from eagle3_nb.errors import Eagle3NbError, OutputExistsError

OWNER_NAME = ".eagle3nb-owner"   # inside every staging dir: who made it (pid, host)
# ctypes, shutil, signal, socket, tempfile and threading are imported where they are used:
# `inspect` needs only json_text from this module, and they cost it about 7 ms at start-up


def rename_noreplace(tmp: Path, dst: Path) -> None:
    """Atomic rename that never replaces an existing DST (renameat2 RENAME_NOREPLACE on Linux)."""
    import ctypes

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


def json_text(obj: Any, indent: int | None = 2) -> str:
    """Strict JSON: a NaN or infinite float (a statistic of a broken tensor) becomes null, since
    NaN and Infinity are not JSON and break the tools reading the output; the counts beside such
    values (n_nan, n_inf) say what was there. Byte for byte
    `json.dumps(_finite(obj), indent=indent, default=str, allow_nan=False)`."""
    if indent is None:
        return json.dumps(_finite(obj), default=str, allow_nan=False)
    writer = _Indented(indent)
    writer.value(obj, 0)
    return "".join(writer.out)


def _finite(obj: Any) -> Any:
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    return obj


_CONSTANTS = {None: "null", True: "true", False: "false"}


class _Indented:
    """json.dumps with an indent encodes in pure Python, a generator step per value (30 ms for
    an inspection's 1.3 MB); here each list or object holding only plain values (key rows,
    shapes: most of it) goes to the C encoder, whose item separator carries the indentation of
    its level, and only the nesting above them is walked in Python."""

    def __init__(self, indent: int):
        self.unit = " " * indent
        self.out: list[str] = []
        self.breaks: list[str] = []  # per level: "\n" and its indentation
        self.flat: list[Any] = []    # per level: the encoder of a plain list or object's items

    def value(self, o: Any, level: int) -> None:
        """O at nesting LEVEL, as json.encoder's _iterencode writes it (same order of tests)."""
        if isinstance(o, str):
            self.out.append(json.encoder.encode_basestring_ascii(o))
        elif o is None or o is True or o is False:
            self.out.append(_CONSTANTS[o])
        elif isinstance(o, int):
            self.out.append(int.__repr__(o))
        elif isinstance(o, float):
            self.out.append(float.__repr__(o) if math.isfinite(o) else "null")
        elif isinstance(o, (list, tuple)):
            self.container(o, o, level, "[]")
        elif isinstance(o, dict):
            self.container(o, o.values(), level, "{}")
        else:
            self.value(str(o), level)

    def container(self, o: Any, values: Any, level: int, brackets: str) -> None:
        if not o:
            self.out.append(brackets)
            return
        outer, inner = self._break(level), self.breaks[level + 1]
        if _plain(values):
            text = "".join(self.flat[level + 1](o))  # brackets, items joined by ",\n" + indent
            self.out.append(brackets[0] + inner + text[1:-1] + outer + brackets[1])
            return
        self.out.append(brackets[0] + inner)
        separator = "," + inner
        if brackets == "[]":
            for i, v in enumerate(o):
                if i:
                    self.out.append(separator)
                self.value(v, level + 1)
        else:
            for i, (k, v) in enumerate(o.items()):
                key = json.encoder.encode_basestring_ascii(_json_key(k)) + ": "
                self.out.append(separator + key if i else key)
                self.value(v, level + 1)
        self.out.append(outer + brackets[1])

    def _break(self, level: int) -> str:
        while len(self.breaks) <= level + 1:
            indentation = self.unit * len(self.breaks)
            self.breaks.append("\n" + indentation)
            self.flat.append(_flat_encoder(",\n" + indentation))
        return self.breaks[level]


def _flat_encoder(separator: str) -> Any:
    """A plain list or object -> its text in chunks: its items joined by SEPARATOR, in its
    brackets (no line break after the opening one or before the closing one)."""
    make = json.encoder.c_make_encoder
    if make is None:  # no C accelerator: the same bytes from the pure-Python encoder
        return json.JSONEncoder(separators=(separator, ": "), default=str,
                                allow_nan=False).iterencode
    encode = make(None, str, json.encoder.encode_basestring_ascii, None, ": ", separator,
                  False, False, False)
    return lambda o: encode(o, 0)


def _plain(values: Any) -> bool:
    """Every value a str, int, bool, None or finite float (no subclass, nothing to convert)."""
    for v in values:
        kind = type(v)
        if not (kind is str or kind is int or kind is bool or v is None
                or (kind is float and math.isfinite(v))):
            return False
    return True


def _json_key(key: Any) -> str:
    """An object key as json.encoder writes it."""
    if isinstance(key, str):
        return key
    if isinstance(key, float):
        if not math.isfinite(key):
            raise ValueError(f"Out of range float values are not JSON compliant: {key!r}")
        return float.__repr__(key)
    if key is None or key is True or key is False:
        return _CONSTANTS[key]
    if isinstance(key, int):
        return int.__repr__(key)
    raise TypeError(f"keys must be str, int, float, bool or None, not {type(key).__name__}")


def atomic_write_text(path: Path, text: str) -> None:
    """Write next to the destination, then rename: readers never see half a file. Replaces
    PATH; callers decide first that it may be replaced (create_text never replaces)."""
    tmp = _temp_beside(path, text)
    try:
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def create_text(path: Path, text: str) -> None:
    """Write a new file at PATH, whole or not at all: written beside it, then renamed without
    replacing anything (an existing PATH, a symbolic link included, raises OutputExistsError)."""
    if os.path.lexists(path):
        raise OutputExistsError("exists", str(path), "name a new file")
    tmp = _temp_beside(path, text)
    try:
        rename_noreplace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _temp_beside(path: Path, text: str) -> Path:
    """A new file (created exclusively: never through a link someone left there) holding TEXT,
    in PATH's directory, with the mode a plain open() would give it."""
    import tempfile

    fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".eagle3nb-tmp", dir=path.parent)
    tmp = Path(name)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            os.fchmod(fh.fileno(), 0o666 & ~_umask())
            fh.write(text)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return tmp


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


# ----------------------------------------------------------------------------- staging dirs
# A destination DEST is built in DEST's parent as .DEST.eagle3nb-tmp-XXXX and renamed into place;
# a replaced DEST waits as .DEST.eagle3nb-old-XXXX until the new one is in place. Each holds an
# owner file, so one left by a killed run is recognised (its pid is gone on this host) and
# removed by the next run; anything else there is never touched.

def staging_dir(dest: Path, purpose: str, error: type[Eagle3NbError] = Eagle3NbError) -> Path:
    """A fresh directory beside `dest` (same file system, so the final rename is atomic)."""
    import tempfile

    try:
        tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.eagle3nb-tmp-", dir=dest.parent))
    except OSError as exc:
        raise error(f"cannot create a directory next to the destination "
                            f"({exc.strerror})", str(dest.parent),
                            "choose a destination in a writable directory") from None
    write_owner(tmp, purpose)
    return tmp


def write_owner(path: Path, purpose: str) -> None:
    (path / OWNER_NAME).write_text(json.dumps({"pid": os.getpid(), "host": _host(),
                                               "purpose": purpose}) + "\n", encoding="utf-8")


def _owner_is_gone(owner_file: Path) -> bool:
    """True only when the file names a process of this host that no longer exists."""
    try:
        owner = json.loads(owner_file.read_text(encoding="utf-8"))
        pid, host = int(owner["pid"]), str(owner["host"])
    except (OSError, ValueError, KeyError, TypeError):
        return False
    return host == _host() and not _pid_alive(pid)


def _host() -> str:
    import socket

    return socket.gethostname()


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_stale_staging(dest: Path, kinds: tuple[str, ...] = ("old", "tmp")) -> list[str]:
    """Clear what killed runs left beside `dest` (provably stale only: the kit's owner file
    names a process of this host that is gone) and say what was done. A run killed between its
    two renames left dest missing and the previous directory aside: that one is put back, not
    removed. KINDS limits it to staging ("tmp") or set-aside ("old") directories."""
    import shutil

    done: list[str] = []
    if not dest.parent.is_dir():
        return done
    for kind in kinds:
        for path in sorted(dest.parent.glob(f".{dest.name}.eagle3nb-{kind}-*")):
            if not path.is_dir() or path.is_symlink() or not _owner_is_gone(path / OWNER_NAME):
                continue
            previous = path / "previous"
            if kind == "old" and previous.is_dir() and not os.path.lexists(dest):
                os.rename(previous, dest)
                done.append(f"restored {dest} from {path}, left by a killed run")
            shutil.rmtree(path, ignore_errors=True)
            done.append(f"removed {path}, left by a killed run")
    return done


@contextlib.contextmanager
def cleanup_on_signals() -> Iterator[None]:
    """Within the block, SIGTERM and SIGHUP unwind like Ctrl-C (KeyboardInterrupt), so the
    cleanup in `finally` and `except BaseException` clauses runs. SIGKILL cannot be caught:
    its leftovers are removed by the next run (remove_stale_staging)."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum, _frame):
        raise KeyboardInterrupt(f"signal {signum}")

    previous = {sig: signal.signal(sig, interrupt) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


@contextlib.contextmanager
def directory_lock(dest: Path) -> Iterator[None]:
    """One writer per destination: .DEST.eagle3nb-lock beside it, created exclusively. A lock
    whose owner is gone (a killed run) is taken over; a live one is refused."""
    lock = dest.parent / f".{dest.name}.eagle3nb-lock"
    for _ in range(2):
        try:
            fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            break
        except FileExistsError:
            if not _owner_is_gone(lock):
                raise OutputExistsError("another eagle3-nb run is writing here", str(dest),
                                        f"wait for it to finish, or pick another directory "
                                        f"(lock: {lock})") from None
            lock.unlink(missing_ok=True)
        except OSError as exc:
            raise Eagle3NbError(f"cannot write beside the destination ({exc.strerror})",
                                str(dest.parent), "choose a writable directory") from None
    else:
        raise OutputExistsError("another eagle3-nb run took the lock", str(dest), "try again")
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        json.dump({"pid": os.getpid(), "host": _host()}, fh)
    try:
        yield
    finally:
        lock.unlink(missing_ok=True)


def swap_in(staging: Path, dest: Path) -> Path | None:
    """Put the finished `staging` dir at `dest`. A missing or empty dest: one no-replace rename.
    An existing one is first renamed aside (returned, for the caller to clear what it knows)
    so that dest always holds a complete directory, the old one or the new one."""
    (staging / OWNER_NAME).unlink(missing_ok=True)
    fsync_dir(staging)
    if dest.is_dir() and not dest.is_symlink() and not any(dest.iterdir()):
        dest.rmdir()
    if not os.path.lexists(dest):
        rename_noreplace(staging, dest)
        fsync_dir(dest.parent)
        return None
    import tempfile

    old = Path(tempfile.mkdtemp(prefix=f".{dest.name}.eagle3nb-old-", dir=dest.parent))
    write_owner(old, "the report being replaced")
    aside = old / "previous"
    os.rename(dest, aside)
    os.rename(staging, dest)
    fsync_dir(dest.parent)
    return old
