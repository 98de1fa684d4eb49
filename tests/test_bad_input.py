"""Every kind of unusable input is an Eagle3NbError naming the file, exit 2, nothing written."""

import json
import os
import struct

import pytest

from conftest import write_draft_dir, write_raw_safetensors
from eagle3_nb.io.checkpoint import Checkpoint
from eagle3_nb.errors import (CheckpointError, ConfigError, Eagle3NbError, SafetensorsFormatError,
                              UnsafeInputError)


def _snapshot(root):
    return {p: (p.stat().st_size, p.stat().st_mtime_ns) for p in root.rglob("*")}


def _expect(run_cli, path, error_type, fragment):
    before = _snapshot(path.parent)
    with pytest.raises(error_type) as info:
        Checkpoint.open(path)
    assert fragment in str(info.value)
    code, out, err = run_cli("inspect", path, "--json")
    assert code == 2, (out, err)
    assert err.startswith("eagle3-nb: error:") and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1
    assert out == ""
    assert _snapshot(path.parent) == before  # nothing written, nothing touched
    return info.value


def test_truncated_file(tmp_path, run_cli):
    d = write_draft_dir(tmp_path / "d")
    st = d / "model.safetensors"
    st.write_bytes(st.read_bytes()[:-100])
    err = _expect(run_cli, d, SafetensorsFormatError, "model.safetensors")
    assert "truncated" in str(err)


def test_shorter_than_length_prefix(tmp_path, run_cli):
    d = write_draft_dir(tmp_path / "d")
    (d / "model.safetensors").write_bytes(b"\x01\x02")
    _expect(run_cli, d, SafetensorsFormatError, "8-byte header length")


def test_header_length_beyond_file(tmp_path, run_cli):
    d = write_draft_dir(tmp_path / "d")
    header = {"fc.weight": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}
    write_raw_safetensors(d / "model.safetensors", header, bytes(8), header_len=10_000)
    _expect(run_cli, d, SafetensorsFormatError, "runs past the end")


def test_header_length_absurd(tmp_path, run_cli):
    d = write_draft_dir(tmp_path / "d")
    (d / "model.safetensors").write_bytes(struct.pack("<Q", 1 << 40) + b"{}")
    _expect(run_cli, d, SafetensorsFormatError, "exceeds")


def test_header_not_json(tmp_path, run_cli):
    d = write_draft_dir(tmp_path / "d")
    raw = b"{not json"
    (d / "model.safetensors").write_bytes(struct.pack("<Q", len(raw)) + raw)
    _expect(run_cli, d, SafetensorsFormatError, "not valid UTF-8 JSON")


def test_offsets_overlap(tmp_path, run_cli):
    d = write_draft_dir(tmp_path / "d", tensors={
        "a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]},
        "b": {"dtype": "F32", "shape": [4], "data_offsets": [8, 24]}})
    _expect(run_cli, d, SafetensorsFormatError, "overlap")


def test_offsets_beyond_data(tmp_path, run_cli):
    d = write_draft_dir(tmp_path / "d")
    header = {"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}}
    write_raw_safetensors(d / "model.safetensors", header, bytes(8))
    _expect(run_cli, d, SafetensorsFormatError, "past the")


def test_size_disagrees_with_shape(tmp_path, run_cli):
    d = write_draft_dir(tmp_path / "d", tensors={
        "a": {"dtype": "F32", "shape": [3], "data_offsets": [0, 16]}})
    _expect(run_cli, d, SafetensorsFormatError, "12 expected")


def test_unknown_dtype(tmp_path, run_cli):
    d = write_draft_dir(tmp_path / "d", tensors={
        "a": {"dtype": "F128", "shape": [1], "data_offsets": [0, 16]}})
    _expect(run_cli, d, SafetensorsFormatError, "unknown dtype")


def test_config_not_json(tmp_path, run_cli):
    d = write_draft_dir(tmp_path / "d")
    (d / "config.json").write_text("{'python': 'dict'}")
    _expect(run_cli, d, ConfigError, "config.json is not valid JSON")


def test_config_missing(tmp_path, run_cli):
    d = write_draft_dir(tmp_path / "d")
    (d / "config.json").unlink()
    _expect(run_cli, d, ConfigError, "config.json not found")


def test_no_weights(tmp_path, run_cli):
    d = write_draft_dir(tmp_path / "d")
    (d / "model.safetensors").unlink()
    _expect(run_cli, d, CheckpointError, "no weight file")


def test_shard_index_outside_directory(tmp_path, run_cli):
    d = write_draft_dir(tmp_path / "d")
    outside = tmp_path / "elsewhere.safetensors"
    os.rename(d / "model.safetensors", outside)
    (d / "model.safetensors.index.json").write_text(json.dumps(
        {"weight_map": {"fc.weight": "../elsewhere.safetensors"}}))
    _expect(run_cli, d, UnsafeInputError, "outside the checkpoint directory")


def test_shard_index_absolute_path(tmp_path, run_cli):
    d = write_draft_dir(tmp_path / "d")
    (d / "model.safetensors.index.json").write_text(json.dumps(
        {"weight_map": {"fc.weight": str(d / "model.safetensors")}}))
    _expect(run_cli, d, UnsafeInputError, "absolute")


def test_symlink_out_of_directory(tmp_path, run_cli):
    d = write_draft_dir(tmp_path / "d")
    outside = tmp_path / "real.safetensors"
    os.rename(d / "model.safetensors", outside)
    os.symlink(outside, d / "model.safetensors")
    _expect(run_cli, d, UnsafeInputError, "outside the checkpoint directory")


def test_config_symlink_out_of_directory(tmp_path, run_cli):
    d = write_draft_dir(tmp_path / "d")
    outside = tmp_path / "config.json"
    os.rename(d / "config.json", outside)
    os.symlink(outside, d / "config.json")
    _expect(run_cli, d, UnsafeInputError, "outside the checkpoint directory")


class _Sneaky:
    def __reduce__(self):
        return (os.system, ("touch PWNED",))


def test_pickle_needing_more_than_weights_only(tmp_path, run_cli):
    import pickle

    import torch

    d = write_draft_dir(tmp_path / "d")
    (d / "model.safetensors").unlink()
    torch.save({"fc.weight": _Sneaky()}, d / "pytorch_model.bin")  # a torch zip archive
    _expect(run_cli, d, UnsafeInputError, "needs more than plain tensors")
    with open(d / "pytorch_model.bin", "wb") as fh:  # a bare pickle: refused before unpickling
        pickle.dump({"fc.weight": _Sneaky()}, fh)
    _expect(run_cli, d, UnsafeInputError, "not a torch zip archive")
    assert not (d / "PWNED").exists() and not (tmp_path / "PWNED").exists()


def test_every_error_is_an_eagle3nb_error():
    for cls in (CheckpointError, ConfigError, SafetensorsFormatError, UnsafeInputError):
        assert issubclass(cls, Eagle3NbError)


def test_path_is_a_file(tmp_path, run_cli):
    d = write_draft_dir(tmp_path / "d")
    _expect(run_cli, d / "config.json", CheckpointError, "is a file")
