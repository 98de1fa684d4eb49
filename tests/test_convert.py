"""convert_checkpoint: byte-for-byte, atomic, provenance-recorded, never touching the source."""

import hashlib
import json
import tempfile
import os
import struct

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import save_file

import eagle3_nb.convert as convert
import eagle3_nb.io.safetensors as safetensors_io
from eagle3_nb.io.checkpoint import Checkpoint, sha256_file
from eagle3_nb.config import parse_config
from eagle3_nb.convert import (PROVENANCE_NAME, ConversionError, VerificationError,
                               convert_checkpoint)
from eagle3_nb.errors import Eagle3NbError, EngineSpecError, OutputExistsError

H, V, VD, INTER, NH, NKV, HD = 8, 40, 20, 16, 2, 1, 4


def _layer(prefix: str, first: bool, g) -> dict:
    width = 2 * H if first else H
    t = {f"{prefix}self_attn.q_proj.weight": torch.randn(NH * HD, width, generator=g).bfloat16(),
         f"{prefix}self_attn.k_proj.weight": torch.randn(NKV * HD, width, generator=g).bfloat16(),
         f"{prefix}self_attn.v_proj.weight": torch.randn(NKV * HD, width, generator=g).bfloat16(),
         f"{prefix}self_attn.o_proj.weight": torch.randn(H, NH * HD, generator=g).bfloat16(),
         f"{prefix}mlp.gate_proj.weight": torch.randn(INTER, H, generator=g).bfloat16(),
         f"{prefix}mlp.up_proj.weight": torch.randn(INTER, H, generator=g).bfloat16(),
         f"{prefix}mlp.down_proj.weight": torch.randn(H, INTER, generator=g).bfloat16(),
         f"{prefix}input_layernorm.weight": torch.rand(H, generator=g),
         f"{prefix}post_attention_layernorm.weight": torch.rand(H, generator=g)}
    if first:
        t[f"{prefix}hidden_norm.weight"] = torch.rand(H, generator=g)
    return t


def _tensors(layer0: str = "midlayer.", wrapper: str = "", n_layers: int = 1, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    ids = torch.tensor(sorted(torch.randperm(V, generator=g)[:VD].tolist()))
    t = {"fc.weight": torch.randn(H, 3 * H, generator=g), "norm.weight": torch.rand(H, generator=g),
         "lm_head.weight": torch.randn(VD, H, generator=g).half(),
         "d2t": ids - torch.arange(VD), "t2d": torch.zeros(V, dtype=torch.bool)}
    t["t2d"][ids] = True
    t.update(_layer(layer0, True, g))
    for i in range(1, n_layers):
        t.update(_layer(f"layers.{i}.", False, g))
    return {wrapper + k: v for k, v in t.items()}


def _flat_config(**extra) -> dict:
    cfg = {"architectures": ["LlamaForCausalLMEagle3"], "model_type": "llama", "hidden_size": H,
           "num_attention_heads": NH, "num_key_value_heads": NKV, "head_dim": HD,
           "intermediate_size": INTER, "vocab_size": V, "draft_vocab_size": VD,
           "num_hidden_layers": 1, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
           "max_position_embeddings": 2048, "hidden_act": "silu", "tie_word_embeddings": False,
           "eagle_config": {"eagle_aux_hidden_state_layer_ids": [1, 15, 28],
                            "use_aux_hidden_state": True}}
    cfg.update(extra)
    return cfg


def _spec_config(ids=(2, 16, 29), n_layers: int = 1, **extra) -> dict:
    cfg = {"architectures": ["Eagle3DraftModel"], "auto_map": {"": "config.Eagle3SpeculatorConfig"},
           "speculators_model_type": "eagle3", "speculators_version": "0.9.0",
           "draft_vocab_size": VD, "target_hidden_size": None, "dtype": "float32",
           "norm_before_residual": True, "norm_before_fc": False, "fc_norm": False,
           "norm_output": False, "embed_requires_grad": False, "tie_word_embeddings": False,
           "speculators_config": {"algorithm": "eagle3", "verifier": {
               "architectures": ["LlamaForCausalLM"], "name_or_path": "meta-llama/Llama-3.1-8B"}},
           "transformer_layer_config": {
               "model_type": "llama", "hidden_size": H, "num_attention_heads": NH,
               "num_key_value_heads": NKV, "head_dim": HD, "intermediate_size": INTER,
               "vocab_size": V, "num_hidden_layers": n_layers, "rms_norm_eps": 1e-5,
               "rope_parameters": {"rope_theta": 10000.0, "rope_type": "default"},
               "max_position_embeddings": 2048, "tie_word_embeddings": False}}
    if ids is not None:
        cfg["eagle_aux_hidden_state_layer_ids"] = list(ids)
    cfg.update(extra)
    return cfg


def _make(root, tensors, config, code: bool = False):
    root.mkdir(parents=True)
    save_file(tensors, str(root / "model.safetensors"), metadata={"format": "pt"})
    (root / "config.json").write_text(json.dumps(config))
    if code:
        (root / "config.py").write_text("raise SystemExit('never executed')\n")
    return root


def _make_sharded(root, tensors, config):
    root.mkdir(parents=True)
    names = sorted(tensors)
    split = {"model-00001-of-00002.safetensors": names[::2],
             "model-00002-of-00002.safetensors": names[1::2]}
    weight_map = {}
    for shard, keys in split.items():
        save_file({k: tensors[k] for k in keys}, str(root / shard), metadata={"format": "pt"})
        weight_map.update({k: shard for k in keys})
    total = sum(t.numel() * t.element_size() for t in tensors.values())
    (root / "model.safetensors.index.json").write_text(json.dumps(
        {"metadata": {"total_size": total}, "weight_map": weight_map}))
    (root / "config.json").write_text(json.dumps(config))
    return root, split


def _snapshot(root):
    """sha256, size and mtime of every file below root."""
    return {p.relative_to(root).as_posix(): (sha256_file(p), p.stat().st_size, p.stat().st_mtime_ns)
            for p in sorted(root.rglob("*")) if p.is_file()}


def _bytes_by_key(root) -> dict[str, bytes]:
    """name -> raw data bytes of every tensor, through the reference reader."""
    out = {}
    for f in sorted(root.glob("*.safetensors")):
        with safe_open(str(f), framework="pt") as fh:
            for k in fh.keys():
                t = fh.get_tensor(k).contiguous().reshape(-1)
                out[k] = (str(t.dtype), t.view(torch.uint8).numpy().tobytes())
    return out


def _strip(name: str) -> str:
    return name.removeprefix("model.")


# ------------------------------------------------------------------------------------------------


def test_round_trip_eagle_speculators_eagle(tmp_path):
    src = _make(tmp_path / "src", _tensors(), _flat_config())
    before = _snapshot(src)
    r1 = convert_checkpoint(src, tmp_path / "spec", to="speculators")
    r2 = convert_checkpoint(tmp_path / "spec", tmp_path / "back", to="eagle")
    assert r1.verified and r2.verified
    orig, spec, back = (_bytes_by_key(tmp_path / d) for d in ("src", "spec", "back"))
    assert set(back) == set(orig)
    assert back == orig                               # identical dtypes and bytes per key
    assert all(k.startswith("layers.0.") for k in spec if "proj" in k or "layernorm" in k)
    assert sorted(spec.values()) == sorted(orig.values())
    assert r1.renames["midlayer.self_attn.q_proj.weight"] == "layers.0.self_attn.q_proj.weight"
    assert r2.renames["layers.0.self_attn.q_proj.weight"] == "midlayer.self_attn.q_proj.weight"
    assert _snapshot(src) == before
    spec_cfg = json.loads((tmp_path / "spec" / "config.json").read_text())
    assert spec_cfg["speculators_model_type"] == "eagle3"
    assert spec_cfg["architectures"] == ["Eagle3DraftModel"]
    assert spec_cfg["transformer_layer_config"]["hidden_size"] == H
    assert spec_cfg["norm_before_residual"] is False          # SafeAILab trains this way
    assert "auto_map" not in spec_cfg and "verifier" not in spec_cfg["speculators_config"]
    back_cfg = json.loads((tmp_path / "back" / "config.json").read_text())
    assert back_cfg["architectures"] == ["LlamaForCausalLMEagle3"]
    assert back_cfg["eagle_config"]["eagle_aux_hidden_state_layer_ids"] == [1, 15, 28]
    assert "transformer_layer_config" not in back_cfg and "speculators_config" not in back_cfg
    for d in ("spec", "back"):
        parse_config(json.loads((tmp_path / d / "config.json").read_text()))
        Checkpoint.open(tmp_path / d)


def test_unchanged_names_reproduce_the_reference_file(tmp_path):
    src = _make(tmp_path / "src", _tensors(), _flat_config())
    convert_checkpoint(src, tmp_path / "out", engine="vllm==0.33")
    assert (tmp_path / "out" / "model.safetensors").read_bytes() == \
        (src / "model.safetensors").read_bytes()
    raw = (tmp_path / "out" / "model.safetensors").read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    assert n % 8 == 0


def test_prefixes_stripped_and_legacy_names(tmp_path):
    t = _tensors(wrapper="model.")
    t["module.aux_norm_low.weight"] = torch.ones(H)
    src = _make(tmp_path / "src", t, _flat_config())
    r = convert_checkpoint(src, tmp_path / "out", to="speculators")
    keys = set(_bytes_by_key(tmp_path / "out"))
    assert not any(k.startswith(("model.", "module.")) for k in keys)
    assert "fc_norm.0.weight" in keys and "layers.0.hidden_norm.weight" in keys
    assert r.renames["module.aux_norm_low.weight"] == "fc_norm.0.weight"
    assert r.renames["model.fc.weight"] == "fc.weight"
    out = _bytes_by_key(tmp_path / "out")
    src_bytes = _bytes_by_key(src)
    for old, new in r.renames.items():
        assert out[new] == src_bytes[old]


def test_engine_targets(tmp_path):
    src = _make(tmp_path / "src", _tensors(layer0="layers.0.", wrapper="model."), _flat_config())
    r = convert_checkpoint(src, tmp_path / "old", engine="sglang==0.5.9")
    assert r.target.keys == "midlayer" and r.target.config == "flat"
    assert "midlayer.self_attn.q_proj.weight" in _bytes_by_key(tmp_path / "old")
    r = convert_checkpoint(src, tmp_path / "new", engine="sglang==0.5.23")
    keys = _bytes_by_key(tmp_path / "new")
    assert "layers.0.self_attn.q_proj.weight" in keys and r.target.config == "flat"
    new_cfg = json.loads((tmp_path / "new" / "config.json").read_text())
    assert parse_config(new_cfg).dialect == "flat"
    r = convert_checkpoint(src, tmp_path / "vllm", engine="vllm==0.33")
    assert set(_bytes_by_key(tmp_path / "vllm")) == {_strip(k) for k in _bytes_by_key(src)}
    with pytest.raises(ConversionError, match="no target given"):
        convert_checkpoint(src, tmp_path / "none")
    with pytest.raises(EngineSpecError):
        convert_checkpoint(src, tmp_path / "bad", engine="tgi==1.0")
    with pytest.raises(ConversionError):
        convert_checkpoint(src, tmp_path / "bad", to="medusa")
    assert not (tmp_path / "none").exists() and not (tmp_path / "bad").exists()


def test_speculators_to_sglang_flat(tmp_path):
    src = _make(tmp_path / "src", _tensors(layer0="layers.0."), _spec_config(), code=True)
    r = convert_checkpoint(src, tmp_path / "out", to="eagle")
    cfg = json.loads((tmp_path / "out" / "config.json").read_text())
    assert cfg["architectures"] == ["LlamaForCausalLMEagle3"] and cfg["model_type"] == "llama"
    assert cfg["hidden_size"] == H and cfg["vocab_size"] == V and cfg["draft_vocab_size"] == VD
    assert cfg["rope_parameters"] == {"rope_theta": 10000.0, "rope_type": "default"}
    assert cfg["eagle_config"] == {"eagle_aux_hidden_state_layer_ids": [1, 15, 28],
                                   "use_aux_hidden_state": True, "norm_before_fc": False}
    assert cfg["norm_before_residual"] is True and cfg["fc_norm"] is False
    assert "target_hidden_size" not in cfg            # null is not written
    assert not any(k.startswith("speculators") or k == "auto_map" for k in cfg)
    assert not list((tmp_path / "out").glob("*.py"))
    assert any("config.py" in w for w in r.warnings)
    assert any("norm_before_residual" in w for w in r.warnings)
    change = {c.key: c for c in r.config_changes}
    ids = change["eagle_config.eagle_aux_hidden_state_layer_ids"]
    assert ids.old == [2, 16, 29] and ids.new == [1, 15, 28] and "+1" in ids.reason
    assert change["auto_map"].new is convert.ABSENT
    assert r.checks["aux_same"] and r.checks["aux_hidden_states_after"] == [2, 16, 29]


@pytest.mark.parametrize("flat_ids,spec_ids", [([1, 15, 28], [2, 16, 29]),
                                               ([2, 16, 29], [2, 16, 29]),
                                               (None, None)])
def test_aux_ids_flat_to_speculators(tmp_path, flat_ids, spec_ids):
    eagle = {"use_aux_hidden_state": True}
    if flat_ids is not None:
        eagle["eagle_aux_hidden_state_layer_ids"] = flat_ids
    src = _make(tmp_path / "src", _tensors(), _flat_config(eagle_config=eagle))
    r = convert_checkpoint(src, tmp_path / "out", to="speculators")
    cfg = json.loads((tmp_path / "out" / "config.json").read_text())
    assert cfg.get("eagle_aux_hidden_state_layer_ids") == spec_ids
    if flat_ids is not None:
        change = next(c for c in r.config_changes if c.key == "eagle_aux_hidden_state_layer_ids")
        assert change.old == flat_ids and change.new == spec_ids and change.reason


@pytest.mark.parametrize("spec_ids,flat_ids", [([2, 16, 29], [1, 15, 28]),
                                               ([3, 16, 29], [2, 15, 28]),
                                               (None, None)])
def test_aux_ids_speculators_to_flat(tmp_path, spec_ids, flat_ids):
    src = _make(tmp_path / "src", _tensors(layer0="layers.0."), _spec_config(ids=spec_ids))
    r = convert_checkpoint(src, tmp_path / "out", to="eagle")
    cfg = json.loads((tmp_path / "out" / "config.json").read_text())
    assert cfg["eagle_config"].get("eagle_aux_hidden_state_layer_ids") == flat_ids
    ambiguous = [w for w in r.warnings if "ambiguous" in w]
    # a flat list that starts at 2 reads as 'input to layer' ids: the kit says so
    assert bool(ambiguous) == (spec_ids == [3, 16, 29])


def test_aux_id_zero_is_refused(tmp_path):
    src = _make(tmp_path / "src", _tensors(layer0="layers.0."), _spec_config(ids=[0, 16, 29]))
    listing = sorted(p.name for p in tmp_path.iterdir())
    with pytest.raises(ConversionError, match="hidden_states index 0"):
        convert_checkpoint(src, tmp_path / "out", to="eagle")
    assert sorted(p.name for p in tmp_path.iterdir()) == listing


def test_destination_exists(tmp_path):
    src = _make(tmp_path / "src", _tensors(), _flat_config())
    dst = tmp_path / "dst"
    dst.mkdir()
    (dst / "keep.txt").write_text("mine")
    before_src, before_dst = _snapshot(src), _snapshot(dst)
    listing = sorted(p.name for p in tmp_path.iterdir())
    for d in (dst, tmp_path / "empty"):
        d.mkdir(exist_ok=True)
        with pytest.raises(OutputExistsError):
            convert_checkpoint(src, d, to="speculators")
    assert _snapshot(src) == before_src and _snapshot(dst) == before_dst
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(listing + ["empty"])
    assert not list((tmp_path / "empty").iterdir())


def test_destination_inside_source_refused(tmp_path):
    src = _make(tmp_path / "src", _tensors(), _flat_config())
    before = _snapshot(src)
    with pytest.raises(ConversionError, match="inside the source"):
        convert_checkpoint(src, src / "converted", to="speculators")
    assert _snapshot(src) == before and not (src / "converted").exists()


def _no_leftovers(tmp_path, names):
    assert sorted(p.name for p in tmp_path.iterdir()) == names


def test_failure_mid_write_leaves_nothing(tmp_path, monkeypatch):
    src = _make(tmp_path / "src", _tensors(), _flat_config())
    before = _snapshot(src)
    calls = {"n": 0}
    real = safetensors_io.copy_tensor

    def flaky(*args):
        calls["n"] += 1
        if calls["n"] == 3:
            raise OSError(28, "No space left on device")
        return real(*args)
    monkeypatch.setattr(safetensors_io, "copy_tensor", flaky)
    with pytest.raises(ConversionError, match="No space left") as info:
        convert_checkpoint(src, tmp_path / "out", to="speculators")
    assert isinstance(info.value, Eagle3NbError) and "nothing was written" in str(info.value)
    _no_leftovers(tmp_path, ["src"])
    assert _snapshot(src) == before


def test_failed_proof_leaves_nothing(tmp_path, monkeypatch):
    src = _make(tmp_path / "src", _tensors(), _flat_config())
    monkeypatch.setattr("eagle3_nb.convert.verify.tensor_sha256", lambda *args: "0" * 64)
    with pytest.raises(VerificationError, match="data bytes differ"):
        convert_checkpoint(src, tmp_path / "out", to="speculators")
    _no_leftovers(tmp_path, ["src"])


def test_failed_rename_leaves_nothing(tmp_path, monkeypatch):
    src = _make(tmp_path / "src", _tensors(), _flat_config())

    def boom(a, b):
        raise OSError(18, "Invalid cross-device link")
    monkeypatch.setattr(convert, "rename_noreplace", boom)
    with pytest.raises(ConversionError):
        convert_checkpoint(src, tmp_path / "out", to="eagle")
    _no_leftovers(tmp_path, ["src"])


def test_source_changed_during_conversion_fails(tmp_path, monkeypatch):
    src = _make(tmp_path / "src", _tensors(), _flat_config())
    real = Checkpoint.hash_files
    calls = {"n": 0}

    def drifting(self):
        calls["n"] += 1
        out = real(self)
        if calls["n"] == 2:
            out["config.json"] = "f" * 64
        return out
    monkeypatch.setattr(Checkpoint, "hash_files", drifting)
    with pytest.raises(ConversionError, match="changed during the conversion"):
        convert_checkpoint(src, tmp_path / "out", to="speculators")
    _no_leftovers(tmp_path, ["src"])


def test_sharded_in_sharded_out(tmp_path):
    tensors = _tensors(wrapper="draft_model.")
    src, split = _make_sharded(tmp_path / "src", tensors, _flat_config())
    before = _snapshot(src)
    r = convert_checkpoint(src, tmp_path / "out", to="speculators")
    out = tmp_path / "out"
    index = json.loads((out / "model.safetensors.index.json").read_text())
    assert sorted(p.name for p in out.glob("*.safetensors")) == sorted(split)
    for shard, keys in split.items():
        expected = {r.renames.get(k, k) for k in keys}
        with safe_open(str(out / shard), framework="pt") as fh:
            assert set(fh.keys()) == expected
        assert {k for k, v in index["weight_map"].items() if v == shard} == expected
    assert index["metadata"]["total_size"] == sum(t.numel() * t.element_size()
                                                  for t in tensors.values())
    ckpt = Checkpoint.open(out)
    assert ckpt.format == "safetensors-sharded"
    assert r.checks["format"] == "safetensors-sharded"
    assert r.checks["tensors_checked"] == len(tensors)
    assert _snapshot(src) == before


def test_pickle_source(tmp_path):
    tensors = _tensors(wrapper="module.")
    src = tmp_path / "src"
    src.mkdir()
    torch.save(tensors, src / "pytorch_model.bin")
    (src / "config.json").write_text(json.dumps(_flat_config()))
    before = _snapshot(src)
    r = convert_checkpoint(src, tmp_path / "out", to="eagle")
    out = _bytes_by_key(tmp_path / "out")
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == \
        ["config.json", PROVENANCE_NAME, "model.safetensors"]
    for old, t in tensors.items():
        flat = t.contiguous().reshape(-1)
        assert out[r.renames.get(old, old)] == (str(t.dtype),
                                                flat.view(torch.uint8).numpy().tobytes())
    assert _snapshot(src) == before


def test_multi_layer_to_eagle_warns(tmp_path):
    src = _make(tmp_path / "src", _tensors(layer0="layers.0.", n_layers=2),
                _spec_config(n_layers=2))
    r = convert_checkpoint(src, tmp_path / "out", to="eagle")
    keys = set(_bytes_by_key(tmp_path / "out"))
    assert "midlayer.self_attn.q_proj.weight" in keys
    assert "layers.1.self_attn.q_proj.weight" in keys
    assert any("0.5.9" in w and "one draft layer" in w for w in r.warnings)
    assert any("hidden_norm" in w for w in r.warnings)


def test_colliding_keys_refused(tmp_path):
    t = _tensors()
    t["layers.0.input_layernorm.weight"] = torch.ones(H)
    src = _make(tmp_path / "src", t, _flat_config())
    with pytest.raises(ConversionError, match="both become"):
        convert_checkpoint(src, tmp_path / "out", to="speculators")
    _no_leftovers(tmp_path, ["src"])


def test_provenance(tmp_path):
    src = _make(tmp_path / "src", _tensors(wrapper="model."),
                _flat_config(auto_map={"AutoConfig": "x.Y"}), code=True)
    (src / "README.md").write_text("notes")
    before = _snapshot(src)
    r = convert_checkpoint(src, tmp_path / "out", to="speculators")
    out = tmp_path / "out"
    prov = json.loads((out / PROVENANCE_NAME).read_text())
    assert prov["tool"] == "eagle3_nb" and prov["version"]
    assert prov["created_utc"].endswith("+00:00")
    assert prov["source"]["path"] == str(src.resolve())
    hashes = {n: v[0] for n, v in before.items() if n in ("config.json", "model.safetensors")}
    assert prov["source"]["sha256_before"] == hashes == prov["source"]["sha256_after"]
    assert prov["source"]["code_files_not_copied"] == ["config.py"]
    assert prov["source"]["other_files_not_copied"] == ["README.md"]
    assert prov["renames"] == r.renames and prov["renames"]["model.midlayer.mlp.up_proj.weight"] \
        == "layers.0.mlp.up_proj.weight"
    for new, rec in prov["tensors"].items():
        assert rec["sha256"] == r.tensor_sha256[new]
    src_bytes = _bytes_by_key(src)
    rec = prov["tensors"]["fc.weight"]
    assert rec["source_key"] == "model.fc.weight"
    assert rec["sha256"] == hashlib.sha256(src_bytes["model.fc.weight"][1]).hexdigest()
    changes = {c["key"]: c for c in prov["config_changes"]}
    assert changes["auto_map"]["new"] == "<absent>" and changes["auto_map"]["reason"]
    assert changes["eagle_aux_hidden_state_layer_ids"]["new"] == [2, 16, 29]
    assert changes["norm_before_residual"]["old"] == "<absent>"
    assert all(c["reason"] for c in prov["config_changes"])
    files = {p.name: sha256_file(p) for p in out.iterdir() if p.name != PROVENANCE_NAME}
    assert prov["output"]["sha256"] == files == r.output_hashes
    assert prov["verification"]["tensor_bytes_identical"] is True
    assert prov["verification"]["source_unchanged"] is True
    assert prov["warnings"] == r.warnings
    assert _snapshot(src) == before
    # converting the converted copy carries the chain along
    r2 = convert_checkpoint(out, tmp_path / "again", to="eagle")
    prov2 = json.loads((tmp_path / "again" / PROVENANCE_NAME).read_text())
    assert prov2["source_provenance"]["source"]["path"] == str(src.resolve())
    assert not any(PROVENANCE_NAME in w for w in r2.warnings)


def test_output_directory_permissions_follow_umask(tmp_path):
    src = _make(tmp_path / "src", _tensors(), _flat_config())
    convert_checkpoint(src, tmp_path / "out", to="speculators")
    mask = os.umask(0)
    os.umask(mask)
    assert (tmp_path / "out").stat().st_mode & 0o777 == 0o777 & ~mask


def test_small_chunks_and_no_torch_on_the_safetensors_path(tmp_path, monkeypatch):
    import subprocess
    import sys

    src = _make(tmp_path / "src", _tensors(), _flat_config())
    monkeypatch.setattr(safetensors_io, "COPY_CHUNK_BYTES", 7)   # many partial reads per tensor
    convert_checkpoint(src, tmp_path / "out", to="speculators")
    assert sorted(_bytes_by_key(tmp_path / "out").values()) == \
        sorted(_bytes_by_key(src).values())
    code = ("import sys; from eagle3_nb.convert import convert_checkpoint; "
            f"convert_checkpoint({str(src)!r}, {str(tmp_path / 'out2')!r}, to='speculators'); "
            "print(sorted(m for m in ('torch', 'numpy', 'safetensors') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_unwritable_parent(tmp_path, monkeypatch):
    src = _make(tmp_path / "src", _tensors(), _flat_config())

    def denied(**kwargs):
        raise PermissionError(13, "Permission denied", kwargs.get("dir"))
    monkeypatch.setattr(tempfile, "mkdtemp", denied)  # the temp dir beside DST
    with pytest.raises(ConversionError, match="writable"):
        convert_checkpoint(src, tmp_path / "out", to="speculators")
    _no_leftovers(tmp_path, ["src"])


def test_a_shard_path_that_climbs_out_and_back_is_written_inside_dst(tmp_path):
    """An index entry like x/../../src/<shard> resolves inside SRC; its output name is the
    normalised one, so nothing lands outside DST (before: a file beside DST, surviving rollback)."""
    src, _ = _make_sharded(tmp_path / "src", _tensors(), _flat_config())
    index = json.loads((src / "model.safetensors.index.json").read_text())
    index["weight_map"] = {k: (f"x/../../src/{v}" if v.startswith("model-00001") else v)
                           for k, v in index["weight_map"].items()}
    (src / "x").mkdir()
    (src / "model.safetensors.index.json").write_text(json.dumps(index))
    before = _snapshot(src)
    result = convert_checkpoint(src, tmp_path / "out", to="speculators")
    assert result.verified
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out", "src"]
    written = sorted(p.relative_to(tmp_path / "out").as_posix()
                     for p in (tmp_path / "out").rglob("*") if p.is_file())
    assert "model-00001-of-00002.safetensors" in written
    assert not any(".." in w for w in json.loads(
        (tmp_path / "out" / "model.safetensors.index.json").read_text())["weight_map"].values())
    assert _snapshot(src) == before


@pytest.mark.parametrize("sample,to", [("good", "eagle"), ("good", "speculators"),
                                       ("good-speculators", "speculators"),
                                       ("good-speculators", "eagle")])
def test_a_count_written_as_a_string_is_repaired_in_the_copy_and_said(tmp_path, sample, to):
    """#25: num_aux_hidden_states "3" is set aside by the kit and makes the releases that build fc
    from it raise; a copy carries fc's count as an integer, named as a change and a warning."""
    import shutil

    from conftest import DRAFTS, TARGET_CONFIG
    from eagle3_nb.checks.load import inspect_checkpoint

    src = tmp_path / "src"
    shutil.copytree(DRAFTS / sample, src)
    raw = json.loads((src / "config.json").read_text())
    raw["num_aux_hidden_states"] = "3"
    (src / "config.json").write_text(json.dumps(raw))

    def num_aux_errors(path):
        found = inspect_checkpoint(path, ["sglang==0.5.23", "vllm==0.34.0"], TARGET_CONFIG,
                                   stats=False).to_json()["findings"]
        return [f for f in found if f["severity"] == "error" and "num_aux_hidden_states"
                in f["message"]]

    # a flat config's count is read (and raises); vLLM's speculators reader never reads it
    assert bool(num_aux_errors(src)) == (sample == "good")
    r = convert_checkpoint(src, tmp_path / "out", to=to)
    assert json.loads((tmp_path / "out" / "config.json").read_text())[
        "num_aux_hidden_states"] == 3
    change = next(c for c in r.config_changes if c.key == "num_aux_hidden_states")
    assert change.old == "3" and change.new == 3 and "fc's count" in change.reason
    assert any("num_aux_hidden_states" in w and "repaired" in w for w in r.warnings)
    assert not num_aux_errors(tmp_path / "out")
