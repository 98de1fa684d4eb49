# Every target sets itself up on a fresh machine, idempotently.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
KERNEL := eagle3-nb

.PHONY: setup test test-fast demo samples train-samples bench clean engine-env test-engines engine-truth lab release-intake

$(STAMP): requirements.txt pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements.txt
	$(PY) -m pip install --quiet --no-deps -e .
	$(PY) -m ipykernel install --sys-prefix --name $(KERNEL) --display-name "eagle3-nb" >/dev/null
	touch $(STAMP)

setup: $(STAMP)

# The probe's real-engine tests need side environments with SGLang 0.5.23 and vLLM 0.34.0
# (about 40 s each from a warm pip cache, 2.3 GB, built side by side); when one cannot be built
# here, its tests skip and say why. The tests run on TEST_WORKERS processes, a file each at a
# time (module fixtures such as a report run once); TEST_WORKERS=0 runs them in this process.
TEST_WORKERS ?= 2
test: $(STAMP)
	-tools/engine_env.sh sglang 0.5.23 & tools/engine_env.sh vllm 0.34.0 & wait
	$(PY) -m pytest -q -p no:cacheprovider -n $(TEST_WORKERS) --dist loadfile

# No notebooks, no model runs: the header path, engines, viz, the rules of the house.
test-fast: $(STAMP)
	$(PY) -m pytest -q -p no:cacheprovider -n $(TEST_WORKERS) --dist loadfile -m "not notebook and not slow"

# The full report on a bundled broken draft and the tiny target into reports/demo (an earlier
# demo there is replaced). The kit picks torch's threads for the model size itself (one here).
demo: $(STAMP)
	$(VENV)/bin/eagle3-nb demo

# JupyterLab on the notebooks with the kit's kernel, bound to 127.0.0.1 with no token (only
# this machine reaches it; over SSH: ssh -L 8888:127.0.0.1:8888 HOST). Root needs --allow-root.
# No news feed pop-up and no update check: Lab asks the network for neither.
LAB_PORT ?= 8888
LAB_FLAGS = --ServerApp.root_dir=$(CURDIR)/notebooks --ServerApp.ip=127.0.0.1 \
	--ServerApp.port=$(LAB_PORT) --IdentityProvider.token= --ServerApp.password= \
	--MappingKernelManager.default_kernel_name=$(KERNEL) \
	--LabApp.news_url=None --LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate \
	$(if $(filter 0,$(shell id -u)),--allow-root)
lab: $(STAMP)
	$(VENV)/bin/jupyter lab $(LAB_FLAGS)

samples: $(STAMP)
	$(PY) -m eagle3_nb.samples

# Trains the tokenizer, the tiny target and the draft (about 36 minutes on 2 busy cores: target
# 23 on two threads, draft 11 on one, as the recorded training times say), rebuilds every sample
# draft from the trained weights, and records in data_samples/train/draft_training.json how far
# `trained` stands from the wrong wirings (tools/separation.py, 1 minute). Never part of `make test`.
train-samples: $(STAMP)
	$(PY) -m eagle3_nb.samples --train

bench: $(STAMP)
	$(PY) benchmarks/bench_inspect.py
	$(PY) benchmarks/bench_stats.py
	$(PY) benchmarks/bench_draft.py --quick
	$(PY) benchmarks/bench_accept.py --quick
	$(PY) benchmarks/bench_hostile.py
	$(PY) benchmarks/bench_log.py
	$(PY) benchmarks/bench_data.py
	$(PY) benchmarks/bench_demo.py

# Side environments for `eagle3-nb probe` under .cache/engines/ (on top of .venv, cached):
# make engine-env ENGINE=sglang VERSION=0.5.23; about 35 s each with a warm pip cache.
ENGINE ?= sglang
VERSION ?= 0.5.23
engine-env: $(STAMP)
	tools/engine_env.sh $(ENGINE) $(VERSION)

# The probe against the real engines (sets up sglang 0.5.23 and vllm 0.34.0 side envs first).
test-engines: $(STAMP)
	tools/engine_env.sh sglang 0.5.23
	tools/engine_env.sh vllm 0.34.0
	EAGLE3NB_ENGINE_TESTS=1 $(PY) -m pytest -q -p no:cacheprovider tests/test_probe.py

# Every profiled release the probe can install, over every bundled sample draft.
# One release per profile range whose engine imports on this CPU torch (sglang 0.4.x does not:
# docs/engine-truth.md); each side environment is built first when missing (~30 s, ~1 GB).
TRUTH_ENGINES ?= sglang==0.5.23,sglang==0.5.16,sglang==0.5.12.post1,sglang==0.5.9,sglang==0.5.7,vllm==0.34.0,vllm==0.33,vllm==0.29.0,vllm==0.24.0,vllm==0.21.0,vllm==0.18.1,vllm==0.11.0
engine-truth: $(STAMP)
	$(PY) tools/engine_truth.py --engines $(TRUTH_ENGINES) --out docs/engine-truth.md

# A new engine release read from its wheel (tools/release_intake.py, docs/adding-a-release.md):
# make release-intake ENGINE=vllm VERSION=0.35.0 [INTAKE_FLAGS=--write]. It proposes (a report
# under .cache/intake/, staged tables); a person writes the profile.
release-intake: $(STAMP)
	$(PY) tools/release_intake.py $(ENGINE) $(VERSION) $(INTAKE_FLAGS)

clean:
	rm -rf $(VENV) reports
