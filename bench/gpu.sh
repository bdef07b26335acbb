#!/usr/bin/env bash
# Any ggml device: runs the parity tests there (every graph takes the stock-op path off the CPU)
# against the same upstream fixtures as on the CPU, then prints per LM type the real-time factor
# (generate() wall time / audio length) of the 10 s utterance of bench/e2e.py at 32 steps, the
# LM step, and the time the timed generate() spent copying to and from the device and computing.
#
#   bash bench/gpu.sh [--device DEVICE] [GGUF_DIR]
#
# DEVICE: CUDA0 (default) builds ggml with CUDA into its own venv first (needs nvidia-smi and
# nvcc); rpc://local starts an omnivoice-rpc-server on 127.0.0.1 for the run and uses it;
# anything else (rpc://HOST:PORT, cpu) is taken as omnivoice.Backend(device=...) in .venv.
# GGUF_DIR (default /work/ckpt/full_gguf) holds omnivoice-base-{F32,BF16,Q8_0}.gguf and
# omnivoice-tokenizer-F32.gguf (bench/README.md makes them from a random full-size checkpoint;
# converted real weights run the same; `omnivoice-convert tests/data/tiny_hf` makes tiny ones).
# Environment: OMNIVOICE_CUDA_VENV (default .venv-cuda), OMNIVOICE_VENV (default .venv),
# STEPS (32), TYPES ("F32 BF16 Q8_0"), THREADS (nproc), PARITY (1; 0 skips the tests).
set -euo pipefail
cd "$(dirname "$0")/.."

DEVICE=CUDA0
if [ "${1:-}" = "--device" ]; then DEVICE=${2:?--device needs a value}; shift 2; fi
GGUF_DIR=${1:-/work/ckpt/full_gguf}
STEPS=${STEPS:-32}
TYPES=${TYPES:-F32 BF16 Q8_0}
THREADS=${THREADS:-$(nproc)}
GGML_PIN="libggml-python==0.20.2.post1"

for f in omnivoice-tokenizer-F32.gguf $(for t in $TYPES; do echo "omnivoice-base-$t.gguf"; done); do
  [ -f "$GGUF_DIR/$f" ] || { echo "gpu.sh: $GGUF_DIR/$f is missing" >&2; exit 2; }
done

case "$DEVICE" in
  CUDA*)
    command -v nvidia-smi >/dev/null || { echo "gpu.sh: nvidia-smi not found: $DEVICE needs an NVIDIA GPU" >&2; exit 2; }
    command -v nvcc >/dev/null || { echo "gpu.sh: nvcc not found: building ggml with CUDA needs the CUDA toolkit" >&2; exit 2; }
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
    VENV=${OMNIVOICE_CUDA_VENV:-.venv-cuda}
    echo "== build: ggml with CUDA, then omnivoice, into $VENV"
    [ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
    # --no-cache-dir: pip's wheel cache ignores -C settings and would hand back a CPU-only build.
    "$VENV/bin/python" -m pip install -q --no-cache-dir --no-binary libggml-python \
      -C cmake.define.GGML_CUDA=ON -C cmake.define.GGML_NATIVE=ON -C cmake.define.GGML_RPC=ON "$GGML_PIN"
    "$VENV/bin/python" -m pip install -q ".[test]"
    ;;
  *)
    VENV=${OMNIVOICE_VENV:-.venv}
    [ -x "$VENV/bin/python" ] || { echo "gpu.sh: $VENV/bin/python not found: run scripts/install.sh" >&2; exit 2; }
    ;;
esac
PY="$VENV/bin/python"

SERVER_PID=
stop_server() { [ -z "$SERVER_PID" ] || { kill "$SERVER_PID" 2>/dev/null; wait "$SERVER_PID" 2>/dev/null || true; }; }
trap stop_server EXIT
if [ "$DEVICE" = rpc://local ]; then
  PORT=$("$PY" -c "import socket; s = socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])")
  "$VENV/bin/omnivoice-rpc-server" --host 127.0.0.1 --port "$PORT" --threads "$THREADS" >/dev/null &
  SERVER_PID=$!
  DEVICE=rpc://127.0.0.1:$PORT
  for _ in $(seq 100); do
    "$PY" -c "import socket; socket.create_connection(('127.0.0.1', $PORT), 1).close()" 2>/dev/null && break
    sleep 0.2
  done
fi

# -I: the installed package, not the source tree in the current directory.
"$PY" -I -c "
from omnivoice import Backend
b = Backend(device='$DEVICE')
print('device:', b.device, '(' + b.name + ')', 'stock ops' if b.stock_ops else 'our CPU ops')
"

if [ "${PARITY:-1}" = 1 ]; then
  echo "== parity tests on every device present, and on $DEVICE"
  # tests/parity/conftest.py adds OMNIVOICE_TEST_DEVICE to the devices it parametrises.
  OMNIVOICE_TEST_DEVICE=$DEVICE "$VENV/bin/pytest" -q tests/parity/omnivoice
fi

echo "== real-time factor on $DEVICE: 10 s utterance, $STEPS steps (generate() wall time / 10 s)"
for t in $TYPES; do
  "$PY" -P bench/e2e.py --worker "$t" --gguf-dir "$GGUF_DIR" --steps "$STEPS" --threads "$THREADS" \
    --device "$DEVICE" --bare-repeats 3 | tail -n 1 | "$PY" -c "
import json, statistics, sys
r = json.loads(sys.stdin.read())
m, l = r['transfers'], r['load_transfers']
print(f\"  {r['side']:10s} on {r['device']}: RTF {r['rtf']:.4f}  (wall {r['wall_s']:.2f} s; LM step \"
      f\"{statistics.median(r['step_periods_s']):.3f} s, bare {statistics.median(r['bare_s']):.3f} s; \"
      f\"load {r['load_s']:.1f} s, {l['upload_bytes'] / 2**20:.0f} MB up in {l['upload_s']:.1f} s; \"
      f\"peak host RSS {r['peak_rss_mb'] / 1024:.2f} GB)\")
print(f\"    generate(): {m['computes']} graphs, compute {m['compute_s']:.2f} s; moved \"
      f\"{m['upload_bytes'] / 2**20:.1f} MB up in {m['upload_s']:.3f} s, \"
      f\"{m['download_bytes'] / 2**20:.1f} MB down in {m['download_s']:.3f} s\")
"
done
