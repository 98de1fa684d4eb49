"""tools/engine_survey.py on a small synthetic engine history (no network, no fetched repo)."""

import importlib.util
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

TOOL = Path(__file__).resolve().parent.parent / "tools" / "engine_survey.py"
spec = importlib.util.spec_from_file_location("engine_survey", TOOL)
survey = importlib.util.module_from_spec(spec)
sys.modules["engine_survey"] = survey
spec.loader.exec_module(survey)

MODELS = "python/sglang/srt/models/"
WORKER = "python/sglang/srt/speculative/eagle_worker.py"
GIT_ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com",
           "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}

LLAMA_PLAIN = """\
class LlamaForCausalLM:
    def forward(self, x):
        return x
"""
LLAMA_CAPTURE = LLAMA_PLAIN + """
    def set_eagle3_layers_to_capture(self, layer_ids=None):
        self.layers_to_capture = [i + 1 for i in layer_ids]
"""
QWEN_PLAIN = """\
class Qwen2ForCausalLM:
    def forward(self, x):
        return x
"""
QWEN_CAPTURE = QWEN_PLAIN + """
    def set_eagle3_layers_to_capture(self, layer_ids=None):
        self.layers_to_capture = layer_ids
"""
DRAFT_V1 = """\
class LlamaForCausalLMEagle3:
    def __init__(self, config):
        self.config = config

    def forward(self, x):
        return x

    def load_weights(self, weights):
        for name, w in weights:
            name = name.replace("midlayer", "layers.0")
"""
DRAFT_V2 = DRAFT_V1.replace('"layers.0")', '"layers.0")\n            self.hot_token_id = w')
WORKER_V1 = """\
class EAGLEWorker:
    def init_token_map(self):
        self.hot_token_id = None

    def draft(self):
        return 1
"""
WORKER_V2 = WORKER_V1.replace("self.hot_token_id = None", "self.hot_token_id = d2t + offsets")


def git(repo: Path, *args: str) -> str:
    proc = subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.com",
                           *args], capture_output=True, text=True, env={**os.environ, **GIT_ENV})
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def commit(repo: Path, files: dict[str, str], subject: str, day: int) -> None:
    for path, text in files.items():
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).write_text(text)
    git(repo, "add", "-A")
    stamp = f"2025-01-{day:02d}T12:00:00+0000"
    os.environ.update(GIT_AUTHOR_DATE=stamp, GIT_COMMITTER_DATE=stamp)
    try:
        git(repo, "commit", "-q", "-m", subject)
    finally:
        del os.environ["GIT_AUTHOR_DATE"], os.environ["GIT_COMMITTER_DATE"]


@pytest.fixture(scope="module")
def engine_repo(tmp_path_factory) -> str:
    """v0.0.9 (no draft) -> v0.1.0 (draft + Llama capture) -> v0.2.0 (load_weights, Qwen capture)."""
    repo = tmp_path_factory.mktemp("engine")
    git(repo, "init", "-q")
    git(repo, "symbolic-ref", "HEAD", "refs/heads/main")  # the history branch the tool follows
    commit(repo, {"README.md": "engine\n", MODELS + "llama.py": LLAMA_PLAIN,
                  MODELS + "qwen2.py": QWEN_PLAIN, WORKER: WORKER_V1}, "Initial layout (#100)", 1)
    git(repo, "tag", "v0.0.9")
    commit(repo, {MODELS + "llama_eagle3.py": DRAFT_V1, MODELS + "llama.py": LLAMA_CAPTURE},
           "Support EAGLE3 draft models (#101)", 2)
    git(repo, "tag", "-a", "v0.1.0", "-m", "release v0.1.0")
    commit(repo, {MODELS + "llama_eagle3.py": DRAFT_V2}, "Map d2t while loading the draft (#102)", 3)
    commit(repo, {"README.md": "engine, faster\n"}, "Docs only (#103)", 4)
    git(repo, "tag", "v0.2.0rc1")
    commit(repo, {MODELS + "qwen2.py": QWEN_CAPTURE}, "[Spec] EAGLE3 capture for Qwen2 (#104)", 5)
    commit(repo, {WORKER: WORKER_V2}, "Use d2t offsets for hot tokens (#105)", 6)
    git(repo, "tag", "v0.2.0")
    return str(repo / ".git")


@pytest.fixture(scope="module")
def report(engine_repo) -> dict:
    return survey.run_survey(engine_repo, "sglang")


def run_tool(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(TOOL), *args], capture_output=True, text=True,
                          env={**os.environ, **GIT_ENV})


def watch(pair: dict, name: str) -> dict[str, dict]:
    return {f["path"]: f for w in pair["watches"] if w["watch"] == name for f in w["files"]}


def test_release_order_and_rc_tags_ignored(engine_repo):
    assert survey.release_tags(survey.Repo(engine_repo)) == ["v0.0.9", "v0.1.0", "v0.2.0"]
    assert survey.release_tags(survey.Repo(engine_repo), pre_releases=True) == [
        "v0.0.9", "v0.1.0", "v0.2.0rc1", "v0.2.0"]
    tags = ["v0.5.10", "v0.9.1", "v0.5.9.post1", "v0.9.0.1", "v0.5.9", "v0.9.0", "v0.5.9rc0", "v0.5.9.dev1"]
    assert sorted(tags, key=survey.release_key) == [
        "v0.5.9.dev1", "v0.5.9rc0", "v0.5.9", "v0.5.9.post1", "v0.5.10", "v0.9.0", "v0.9.0.1", "v0.9.1"]


def test_first_eagle3_release_and_capture_table(report):
    assert report["first_eagle3_release"] == "v0.1.0"
    assert [(r["tag"], r["eagle3_draft"], r["capture"]) for r in report["releases"]] == [
        ("v0.0.9", False, []),
        ("v0.1.0", True, ["LlamaForCausalLM (llama.py)"]),
        ("v0.2.0", True, ["LlamaForCausalLM (llama.py)", "Qwen2ForCausalLM (qwen2.py)"]),
    ]


def test_function_level_changes_per_pair(report):
    first, second = report["pairs"]
    assert (first["from"], first["to"], second["from"], second["to"]) == (
        "v0.0.9", "v0.1.0", "v0.1.0", "v0.2.0")
    draft = watch(first, "draft model")[MODELS + "llama_eagle3.py"]
    assert draft["status"] == "A"
    assert draft["added"] == ["LlamaForCausalLMEagle3.__init__", "LlamaForCausalLMEagle3.forward",
                              "LlamaForCausalLMEagle3.load_weights"]
    assert watch(first, "target capture")[MODELS + "llama.py"]["added"] == [
        "LlamaForCausalLM.set_eagle3_layers_to_capture"]

    draft = watch(second, "draft model")[MODELS + "llama_eagle3.py"]
    assert (draft["status"], draft["added"], draft["removed"], draft["changed"]) == (
        "M", [], [], ["LlamaForCausalLMEagle3.load_weights"])
    capture = watch(second, "target capture")
    assert list(capture) == [MODELS + "qwen2.py"]
    assert capture[MODELS + "qwen2.py"]["added"] == ["Qwen2ForCausalLM.set_eagle3_layers_to_capture"]
    # the focus keeps only functions whose changed lines mention the hot-token map
    assert watch(second, "hot_token_id / d2t")[WORKER]["changed"] == ["EAGLEWorker.init_token_map"]


def test_commits_and_pr_numbers(report):
    first, second = report["pairs"]
    assert first["prs"] == [101]
    assert second["prs"] == [102, 104, 105]  # the docs-only #103 touches no watched path
    by_pr = {c["prs"][0]: c for c in second["commits"]}
    assert by_pr[102]["subject"] == "Map d2t while loading the draft (#102)"
    assert by_pr[102]["watches"] == ["draft model", "hot_token_id / d2t"]
    assert by_pr[104]["watches"] == ["target capture"]
    assert by_pr[105]["watches"] == ["eagle workers", "hot_token_id / d2t"]
    assert [c["date"] for c in second["commits"]] == ["2025-01-03", "2025-01-05", "2025-01-06"]


def test_tag_range(engine_repo):
    narrowed = survey.run_survey(engine_repo, "sglang", since="v0.1.0", until="v0.2.0")
    assert [r["tag"] for r in narrowed["releases"]] == ["v0.1.0", "v0.2.0"]
    assert len(narrowed["pairs"]) == 1
    assert narrowed["first_eagle3_release"] == "v0.1.0"


def test_pre_releases_only_when_asked(engine_repo):
    report = survey.run_survey(engine_repo, "sglang", since="v0.1.0", pre_releases=True)
    assert [(p["from"], p["to"], p["prs"]) for p in report["pairs"]] == [
        ("v0.1.0", "v0.2.0rc1", [102]), ("v0.2.0rc1", "v0.2.0", [104, 105])]


def test_cli_markdown_and_json(engine_repo):
    proc = run_tool(engine_repo, "sglang", "--since", "v0.1.0")
    assert proc.returncode == 0, proc.stderr
    assert "### v0.1.0 → v0.2.0" in proc.stdout
    assert "PRs: #102, #104, #105" in proc.stdout
    assert "| Qwen2ForCausalLM (qwen2.py) | v0.2.0 | (still present) |" in proc.stdout
    proc = run_tool(engine_repo, "sglang", "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["pairs"][1]["prs"] == [102, 104, 105]


@pytest.mark.parametrize("args, message", [
    (("--since", "v9.9.9"), "tag not found: v9.9.9"),
    (("--until", "v0.3.0"), "tag not found: v0.3.0"),
    (("--since", "v0.2.0rc1"), "not a release tag: v0.2.0rc1"),
])
def test_cli_missing_tag_exits_2(engine_repo, args, message):
    proc = run_tool(engine_repo, "sglang", *args)
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert proc.stderr.strip().splitlines() == [f"engine_survey: error: {message}"]


def test_cli_missing_git_dir_exits_2(tmp_path):
    proc = run_tool(str(tmp_path / "nowhere"), "vllm")
    assert proc.returncode == 2
    assert proc.stderr.strip() == f"engine_survey: error: git dir not found: {tmp_path / 'nowhere'}"
    proc = run_tool(str(tmp_path), "vllm")
    assert proc.returncode == 2
    assert "not a git directory" in proc.stderr


def test_regex_fallback_for_unparsable_source():
    source = "type Alias = int\n\nclass A:\n    def f(self):\n        def inner():\n            pass\n" \
             "        return 1\n\n    async def g(self):\n        pass\n\ndef top():\n    return 2\n"
    with pytest.raises(SyntaxError):
        compile(source, "x", "exec")
    found = survey.extract_functions(source)
    assert sorted(found) == ["A.f", "A.g", "top"]
    assert "inner" in found["A.f"]


def test_vllm_capture_by_interface_or_method():
    rule = survey.ENGINES["vllm"].capture
    source = ("class SupportsEagle3(Protocol):\n    def set_aux_hidden_state_layers(self, layers):\n        pass\n"
              "class A(nn.Module, SupportsEagle3):\n    pass\n"
              "class B(interfaces.SupportsEagle3):\n    pass\n"
              "class C:\n    def set_aux_hidden_state_layers(self, layers):\n        pass\n"
              "class D(SupportsEagle):\n    pass\n")
    assert survey.capture_classes_in(source, rule) == ["A", "B", "C"]


def bare_clone(engine_repo: str, tmp_path: Path) -> Path:
    clone = tmp_path / "clone.git"
    subprocess.run(["git", "clone", "-q", "--bare", engine_repo, str(clone)], check=True,
                   env={**os.environ, **GIT_ENV})
    return clone


def write_wheel(path: Path, members: dict[str, str]) -> None:
    with zipfile.ZipFile(path, "w") as archive:
        for name, text in members.items():
            archive.writestr(zipfile.ZipInfo(name, (2025, 1, 20, 0, 0, 0)), text)


def test_graft_wheel_adds_a_release_without_history(engine_repo, tmp_path):
    clone = bare_clone(engine_repo, tmp_path)
    wheel = tmp_path / "sglang-0.3.0-py3-none-any.whl"
    members = {  # name: (text, file time); the newest .py time becomes the commit date
        "sglang/srt/models/llama_eagle3.py": (DRAFT_V2.replace("return x", "return x * 2"),
                                              (2025, 2, 1, 8, 0, 0)),
        "sglang/srt/models/llama.py": (LLAMA_CAPTURE, (2025, 1, 30, 0, 0, 0)),
        "sglang/srt/models/mistral.py": (QWEN_CAPTURE.replace("Qwen2", "Mistral"), (2025, 1, 30, 0, 0, 0)),
        "sglang-0.3.0.dist-info/METADATA": ("Name: sglang\n", (2025, 3, 1, 0, 0, 0)),
    }
    with zipfile.ZipFile(wheel, "w") as archive:
        for name, (text, when) in members.items():
            archive.writestr(zipfile.ZipInfo(name, when), text)
    proc = run_tool(str(clone), "sglang", "--graft-wheel", str(wheel), "--tag", "v0.3.0")
    assert proc.returncode == 0, proc.stderr

    grafted = survey.run_survey(str(clone), "sglang", since="v0.2.0")
    pair = grafted["pairs"][0]
    assert pair["grafted"] and pair["prs"] == []  # x * 2 is in no branch commit: nothing to recover
    assert watch(pair, "draft model")[MODELS + "llama_eagle3.py"]["changed"] == [
        "LlamaForCausalLMEagle3.forward"]
    # qwen2.py -> mistral.py is paired as a rename; eagle_worker.py is not in the wheel: deleted
    renamed = watch(pair, "target capture")[MODELS + "mistral.py"]
    assert (renamed["status"], renamed["old_path"]) == ("R", MODELS + "qwen2.py")
    assert renamed["added"] == ["MistralForCausalLM.set_eagle3_layers_to_capture"]
    assert renamed["removed"] == ["Qwen2ForCausalLM.set_eagle3_layers_to_capture"]
    deleted = watch(pair, "eagle workers")[WORKER]
    assert (deleted["status"], deleted["removed"]) == ("D", ["EAGLEWorker.draft", "EAGLEWorker.init_token_map"])
    assert grafted["releases"][-1]["capture"] == ["LlamaForCausalLM (llama.py)",
                                                  "MistralForCausalLM (mistral.py)"]
    repo = survey.Repo(str(clone))
    assert repo.show("v0.3.0", "README.md") == "engine, faster\n"  # non-Python files kept
    assert repo.git("log", "-1", "--format=%cI %P", "v0.3.0").split() == [
        "2025-02-01T08:00:00+00:00", repo.git("rev-parse", "v0.2.0^{commit}").strip()]
    again = run_tool(str(clone), "sglang", "--graft-wheel", str(wheel), "--tag", "v0.3.0")
    assert again.returncode == 2 and "tag exists already: v0.3.0" in again.stderr


def test_grafted_release_recovers_commits_from_matching_file_versions(engine_repo, tmp_path):
    """A wheel whose draft file equals a branch version: the commits in between are found."""
    clone = bare_clone(engine_repo, tmp_path)
    wheel = tmp_path / "sglang-0.1.1-py3-none-any.whl"
    write_wheel(wheel, {"sglang/srt/models/llama_eagle3.py": DRAFT_V2,
                        "sglang/srt/models/llama.py": LLAMA_CAPTURE,
                        "sglang/srt/models/qwen2.py": QWEN_PLAIN.replace("return x", "return -x"),
                        "sglang/srt/speculative/eagle_worker.py": WORKER_V1.replace("return 1", "return 2")})
    proc = run_tool(str(clone), "sglang", "--graft-wheel", str(wheel), "--tag", "v0.1.1")
    assert proc.returncode == 0, proc.stderr

    pair = survey.run_survey(str(clone), "sglang", since="v0.1.0", until="v0.1.1")["pairs"][0]
    draft = watch(pair, "draft model")[MODELS + "llama_eagle3.py"]
    assert (draft["changed"], draft["history_matched"]) == (["LlamaForCausalLMEagle3.load_weights"], True)
    assert pair["prs"] == [102]
    assert [(c["subject"], c["recovered"], c["watches"]) for c in pair["commits"]] == [
        ("Map d2t while loading the draft (#102)", True, ["draft model", "hot_token_id / d2t"])]
    proc = run_tool(str(clone), "sglang", "--since", "v0.1.0", "--until", "v0.1.1")
    assert "(1 of 2 changed files matched)" in proc.stdout
    assert f"`{WORKER}` (modified) — changed: EAGLEWorker.draft [no upstream history found]" in proc.stdout
    without = survey.run_survey(str(clone), "sglang", since="v0.1.0", until="v0.1.1", history_branch="gone")
    assert without["pairs"][0]["prs"] == []
    assert watch(without["pairs"][0], "draft model")[MODELS + "llama_eagle3.py"]["history_matched"] is False
