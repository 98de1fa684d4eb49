"""torch.save files from anywhere: the central directory is checked before torch.load allocates.

A compressed member (a zip bomb: torch.load would inflate it), members whose byte ranges overlap,
more members than a checkpoint has, and the legacy pre-zip format are each one clear error, exit
2, nothing loaded. Before eagle3_nb/io/torchfile.py, torch.load read all of them."""

from __future__ import annotations

import shutil
import struct
import time
import zipfile
from pathlib import Path

import pytest

from conftest import DRAFTS
from eagle3_nb.cli import main
from eagle3_nb.errors import UnsafeInputError
from eagle3_nb.io import torchfile
from eagle3_nb.io.torchfile import check_torch_file

torch = pytest.importorskip("torch")
GOOD_BIN = DRAFTS / "pickle-bin" / "pytorch_model.bin"


def bin_draft(tmp_path: Path, write) -> Path:
    """The pickle-bin sample with its weight file replaced by what `write(path)` makes."""
    draft = tmp_path / "draft"
    shutil.copytree(DRAFTS / "pickle-bin", draft)
    (draft / "pytorch_model.bin").unlink()
    write(draft / "pytorch_model.bin")
    return draft


def zip_bomb(path: Path, inflated: int = 64 << 20) -> None:
    """A torch-like archive whose storage member is deflated: 64 MiB of zeros in ~64 KiB."""
    good = zipfile.ZipFile(GOOD_BIN)
    with zipfile.ZipFile(path, "w") as out:
        for m in good.infolist():
            out.writestr(m.filename, good.read(m.filename))
        out.writestr("pytorch_model/data/999", b"\0" * inflated, zipfile.ZIP_DEFLATED)


def overlapping(path: Path) -> None:
    """Two central-directory entries pointing at the same local record."""
    with zipfile.ZipFile(path, "w") as out:
        out.writestr("archive/data.pkl", b"x" * 4096)
        out.writestr("archive/data/0", b"y" * 4096)
    raw = bytearray(path.read_bytes())
    second = raw.rindex(b"PK\x01\x02")          # the last central entry
    struct.pack_into("<I", raw, second + 42, 0)  # its local-header offset -> the first record
    path.write_bytes(bytes(raw))


def legacy(path: Path) -> None:
    torch.save({"fc.weight": torch.zeros(2, 2)}, path, _use_new_zipfile_serialization=False)


def cli(capsys, *args) -> tuple[int, str]:
    code = main([str(a) for a in args])
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return code, err


@pytest.mark.parametrize("write, says", [(zip_bomb, "is compressed"),
                                         (overlapping, "overlap"),
                                         (legacy, "legacy torch.save format")])
def test_a_hostile_weight_file_is_refused_before_loading(tmp_path, capsys, write, says):
    draft = bin_draft(tmp_path, write)
    t0 = time.monotonic()
    code, err = cli(capsys, "inspect", draft, "--no-stats")
    assert code == 2 and says in err, err
    assert time.monotonic() - t0 < 20


def test_more_members_than_a_checkpoint_has(tmp_path, monkeypatch):
    monkeypatch.setattr(torchfile, "MAX_MEMBERS", 8)
    path = tmp_path / "many.bin"
    with zipfile.ZipFile(path, "w") as out:
        for i in range(9):
            out.writestr(f"archive/data/{i}", b"z" * 64)
    with pytest.raises(UnsafeInputError, match="9 archive members"):
        check_torch_file(path)


def test_what_torch_save_writes_passes(tmp_path):
    check_torch_file(GOOD_BIN)
    path = tmp_path / "state.pt"
    torch.save({f"w{i}": torch.randn(3, 5) for i in range(40)}, path)
    check_torch_file(path)


def test_a_specforge_dump_zip_bomb_is_refused(tmp_path):
    from eagle3_nb.target import read_specforge_dump

    path = tmp_path / "data_0.ckpt"
    zip_bomb(path)
    with pytest.raises(UnsafeInputError, match="is compressed"):
        read_specforge_dump(path)


def sparse_dump(path: Path, nbytes: int) -> None:
    import json
    entries = {"hidden_states": {"dtype": "BF16", "shape": [nbytes // 2 // 256, 4, 64],
                                 "data_offsets": [0, nbytes // 2 // 256 * 4 * 64 * 2]},
               "token_ids": {"dtype": "I64", "shape": [nbytes // 2 // 256],
                             "data_offsets": [nbytes // 2 // 256 * 512,
                                              nbytes // 2 // 256 * 512 + nbytes // 2 // 256 * 8]}}
    raw = json.dumps(entries).encode()
    raw += b" " * (-len(raw) % 8)
    end = entries["token_ids"]["data_offsets"][1]
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(raw)) + raw)
        f.truncate(8 + len(raw) + end)


def test_a_3_gib_dump_is_refused_from_its_header(tmp_path, capsys):
    """Before: `accept --hidden-states` read the sparse 3 GiB file whole (9.7 GB, then a
    traceback)."""
    dumps = tmp_path / "dumps"
    dumps.mkdir()
    sparse_dump(dumps / "hs_0.safetensors", 3 << 30)
    t0 = time.monotonic()
    code, err = cli(capsys, "accept", DRAFTS / "good", "--hidden-states", dumps,
                    "--target", DRAFTS.parent / "target", "--json")
    assert code == 2 and "GiB" in err and "one prompt per file" in err, err
    assert time.monotonic() - t0 < 30


def test_report_checks_the_dumps_before_any_notebook(tmp_path, capsys):
    dumps = tmp_path / "dumps"
    dumps.mkdir()
    sparse_dump(dumps / "hs_0.safetensors", 3 << 30)
    out = tmp_path / "report"
    code, err = cli(capsys, "report", DRAFTS / "good", "--hidden-states", dumps,
                    "--target-config", DRAFTS.parent / "target" / "config.json", "--out", out)
    assert code == 2 and "one prompt per file" in err, err
    assert not out.exists() and sorted(p.name for p in tmp_path.iterdir()) == ["dumps"]
