#!/usr/bin/env bash
# Creates .venv in the repository and installs omnivoice into it, with ggml built for this CPU
# (GGML_NATIVE + llamafile kernels: ~2.5x faster f32 and ~7x faster bf16 matmul than the prebuilt
# wheel), with ggml's RPC backend (remote devices over TCP, omnivoice-rpc-server). Set
# OMNIVOICE_PREBUILT_GGML=1 to keep libggml-python's prebuilt wheel instead (no RPC), or
# GGML_CUDA=ON to build ggml with CUDA.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
PIP=".venv/bin/python -m pip"
GGML_PIN="libggml-python==0.20.2.post1"

if [ "${OMNIVOICE_PREBUILT_GGML:-0}" = "1" ]; then
  $PIP install -q "$GGML_PIN"
else
  # --no-cache-dir: pip's wheel cache ignores -C settings and would hand back a stale build.
  $PIP install -q --no-cache-dir --no-binary libggml-python \
    -C cmake.define.GGML_NATIVE=ON -C cmake.define.GGML_LLAMAFILE=ON -C cmake.define.GGML_RPC=ON \
    -C cmake.define.GGML_CUDA="${GGML_CUDA:-OFF}" "$GGML_PIN"
fi
# [server]: omnivoice-server; [ray]: Ray Data and Serve for omnivoice.distributed (+635 MB, 0.5-2 min)
$PIP install -q ".[server,test,ray]"
# -I: do not import the source tree in the current directory instead of the installed package
.venv/bin/python -I -c "import omnivoice; print('omnivoice', omnivoice.__version__, 'on', omnivoice.Backend().name)"
