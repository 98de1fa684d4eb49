"""The same draft gets the same figure from the CLI, the report, notebook 04 and the demo: every
entry point takes its simulation defaults from eagle3_nb/defaults.py."""

import ast
import inspect

import pytest

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
    from eagle3_nb.checks.options import AcceptanceOptions, HiddenStateOptions
    assert (AcceptanceOptions().n_samples, AcceptanceOptions().max_new_tokens,
            AcceptanceOptions().batch_size) == (defaults.DEFAULT_N_SAMPLES,
                                                defaults.DEFAULT_MAX_NEW_TOKENS,
                                                defaults.DEFAULT_BATCH_SIZE)
    assert HiddenStateOptions().n_samples == defaults.DEFAULT_N_SAMPLES
    # the demo passes no parameter of its own: the notebooks' defaults above are its figures
    assert "extra=" not in inspect.getsource(report_run.run_demo)


# What a notebook's parameters cell holds besides a check's options: its inputs and its page.
NOT_OPTIONS = {"checkpoint", "target", "prompts", "plotly_renderer", "output_dir"}


@pytest.mark.parametrize("notebook, options", [("04_acceptance.ipynb", "AcceptanceOptions"),
                                               ("03_hidden_state_shapes.ipynb",
                                                "HiddenStateOptions")])
def test_options_read_every_notebook_parameter_with_its_default(notebook, options):
    """from_parameters takes the notebook's parameters by name, with the notebook's defaults:
    a parameter added to the notebook, or a default changed on one side only, fails here."""
    from eagle3_nb.checks import options as module

    cell = notebook_parameters(notebooks_dir() / notebook)
    taken = inspect.signature(getattr(module, options).from_parameters).parameters
    assert set(taken) == set(cell) - NOT_OPTIONS
    for name, parameter in taken.items():
        assert parameter.default == ast.literal_eval(cell[name]["default"]), name


def test_the_cli_and_notebook_04_build_the_same_options():
    """The same question from `accept` and from notebook 04's parameters: the same options,
    but for what_if, which the notebook turns on and the command line asks for."""
    from dataclasses import replace

    from eagle3_nb.checks.options import AcceptanceOptions

    parser = build_parser()
    cli = AcceptanceOptions.from_args(parser.parse_args(["accept", "DRAFT", "--target", "T"]))
    assert cli == replace(AcceptanceOptions.from_parameters(), what_if=False)
    cli = AcceptanceOptions.from_args(parser.parse_args([
        "accept", "DRAFT", "--target", "T", "--num-steps", "3", "--topk", "2",
        "--num-draft-tokens", "5", "--engine", "sglang==0.5.9", "--wiring", "sglang:0.5.9",
        "--observed", "1.5", "--device", "cpu", "--n-samples", "4", "--temperature", "0.5"]))
    notebook = AcceptanceOptions.from_parameters(
        num_steps=3, topk=2, num_draft_tokens=5, engine="sglang:0.5.9", wiring="sglang:0.5.9",
        observed="1.5", device="cpu", n_samples=4, temperature=0.5)
    assert cli == notebook and cli.what_if and cli.wiring == "sglang==0.5.9"


@pytest.mark.slow
def test_cli_and_the_report_check_give_the_same_figure_on_the_same_inputs(run_cli):
    """The CLI's accept and notebook 04's check (which the report and the demo run) on the same
    draft, target and defaults: the same accept length and standard error, the same settings."""
    import json

    from conftest import DRAFTS, SAMPLES
    from eagle3_nb.checks.acceptance import check_acceptance
    from eagle3_nb.checks.options import AcceptanceOptions

    draft, target = DRAFTS / "layers0-flat", SAMPLES / "target"
    rc, out, err = run_cli("accept", draft, "--target", target, "--device", "cpu", "--json")
    assert rc == 0, err
    cli = json.loads(out)
    check = check_acceptance(draft, target, SAMPLES / "prompts.jsonl",
                             AcceptanceOptions(what_if=False, device="cpu")).summary()
    assert check["headline"]["mean_accept_length"] == cli["mean_accept_length"]
    assert check["headline"]["mean_accept_length_se"] == cli["mean_accept_length_se"]
    assert check["drafting"] == cli["drafting"] and cli["n_samples"] == defaults.DEFAULT_N_SAMPLES
    assert "64 prompts, 48 new tokens each, greedy verification" in check["settings"]
