# Every target sets itself up on a fresh machine, idempotently.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
KERNEL := eagle3-nb

.PHONY: setup test test-fast demo samples train-samples bench clean

$(STAMP): requirements.txt pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements.txt
	$(PY) -m pip install --quiet --no-deps -e .
	$(PY) -m ipykernel install --sys-prefix --name $(KERNEL) --display-name "eagle3-nb" >/dev/null
	touch $(STAMP)

setup: $(STAMP)

test: $(STAMP)
	$(PY) -m pytest -q -p no:cacheprovider

# No notebooks, no model runs: the header path, engines, viz, the rules of the house.
test-fast: $(STAMP)
	$(PY) -m pytest -q -p no:cacheprovider -m "not notebook and not slow"

# The full report on a bundled broken draft and the tiny target into reports/demo (an earlier
# demo there is replaced). One torch thread: the tiny target gains nothing from more, and on a
# shared 2-core machine spinning OpenMP threads slow the notebooks down several times.
demo: $(STAMP)
	OMP_NUM_THREADS=1 $(VENV)/bin/eagle3-nb demo

samples: $(STAMP)
	$(PY) -m eagle3_nb.samples

# Trains the tokenizer, the tiny target and the draft (about 30 minutes on 2 cores, as the
# recorded training times say), then rebuilds every sample draft from the trained weights.
# Never part of `make test`.
train-samples: $(STAMP)
	$(PY) -m eagle3_nb.samples --train

bench: $(STAMP)
	$(PY) benchmarks/bench_inspect.py
	$(PY) benchmarks/bench_stats.py
	$(PY) benchmarks/bench_draft.py --quick
	$(PY) benchmarks/bench_accept.py --quick

clean:
	rm -rf $(VENV) reports
