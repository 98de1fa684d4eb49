"""How a run runs (issue #26): torch threads chosen for the model size unless the user says, and
progress bars shown where someone watches, never saved as dead widgets in the notebooks the
report runs headless."""

import json
import os
from pathlib import Path

import nbformat
import pytest

from eagle3_nb.progress import progress_bar
from eagle3_nb.defaults import PROGRESS_VARIABLE, THREADS_VARIABLE
from eagle3_nb.errors import Eagle3NbError
from eagle3_nb.session import SMALL_MODEL_PARAMS, choose_threads


def test_threads_follow_the_model_size_unless_the_user_sets_them(monkeypatch):
    monkeypatch.delenv(THREADS_VARIABLE, raising=False)
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    assert choose_threads(361_536).count == 1                       # the bundled target
    big = choose_threads(8_000_000_000)
    assert big.count >= 1 and "cores" in big.why and big.count == choose_threads(
        SMALL_MODEL_PARAMS).count
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    assert (choose_threads(361_536).count, choose_threads(361_536).why) == (3, "OMP_NUM_THREADS")
    monkeypatch.setenv(THREADS_VARIABLE, "2")                       # --threads wins
    assert (choose_threads(8_000_000_000).count, choose_threads(1).why) == (2, "--threads")
    monkeypatch.setenv(THREADS_VARIABLE, "two")
    with pytest.raises(Eagle3NbError, match="not a thread count"):
        choose_threads(1)


@pytest.mark.slow
def test_accept_says_its_threads_and_honours_the_flag(run_cli, monkeypatch):
    import re

    from conftest import DRAFTS, SAMPLES

    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.delenv(THREADS_VARIABLE, raising=False)
    args = ["accept", DRAFTS / "good", "--target", SAMPLES / "target", "--n-samples", "2",
            "--max-new-tokens", "8"]
    rc, out, err = run_cli(*args)
    assert rc == 0, err
    assert re.search(r"1 torch thread \(\d\.\dM parameters", out), out
    rc, out, err = run_cli(*args, "--threads", "2")
    assert rc == 0 and "2 torch threads (--threads)" in out, out + err


def test_a_long_run_shows_a_bar_unless_progress_is_off(monkeypatch):
    monkeypatch.delenv(PROGRESS_VARIABLE, raising=False)
    with progress_bar(64, None, "simulating") as bar:
        assert hasattr(bar, "n")               # a tqdm bar
    with progress_bar(4, None, "simulating") as bar:
        assert not hasattr(bar, "n")           # too short to wait on
    monkeypatch.setenv(PROGRESS_VARIABLE, "off")
    with progress_bar(64, None, "simulating") as bar:
        assert not hasattr(bar, "n")
    with progress_bar(64, True, "simulating") as bar:
        assert hasattr(bar, "n")               # asked for explicitly


def test_a_relayed_run_writes_a_line_now_and_then_and_one_at_the_end(tmp_path, monkeypatch):
    """In a notebook the report runs, progress goes to the file the report names, as lines:
    one per LINE_EVERY_S seconds at most, and the last prompt's always."""
    import eagle3_nb.progress as progress
    from eagle3_nb.defaults import PROGRESS_FILE_VARIABLE

    lines = tmp_path / "lines"
    monkeypatch.setenv(PROGRESS_VARIABLE, "off")
    monkeypatch.setenv(PROGRESS_FILE_VARIABLE, str(lines))
    clock = iter([0.0, 1.0, 6.0, 7.0, 8.0])
    monkeypatch.setattr(progress.time, "monotonic", lambda: next(clock))
    with progress_bar(24, None, "simulating 3 wirings") as bar:
        for _ in range(3):
            bar.update(8)
        assert not hasattr(bar, "n")
    assert lines.read_text().splitlines() == ["simulating 3 wirings: 16/24 prompts (6 s)",
                                              "simulating 3 wirings: 24/24 prompts (7 s)"]
    with progress_bar(4, None, "short") as bar:   # too short to wait on: no line
        bar.update(4)
    assert len(lines.read_text().splitlines()) == 2


def test_the_relay_prints_whole_lines_and_leaves_nothing_behind(monkeypatch):
    from eagle3_nb.defaults import PROGRESS_FILE_VARIABLE
    from eagle3_nb.report.relay import INDENT, relayed_progress

    monkeypatch.setenv(PROGRESS_FILE_VARIABLE, "the user's own")
    said = []
    with relayed_progress(said.append) as relay:
        path = Path(os.environ[PROGRESS_FILE_VARIABLE])
        with open(path, "a") as out:
            out.write("simulating: 8/64 prompts (1 s)\nsimul")
        relay.drain()
        assert said == [INDENT + "simulating: 8/64 prompts (1 s)"]   # half a line waits
        with open(path, "a") as out:
            out.write("ating: 64/64 prompts (5 s)\n")
    assert said[1:] == [INDENT + "simulating: 64/64 prompts (5 s)"]
    assert os.environ[PROGRESS_FILE_VARIABLE] == "the user's own" and not path.parent.exists()


@pytest.mark.notebook
def test_the_report_runs_notebooks_with_progress_off_and_restores_it(tmp_path, monkeypatch):
    from eagle3_nb.report.notebooks import run_notebook

    monkeypatch.delenv(PROGRESS_VARIABLE, raising=False)
    seen = tmp_path / "seen.json"
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    nb.cells = [nbformat.v4.new_code_cell("output_dir = ''", metadata={"tags": ["parameters"]}),
                nbformat.v4.new_code_cell(
                    "import json, os\n"
                    f"open({str(seen)!r}, 'w').write(json.dumps(os.environ.get("
                    f"{PROGRESS_VARIABLE!r})))")]
    path = tmp_path / "probe.ipynb"
    nbformat.write(nb, path)
    run_notebook(path, tmp_path / "out")
    assert json.loads(seen.read_text()) == "off"
    import os
    assert PROGRESS_VARIABLE not in os.environ
