"""`eagle3-nb probe --engine trtllm` through the TensorRT-LLM adapter
(eagle3_nb/engines/trtllm/probe.py), run here against a stand-in `tensorrt_llm` package written
by this test: the module paths and call signatures the adapter uses (ModelConfig.from_pretrained,
Eagle3ForCausalLM(model_config), load_weights(dict, weight_mapper), HfWeightMapper), with a
loader that does what the source read says (layers.N -> midlayer, model. prefix, modules pull
their own weights, q/k/v and gate/up fused, other keys ignored). TensorRT-LLM itself is not
installable here; the stand-in tests the adapter's plumbing and the comparison, not the engine."""

from __future__ import annotations

import sys
import textwrap

import pytest

from conftest import DRAFTS

STANDIN = r'''
import json, re
from pathlib import Path
import torch
from torch import nn


class ModelConfig:
    def __init__(self, pretrained_config, spec_config):
        self.pretrained_config, self.spec_config = pretrained_config, spec_config

    @classmethod
    def from_pretrained(cls, path, trust_remote_code=False, spec_config=None, **_):
        raw = json.loads((Path(path) / "config.json").read_text())
        return cls(type("Cfg", (), raw)(), spec_config)


def _linear(rows, cols):
    return nn.Parameter(torch.zeros(rows, cols))


class Layer(nn.Module):
    def __init__(self, c, first):
        super().__init__()
        hd = c.hidden_size // c.num_attention_heads
        width = 2 * c.hidden_size if first else c.hidden_size
        self.q, self.kv = c.num_attention_heads * hd, c.num_key_value_heads * hd
        self.self_attn = nn.Module()
        self.self_attn.qkv_proj = nn.Module()
        self.self_attn.qkv_proj.weight = _linear(self.q + 2 * self.kv, width)
        self.self_attn.o_proj = nn.Module()
        self.self_attn.o_proj.weight = _linear(c.hidden_size, self.q)
        self.mlp = nn.Module()
        self.mlp.gate_up_proj = nn.Module()
        self.mlp.gate_up_proj.weight = _linear(2 * c.intermediate_size, c.hidden_size)
        self.mlp.down_proj = nn.Module()
        self.mlp.down_proj.weight = _linear(c.hidden_size, c.intermediate_size)
        norms = ["hidden_norm", "post_attention_layernorm"] + (["input_layernorm"] if first else [])
        for name in norms:
            setattr(self, name, nn.Module())
            getattr(self, name).weight = nn.Parameter(torch.ones(c.hidden_size))


class Draft(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.num_layers = c.num_hidden_layers
        self.midlayer = (nn.ModuleList([Layer(c, i == 0) for i in range(c.num_hidden_layers)])
                         if c.num_hidden_layers > 1 else Layer(c, True))
        ht = getattr(c, "target_hidden_size", c.hidden_size)
        self.fc = nn.Module()
        self.fc.weight = _linear(c.hidden_size, 3 * ht)
        self.norm = nn.Module()
        self.norm.weight = nn.Parameter(torch.ones(c.hidden_size))
        if c.draft_vocab_size != c.vocab_size:
            self.d2t = nn.Parameter(torch.zeros(c.draft_vocab_size, dtype=torch.int32),
                                    requires_grad=False)


class Eagle3ForCausalLM(nn.Module):
    def __init__(self, model_config):
        super().__init__()
        c = model_config.pretrained_config
        self.model = Draft(c)
        self.lm_head = nn.Module()
        self.lm_head.weight = _linear(c.draft_vocab_size, c.hidden_size)

    def load_weights(self, weights, weight_mapper):
        assert isinstance(weights, dict) and weight_mapper.model is self
        single = self.model.num_layers == 1
        named = {}
        for k, v in weights.items():
            k = (re.sub(r"^layers\.0\.", "midlayer.", k) if single
                 else re.sub(r"^layers\.(\d+)\.", r"midlayer.\1.", k))
            named[k if "lm_head" in k else "model." + k] = v
        fused = {"qkv_proj": ("q_proj", "k_proj", "v_proj"), "gate_up_proj": ("gate_proj", "up_proj")}
        with torch.no_grad():
            for name, p in self.named_parameters():
                module, _, leaf = name.rpartition(".")
                parent, _, last = module.rpartition(".")
                if last in fused:
                    parts = [named.get(f"{parent}.{s}.{leaf}") for s in fused[last]]
                    if all(t is not None for t in parts):
                        p.copy_(torch.cat(parts))
                    else:  # what arrived lands in its rows, as the fused loaders do
                        row = 0
                        for t, s in zip(parts, fused[last]):
                            n = {"q_proj": "q", "k_proj": "kv", "v_proj": "kv"}.get(s)
                            rows = (getattr(self._layer(parent), n) if n else p.shape[0] // 2)
                            if t is not None:
                                p[row:row + rows].copy_(t)
                            row += rows
                elif name in named:
                    p.copy_(named[name])

    def _layer(self, attn_path):
        obj = self
        for part in attn_path.split(".")[:-1]:
            obj = getattr(obj, part)
        return obj
'''

ARGS = '''
class EagleDecodingConfig:
    def __init__(self, max_draft_len, speculative_model, eagle3_one_model=True):
        self.max_draft_len, self.speculative_model = max_draft_len, speculative_model
'''

MAPPER = '''
class HfWeightMapper:
    model = None

    def init_model_and_config(self, model, config):
        self.model = model
'''


@pytest.fixture
def standin(tmp_path, monkeypatch):
    root = tmp_path / "site"
    files = {"tensorrt_llm/__init__.py": "", "tensorrt_llm/_torch/__init__.py": "",
             "tensorrt_llm/_torch/model_config.py": "from tensorrt_llm._torch.models."
             "modeling_speculative import ModelConfig\n",
             "tensorrt_llm/_torch/models/__init__.py": "",
             "tensorrt_llm/_torch/models/modeling_speculative.py": STANDIN,
             "tensorrt_llm/_torch/models/checkpoints/__init__.py": "",
             "tensorrt_llm/_torch/models/checkpoints/hf/__init__.py": "",
             "tensorrt_llm/_torch/models/checkpoints/hf/weight_mapper.py": MAPPER,
             "tensorrt_llm/llmapi/__init__.py": "", "tensorrt_llm/llmapi/llm_args.py": ARGS,
             "tensorrt_llm-1.4.0rc1.dist-info/METADATA":
             "Metadata-Version: 2.1\nName: tensorrt-llm\nVersion: 1.4.0rc1\n"}
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(textwrap.dedent(text), encoding="utf-8")
    monkeypatch.syspath_prepend(str(root))
    yield root
    for name in [m for m in sys.modules if m.startswith("tensorrt_llm")]:
        del sys.modules[name]


def test_the_probe_runs_the_engines_own_loader_and_agrees_on_the_good_draft(standin):
    from eagle3_nb.probe import probe_checkpoint

    result = probe_checkpoint(DRAFTS / "good", "trtllm")
    assert result.version == "1.4.0rc1" and result.draft_class.endswith("Eagle3ForCausalLM")
    assert result.differences == [], [d.text() for d in result.differences]
    fates = {k.name: k.fate for k in result.observation.keys}
    assert fates["midlayer.mlp.down_proj.weight"] == "filled" and fates["t2d"] == "ignored"


def test_the_probe_sees_the_layers_0_rename(standin):
    from eagle3_nb.probe import probe_checkpoint

    result = probe_checkpoint(DRAFTS / "layers0-flat", "trtllm")
    assert result.differences == [], [d.text() for d in result.differences]
    assert {k.fate for k in result.observation.keys if k.name.startswith("layers.0.")} == \
        {"filled"}


def test_without_tensorrt_llm_the_probe_says_how_to_get_it():
    from eagle3_nb.engines.probing import EngineNotInstalled
    from eagle3_nb.probe import probe_checkpoint

    with pytest.raises(EngineNotInstalled, match="not installed"):
        probe_checkpoint(DRAFTS / "good", "trtllm")
