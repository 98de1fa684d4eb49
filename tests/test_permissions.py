"""Files and folders the user may not read or write: one clear error, exit 2, no traceback,
nothing written. Root reads everything, so as root each case runs with the effective uid and gid
of `nobody` (seteuid, undone afterwards); as any other user, the modes alone decide."""

from __future__ import annotations

import os
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path

import pytest

from conftest import DRAFTS, TARGET_CONFIG
from eagle3_nb.cli import main

NOBODY = 65534


@contextmanager
def unprivileged():
    if os.geteuid() != 0:
        yield
        return
    os.setegid(NOBODY)
    os.seteuid(NOBODY)
    try:
        yield
    finally:
        os.seteuid(0)
        os.setegid(0)


@pytest.fixture
def shared_dir():
    """A folder `nobody` can enter (pytest's own tmp folders are root-only)."""
    d = Path(tempfile.mkdtemp(prefix="eagle3nb-perm-"))
    d.chmod(0o755)
    yield d
    for p in [d, *d.rglob("*")]:
        p.chmod(0o755 if p.is_dir() else 0o644)
    shutil.rmtree(d)


def draft_in(d: Path) -> Path:
    draft = d / "draft"
    shutil.copytree(DRAFTS / "good", draft)
    for p in [draft, *draft.rglob("*")]:
        p.chmod(0o755 if p.is_dir() else 0o644)
    return draft


def run(capsys, *args) -> tuple[int, str]:
    # every module the command may import, imported as root: `nobody` cannot read the
    # interpreter's own library here (it lives under /root)
    main(["inspect", str(DRAFTS / "good"), "--no-stats", "--json"])
    import eagle3_nb.report.run  # noqa: F401
    import papermill  # noqa: F401
    capsys.readouterr()
    with unprivileged():
        code = main([str(a) for a in args])
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return code, err


@pytest.mark.parametrize("what", ["config.json", "model.safetensors", "."])
def test_an_unreadable_input(shared_dir, capsys, what):
    draft = draft_in(shared_dir)
    (draft / what).chmod(0o000)
    code, err = run(capsys, "inspect", draft, "--no-stats")
    assert code == 2, err
    assert "permission denied" in err.lower(), err


def test_a_report_into_a_folder_it_may_not_write(shared_dir, capsys):
    draft = draft_in(shared_dir)
    parent = shared_dir / "reports"
    parent.mkdir()
    parent.chmod(0o555)
    code, err = run(capsys, "report", draft, "--target-config", TARGET_CONFIG,
                    "--out", parent / "r")
    assert code == 2, err
    assert list(parent.iterdir()) == []
