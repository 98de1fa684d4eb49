"""One set of simulation defaults for the CLI, the report, notebook 04 and the demo, so that the
same draft gets the same figure from each (tests/test_defaults.py holds every entry point to it).
No imports: the header path (cli) reads it without torch.

64 prompts x 48 new tokens (the bundled prompts.jsonl): on the bundled pair, fewer prompts leave
standard errors too wide to tell the one-layer-off wiring from the trained one
(docs/bundled-pair.md: at 16 prompts the paired z is about 1, at 64 about 5)."""

DEFAULT_NUM_STEPS = 4          # draft depth of a chain, when nothing states the engine's
DEFAULT_MAX_NEW_TOKENS = 48    # tokens generated per prompt
DEFAULT_N_SAMPLES = 64         # prompts simulated
DEFAULT_BATCH_SIZE = 8         # prompts decoded together (the tokens do not depend on it)
THREADS_VARIABLE = "EAGLE3NB_THREADS"  # --threads, read where the models load (session.py); a
                                       # notebook's kernel inherits it from `report`
PROGRESS_VARIABLE = "EAGLE3NB_PROGRESS"  # "off": no progress bars (notebooks the report runs)
PROGRESS_FILE_VARIABLE = "EAGLE3NB_PROGRESS_FILE"  # where they write progress lines instead: the
                                                   # report prints them (report/relay.py)
