"""inspect --launch: the serving command read against the draft."""

from __future__ import annotations

import json
import shutil

from conftest import DRAFTS, TARGET_CONFIG
from eagle3_nb.engines.launch import read_launch

SGLANG = ("python -m sglang.launch_server --model-path /models/target --speculative-algorithm "
          "{algo} --speculative-draft-model-path /models/draft --speculative-num-steps 3 "
          "--speculative-eagle-topk 4 --speculative-num-draft-tokens 8 --tp-size 2")
VLLM = ("vllm serve /models/target --tensor-parallel-size 4 --speculative-config "
        "'{{\"model\": \"/models/draft\", \"method\": \"{method}\", \"num_speculative_tokens\": 3}}'")


def launch_codes(run_cli, command, variant="good", engine="sglang==0.5.23"):
    rc, out, err = run_cli("inspect", DRAFTS / variant, "--no-stats", "--json", "--engine", engine,
                           "--target-config", TARGET_CONFIG, "--launch", command)
    assert rc in (0, 1), err
    data = json.loads(out)
    return data, [f for f in data["findings"] if f["code"] == "LAUNCH_SETTING"]


def test_sglang_with_eagle_instead_of_eagle3_is_the_accept_length_one_case(run_cli):
    data, found = launch_codes(run_cli, SGLANG.format(algo="EAGLE"))
    assert [f["severity"] for f in found] == ["error"] and "EAGLE3" in found[0]["message"]
    assert data["launch"]["num_steps"] == 3 and data["launch"]["topk"] == 4
    assert data["launch"]["num_draft_tokens"] == 8 and data["launch"]["tensor_parallel"] == 2
    _, found = launch_codes(run_cli, SGLANG.format(algo="EAGLE3"))
    assert found == []


def test_vllm_method_and_settings(run_cli):
    data, found = launch_codes(run_cli, VLLM.format(method="eagle3"), engine="vllm==0.33")
    assert found == [] and data["launch"]["num_steps"] == 3
    assert data["launch"]["tensor_parallel"] == 4 and data["launch"]["draft"] == "/models/draft"
    _, found = launch_codes(run_cli, VLLM.format(method="eagle"), engine="vllm==0.33")
    assert found and found[0]["severity"] == "error"


def test_a_missing_draft_and_an_inherited_mla_backend(run_cli):
    cmd = "python -m sglang.launch_server --model-path /m --speculative-algorithm EAGLE3 " \
          "--attention-backend trtllm_mla"
    _, found = launch_codes(run_cli, cmd)
    messages = " ".join(f["message"] for f in found)
    assert "names no draft model" in messages and "inherits it" in messages
    _, found = launch_codes(run_cli, cmd + " --speculative-draft-model-path /d", "mla-draft")
    assert found == []  # an MLA draft runs on an MLA backend


def test_a_command_file_with_continuations(tmp_path):
    path = tmp_path / "serve.sh"
    path.write_text("python3 -m sglang.launch_server \\\n  --model-path /m \\\n"
                    "  --speculative-algorithm=EAGLE3 --disable-cuda-graph\n")
    s = read_launch(str(path))
    assert s.engine == "sglang" and s.method == "EAGLE3" and s.cuda_graphs is False


def test_not_a_serving_command(run_cli):
    rc, _, err = run_cli("inspect", DRAFTS / "good", "--no-stats", "--launch", "python train.py")
    assert rc == 2 and "starts no SGLang or TensorRT-LLM or vLLM server" in err


def test_a_long_one_line_command_is_read_as_a_command_not_a_file_name():
    """A command longer than a file name may be (255 bytes) made Path.is_file raise
    ENAMETOOLONG: a traceback instead of the findings."""
    spec = json.dumps({"model": "draft", "method": "eagle3", "num_speculative_tokens": 3,
                       "draft_tensor_parallel_size": 1, "comment": "x" * 300})
    got = read_launch(f"vllm serve target --speculative-config '{spec}'")
    assert got.engine == "vllm" and got.num_steps == 3


def test_tensor_parallel_sizes_the_draft_cannot_be_sharded_by():
    """The bundled draft has 4 heads, 2 kv heads, intermediate 128: TP 8 breaks its heads
    (both engines assert); vLLM's draft_tensor_parallel_size 1 is the way out."""
    from eagle3_nb.config import parse_config
    from eagle3_nb.engines import resolve_engines
    from eagle3_nb.engines.launch import launch_findings

    cfg = parse_config(json.loads((DRAFTS / "good" / "config.json").read_text()))
    sglang = SGLANG.format(algo="EAGLE3")
    vllm_spec = ('vllm serve /models/target --tensor-parallel-size 8 --speculative-config '
                 "'{\"method\": \"eagle3\", \"model\": \"/models/draft\", "
                 "\"num_speculative_tokens\": 3%s}'")

    def tp_findings(command, engine):
        return [f for f in launch_findings(read_launch(command), cfg, resolve_engines([engine]))
                if "sharded" in f.message]
    broken = tp_findings(sglang + " --tp-size 8", "sglang==0.5.23")
    assert len(broken) == 1 and "num_attention_heads 4" in broken[0].message
    assert "num_key_value_heads" not in broken[0].message        # 8 % 2 == 0 is allowed
    assert not tp_findings(sglang + " --tp-size 2", "sglang==0.5.23")
    assert tp_findings(vllm_spec % "", "vllm==0.33")
    assert not tp_findings(vllm_spec % ', "draft_tensor_parallel_size": 1', "vllm==0.33")


def test_a_bug_that_needs_the_serving_command_is_conditional_until_it_is_given():
    """vLLM before 0.10.2 infers method 'eagle' from an 'eagle3-' path only when the
    speculative config names no method: without the command the bug is said, as info; a
    command that names the method removes it; one that does not makes it a warning."""
    from eagle3_nb.checks.load import inspect_checkpoint

    def bug(launch):
        data = inspect_checkpoint(DRAFTS / "good", ["vllm==0.10.0"], stats=False,
                                  launch=launch).to_json()
        return [f for f in data["findings"] if f["evidence"].get("bug") ==
                "survey:vllm-eagle3-path-as-eagle"]
    (unknown,) = bug(None)
    assert unknown["severity"] == "info" and "only if the serving command" in unknown["message"]
    assert bug(VLLM.format(method="eagle3")) == []
    spec = json.dumps({"model": "/ckpt/eagle3-draft", "num_speculative_tokens": 3})
    (unset,) = bug(f"vllm serve /models/target --speculative-config '{spec}'")
    assert unset["severity"] == "warning" and "names no method" in unset["message"]


def test_vllm_serve_of_a_speculators_checkpoint_is_a_served_draft():
    """`vllm serve <speculators checkpoint>`: vLLM reads its speculators_config, serves the
    verifier and drafts with the checkpoint (maybe_override_with_speculators, 0.10.1 on); before
    0.10.1 it is read as a target model; a local verifier is refused from 0.33.0."""
    from eagle3_nb.checks.load import inspect_checkpoint

    draft = DRAFTS / "good-speculators"
    launch = read_launch(f"vllm serve {draft}")
    assert launch.draft == str(draft) and launch.model == "eagle3-nb/tiny-llama-target"
    assert (launch.method, launch.num_steps) == ("eagle3", 3)

    def found(engine, command):
        data = inspect_checkpoint(draft, [engine], stats=False, launch=command).to_json()
        return [f for f in data["findings"] if f["code"] == "LAUNCH_SETTING"]
    assert found("vllm==0.34.0", f"vllm serve {draft}") == []
    (old,) = found("vllm==0.10.0", f"vllm serve {draft}")
    assert old["severity"] == "error" and "does not read as one" in old["message"]
    (hub,) = found("vllm==0.34.0", "vllm serve someone/eagle3-speculators")
    assert hub["severity"] == "warning" and "unless someone/eagle3-speculators is a speculators" \
        in hub["message"]


def test_a_local_speculators_verifier_is_refused_from_vllm_0_33(tmp_path):
    draft = tmp_path / "draft"
    shutil.copytree(DRAFTS / "good-speculators", draft)
    raw = json.loads((draft / "config.json").read_text())
    raw["speculators_config"]["verifier"]["name_or_path"] = str(tmp_path)
    (draft / "config.json").write_text(json.dumps(raw))
    from eagle3_nb.checks.load import inspect_checkpoint

    for engine, refused in (("vllm==0.34.0", True), ("vllm==0.25.0", False)):
        data = inspect_checkpoint(draft, [engine], stats=False,
                                  launch=f"vllm serve {draft}").to_json()
        errors = [f for f in data["findings"] if f["code"] == "LAUNCH_SETTING"
                  and "remote model repository" in f["message"]]
        assert bool(errors) == refused, engine
