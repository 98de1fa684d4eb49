"""The `eagle3-nb` argument parser: every subcommand, its flags and their checks (a bad value
is argparse's one-line error, exit 2)."""

from __future__ import annotations

import argparse
from typing import Callable

from eagle3_nb.defaults import DEFAULT_MAX_NEW_TOKENS, DEFAULT_N_SAMPLES, DEFAULT_NUM_STEPS
from eagle3_nb.engines.registry import engines, setting_names
from eagle3_nb.cli.commands import (cmd_accept, cmd_convert, cmd_data, cmd_demo, cmd_diff,
                                    cmd_engines, cmd_inspect, cmd_log, cmd_notebooks, cmd_observe,
                                    cmd_probe, cmd_report, cmd_vocab, observe_options)

THREADS_HELP = ("torch threads for the simulation (default: OMP_NUM_THREADS if set, else one for "
                "a model under 50M parameters, else every core)")
# --engine's grammar (engines.split_spec): the notebooks' form first, as they document it
ENGINE_METAVAR = "NAME:VERSION"
ENGINE_FORMS = "NAME:VERSION or NAME==VERSION; a bare NAME: its newest releases"


def _size(text: str) -> int:
    units = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
    t = text.strip().lower().rstrip("b")
    try:
        n = int(float(t[:-1]) * units[t[-1]]) if t and t[-1] in units else int(t)
    except (ValueError, OverflowError):  # "x", "infG", "nanM", 5000 digits
        n = -1
    if n < 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a byte count (e.g. 1G, 500M)")
    return n


def _positive(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of at least 1")
    return n


class _Version(argparse.Action):
    """--version: read from the installed package's metadata only when asked."""

    def __init__(self, option_strings, dest, help=None):
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        print(f"eagle3-nb {kit_version()}")
        parser.exit()


def kit_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("eagle3_nb")
    except PackageNotFoundError:  # run from a checkout that was never installed
        return "unknown (not installed: pip install -e . from the checkout)"


def _finite(text: str, low: float, high: float, what: str) -> float:
    try:
        x = float(text)
    except ValueError:
        x = float("nan")
    if not low <= x <= high:  # NaN and inf fail here too
        raise argparse.ArgumentTypeError(f"{text!r} is not {what}")
    return x


def _temperature(text: str) -> float:
    return _finite(text, 0.0, 1e6, "a temperature from 0 to 1e6")


def _seconds(text: str) -> float:
    seconds = _finite(text, 0.0, 86400.0, "a number of seconds above 0, at most a day")
    if seconds == 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds above 0")
    return seconds


def _add_inspect(ins: argparse.ArgumentParser) -> None:
    ins.add_argument("path", help="draft checkpoint directory")
    ins.add_argument("--engine", action="append", metavar=ENGINE_METAVAR,
                     help=f"engine release ({ENGINE_FORMS}; repeatable); default: each "
                          "engine's newest releases; all: every release range")
    ins.add_argument("--target-config", metavar="CONFIG_JSON",
                     help="the target model's config.json (resolves layer ids, context length)")
    ins.add_argument("--no-stats", action="store_true", help="headers only: skip tensor statistics")
    ins.add_argument("--launch", metavar="COMMAND_OR_FILE",
                     help="the serving command as you run it, or a file holding it: its "
                          "speculative settings are checked against the draft")
    ins.add_argument("--log", metavar="FILE",
                     help="the engine's server log or a traceback: its release (when --engine is "
                          "not given), arguments and exceptions join the answer")
    ins.add_argument("--stats-budget", type=_size, default="1G", metavar="BYTES",
                     help="bytes of tensor data the statistics scan may read (default 1G)")
    ins.add_argument("--json", action="store_true", help="one JSON object on stdout")
    ins.set_defaults(func=cmd_inspect)


def _add_convert(conv: argparse.ArgumentParser) -> None:
    conv.add_argument("src")
    conv.add_argument("dst")
    conv.add_argument("--to", choices=["eagle", "speculators"])
    conv.add_argument("--engine", metavar=ENGINE_METAVAR,
                      help=f"pick the layout this engine version loads ({ENGINE_FORMS})")
    conv.add_argument("--fix-d2t", action="store_true",
                      help="rewrite d2t as offsets, only when the evidence decides (never on a guess)")
    conv.add_argument("--target-config", metavar="TARGET_CONFIG",
                      help="the target's config.json (or directory): the copy's verdicts are "
                           "then checked against it; without it none is printed as ok")
    conv.add_argument("--json", action="store_true")
    conv.set_defaults(func=cmd_convert)


def _add_vocab(voc: argparse.ArgumentParser) -> None:
    voc.add_argument("path", help="draft checkpoint directory")
    voc.add_argument("--tokenizer", metavar="TOKENIZER_JSON_OR_DIR",
                     help="the target's tokenizer.json, to show token strings and read text corpora")
    voc.add_argument("--corpus", metavar="FILE",
                     help="JSON Lines (input_ids [+loss_mask], or text) or plain text: coverage")
    voc.add_argument("--engine", action="append", metavar=ENGINE_METAVAR,
                     help=f"engine release ({ENGINE_FORMS}; repeatable)")
    voc.add_argument("--json", action="store_true")
    voc.set_defaults(func=cmd_vocab)


def _add_data(dat: argparse.ArgumentParser) -> None:
    dat.add_argument("path", help="training JSONL or the directory that holds the trainer's files")
    dat.add_argument("--tokenizer", metavar="TOKENIZER_JSON_OR_DIR",
                     help="the target's tokenizer.json (its tokenizer_config.json chat_template "
                          "is the served template)")
    dat.add_argument("--template", metavar="NAME",
                     help="the trainer's registered template (SpecForge data.chat_template), to "
                          "tokenise conversations as the trainer did; default: the config's")
    dat.add_argument("--chat-template", metavar="FILE", help="the served chat template (.jinja)")
    dat.add_argument("--serve-thinking", choices=("on", "off"),
                     help="the served enable_thinking (chat_template_kwargs); default: the "
                          "template's own default")
    dat.add_argument("--draft", metavar="DRAFT", help="the draft checkpoint (its t2d, "
                                                      "max_position_embeddings)")
    dat.add_argument("--target", metavar="TARGET_DIR", help="the target model directory "
                                                            "(serving context; tokenizer)")
    dat.add_argument("--config", metavar="YAML", help="the training config (default: the YAML "
                                                      "found under PATH)")
    dat.add_argument("--prompts", metavar="FILE", help="serving prompts (JSONL prompt|text): "
                                                       "domain check")
    dat.add_argument("--max-length", type=int, metavar="N",
                     help="the training max_length when no config says it")
    dat.add_argument("--serve-context", type=int, metavar="N",
                     help="the serving context length (default: the target's)")
    dat.add_argument("--max-rows", type=int, metavar="N", help="read at most N rows")
    dat.add_argument("--hidden-states", metavar="DUMPS",
                     help="the training hidden-state dumps (hs_*.safetensors or .ckpt), one per "
                          "row: checks 9 and, with --target, 6 (imports torch)")
    dat.add_argument("--run-target", action="store_true",
                     help="check 6 by running the (small, local) --target on the rows")
    dat.add_argument("--no-progress", action="store_true", help="no progress bar")
    dat.add_argument("--json", action="store_true")
    dat.set_defaults(func=cmd_data)


def _add_accept(acc: argparse.ArgumentParser) -> None:
    acc.add_argument("checkpoint", nargs="?", help="draft checkpoint directory")
    acc.add_argument("--target", metavar="DIR", help="target model directory (transformers)")
    acc.add_argument("--hidden-states", metavar="DIR",
                     help="speculators hs_*.safetensors or SpecForge .ckpt dumps: teacher-forced "
                          "scoring (--target then only lends embeddings)")
    acc.add_argument("--prompts", metavar="FILE", help="JSON Lines: prompt or input_ids "
                     "(default: data_samples/prompts.jsonl)")
    acc.add_argument("--num-steps", type=_positive, default=None, metavar="K",
                     help=f"draft depth ({setting_names('num_steps')}); default: as --launch or "
                          f"the engine's log states, else {DEFAULT_NUM_STEPS}")
    acc.add_argument("--topk", type=_positive, default=None, metavar="K",
                     help=f"{setting_names('topk')}: above 1 drafts a tree as the engine does")
    acc.add_argument("--num-draft-tokens", type=_positive, default=None, metavar="N",
                     help=f"{setting_names('num_draft_tokens')}: the tree's size, root included")
    acc.add_argument("--launch", metavar="COMMAND_OR_FILE",
                     help="the serving command: its drafting settings are simulated")
    acc.add_argument("--temperature", type=_temperature, default=0.0, metavar="T",
                     help="above 0: the target samples, and drafts are verified by target-only "
                          "rejection sampling as the engines do by default (default: greedy)")
    acc.add_argument("--max-new-tokens", type=_positive, default=DEFAULT_MAX_NEW_TOKENS,
                     metavar="N")
    acc.add_argument("--n-samples", type=_positive, default=DEFAULT_N_SAMPLES, metavar="N",
                     help=f"prompts to simulate (default {DEFAULT_N_SAMPLES})")
    acc.add_argument("--batch-size", type=int, default=8, metavar="B",
                     help="prompts decoded together (the tokens do not depend on it)")
    acc.add_argument("--engine", action="append", default=None, metavar=ENGINE_METAVAR,
                     help=f"engine releases whose wirings to simulate ({ENGINE_FORMS}; "
                          "repeatable); default: each engine's newest; a --wiring "
                          f"{ENGINE_METAVAR} adds its own")
    acc.add_argument("--wiring", default="trained")
    acc.add_argument("--list-wirings", action="store_true")
    acc.add_argument("--what-if", action="store_true",
                     help="simulate every wiring and rank them against --observed")
    acc.add_argument("--observed", metavar="FILE_OR_NUMBER",
                     help="what the engine reported: an accept length, its log, Prometheus text "
                          "or JSON (implies --what-if)")
    acc.add_argument("--stop-at-eos", action="store_true",
                     help="end a prompt at the target's EOS (off: runs stay comparable)")
    acc.add_argument("--device", choices=["cpu", "cuda"])
    acc.add_argument("--threads", type=_positive, metavar="N", help=THREADS_HELP)
    acc.add_argument("--json", action="store_true")
    acc.set_defaults(func=cmd_accept)


def _add_report(rep: argparse.ArgumentParser) -> None:
    rep.add_argument("checkpoint", help="draft checkpoint directory")
    rep.add_argument("--target", metavar="DIR", help="target model directory (transformers); "
                     "also supplies --target-config and --tokenizer when those are not given")
    rep.add_argument("--hidden-states", metavar="DIR", help="the engine's hidden-state dumps "
                     "(speculators hs_*.safetensors or SpecForge .ckpt)")
    rep.add_argument("--engine", action="append", default=[], metavar=ENGINE_METAVAR,
                     help=f"engine release ({ENGINE_FORMS}; repeatable); default: each "
                          "engine's newest releases; all: every release range")
    rep.add_argument("--observed", metavar="FILE_OR_NUMBER",
                     help="what the engine reported: an accept length, or its log/metrics file")
    rep.add_argument("--launch", metavar="COMMAND_OR_FILE",
                     help="the serving command as you run it, or a file holding it: its settings "
                          "are checked against the draft (notebook 00)")
    rep.add_argument("--log", metavar="FILE",
                     help="the engine's server log or a traceback: its release answers when "
                          "--engine is not given; notebook 00 explains its exceptions")
    rep.add_argument("--device", choices=["cpu", "cuda"])
    rep.add_argument("--threads", type=_positive, metavar="N", help=THREADS_HELP)
    rep.add_argument("--out", metavar="DIR", help="output directory (default reports/<checkpoint "
                     "dir name>); must not exist or be empty")
    rep.add_argument("--overwrite", action="store_true",
                     help="replace an earlier report in --out: only the files it lists; any "
                          "other file there refuses the run (nothing else is ever deleted)")
    rep.add_argument("--fail-on", choices=["error", "warning", "never"], default="error",
                     help="exit 1 on error findings or a failed notebook (default), also on "
                          "warnings, or never")
    rep.add_argument("--target-config", metavar="CONFIG_JSON")
    rep.add_argument("--tokenizer", metavar="TOKENIZER_JSON")
    rep.add_argument("--corpus", metavar="FILE", help="JSON Lines or text: vocabulary coverage")
    rep.add_argument("--prompts", metavar="FILE", help="JSON Lines: prompt or input_ids")
    rep.add_argument("--train-data", metavar="PATH", help="the draft's training data (JSONL or the "
                     "trainer's directory): notebook 05; -p chat_template FILE, -p "
                     "serve_thinking on|off")
    rep.add_argument("--num-steps", type=int, metavar="K", help="draft depth to simulate "
                     "(default: as --launch or --observed states, else the kit's chain of "
                     f"{DEFAULT_NUM_STEPS})")
    rep.add_argument("--topk", type=int, metavar="K", help=f"{setting_names('topk')}: above 1, "
                     "notebook 04 drafts a tree as the engine does")
    rep.add_argument("--num-draft-tokens", type=int, metavar="N",
                     help=f"{setting_names('num_draft_tokens')} (the tree's size)")
    rep.add_argument("--wiring", help="wiring to simulate (eagle3-nb accept --list-wirings)")
    rep.add_argument("-p", "--parameter", nargs=2, action="append", default=[],
                     metavar=("NAME", "VALUE"), help="any other notebook parameter (repeatable)")
    rep.add_argument("--redact-paths", action="store_true",
                     help="to share the report: every path it writes relative to the draft's "
                          "parent directory, inputs elsewhere as TARGET_DIR, DUMPS_DIR, ..., no "
                          "home or user name; input hashes kept")
    rep.add_argument("--markdown", action="store_true",
                     help="also write summary.md beside index.html: the front page in Markdown, "
                          "to paste into a GitHub issue")
    rep.set_defaults(func=cmd_report)


def _add_demo(demo: argparse.ArgumentParser) -> None:
    demo.add_argument("--out", default="reports/demo",
                      help="output directory (default reports/demo; an earlier report there is "
                           "replaced)")
    demo.add_argument("--redact-paths", action="store_true",
                      help="as report --redact-paths: every path written relative, no home or "
                           "user name, input hashes kept")
    demo.add_argument("--markdown", action="store_true",
                      help="as report --markdown: also summary.md, the front page in Markdown")
    demo.set_defaults(func=cmd_demo)


def _add_observe(obs: argparse.ArgumentParser) -> None:
    observed = [n for n, e in engines().items() if e.has("observe")]
    obs.add_argument("engine", choices=observed, help="the engine serving at URL")
    obs.add_argument("url", help="the server's base URL, e.g. http://127.0.0.1:30000")
    obs.add_argument("--prompts", default=None,
                     help="JSON Lines with prompt or input_ids (default: the bundled prompts)")
    obs.add_argument("--n-samples", type=_positive, default=8, help="prompts to send (default 8)")
    obs.add_argument("--max-new-tokens", type=_positive, default=64)
    for option, (engine, text) in observe_options().items():
        obs.add_argument(f"--{option}", default=None, help=f"{engine}: {text}")
    obs.add_argument("--timeout", type=_seconds, default=120.0,
                     help="seconds each request may take in all, its answer included")
    obs.add_argument("--out", default=None,
                     help="also write the figures as JSON, for --observed of accept and report "
                          "(a new file)")
    obs.add_argument("--overwrite", action="store_true",
                     help="let --out replace an earlier `eagle3-nb observe` output (nothing else)")
    obs.add_argument("--json", action="store_true", help="print the figures as JSON")
    obs.set_defaults(func=cmd_observe)


def _add_log(lg: argparse.ArgumentParser) -> None:
    lg.add_argument("file", help="the server's log, or a saved traceback")
    lg.add_argument("--engine", metavar=ENGINE_METAVAR,
                    help="the engine (and release) when the log does not name them")
    lg.add_argument("--json", action="store_true", help="one JSON object on stdout")
    lg.set_defaults(func=cmd_log)


def _add_notebooks(nbs: argparse.ArgumentParser) -> None:
    nbs.add_argument("dir", help="a directory that does not exist yet")
    nbs.set_defaults(func=cmd_notebooks)


def _add_engines(eng: argparse.ArgumentParser) -> None:
    eng.set_defaults(func=cmd_engines)


def _add_diff(dif: argparse.ArgumentParser) -> None:
    dif.add_argument("good", help="the draft that worked")
    dif.add_argument("other", help="the draft to explain")
    dif.add_argument("--engine", action="append", metavar=ENGINE_METAVAR,
                     help=f"engine release ({ENGINE_FORMS}; repeatable)")
    dif.add_argument("--target-config", metavar="CONFIG_JSON")
    dif.add_argument("--json", action="store_true")
    dif.set_defaults(func=cmd_diff)


def _add_probe(prb: argparse.ArgumentParser) -> None:
    prb.add_argument("draft", help="draft checkpoint directory")
    prb.add_argument("--engine", required=True, choices=[n for n, e in engines().items() if e.probe],
                     help="the engine to import (whatever release this Python has)")
    prb.add_argument("--target-config", default=None,
                     help="target config.json or directory (an engine may build the draft "
                          "against it)")
    prb.add_argument("--json", action="store_true", help="print the result as JSON")
    prb.set_defaults(func=cmd_probe)


# Every subcommand, as `eagle3-nb -h` lists them: its name, its help, what adds its flags
COMMANDS: list[tuple[str, str, Callable[[argparse.ArgumentParser], None]]] = [
    ("inspect", "will each engine load this draft, and how?", _add_inspect),
    ("convert", "write a converted copy (never touches SRC)", _add_convert),
    ("vocab", "is the d2t/t2d vocabulary mapping right?", _add_vocab),
    ("data", "was the draft trained on what it is served? (training "
             "JSONL, token rows, configs, vocab mapping, dumps)", _add_data),
    ("accept", "simulate speculative decoding on a local target", _add_accept),
    ("report", "run every notebook headless: offline HTML pages, "
               "index.html and summary.json", _add_report),
    ("demo", "the full report on a bundled broken draft served against "
             "the bundled tiny target, into reports/demo", _add_demo),
    ("observe", "measure a running engine server: send prompts, read "
                "back its speculative-decoding figures", _add_observe),
    ("log", "what the engine's own log or traceback says: its release, "
            "its resolved arguments, its exceptions explained or said to be unknown", _add_log),
    ("notebooks", "copy the six notebooks into a new directory, to open "
                  "in Jupyter (their default paths still name the bundled samples)",
     _add_notebooks),
    ("engines", "list the engine profiles and the versions they cover", _add_engines),
    ("diff", "a draft against a known-good one: keys, config, d2t, "
             "statistics and engine verdicts side by side", _add_diff),
    ("probe", "run the INSTALLED engine's own draft loader on DRAFT and "
              "compare it with the engine's profile (needs the engine: make engine-env)",
     _add_probe),
]


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """Every subcommand's parser. Given COMMAND, the subcommand about to run, only its flags are
    added, the others keep their name and help: some flags' help texts name each engine's
    settings, read from the engine folders' launch and observe modules (engines.registry.Later),
    which `inspect` never needs."""
    parser = argparse.ArgumentParser(prog="eagle3-nb", description="Debug EAGLE-3 draft checkpoints.")
    parser.add_argument("--version", action=_Version, help="the kit's version (package metadata)")
    sub = parser.add_subparsers(dest="command", required=True)
    every = command not in {name for name, _, _ in COMMANDS}
    for name, help_text, add_flags in COMMANDS:
        command_parser = sub.add_parser(name, help=help_text)
        if every or name == command:
            add_flags(command_parser)
    return parser
