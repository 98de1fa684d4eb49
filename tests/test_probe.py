"""eagle3-nb probe: recording, comparison and findings (always), and the real engines (when
their side environments exist, or EAGLE3NB_ENGINE_TESTS=1 builds them: make test-engines)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from eagle3_nb.engines import resolve_engine
from eagle3_nb.engines.planner import plan_load
from eagle3_nb.io.checkpoint import Checkpoint
from eagle3_nb.engines import stubs
from eagle3_nb.probe.compare import compare, findings, predicted_unwritten
from eagle3_nb.probe.record import ObservedKey, Observation, observe_load

torch = pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parent.parent
DRAFTS = ROOT / "data_samples" / "drafts"
TARGET = ROOT / "data_samples" / "target"


# ----------------------------------------------------------------------------- a fake engine

class FakeDraft(torch.nn.Module):
    """An engine's draft in miniature: a stacked qkv parameter filled by shard, a plain
    attribute for d2t, a loader that renames, ignores t2d, drops unknown names silently and
    raises on one name."""

    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 2, bias=False)
        self.qkv = torch.nn.Parameter(torch.zeros(6, 2))
        self.norm = torch.nn.Parameter(torch.ones(2))
        self.hot_token_id = None

    def load_weights(self, weights):
        rows = {"q_proj": slice(0, 2), "k_proj": slice(2, 4), "v_proj": slice(4, 6)}
        for name, w in weights:
            name = name.replace("midlayer.", "")
            if name == "d2t":
                self.hot_token_id = w + torch.arange(w.shape[0])
            elif name == "t2d":
                continue
            elif name in rows:
                with torch.no_grad():
                    self.qkv[rows[name]] = w
            elif name == "fc.weight":
                with torch.no_grad():
                    self.fc.weight.copy_(w)
            elif name == "boom":
                raise ValueError("There is no module or parameter named 'boom'")
            # anything else: dropped without a word


def _weights(*names):
    shapes = {"fc.weight": (2, 4), "q_proj": (2, 2), "k_proj": (2, 2), "v_proj": (2, 2),
              "d2t": (3,), "t2d": (5,), "junk": (1,), "boom": (1,), "midlayer.q_proj": (2, 2)}
    return [(n, torch.ones(shapes[n], dtype=torch.long if n in ("d2t", "t2d") else torch.float))
            for n in names]


def test_observe_load_attributes_each_key():
    model = FakeDraft()
    obs = observe_load(model, model.load_weights,
                       _weights("fc.weight", "midlayer.q_proj", "k_proj", "d2t", "t2d", "junk"),
                       watch_attrs=["hot_token_id"])
    fates = {k.name: (k.fate, k.params) for k in obs.keys}
    assert fates["fc.weight"] == ("filled", {"fc.weight": 1.0})
    assert fates["midlayer.q_proj"] == ("filled", {"qkv": pytest.approx(1 / 3, abs=1e-3)})
    assert fates["d2t"] == ("filled", {"hot_token_id": 1.0})
    assert fates["t2d"][0] == fates["junk"][0] == "ignored"
    assert obs.raised == ""
    # v_proj never came: a third of qkv and all of norm stay unwritten
    assert obs.unwritten["qkv"] == pytest.approx(1 / 3, abs=1e-3)
    assert obs.unwritten["norm"] == 1.0
    assert "fc.weight" not in obs.unwritten and "hot_token_id" not in obs.unwritten


def test_observe_load_records_the_engines_error():
    model = FakeDraft()
    obs = observe_load(model, model.load_weights, _weights("fc.weight", "boom"))
    boom = [k for k in obs.keys if k.name == "boom"][0]
    assert boom.fate == "error" and "no module or parameter named 'boom'" in boom.error
    assert obs.raised.startswith("ValueError")


def test_observe_load_refuses_meta_parameters():
    with torch.device("meta"):
        model = FakeDraft()
    with pytest.raises(ValueError, match="meta"):
        observe_load(model, model.load_weights, _weights("fc.weight"))


# ----------------------------------------------------------------------------- comparison

def _plan(variant="good", engine="sglang==0.5.23"):
    ckpt = Checkpoint.open(DRAFTS / variant)
    shapes = {n: t.shape for n, t in ckpt.tensors.items()}
    return plan_load(resolve_engine(engine), ckpt.config, shapes), ckpt


_AS = {"loaded": "filled", "renamed": "filled", "dropped": "ignored", "skipped": "ignored",
       "error": "error"}


def _observation_as_planned(plan, params):
    keys = [ObservedKey(k.name, _AS[k.fate], {k.param: 1.0} if _AS[k.fate] == "filled" else {})
            for k in plan.keys]
    unwritten = {p: 1.0 for p in predicted_unwritten(plan, params)}
    return Observation(keys, params, unwritten)


def test_compare_agrees_with_an_engine_that_did_what_the_plan_says():
    plan, _ = _plan()
    params = ["model.embed_tokens.weight", "model.fc.weight", "lm_head.weight", "hot_token_id"]
    obs = _observation_as_planned(plan, params)
    assert compare(plan, obs, params) == []
    (f,) = findings([], "sglang 0.5.23", plan.profile.key)
    assert f.code == "ENGINE_AGREES"


def test_compare_reports_every_difference():
    plan, _ = _plan()
    params = ["model.embed_tokens.weight", "model.fc.weight", "lm_head.weight", "hot_token_id"]
    obs = _observation_as_planned(plan, params)
    fc = next(k for k in obs.keys if k.name == "fc.weight")
    fc.fate, fc.params = "ignored", {}
    obs.unwritten["model.fc.weight"] = 1.0
    obs.unwritten.pop("model.embed_tokens.weight")
    diffs = compare(plan, obs, params)
    assert {(d.what, d.name) for d in diffs} == {
        ("key", "fc.weight"), ("unwritten", "model.fc.weight"),
        ("unwritten", "model.embed_tokens.weight")}
    found = findings(diffs, "sglang 0.5.23", plan.profile.key)
    assert [f.code for f in found] == ["ENGINE_DISAGREES"] * 3
    assert all(f.engine == "sglang==0.5.23" for f in found)


def test_compare_startup():
    plan, _ = _plan("good-speculators")  # SGLang reads no speculators config: LOAD_ERROR
    refused = Observation([], [], {}, build_error="ValueError: Unrecognized model")
    assert compare(plan, refused) == []
    built = Observation([], [], {})
    (d,) = compare(plan, built)
    assert d.what == "startup" and "fails at startup" in d.predicted
    good, _ = _plan("good")
    (d,) = compare(good, refused)
    assert d.engine_line == "ValueError: Unrecognized model"


def test_stub_modules_answer_anything():
    mod = stubs._stub_module("sgl_kernel.ops")
    fn = mod.some_kernel
    assert fn(1, 2) is not None and not fn
    def f():
        return 3
    assert mod.register(f) is f  # a decorator passes its function through
    class K(mod.Base):
        pass
    assert K().__class__.__mro__[-1] is object
    assert set(stubs._all_stubs()) >= {"sgl_kernel", "vllm._C", "torchvision"}


def test_torch_op_placeholders_and_old_release_gates():
    import torch

    from eagle3_nb.engines.sglang import probe as sglang_probe
    from eagle3_nb.engines.vllm.probe import TORCH_OPS

    stubs.install_torch_ops(TORCH_OPS)  # vLLM 0.26-0.30 SiluAndMul.__init__ looks the op up
    assert torch.ops._C.silu_and_mul is not None
    assert any(s["module"] == "torch.ops._C.silu_and_mul" for s in stubs.used())
    # the SGLang compat shims leave releases that do not need them untouched
    assert sglang_probe._sglang_config_registry_compat("0.5.20") == []
    sglang_probe._sglang_cpu_fallback_compat("0.5.8")  # returns before importing anything


def test_cli_says_how_to_install_a_missing_engine(tmp_path):
    from importlib import metadata
    try:
        metadata.version("vllm")
        pytest.skip("vllm is installed in this Python")
    except metadata.PackageNotFoundError:
        pass
    r = subprocess.run([sys.executable, "-m", "eagle3_nb.cli", "probe", str(DRAFTS / "good"),
                        "--engine", "vllm"], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "make engine-env ENGINE=vllm" in r.stderr
    r = subprocess.run([sys.executable, "-m", "eagle3_nb.cli", "probe", str(DRAFTS / "good"),
                        "--engine", "tgi"], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 2


# ----------------------------------------------------------------------------- real engines

RELEASES = {"sglang": "0.5.23", "vllm": "0.34.0"}
VARIANTS = ("good", "layers0-flat", "good-speculators", "multilayer-flat")


def _side_python(engine: str) -> Path:
    env = ROOT / ".cache" / "engines" / f"{engine}-{RELEASES[engine]}"
    if not (env / ".ready").exists():
        if os.environ.get("EAGLE3NB_ENGINE_TESTS") != "1":
            pytest.skip(f"no {engine} side environment: make test-engines (or make engine-env "
                        f"ENGINE={engine} VERSION={RELEASES[engine]}, ~40 s) sets it up")
        subprocess.run(["bash", str(ROOT / "tools" / "engine_env.sh"), engine,
                        RELEASES[engine]], check=True, cwd=ROOT)
    return env / "bin" / "python"


@pytest.mark.slow
@pytest.mark.parametrize("engine", sorted(RELEASES))
def test_probe_real_engine_on_samples(engine):
    py = _side_python(engine)
    r = subprocess.run([str(py), str(ROOT / "tools" / "engine_truth.py"), "--worker", engine,
                        *[str(DRAFTS / v) for v in VARIANTS]],
                       capture_output=True, text=True, cwd=ROOT, timeout=600)
    rows = {json.loads(ln[2:])["variant"]: json.loads(ln[2:])
            for ln in r.stdout.splitlines() if ln.startswith("@@")}
    assert set(rows) == set(VARIANTS), r.stderr[-2000:]
    good = rows["good"]
    assert good["version"] == RELEASES[engine] and good["draft_class"]
    fates = {k["name"]: k for k in good["observed"]["keys"]}
    assert fates["fc.weight"]["params"] == {"model.fc.weight": 1.0}
    assert fates["t2d"]["fate"] == "ignored"
    assert fates["d2t"]["fate"] == "filled"
    assert good["agrees"], good["differences"]
    if engine == "sglang":  # SGLang reads no speculators config
        assert rows["good-speculators"]["observed"]["build_error"]
    else:
        assert not rows["good-speculators"]["observed"]["build_error"]
    assert any(s["module"] for s in good["stubs"])
