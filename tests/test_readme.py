"""The README's "Your draft in three commands", run as written: only the placeholders (DRAFT,
TARGET, TARGET_DIR, DUMPS_DIR) become the bundled samples (DUMPS_DIR the shipped dumps), and
`.venv/bin/eagle3-nb` this interpreter's CLI. Its recipe on the shipped dumps runs from a folder
that sees data_samples/ where a checkout has it. A recipe that stops working fails here, not on a
new user."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import DRAFTS, SAMPLES

pytestmark = [pytest.mark.slow, pytest.mark.notebook]

README = Path(__file__).resolve().parent.parent / "README.md"


def recipe(heading: str = "## Your draft in three commands") -> list[str]:
    """The commands of the first bash block after HEADING, continuation lines joined, comments
    dropped."""
    text = README.read_text(encoding="utf-8")
    section = text.split(heading, 1)[1]
    block = re.search(r"```bash\n(.*?)```", section, re.S).group(1)
    joined = block.replace("\\\n", " ")
    return [line.strip() for line in joined.splitlines()
            if line.strip() and not line.strip().startswith("#")]


def as_run_here(command: str) -> str:
    places = {"TARGET_DIR": SAMPLES / "target", "DUMPS_DIR": SAMPLES / "dumps" / "speculators",
              "DRAFT": DRAFTS / "good", "TARGET": SAMPLES / "target"}
    for name, path in places.items():   # TARGET_DIR before TARGET
        command = re.sub(rf"\b{name}\b", str(path), command)
    return with_this_cli(command)


def with_this_cli(command: str) -> str:
    return command.replace(".venv/bin/eagle3-nb", f"{sys.executable} -m eagle3_nb.cli")


def run_in(cwd: Path, command: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.run(command, shell=True, cwd=cwd, capture_output=True, text=True,
                          timeout=900, env=env)


def test_the_recipe_is_four_commands_of_the_cli():
    commands = recipe()
    assert len(commands) == 4
    assert all(c.startswith(".venv/bin/eagle3-nb ") for c in commands)


def test_the_three_commands_run_as_written(tmp_path):
    for command in recipe():
        proc = run_in(tmp_path, as_run_here(command))
        # exit 1: the draft has error findings (the recipe's engine release drops its keys);
        # 2 would be bad input, a traceback anything else
        assert proc.returncode in (0, 1), f"{command}\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}"
        assert "Traceback" not in proc.stderr
    report = tmp_path / "report-draft"
    assert (report / "index.html").is_file() and (report / "summary.json").is_file()
    notebooks = {p.name for p in report.iterdir() if p.is_dir()}
    assert {"03_hidden_state_shapes", "04_acceptance"} <= notebooks   # the target's run
    assert (tmp_path / "reports" / "good" / "index.html").is_file()    # the dumps' run


SHIPPED = "**Try it first on the shipped dumps.**"


def test_the_shipped_dumps_recipe_runs_as_written(tmp_path):
    commands = recipe(SHIPPED)
    assert len(commands) == 2
    assert {"data_samples/dumps/speculators", "data_samples/dumps/specforge"} == {
        word for c in commands for word in c.split() if word.startswith("data_samples/dumps/")}
    (tmp_path / "data_samples").symlink_to(SAMPLES)   # where a checkout has it, nothing else
    report, accept = (run_in(tmp_path, with_this_cli(c)) for c in commands)
    for proc in (report, accept):
        assert proc.returncode == 0, f"{proc.args}\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}"
        assert "Traceback" not in proc.stderr
    summary = json.loads((tmp_path / "report-dumps" / "summary.json").read_text())
    status = {nb["notebook"]: nb["status"] for nb in summary["notebooks"]}
    assert status["03_hidden_state_shapes"] == status["04_acceptance"] == "ok", status
    assert set(status.values()) == {"ok"}, status
    scored = json.loads(accept.stdout)   # the SpecForge .ckpt files, teacher-forced
    assert scored["n_samples"] == 4 and scored["wiring"] == "trained"
    assert scored["per_step_accuracy"][0] > 0.2   # the trained draft on its own target's states
