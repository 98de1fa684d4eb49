"""`eagle3-nb` command line. Bad input: one line on stderr, exit 2, no traceback.

The parser is `cli.parser`, the subcommands `cli.commands`. Imports stay lazy: `eagle3-nb
inspect` on a safetensors checkpoint never imports torch, plotly or transformers, and only the
subcommand about to run gets its flags (their help texts read the engine folders' modules).
"""

from __future__ import annotations

import os
import sys

from eagle3_nb.defaults import THREADS_VARIABLE
from eagle3_nb.errors import Eagle3NbError
from eagle3_nb.cli.commands import EXIT_BAD_INPUT, EXIT_FINDINGS
from eagle3_nb.cli.parser import build_parser, kit_version

__all__ = ["build_parser", "kit_version", "main"]


def main(argv: list[str] | None = None) -> int:
    words = list(sys.argv[1:] if argv is None else argv)
    # the top level takes no option with a value: the first other word names the subcommand
    command = next((w for w in words if not w.startswith("-")), None)
    args = build_parser(command).parse_args(words)
    args.argv = words  # recorded by `report`
    if getattr(args, "threads", None):  # read where the models load, here or in a notebook
        os.environ[THREADS_VARIABLE] = str(args.threads)
    try:
        return args.func(args)
    except Eagle3NbError as exc:
        print(f"eagle3-nb: error: {exc.one_line()}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except PermissionError as exc:  # wherever it happens: one line naming the file
        print(f"eagle3-nb: error: {exc.filename or 'a file'}: permission denied (inputs must "
              "be readable, --out writable; check the mode and owner)", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `eagle3-nb ... | head`: the reader left; say nothing more
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_FINDINGS
