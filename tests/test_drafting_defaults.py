"""The drafting defaults per engine release: the lookup (eagle3_nb/engines/drafting.py) on real
releases, the shipped tables (eagle3_nb/engines/*/data/drafting.json, made by
tools/drafting_defaults.py) against releases.py, the tool's parser on inline sources, and, where a
side environment with a real engine exists, the table against the engine's own function."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from eagle3_nb.engines.drafting import DraftingDefault, default_drafting, drafting_table
from eagle3_nb.engines import RELEASES

REPO = Path(__file__).resolve().parent.parent
TOOL = REPO / "tools" / "drafting_defaults.py"
ENGINES = REPO / ".cache" / "engines"

_spec = importlib.util.spec_from_file_location("drafting_defaults", TOOL)
dd = importlib.util.module_from_spec(_spec)
sys.modules["drafting_defaults"] = dd
_spec.loader.exec_module(dd)


def triple(d: DraftingDefault) -> tuple:
    return d.num_steps, d.topk, d.num_draft_tokens


# ---------------------------------------------------------------- lookup on real releases

def test_sglang_0_5_23_by_architecture():
    llama = default_drafting("sglang", "0.5.23", "LlamaForCausalLM")
    assert triple(llama) == (5, 4, 8)
    assert "speculative_hook.py:_auto_choose_speculative_params" in llama.source
    assert "sgl-project/sglang" in llama.source and "v0.5.23" in llama.source
    assert triple(default_drafting("sglang", "0.5.23", "DeepseekV3ForCausalLM")) == (3, 1, 4)
    assert triple(default_drafting("sglang", "0.5.23", "GptOssForCausalLM")) == (3, 1, 4)
    assert triple(default_drafting("sglang", "0.5.23", "Grok1ForCausalLM")) == (5, 4, 8)
    assert triple(default_drafting("sglang", "0.5.23", "Qwen3ForCausalLM")) == (3, 1, 4)
    assert triple(default_drafting("sglang", "0.5.23", None)) == (3, 1, 4)
    assert triple(default_drafting("sglang", "0.5.23", "LlamaForCausalLM", "STANDALONE")) == (3, 1, 4)
    assert "adaptive" in llama.note and "must be unset" in llama.note


def test_sglang_0_4_4_post2_field_defaults_for_every_target():
    for arch in ("LlamaForCausalLM", "DeepseekV3ForCausalLM", "Qwen3ForCausalLM", None):
        d = default_drafting("sglang", "0.4.4.post2", arch)
        assert triple(d) == (5, 4, 8)
        assert "ServerArgs" in d.source and "field" in d.note


def test_sglang_change_points():
    # the auto-choice appears in 0.4.4.post4 (all branches still (5, 4, 8))
    assert drafting_table("sglang")["releases"]["0.4.4.post3"]["auto"] is False
    assert "auto_choose" in default_drafting("sglang", "0.4.4.post4", "LlamaForCausalLM").source
    # DeepSeek moves to a chain in 0.4.7
    assert triple(default_drafting("sglang", "0.4.6.post5", "DeepseekV3ForCausalLM")) == (5, 4, 8)
    assert triple(default_drafting("sglang", "0.4.7", "DeepseekV3ForCausalLM")) == (3, 1, 4)
    # GptOss joins the chain list in 0.5.1
    assert triple(default_drafting("sglang", "0.4.10.post2", "GptOssForCausalLM")) == (5, 4, 8)
    assert triple(default_drafting("sglang", "0.5.1", "GptOssForCausalLM")) == (3, 1, 4)
    # the catch-all goes from (5, 4, 8) to (3, 1, 4) in 0.5.8; Llama keeps its tree
    assert triple(default_drafting("sglang", "0.5.7", "Qwen3ForCausalLM")) == (5, 4, 8)
    assert triple(default_drafting("sglang", "0.5.8", "Qwen3ForCausalLM")) == (3, 1, 4)
    assert triple(default_drafting("sglang", "0.5.8", "LlamaForCausalLM")) == (5, 4, 8)
    # the rule moves to the argument groups in 0.5.14
    assert "server_args.py:auto_choose" in default_drafting("sglang", "0.5.13.post1", None).source
    assert "speculative_hook.py" in default_drafting("sglang", "0.5.14", None).source
    other = [(v, r["other"]) for v, r in drafting_table("sglang")["releases"].items()]
    firsts = [v for (v, o), (_, p) in zip(other[1:], other) if o != p]
    assert firsts == ["0.5.8"]


def test_sglang_chain_and_page_size_rules():
    table = drafting_table("sglang")["releases"]
    forced = [v for v, r in table.items() if r["chain_tokens_forced"]]
    assert forced[0] == "0.4.5.post3" and forced[-1] == "0.5.23"
    assert all(table[v]["chain_tokens_forced"] for v in list(table)[list(table).index("0.4.5.post3"):])
    paged = [v for v, r in table.items() if r["page_size_forces_topk1"]]
    assert paged[0] == "0.4.4.post4" and paged[-1] == "0.4.8.post1"
    # page_size > 1 lowered topk to 1; since 0.4.5.post3 num_draft_tokens follows
    assert triple(default_drafting("sglang", "0.4.6", "LlamaForCausalLM", page_size=16)) == (5, 1, 6)
    kept = default_drafting("sglang", "0.4.5", "LlamaForCausalLM", page_size=16)
    assert triple(kept) == (5, 1, 8) and "does not adjust" in kept.note
    assert triple(default_drafting("sglang", "0.4.9", "LlamaForCausalLM", page_size=16)) == (5, 4, 8)
    for v in ("0.4.4.post4", "0.5.13", "0.5.23"):
        assert table[v]["auto_requires_unset"] and "speculative_num_steps is None" in table[v]["auto_when"]


def test_vllm_requires_num_speculative_tokens_and_drafts_a_chain():
    for v in ("0.8.5", "0.10.0", "0.15.0", "0.33.0"):
        d = default_drafting("vllm", v, "LlamaForCausalLM")
        assert triple(d) == (None, 1, None)
        assert "num_speculative_tokens" in d.note and "SpeculativeConfig" in d.source
    table = drafting_table("vllm")["releases"]
    assert all(r["num_speculative_tokens"] is None and r["required"] for r in table.values())
    assert all(r["from_draft_n_predict"] for r in table.values())
    tree = [v for v, r in table.items() if r["tree"]]
    assert tree[0] == "0.10.1" and tree[-1] == "0.20.2"
    assert tree == list(table)[list(table).index("0.10.1"):list(table).index("0.21.0")]
    assert all(table[v]["default_tree"] == "chain" for v in tree)
    assert "TREE_ATTN" in default_drafting("vllm", "0.15.0", None).note
    assert "no EAGLE tree" in default_drafting("vllm", "0.21.0", None).note


def test_unknown_releases():
    newer = default_drafting("sglang", "0.6.0", "LlamaForCausalLM")
    assert triple(newer) == (5, 4, 8) and newer.release == "0.5.23"
    assert "not read" in newer.note and "0.6.0" in newer.note
    assert "not read" in default_drafting("vllm", "1.0.0", None).note
    between = default_drafting("sglang", "0.5.9.post1", "Qwen3ForCausalLM")
    assert between.release == "0.5.9" and "not surveyed" in between.note
    assert "not read" not in default_drafting("sglang", "0.5.23", None).note
    with pytest.raises(ValueError, match="predates"):
        default_drafting("sglang", "0.4.3", None)
    with pytest.raises(ValueError):
        default_drafting("tgi", "1.0", None)
    with pytest.raises(ValueError):
        default_drafting("sglang", "0.5.23", None, algorithm="NGRAM")


# ---------------------------------------------------------------- the shipped tables

@pytest.mark.parametrize("engine", ["sglang", "vllm"])
def test_table_covers_every_release(engine):
    table = drafting_table(engine)
    assert list(table["releases"]) == [v for v, _ in RELEASES[engine]]
    assert table["engine"] == engine and table["changes"][0]["release"] == RELEASES[engine][0][0]
    for version, rule in table["releases"].items():
        assert rule["source"] and rule["read"], version


def test_sglang_table_shape():
    for version, rule in drafting_table("sglang")["releases"].items():
        for t in [rule["other"], *rule["by_architecture"].values()] + ([rule["standalone"]]
                                                                       if rule["standalone"] else []):
            steps, topk, tokens = t
            assert steps >= 1 and topk >= 1 and tokens >= 2, version


# ---------------------------------------------------------------- the tool's parser

class Inline(dd.Code):
    label = "inline"

    def __init__(self, files: dict[str, str]):
        self.files_ = {k: textwrap.dedent(v).lstrip("\n") for k, v in files.items()}

    def read(self, path):
        return self.files_.get(path)

    def files(self, under):
        return sorted(p for p in self.files_ if p.startswith(under))


CALLER = """
class ServerArgs:
    speculative_num_steps: Optional[int] = None

    def __post_init__(self):
        if self.speculative_num_steps is None:
            assert self.speculative_eagle_topk is None and self.speculative_num_draft_tokens is None
            (self.speculative_num_steps, self.speculative_eagle_topk,
             self.speculative_num_draft_tokens) = auto_choose_speculative_params(self)
        if self.speculative_eagle_topk == 1 and self.speculative_num_draft_tokens != self.speculative_num_steps + 1:
            self.speculative_num_draft_tokens = self.speculative_num_steps + 1
"""


def test_parser_reads_the_if_chain():
    code = Inline({"sglang/srt/server_args.py": CALLER + """
def auto_choose_speculative_params(self):
    '''doc'''
    arch = self.get_hf_config().architectures[0]
    if self.speculative_algorithm == "STANDALONE":
        return (3, 1, 4)
    if arch in ["LlamaForCausalLM"]:
        return (5, 4, 8)
    elif arch in ["A", "LlamaForCausalLM"]:
        return (2, 1, 3)
    else:
        return (4, 2, 6)
"""})
    rule = dd.analyze_sglang(code)
    assert rule.by_architecture == {"LlamaForCausalLM": [5, 4, 8], "A": [2, 1, 3]}
    assert rule.other == [4, 2, 6] and rule.standalone == [3, 1, 4]
    assert rule.chain_tokens_forced and rule.auto_requires_unset and not rule.page_size_forces_topk1
    assert rule.auto_when == "speculative_num_steps is None"
    assert rule.called_from.endswith("server_args.py:ServerArgs.__post_init__")


@pytest.mark.parametrize("body, reason", [
    ("if arch in BIG_LIST:\n        return (3, 1, 4)\n    return (5, 4, 8)", "unknown test"),
    ("if arch in ['A']:\n        return (n, 1, 4)\n    return (5, 4, 8)", "int literals"),
    ("if arch in ['A']:\n        return (3, 1, 4)", "no catch-all"),
    ("for a in x:\n        return (3, 1, 4)\n    return (5, 4, 8)", "teach the parser"),
])
def test_parser_fails_loudly(body, reason):
    code = Inline({"sglang/srt/server_args.py": CALLER + f"""
def auto_choose_speculative_params(self):
    arch = self.get_hf_config().architectures[0]
    {body}
"""})
    with pytest.raises(dd.ParseFailure, match=reason):
        dd.analyze_sglang(code)


def test_parser_needs_the_num_steps_guard():
    code = Inline({"sglang/srt/server_args.py": """
class ServerArgs:
    def __post_init__(self):
        self.a, self.b, self.c = auto_choose_speculative_params(self)

def auto_choose_speculative_params(self):
    arch = self.hf_config.architectures[0]
    return (5, 4, 8)
"""})
    with pytest.raises(dd.ParseFailure, match="not guarded"):
        dd.analyze_sglang(code)


def test_vllm_parser():
    code = Inline({"vllm/config.py": """
class SpeculativeConfig:
    num_speculative_tokens: int = Field(default=None, gt=0)
    method: str = "eagle3"
    def _verify_args(self):
        if self.num_speculative_tokens is None:
            raise ValueError("num_speculative_tokens must be provided")
"""})
    rule = dd.analyze_vllm(code)
    assert rule.num_speculative_tokens is None and rule.required and not rule.tree
    silent = Inline({"vllm/config.py": "class SpeculativeConfig:\n    num_speculative_tokens: int = None\n"
                                       "    m = 'eagle3'\n"})
    with pytest.raises(dd.ParseFailure, match="nothing raises"):
        dd.analyze_vllm(silent)


# ---------------------------------------------------------------- against installed engines

def _site_packages(engine: str) -> list[tuple[str, Path]]:
    out = []
    for env in sorted(ENGINES.glob(f"{engine}-*")):
        sp = next(iter(env.glob("lib/python3*/site-packages")), None)
        if sp is not None and (sp / engine).is_dir():
            out.append((env.name.split("-", 1)[1], sp))
    return out


@pytest.mark.parametrize("engine", ["sglang", "vllm"])
def test_table_matches_the_code_of_installed_releases(engine):
    """The parser run on each installed side environment gives the shipped row (git tags and wheels
    are two copies of the same release)."""
    envs = _site_packages(engine)
    if not envs:
        pytest.skip(f"no {engine} side environment under .cache/engines")
    table = drafting_table(engine)["releases"]
    for version, sp in envs:
        if version not in table:
            continue
        rule = dd.ANALYZE[engine](dd.TreeCode(str(sp))).as_json()
        expected = dict(table[version])
        rule.pop("read"), expected.pop("read")
        assert rule == expected, version


@pytest.mark.slow
def test_sglang_0_5_23_function_agrees():
    """Import the real `_auto_choose_speculative_params` from sglang 0.5.23 and ask it."""
    py = ENGINES / "sglang-0.5.23" / "bin" / "python"
    if not py.exists():
        pytest.skip("no sglang 0.5.23 side environment (make engine-env ENGINE=sglang VERSION=0.5.23)")
    archs = ["LlamaForCausalLM", "DeepseekV3ForCausalLM", "GptOssForCausalLM", "Grok1ForCausalLM",
             "Qwen3ForCausalLM", "Qwen2ForCausalLM", "MiMoV2FlashForCausalLM"]
    script = textwrap.dedent(f"""
        import json, sys
        from types import SimpleNamespace
        from sglang.srt.arg_groups.speculative_hook import _auto_choose_speculative_params as f
        out = {{a: list(f(SimpleNamespace(speculative_algorithm="EAGLE3"), a)) for a in {archs!r}}}
        out["STANDALONE"] = list(f(SimpleNamespace(speculative_algorithm="STANDALONE"), "LlamaForCausalLM"))
        print("@@" + json.dumps(out))
    """)
    r = subprocess.run([str(py), "-c", script], capture_output=True, text=True, timeout=600, cwd=REPO)
    line = next((ln for ln in r.stdout.splitlines() if ln.startswith("@@")), None)
    assert line, r.stderr[-2000:]
    real = json.loads(line[2:])
    for arch in archs:
        assert list(triple(default_drafting("sglang", "0.5.23", arch))) == real[arch], arch
    assert list(triple(default_drafting("sglang", "0.5.23", "LlamaForCausalLM", "STANDALONE"))) == real["STANDALONE"]
