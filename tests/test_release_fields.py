"""tools/release_fields.py on a tiny git history built here (no /tmp/survey, no network)."""

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

TOOL = Path(__file__).resolve().parent.parent / "tools" / "release_fields.py"
spec = importlib.util.spec_from_file_location("release_fields", TOOL)
rf = importlib.util.module_from_spec(spec)
sys.modules["release_fields"] = rf
spec.loader.exec_module(rf)

GIT_ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com",
           "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
DRAFT = "pkg/models/draft.py"

# three releases of a made-up engine: 1.1.0 adds a registry entry and reads fc_norm,
# 1.2.0 adds a capture file; an rc tag in between must be skipped
V1 = {DRAFT: """\
class Draft:
    def __init__(self, config):
        self.fc = make_fc(config)

    def load_weights(self, weights):
        for name, w in weights:
            load("model." + name, w)

REGISTRY = ["DraftA"]
""", "pkg/other.py": "x = 1\n"}
V1_1 = {DRAFT: """\
class Draft:
    def __init__(self, config):
        self.fc = make_fc(config)
        self.fc_norm = getattr(config, "fc_norm", False)

    def load_weights(self, weights):
        for name, w in weights:
            load(name if name in params else "model." + name, w)

REGISTRY = [
    "DraftA",
    "DraftB",
]
""", "pkg/other.py": "x = 1\n"}
V1_2 = {**V1_1, "pkg/models/capture.py": "def set_layers(ids):\n    return [i + 1 for i in ids]\n"}
RC = {**V1_2, "pkg/models/capture.py": "def set_layers(ids):\n    return ids\n"}


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True,
                          env={**os.environ, **GIT_ENV}).stdout


def _commit(repo: Path, files: dict[str, str], tag: str) -> None:
    for path in list(repo.glob("pkg/**/*.py")):  # each release is a full tree
        path.unlink()
    for path, text in files.items():
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).write_text(text)
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", tag)
    _git(repo, "tag", tag)


@pytest.fixture(scope="module")
def engine_repo(tmp_path_factory) -> Path:
    repo = tmp_path_factory.mktemp("engine")
    _git(repo, "init", "-q")
    for files, tag in ((V1, "v1.0.0"), (V1_1, "v1.1.0"), (RC, "v1.2.0rc1"), (V1_2, "v1.2.0")):
        _commit(repo, files, tag)
    return repo / ".git"


MARKERS = (
    rf.Marker("key_resolution",
              (rf.P(DRAFT, "has", r"name if name in params", "Draft.load_weights"),),
              "bare name first", "1.1.0", {"n": "model_prefix", "y": "bare_or_model"}),
    rf.Marker("fc_norm", (rf.P(DRAFT, "has", r"fc_norm", "Draft.__init__"),), "reads fc_norm",
              "1.1.0"),
    rf.Marker("registry", (rf.P("pkg/*.py", "extract", r"REGISTRY = \[([^\]]*)\]"),),
              "registered drafts", "1.1.0", tracked="info"),
    rf.Marker("capture", (rf.P("pkg/models/capture.py", "exists", "", "set_layers"),
                          rf.P("pkg/models/capture.py", "has", r"i \+ 1", "set_layers")),
              "capture rule", "1.2.0", {"n/-": "unsupported", "y/y": "plus_one"}),
)


def _rows(engine_repo: Path, markers=MARKERS, since=None):
    repo = rf.GitRepo(str(engine_repo))
    tags = rf.select_releases(repo.release_tags(), since)
    try:
        return rf.evaluate(repo, markers, tags)
    finally:
        repo.close()


# ---------------------------------------------------------------- marker evaluation

def test_release_tags_skip_rc_and_sort(engine_repo):
    assert rf.GitRepo(str(engine_repo)).release_tags() == ["v1.0.0", "v1.1.0", "v1.2.0"]


def test_marker_values_per_release(engine_repo):
    rows = dict(_rows(engine_repo))
    assert rows["v1.0.0"] == {"key_resolution": "model_prefix", "fc_norm": "n",
                              "registry": "DraftA", "capture": "unsupported"}
    assert rows["v1.1.0"]["key_resolution"] == "bare_or_model"
    assert rows["v1.1.0"]["fc_norm"] == "y"
    # spaces, quotes, newlines and trailing commas do not count
    assert rows["v1.1.0"]["registry"] == "DraftA,DraftB"
    assert rows["v1.2.0"]["capture"] == "plus_one"


def test_probe_outcomes_for_missing_file_and_function(engine_repo):
    repo = rf.GitRepo(str(engine_repo))
    ev = rf.Evaluator(repo, MARKERS)
    tree = repo.tree("v1.0.0", ["pkg/"])

    def files(pattern):
        return [sha for path, sha in sorted(tree.items()) if rf._path_matches(path, pattern)]
    assert ev.probe(rf.P("pkg/nope.py", "has", "x"), files("pkg/nope.py")) == "-"
    assert ev.probe(rf.P(DRAFT, "has", "x", "Draft.nope"), files(DRAFT)) == "-"
    assert ev.probe(rf.P(DRAFT, "exists", "", "Draft.nope"), files(DRAFT)) == "n"
    assert ev.probe(rf.P(DRAFT, "exists", "", "*.load_weights"), files(DRAFT)) == "y"
    assert ev.probe(rf.P(DRAFT, "extract", r"never here"), files(DRAFT)) == "none"
    # a glob searches every matching file
    assert ev.probe(rf.P("pkg/*.py", "has", r"x = 1"), files("pkg/*.py")) == "y"
    # the pattern sees only the named function's source
    assert ev.probe(rf.P(DRAFT, "has", "REGISTRY", "Draft.__init__"), files(DRAFT)) == "n"
    repo.close()


def test_unknown_raw_value_is_flagged():
    marker = rf.Marker("f", (), "", "", {"n": "no", "y": "yes"})
    assert rf.label(marker, "y") == "yes"
    assert rf.label(marker, "y/n") == "y/n?"
    assert rf.label(rf.Marker("g", (), "", ""), "raw") == "raw"


def test_functions_in_falls_back_on_unparsable_source():
    src = "class A:\n    def f(self):\n        match = 1 +\n\n    def g(self):\n        return 2\n"
    found = rf.functions_in(src)
    assert set(found) == {"A.f", "A.g"}
    assert "return 2" in found["A.g"] and "return 2" not in found["A.f"]


def test_fixed_dir_limits_ls_tree():
    assert rf._fixed_dir("pkg/models/draft.py") == "pkg/models/draft.py"
    assert rf._fixed_dir("pkg/models/*eagle3*.py") == "pkg/models/"
    assert rf._fixed_dir("vllm/config*.py") == "vllm/"


# ---------------------------------------------------------------- change points

def test_change_points(engine_repo):
    changes = rf.change_points(_rows(engine_repo))
    assert [(c.field, c.release, c.old, c.new) for c in changes] == [
        ("key_resolution", "1.1.0", "model_prefix", "bare_or_model"),
        ("fc_norm", "1.1.0", "n", "y"),
        ("registry", "1.1.0", "DraftA", "DraftA,DraftB"),
        ("capture", "1.2.0", "unsupported", "plus_one"),
    ]
    assert all(c.previous == {"1.1.0": "1.0.0", "1.2.0": "1.1.0"}[c.release] for c in changes)


def test_since_limits_the_releases(engine_repo):
    rows = _rows(engine_repo, since="v1.1.0")
    assert [tag for tag, _ in rows] == ["v1.1.0", "v1.2.0"]
    assert [c.release for c in rf.change_points(rows)] == ["1.2.0"]


def test_select_releases_keeps_an_older_baseline():
    tags = ["v1.0.0", "v1.1.0", "v1.2.0", "v1.3.0"]
    assert rf.select_releases(tags, "v1.2.0", baseline="1.0.0") == ["v1.0.0", "v1.2.0", "v1.3.0"]
    assert rf.select_releases(tags, "v1.0.0", baseline="1.2.0") == tags  # already inside
    assert rf.select_releases(tags, None, until="v1.1.0") == ["v1.0.0", "v1.1.0"]


def test_describe_lists_and_scalars():
    assert rf.describe("a,b", "a,b,c") == "+c"
    assert rf.describe("n", "y") == "n -> y"
    assert rf.describe("top", "top, eagle_config") == "top -> top, eagle_config"


# ---------------------------------------------------------------- the profile check

def test_check_passes_when_ranges_start_at_every_change(engine_repo):
    rows = _rows(engine_repo)
    check = rf.check_profiles(rows, MARKERS, [("1.0.0", "1.0.0"), ("1.1.0", "1.1.0"),
                                              ("1.2.0", "1.2.0")])
    assert not check.failed
    assert check.missed == [] and check.unprofiled == [] and check.quiet_starts == []


def test_check_reports_a_change_inside_a_range(engine_repo):
    rows = _rows(engine_repo)
    check = rf.check_profiles(rows, MARKERS, [("1.0.0", "1.0.0"), ("1.1.0", "1.2.0")])
    assert check.failed
    assert [(c.field, c.release, where) for c, where in check.missed] == [
        ("capture", "1.2.0", ("1.1.0", "1.2.0"))]


def test_check_reports_unprofiled_releases_with_changed_fields(engine_repo):
    rows = _rows(engine_repo)
    check = rf.check_profiles(rows, MARKERS, [("1.0.0", "1.0.0")])
    assert check.failed and check.missed == []
    assert [(release, [(c.field, c.old, c.new, c.previous) for c in diff])
            for release, diff in check.unprofiled] == [
        ("1.1.0", [("key_resolution", "model_prefix", "bare_or_model", "1.0.0"),
                   ("fc_norm", "n", "y", "1.0.0"),
                   ("registry", "DraftA", "DraftA,DraftB", "1.0.0")]),
        ("1.2.0", [("key_resolution", "model_prefix", "bare_or_model", "1.0.0"),
                   ("fc_norm", "n", "y", "1.0.0"), ("registry", "DraftA", "DraftA,DraftB", "1.0.0"),
                   ("capture", "unsupported", "plus_one", "1.0.0")])]


def test_info_markers_and_steps_do_not_fail(engine_repo):
    rows = _rows(engine_repo)
    ranges = [("1.0.0", "1.0.0"), ("1.1.0", "1.2.0")]
    stepped = tuple(rf.Marker(m.field, m.probes, m.why, m.cite, m.labels,
                              "steps" if m.field == "capture" else m.tracked) for m in MARKERS)
    check = rf.check_profiles(rows, stepped, ranges, steps=("1.2.0",))
    assert not check.failed
    # the same change outside a range start but tracked as info is reported, never a failure
    shifted = [("1.0.0", "1.0.0"), ("1.1.0", "1.1.0"), ("1.2.0", "1.2.0")]
    info_only = tuple(rf.Marker(m.field, m.probes, m.why, m.cite, m.labels, "info")
                      for m in MARKERS)
    check = rf.check_profiles(rows, info_only, [("1.0.0", "1.2.0")])
    assert not check.failed and {c.field for c, _ in check.untracked} == {
        "key_resolution", "fc_norm", "registry", "capture"}
    check = rf.check_profiles(rows, info_only, shifted)
    assert check.quiet_starts == ["1.1.0", "1.2.0"]  # no tracked marker flips there


def test_cli_check_profiles(engine_repo, monkeypatch, capsys):
    monkeypatch.setitem(rf.MARKERS, "sglang", MARKERS)
    monkeypatch.setitem(rf.UNMARKABLE, "sglang", (rf.Unmarkable("embed", "read by hand"),))
    monkeypatch.setattr(rf, "profile_ranges", lambda engine: ([("1.0.0", "1.1.0")], ()))
    assert rf.main([str(engine_repo), "sglang"]) == 0
    assert rf.main([str(engine_repo), "sglang", "--check-profiles"]) == 1
    out = capsys.readouterr().out
    assert "MISSED: key_resolution changes at 1.1.0 inside the profile range 1.0.0 .. 1.1.0" in out
    assert "NOT PROFILED: 1.2.0" in out and "capture (unsupported -> plus_one)" in out
    assert "not markable: read by hand" in out
    # --since after the last profiled release still compares with that release
    assert rf.main([str(engine_repo), "sglang", "--since", "v1.2.0", "--check-profiles"]) == 1
    out = capsys.readouterr().out
    assert "changed since 1.1.0: capture (unsupported -> plus_one)" in out
    assert "| 1.2.0 | capture | unsupported -> plus_one |" in out


def test_cli_rejects_a_non_repository_and_a_bad_release(tmp_path, engine_repo, capsys):
    assert rf.main([str(tmp_path), "vllm"]) == 2
    assert "not a git directory" in capsys.readouterr().err
    assert rf.main([str(engine_repo), "vllm", "--since", "latest"]) == 2
    assert "cannot read version" in capsys.readouterr().err
    assert rf.main([str(engine_repo), "vllm", "--since", "v9.0"]) == 2
    assert "no release tags from v9.0" in capsys.readouterr().err


# ---------------------------------------------------------------- the real marker tables

@pytest.mark.parametrize("engine", sorted(rf.MARKERS))
def test_marker_tables_are_well_formed(engine):
    markers = rf.MARKERS[engine]
    assert len({m.field for m in markers}) == len(markers)
    for m in markers:
        assert m.probes and m.why and m.cite, m.field
        assert m.tracked in ("range", "steps", "info"), m.field
        for p in m.probes:
            assert p.test in ("exists", "has", "extract"), m.field
            assert (p.test == "exists") == (not p.pattern), m.field
        # every labelled raw value has one part per probe
        assert all(raw.count("/") == len(m.probes) - 1 for raw in m.labels), m.field
