"""The same draft gets the same figure from the CLI, the report, notebook 04 and the demo: every
entry point takes its simulation defaults from eagle3_nb/defaults.py."""

import ast
import inspect

from eagle3_nb import defaults
from eagle3_nb.cli import build_parser
from eagle3_nb.io.resources import notebooks_dir
from eagle3_nb.report import run as report_run
from eagle3_nb.report.notebooks import notebook_parameters


def notebook_default(notebook: str, name: str):
    return ast.literal_eval(notebook_parameters(notebooks_dir() / notebook)[name]["default"])


def test_notebooks_use_the_kits_defaults():
    assert notebook_default("04_acceptance.ipynb", "n_samples") == defaults.DEFAULT_N_SAMPLES
    assert notebook_default("04_acceptance.ipynb", "max_new_tokens") == \
        defaults.DEFAULT_MAX_NEW_TOKENS
    assert notebook_default("04_acceptance.ipynb", "batch_size") == defaults.DEFAULT_BATCH_SIZE
    # 0: whatever the launch command or the engine's log states, else DEFAULT_NUM_STEPS
    assert notebook_default("04_acceptance.ipynb", "num_steps") == 0
    assert notebook_default("03_hidden_state_shapes.ipynb", "n_samples") == \
        defaults.DEFAULT_N_SAMPLES


def test_the_cli_uses_the_kits_defaults():
    parser = build_parser()
    args = parser.parse_args(["accept", "DRAFT", "--target", "T"])
    assert (args.n_samples, args.max_new_tokens) == (defaults.DEFAULT_N_SAMPLES,
                                                     defaults.DEFAULT_MAX_NEW_TOKENS)
    assert args.num_steps is None and args.topk is None   # resolved, and the source named


def test_the_python_api_and_the_demo_use_the_kits_defaults():
    from eagle3_nb.checks import acceptance, hidden
    for fn in (acceptance.check_acceptance, acceptance.what_if, acceptance.measure_acceptance):
        params = inspect.signature(fn).parameters
        assert params["n_samples"].default == defaults.DEFAULT_N_SAMPLES, fn.__name__
        assert params["max_new_tokens"].default == defaults.DEFAULT_MAX_NEW_TOKENS, fn.__name__
    assert inspect.signature(hidden.check_hidden_states).parameters["n_samples"].default == \
        defaults.DEFAULT_N_SAMPLES
    # the demo passes no parameter of its own: the notebooks' defaults above are its figures
    assert "extra=" not in inspect.getsource(report_run.run_demo)
