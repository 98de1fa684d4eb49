"""One set of simulation defaults for the CLI, the report, notebook 04 and the demo, so that the
same draft gets the same figure from each (tests/test_defaults.py holds every entry point to it).
No imports: the header path (cli) reads it without torch.

16 prompts x 48 new tokens is every bundled prompt; fewer prompts leave standard errors too wide
to tell a one-layer-off wiring from the trained one."""

DEFAULT_NUM_STEPS = 4          # draft depth of a chain, when nothing states the engine's
DEFAULT_MAX_NEW_TOKENS = 48    # tokens generated per prompt
DEFAULT_N_SAMPLES = 16         # prompts simulated
DEFAULT_BATCH_SIZE = 8         # prompts decoded together (the tokens do not depend on it)
