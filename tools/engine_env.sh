#!/usr/bin/env bash
# Side environment for `eagle3-nb probe`: .cache/engines/<engine>-<version>/, a venv that reuses
# the dev venv's site-packages through a .pth file (torch, transformers and the kit are not
# reinstalled) plus, with --no-deps, the engine wheel and the pure-Python/CPU packages its
# import chain needs to build an EAGLE-3 draft and run load_weights. The lists are the minimal
# sets found by importing the draft module and building the draft until nothing was missing;
# CUDA-only packages are stubbed by eagle3_nb/engines/stubs.py instead. Idempotent: a finished
# environment (its .ready stamp) is kept. Prints the time it took.
#
#   tools/engine_env.sh sglang 0.5.23
#   tools/engine_env.sh vllm 0.33.0
#   tools/engine_env.sh sglang 0.5.16     (the older releases listed in the per-version case below)
set -euo pipefail
ENGINE=${1:?usage: tools/engine_env.sh ENGINE VERSION}
VERSION=${2:?usage: tools/engine_env.sh ENGINE VERSION}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
DEV=$ROOT/.venv
ENV=$ROOT/.cache/engines/$ENGINE-$VERSION

COMMON="aiohappyeyeballs==2.7.1 aiohttp==3.14.5 aiosignal==1.4.0 apache-tvm-ffi==0.1.15.post2
  frozenlist==1.8.0 msgspec==0.23.0 multidict==7.2.1 openai==3.57.0 partial-json-parser==0.2.1.1.post7
  pillow==13.0.0 propcache==0.5.4 pybase64==1.5.1 sniffio==1.3.1 starlette==1.10.0 yarl==1.25.1"
case $ENGINE in
  sglang) DEPS="$COMMON compressed-tensors==0.20.1 dill==0.4.1 einops==0.8.2 gguf==0.19.0 loguru==0.7.3
            orjson==3.13.0 sentencepiece==0.2.3 triton==3.9.0" ;;
  vllm)   DEPS="$COMMON cachetools==8.0.2 cbor2==6.3.0 cloudpickle==3.1.3 einops==0.8.2
            fastapi==0.165.0 llguidance==1.9.1 openai-harmony==0.0.8 opentelemetry-api==1.45.2
            py-cpuinfo==9.0.0 uvloop==0.23.0 xgrammar==0.2.9" ;;
  *) echo "engine_env.sh: no side environment recipe for engine '$ENGINE' (sglang, vllm)" >&2; exit 2 ;;
esac
# Older releases: what their import chain needs beyond (or instead of) the lists above, found the
# same way (import the draft module, build the draft, run load_weights, until nothing is missing).
case "$ENGINE-$VERSION" in
  sglang-0.5.16) DEPS="$DEPS xgrammar==0.2.9" ;;  # function_call/inkling_detector.py via server_args
  sglang-0.5.7) DEPS="$DEPS fastapi==0.165.0 opentelemetry-api==1.45.2" ;;  # utils/common.py, tracing
  # the wheel pins transformers==4.57.1 (METADATA Requires-Dist): its config reading is the
  # release's only with that transformers (and the hub and tokenizers it accepts)
  sglang-0.5.9) DEPS="$DEPS transformers==4.57.1 huggingface-hub==0.36.0 tokenizers==0.22.2" ;;
  # gguf: vllm.config's GGUF loader; transformers 4.57.1 (and the hub and tokenizers it accepts):
  # an allowed pin (METADATA Requires-Dist: >=4.56.0, 5.0.*-5.5.0 excluded), one that path-guesses
  vllm-0.23.0) DEPS="$DEPS gguf==0.19.0 transformers==4.57.1 huggingface-hub==0.36.0 tokenizers==0.22.2" ;;
  vllm-0.21.0|vllm-0.18.1) DEPS="$DEPS gguf==0.19.0" ;;  # vllm.config imports the GGUF loader
  vllm-0.11.0) DEPS="$DEPS blake3==1.0.11 gguf==0.19.0 setproctitle==1.3.8" ;;  # vllm.config, model loader
esac

# The probe's entry point: a console script run with -P, so neither the working directory (a
# downloaded checkpoint, say) nor the script's folder is put on sys.path before the real modules.
console_script() {
  printf '#!%s -P\nimport sys\nfrom eagle3_nb.cli import main\nsys.exit(main())\n' \
    "$ENV/bin/python" > "$ENV/bin/eagle3-nb"
  chmod +x "$ENV/bin/eagle3-nb"
}

if [ -f "$ENV/.ready" ]; then
  test -x "$ENV/bin/eagle3-nb" || console_script
  echo "$ENV ready ($(du -sh "$ENV" | cut -f1))"; exit 0
fi
test -x "$DEV/bin/python" || { echo "engine_env.sh: run make setup first (no $DEV)" >&2; exit 2; }
start=$(date +%s)
rm -rf "$ENV"
BASE=$("$DEV/bin/python" -c 'import sys; print(sys.base_prefix)')/bin/python3
"$BASE" -m venv --without-pip "$ENV"
SITE=$("$ENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
DEVSITE=$("$DEV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
# addsitedir (not a bare path) so the dev venv's own .pth files, the kit's editable install
# among them, apply too; the side venv's packages stay first on sys.path
echo "import site; site.addsitedir('$DEVSITE')" > "$SITE/_eagle3nb_devvenv.pth"
# shellcheck disable=SC2086
"$DEV/bin/python" -m pip --python "$ENV/bin/python" install --quiet --no-deps \
  "$ENGINE==$VERSION" $DEPS
# with the probe's stubs (CUDA-only packages), as the probe imports it
"$ENV/bin/python" -c "import eagle3_nb.engines.stubs as s; s.install(); import $ENGINE, torch, eagle3_nb"
console_script
touch "$ENV/.ready"
echo "$ENV ready in $(( $(date +%s) - start ))s ($(du -sh "$ENV" | cut -f1))"
