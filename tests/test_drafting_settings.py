"""Where a simulation's drafting settings come from: the parameters, the launch command, the
engine's own default for the target (read per release), the engine's log; and a figure measured
with other settings is never compared silently. No model runs here."""

from pathlib import Path

import pytest

from eagle3_nb.checks.drafting import resolve_drafting
from eagle3_nb.engines.launch import read_launch
from eagle3_nb.errors import Eagle3NbError
from eagle3_nb.observed.metrics import parse_observed

RECORDINGS = Path(__file__).parent / "recordings"
LLAMA, QWEN = "LlamaForCausalLM", "Qwen3ForCausalLM"


def shape(d):
    return d.num_steps, d.topk, d.num_draft_tokens


def test_nothing_stated_is_the_kits_chain_and_says_so():
    d = resolve_drafting()
    assert shape(d) == (4, 1, 5) and d.source == "the kit's defaults"


def test_parameters_win_when_nothing_contradicts_them():
    d = resolve_drafting(num_steps=5, topk=4, num_draft_tokens=8)
    assert shape(d) == (5, 4, 8) and d.source == "parameters"


def test_a_launch_command_states_the_tree():
    launch = read_launch("python -m sglang.launch_server --model-path m --speculative-algorithm "
                         "EAGLE3 --speculative-draft-model-path d --speculative-num-steps 3 "
                         "--speculative-eagle-topk 2 --speculative-num-draft-tokens 6")
    d = resolve_drafting(launch=launch)
    assert shape(d) == (3, 2, 6) and "launch command" in d.source


def test_a_launch_without_drafting_flags_takes_the_engines_default_for_the_target():
    launch = read_launch("python -m sglang.launch_server --model-path m --speculative-algorithm "
                         "EAGLE3 --speculative-draft-model-path d")
    llama = resolve_drafting(launch=launch, architecture=LLAMA, engines=["sglang==0.5.23"])
    assert shape(llama) == (5, 4, 8) and "sglang 0.5.23's default for LlamaForCausalLM" in llama.source
    # the catch-all branch changed in 0.5.8 (engines/drafting.py, read per release)
    assert shape(resolve_drafting(launch=launch, architecture=QWEN,
                                  engines=["sglang==0.5.23"])) == (3, 1, 4)
    assert shape(resolve_drafting(launch=launch, architecture=QWEN,
                                  engines=["sglang==0.5.7"])) == (5, 4, 8)


def test_a_vllm_log_states_its_draft_positions():
    observed = parse_observed(RECORDINGS / "vllm-0.33-specdecode.log")
    d = resolve_drafting(observed=observed, architecture=LLAMA)
    assert shape(d) == (3, 1, 4) and "3 draft tokens per verify step" in d.source


def test_an_sglang_log_matching_the_default_tree_is_read_as_that_tree():
    observed = parse_observed(RECORDINGS / "sglang-0.5.23-decode.log")
    assert observed.draft_tokens_per_step == 3
    # a Llama target's SGLang default verifies 8 tokens, not 4: the log's 3 drafts per step
    # cannot be the default tree, so it is read as a chain of 3 ...
    assert shape(resolve_drafting(observed=observed, architecture=LLAMA)) == (3, 1, 4)
    # ... and for a target whose default is (3, 1, 4), the default is named as the source
    d = resolve_drafting(observed=observed, architecture=QWEN)
    assert shape(d) == (3, 1, 4) and "default for Qwen3ForCausalLM" in d.source


def test_parameters_that_contradict_the_engine_are_refused():
    observed = parse_observed(RECORDINGS / "vllm-0.33-specdecode.log")
    with pytest.raises(Eagle3NbError, match="states a chain of 3"):
        resolve_drafting(num_steps=4, observed=observed)
    assert shape(resolve_drafting(num_steps=3, observed=observed)) == (3, 1, 4)


def test_the_running_servers_own_arguments_come_first():
    from eagle3_nb.observed.metrics import ObservedMetrics
    observed = ObservedMetrics("sglang", "observe.json", mean_accept_length=3.1,
                               draft_tokens_per_step=7,
                               details={"settings": {"num_steps": 5, "topk": 4,
                                                     "num_draft_tokens": 8}})
    d = resolve_drafting(observed=observed, architecture=QWEN)
    assert shape(d) == (5, 4, 8) and "the server's own arguments" in d.source
