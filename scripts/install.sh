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
  # An installed ggml without the RPC library (an older venv, or the prebuilt wheel) is rebuilt:
  # pip counts the pinned version as satisfied whatever it was built with.
  REBUILD=()
  if .venv/bin/python -c 'import libggml' 2>/dev/null &&
     ! compgen -G ".venv/lib/python*/site-packages/libggml/lib*/libggml-rpc.so*" >/dev/null; then
    REBUILD=(--force-reinstall --no-deps)
  fi
  # --no-cache-dir: pip's wheel cache ignores -C settings and would hand back a stale build.
  $PIP install -q --no-cache-dir --no-binary libggml-python "${REBUILD[@]}" \
    -C cmake.define.GGML_NATIVE=ON -C cmake.define.GGML_LLAMAFILE=ON -C cmake.define.GGML_RPC=ON \
    -C cmake.define.GGML_CUDA="${GGML_CUDA:-OFF}" "$GGML_PIN"
fi
# [server]: omnivoice-server; [ray]: Ray Data and Serve for omnivoice.distributed (+635 MB, 0.5-2 min)
$PIP install -q ".[server,test,ray]"
# Debian's chromium for the test suite's web-page test (tests/e2e/test_server.py): installed here so
# that the README's test command sets up everything the tests need.
if ! command -v chromium >/dev/null; then
  if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
  else
    echo "install.sh: chromium is missing (the web-page test needs it): sudo apt-get install chromium" >&2
  fi
fi
# -I: do not import the source tree in the current directory instead of the installed package
.venv/bin/python -I -c "import omnivoice; print('omnivoice', omnivoice.__version__, 'on', omnivoice.Backend().name)"
