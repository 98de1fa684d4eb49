"""Tensor statistics: numbers checked against torch in float64, chunking, budget, findings."""

import json
import math
import subprocess
import sys

import numpy as np
import pytest
import torch
from safetensors.torch import save_file

from eagle3_nb.io.checkpoint import Checkpoint
from eagle3_nb.io.safetensors import iter_chunks
from eagle3_nb.stats import scan_order, scan_stats, stats_findings

CONFIG = {"architectures": ["LlamaForCausalLMEagle3"], "model_type": "llama", "hidden_size": 32,
          "num_attention_heads": 4, "intermediate_size": 64, "vocab_size": 128,
          "draft_vocab_size": 64, "num_hidden_layers": 1}
REL = 1e-5


def _draft(root, tensors, pickle=False):
    root.mkdir(parents=True, exist_ok=True)
    (root / "config.json").write_text(json.dumps(CONFIG))
    tensors = {k: v.contiguous() for k, v in tensors.items()}
    if pickle:
        torch.save(tensors, root / "pytorch_model.bin")
    else:
        save_file(tensors, str(root / "model.safetensors"))
    return Checkpoint.open(root)


def _mixed_tensors():
    g = torch.Generator().manual_seed(0)
    down = 5.0 + 0.01 * torch.randn(32, 64, generator=g)   # large mean, tiny spread
    down[0, :7] = 0.0
    d2t = torch.arange(64, dtype=torch.int64) * 2 - 3
    t2d = torch.zeros(128, dtype=torch.bool)
    t2d[torch.randperm(128, generator=g)[:64]] = True
    return {
        "lm_head.weight": torch.randn(64, 32, generator=g).to(torch.bfloat16),
        "fc.weight": (0.03 * torch.randn(32, 96, generator=g)).to(torch.float16),  # not at init
        "layers.0.mlp.down_proj.weight": down,
        "norm.weight": 1.0 + 0.1 * torch.randn(32, generator=g, dtype=torch.float64),
        "d2t": d2t,
        "t2d": t2d,
        "layers.0.self_attn.q_proj.weight": torch.randn(16, 64, generator=g).to(
            torch.float8_e4m3fn),
    }


def _assert_close(got, want, what):
    assert got is not None, what
    assert math.isclose(got, want, rel_tol=REL, abs_tol=1e-12), (what, got, want)


def _check_against_torch(stats, t):
    ref = t.reshape(-1)
    if ref.dtype == torch.bool:
        assert stats.n_true == int(ref.sum())
        assert stats.n_zero == ref.numel() - int(ref.sum())
        return
    assert stats.numel == ref.numel()
    assert stats.n_zero == int((ref == 0).sum())
    if ref.dtype.is_floating_point:
        ref = ref.double()
        assert stats.n_nan == int(torch.isnan(ref).sum())
        assert stats.n_inf == int(torch.isinf(ref).sum())
        ref = ref[torch.isfinite(ref)]
        assert stats.min == float(ref.min()) and stats.max == float(ref.max())
    else:
        assert stats.min == int(ref.min()) and stats.max == int(ref.max())
        assert isinstance(stats.min, int)
        ref = ref.double()
    _assert_close(stats.mean, float(ref.mean()), "mean")
    _assert_close(stats.std, float(ref.std(correction=0)), "std")
    _assert_close(stats.norm, float(ref.norm()), "norm")


@pytest.mark.parametrize("pickle", [False, True], ids=["safetensors", "pickle"])
def test_stats_match_torch_float64(tmp_path, pickle):
    tensors = _mixed_tensors()
    ckpt = _draft(tmp_path / "d", tensors, pickle=pickle)
    result = scan_stats(ckpt)
    assert set(result.stats) == set(tensors) and result.skipped == []
    assert result.scanned_bytes == ckpt.declared_bytes
    for name, t in tensors.items():
        _check_against_torch(result.stats[name], t)
    assert result.stats["norm.weight"].dtype == "F64"
    assert result.stats["layers.0.self_attn.q_proj.weight"].dtype == "F8_E4M3"
    assert result.stats["t2d"].n_true == 64 and result.stats["t2d"].min is None
    assert result.stats["lm_head.weight"].shape == (64, 32)
    assert not any(s.constant for s in result.stats.values())
    assert stats_findings(result, ckpt) == []
    json.dumps(result.to_json(), allow_nan=False)


def test_pickle_and_safetensors_agree(tmp_path):
    tensors = _mixed_tensors()
    a = scan_stats(_draft(tmp_path / "st", tensors))
    b = scan_stats(_draft(tmp_path / "pk", tensors, pickle=True))
    assert list(a.stats) == list(b.stats)
    for name in a.stats:
        ja, jb = a.stats[name].to_json(), b.stats[name].to_json()
        for key in ("mean", "std", "norm"):
            if ja[key] is not None:
                _assert_close(jb[key], ja[key], f"{name} {key}")
            ja.pop(key), jb.pop(key)
        assert ja == jb


def test_nan_inf_counts_exact_and_stats_over_finite_values(tmp_path):
    g = torch.Generator().manual_seed(1)
    w = torch.randn(40, 50, generator=g)
    w.view(-1)[::7] = float("nan")
    w.view(-1)[3::11] = float("inf")
    w.view(-1)[5::13] = float("-inf")
    h = torch.randn(100, generator=g).to(torch.bfloat16)
    h[10] = float("nan")
    all_nan = torch.full((8, 4), float("nan"), dtype=torch.bfloat16)
    tensors = {"fc.weight": w, "layers.0.mlp.up_proj.weight": h, "lm_head.weight": all_nan}
    ckpt = _draft(tmp_path / "d", tensors)
    result = scan_stats(ckpt, chunk_bytes=64)
    for name, t in tensors.items():
        if name != "lm_head.weight":
            _check_against_torch(result.stats[name], t)
    s = result.stats["lm_head.weight"]
    assert (s.n_nan, s.n_inf, s.n_finite) == (32, 0, 0)
    assert s.mean is None and s.min is None and not s.constant

    findings = stats_findings(result, ckpt)
    nan = [f for f in findings if f.code == "NAN_WEIGHTS" and "NaN" in f.message]
    assert len(nan) == 1 and nan[0].severity == "error" and nan[0].engine is None
    ev = nan[0].evidence["tensors"]
    assert set(ev) == set(tensors)
    want_nan = int(torch.isnan(w).sum())
    assert ev["fc.weight"] == {"nan": want_nan, "inf": int(torch.isinf(w).sum()), "numel": 2000}
    assert ev["lm_head.weight"]["nan"] == 32
    assert "fc.weight" in nan[0].message and "lm_head.weight" in nan[0].message
    # NaN tensors are not also reported as constant or zero
    assert [f.code for f in findings] == ["NAN_WEIGHTS"]


def test_tiny_chunks_give_the_same_numbers_as_one_chunk(tmp_path):
    tensors = _mixed_tensors()
    tensors["layers.0.mlp.gate_proj.weight"] = torch.randn(257, 33, dtype=torch.float16)
    ckpt = _draft(tmp_path / "d", tensors)
    big = scan_stats(ckpt, chunk_bytes=1 << 30)
    for chunk in (1, 7, 16, 1000):
        small = scan_stats(ckpt, chunk_bytes=chunk)
        assert list(small.stats) == list(big.stats)
        for name in big.stats:
            a, b = big.stats[name], small.stats[name]
            assert (a.n_nan, a.n_inf, a.n_zero, a.min, a.max, a.constant, a.n_true) == \
                   (b.n_nan, b.n_inf, b.n_zero, b.min, b.max, b.constant, b.n_true)
            for key in ("mean", "std", "norm"):
                va, vb = getattr(a, key), getattr(b, key)
                assert (va is None) == (vb is None)
                if va is not None:
                    assert math.isclose(va, vb, rel_tol=1e-12, abs_tol=1e-15), (name, key, chunk)


def test_iter_chunks_survives_callers_holding_chunks(tmp_path):
    ckpt = _draft(tmp_path / "d", {"fc.weight": torch.arange(1000, dtype=torch.float32)})
    info = ckpt.tensors["fc.weight"]
    path = ckpt.file_path(info.file)
    chunks = list(iter_chunks(path, info, chunk_bytes=256))  # every chunk still alive
    assert len(chunks) == 16
    assert np.array_equal(np.concatenate(chunks), np.arange(1000, dtype=np.float32))
    for chunk in iter_chunks(path, info, chunk_bytes=256):  # loop variable outlives the generator
        pass
    assert chunk[-1] == 999
    for chunk in iter_chunks(path, info, chunk_bytes=256):  # closed early
        break


def _sized(nbytes):
    return torch.zeros(nbytes // 4, dtype=torch.float32) + torch.arange(nbytes // 4)


def test_priority_order_and_budget_skip(tmp_path):
    tensors = {
        "model.layers.0.self_attn.o_proj.weight": _sized(400),
        "model.layers.0.input_layernorm.weight": _sized(40),
        "model.midlayer.hidden_norm.weight": _sized(40),
        "model.norm.weight": _sized(40),
        "model.fc_norm.0.weight": _sized(40),
        "model.embed_tokens.weight": _sized(4000),
        "model.fc.weight": _sized(800),
        "lm_head.weight": _sized(1200),
        "model.d2t": torch.arange(10, dtype=torch.int64),
        "model.t2d": torch.ones(20, dtype=torch.bool),
        "model.aaa_extra.weight": _sized(80),
        "zzz_unknown": _sized(8),
    }
    ckpt = _draft(tmp_path / "d", tensors)
    expected = ["lm_head.weight", "model.fc.weight", "model.embed_tokens.weight", "model.d2t",
                "model.t2d",
                # norms by canonical name: fc_norm.0, layers.0.hidden_norm (from midlayer),
                # layers.0.input_layernorm, norm
                "model.fc_norm.0.weight", "model.midlayer.hidden_norm.weight",
                "model.layers.0.input_layernorm.weight", "model.norm.weight",
                # then by canonical name; keys that are not EAGLE-3 keys keep their full name
                "model.layers.0.self_attn.o_proj.weight", "model.aaa_extra.weight",
                "zzz_unknown"]
    assert scan_order(ckpt.tensors) == expected
    assert list(scan_stats(ckpt, budget_bytes=1 << 40).stats) == expected

    # lm_head (1200) + fc (800) fit 2500; embed_tokens (4000) does not; smaller ones still do
    # until o_proj (400) would pass the budget; the last 8-byte tensor still fits
    result = scan_stats(ckpt, budget_bytes=2500)
    assert result.skipped == ["model.embed_tokens.weight",
                              "model.layers.0.self_attn.o_proj.weight"]
    assert list(result.stats) == [n for n in expected if n not in result.skipped]
    assert result.scanned_bytes == sum(ckpt.tensors[n].nbytes for n in result.stats)
    assert result.scanned_bytes <= 2500 and result.budget_bytes == 2500
    assert result.to_json()["skipped"] == result.skipped

    skipped = [f for f in stats_findings(result, ckpt) if f.code == "STATS_SKIPPED"]
    assert len(skipped) == 1 and skipped[0].severity == "info" and skipped[0].engine is None
    assert skipped[0].evidence["skipped"] == result.skipped
    assert skipped[0].evidence["skipped_bytes"] == 4400
    assert "model.embed_tokens.weight" in skipped[0].message and "budget" in skipped[0].message

    nothing = scan_stats(ckpt, budget_bytes=0)
    assert nothing.stats == {} and nothing.skipped == expected


def test_findings_zero_constant_and_untouched_norms(tmp_path):
    g = torch.Generator().manual_seed(2)
    tensors = {
        "lm_head.weight": torch.zeros(64, 32, dtype=torch.bfloat16),          # zero: error
        "fc.weight": torch.full((32, 96), 0.25, dtype=torch.float16),          # constant: error
        "layers.0.self_attn.q_proj.weight": torch.randn(32, 64, generator=g),  # fine
        "layers.0.input_layernorm.weight": torch.ones(32),                     # ones: warning
        "layers.0.hidden_norm.weight": torch.ones(32, dtype=torch.bfloat16),   # ones: warning
        "norm.weight": torch.full((32,), 0.5),                                 # constant norm: ok
        "layers.0.post_attention_layernorm.weight": 1 + 0.1 * torch.randn(32, generator=g),
        "d2t": torch.zeros(64, dtype=torch.int64),                             # ints: not here
        "t2d": torch.ones(64, dtype=torch.bool),
    }
    ckpt = _draft(tmp_path / "d", tensors)
    result = scan_stats(ckpt)
    assert result.stats["fc.weight"].constant and result.stats["norm.weight"].constant
    assert result.stats["lm_head.weight"].n_zero == 64 * 32
    assert result.stats["t2d"].constant and result.stats["d2t"].constant

    findings = stats_findings(result, ckpt)
    assert all(f.code == "NAN_WEIGHTS" and f.engine is None for f in findings)
    by_text = {("zero" if "all zeros" in f.message else
                "constant" if "single repeated value" in f.message else
                "ones" if "exactly 1.0" in f.message else f.message): f for f in findings}
    assert set(by_text) == {"zero", "constant", "ones"}
    assert by_text["zero"].severity == "error"
    assert set(by_text["zero"].evidence["tensors"]) == {"lm_head.weight"}
    assert by_text["constant"].severity == "error"
    assert by_text["constant"].evidence["tensors"] == {"fc.weight": {"value": 0.25,
                                                                     "shape": [32, 96]}}
    assert by_text["ones"].severity == "warning"
    assert by_text["ones"].evidence["tensors"] == ["layers.0.hidden_norm.weight",
                                                   "layers.0.input_layernorm.weight"]
    for f in findings:  # actionable: names the tensor and says what to do
        assert any(n in f.message for n in f.evidence["tensors"])
        assert "export" in f.message
        json.dumps(f.to_json(), allow_nan=False)


def test_empty_tensor(tmp_path):
    ckpt = _draft(tmp_path / "d", {"fc.weight": torch.zeros(0, 4), "d2t": torch.zeros(0,
                                                                                      dtype=torch.int64)})
    result = scan_stats(ckpt)
    for s in result.stats.values():
        assert s.numel == 0 and s.mean is None and s.min is None and not s.constant
    assert stats_findings(result, ckpt) == []


def test_import_does_not_pull_in_torch():
    code = "import eagle3_nb.stats, sys; assert 'torch' not in sys.modules, 'torch imported'"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def test_over_budget_float_tensors_get_a_head_probe(tmp_path):
    """A NaN-initialised tensor too large for the budget is still caught by its first chunk."""
    import torch
    from safetensors.torch import save_file

    from eagle3_nb.io.checkpoint import Checkpoint
    from eagle3_nb.stats import scan_stats, stats_findings

    d = tmp_path / "ckpt"
    d.mkdir()
    (d / "config.json").write_text("{}")
    save_file({"embed_tokens.weight": torch.full((64, 32), float("nan")),
               "norm.weight": torch.ones(32) * 1.1}, str(d / "model.safetensors"))
    ckpt = Checkpoint.open(d)
    result = scan_stats(ckpt, budget_bytes=1024, chunk_bytes=512)
    assert result.skipped == ["embed_tokens.weight"]
    probe = result.probes["embed_tokens.weight"]
    assert probe.numel == 128 and probe.n_nan == 128          # one 512-byte chunk of float32
    codes = [(f.code, f.severity) for f in stats_findings(result, ckpt)]
    assert ("NAN_WEIGHTS", "error") in codes and ("STATS_SKIPPED", "info") in codes
    assert "probes" in result.to_json()


def test_random_initialisation_under_trained_norms_is_found_by_row_structure():
    """#25 (speculators#1114): a conversion that lost a key remap saves strict=False random
    linears under trained norms. Mean 0 and std initializer_range are not enough on their own
    (a large trained weight can sit there); rows of equal norm are what no trained weight has."""
    from conftest import DRAFTS
    from eagle3_nb.io.checkpoint import Checkpoint

    def found(name):
        ckpt = Checkpoint.open(DRAFTS / name)
        return [f for f in stats_findings(scan_stats(ckpt), ckpt) if f.code == "NAN_WEIGHTS"]
    (random_init,) = found("random-init-linears")
    spreads = random_init.evidence["tensors"]
    assert len(spreads) == 7 and all(v["row_norm_spread"] < 0.2 for v in spreads.values())
    assert found("good") == [] and found("multilayer-flat") == [] and found("mla-draft") == []
    fresh = found("fresh-layer")  # the all-ones norms rule says it; not said twice
    assert not any("random initialisation" in f.message for f in fresh)
