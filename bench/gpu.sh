#!/usr/bin/env bash
# On a machine with an NVIDIA GPU: builds ggml with CUDA into its own venv, runs the parity tests
# on the GPU backend (where every graph takes the stock-op path) against the same upstream
# fixtures as on the CPU, then prints the real-time factor (generate() wall time / audio length)
# of the 10 s utterance of bench/e2e.py at 32 steps, for F32, BF16 and Q8_0 LM weights.
#
#   bash bench/gpu.sh [GGUF_DIR]
#
# GGUF_DIR (default /work/ckpt/full_gguf) holds omnivoice-base-{F32,BF16,Q8_0}.gguf and
# omnivoice-tokenizer-F32.gguf (bench/README.md makes them from a random full-size checkpoint;
# converted real weights run the same). Needs nvidia-smi and the CUDA toolkit (nvcc) to build.
# Environment: OMNIVOICE_CUDA_VENV (default .venv-cuda), STEPS (32), TYPES ("F32 BF16 Q8_0").
set -euo pipefail
cd "$(dirname "$0")/.."

GGUF_DIR=${1:-/work/ckpt/full_gguf}
VENV=${OMNIVOICE_CUDA_VENV:-.venv-cuda}
STEPS=${STEPS:-32}
TYPES=${TYPES:-F32 BF16 Q8_0}
GGML_PIN="libggml-python==0.20.2.post1"

command -v nvidia-smi >/dev/null || { echo "gpu.sh: nvidia-smi not found: this needs an NVIDIA GPU" >&2; exit 2; }
command -v nvcc >/dev/null || { echo "gpu.sh: nvcc not found: building ggml with CUDA needs the CUDA toolkit" >&2; exit 2; }
for f in omnivoice-tokenizer-F32.gguf $(for t in $TYPES; do echo "omnivoice-base-$t.gguf"; done); do
  [ -f "$GGUF_DIR/$f" ] || { echo "gpu.sh: $GGUF_DIR/$f is missing" >&2; exit 2; }
done
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader

echo "== build: ggml with CUDA, then omnivoice, into $VENV"
[ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
PIP="$VENV/bin/python -m pip"
# --no-cache-dir: pip's wheel cache ignores -C settings and would hand back a CPU-only build.
$PIP install -q --no-cache-dir --no-binary libggml-python \
  -C cmake.define.GGML_CUDA=ON -C cmake.define.GGML_NATIVE=ON "$GGML_PIN"
$PIP install -q ".[test]"
# -I: the installed package, not the source tree in the current directory.
"$VENV/bin/python" -I -c "
from omnivoice import _core
b = _core.Backend()
print('backend:', b.name, '(stock ops)' if b.stock_ops else '')
assert not b.is_cpu, 'ggml found no GPU: check the driver and that the build enabled CUDA'
"

echo "== parity tests on the GPU backend"
"$VENV/bin/pytest" -q tests/test_parity_lm.py tests/test_parity_codec_decode.py \
  tests/test_parity_codec_encode.py tests/test_generate_tiny.py tests/test_pipeline.py

echo "== real-time factor: 10 s utterance, $STEPS steps (generate() wall time / 10 s)"
for t in $TYPES; do
  "$VENV/bin/python" -P bench/e2e.py --worker "$t" --gguf-dir "$GGUF_DIR" --steps "$STEPS" --threads "$(nproc)" \
    --bare-repeats 3 | tail -n 1 | "$VENV/bin/python" -c "
import json, statistics, sys
r = json.loads(sys.stdin.read())
print(f\"  {r['side']:10s} on {r['backend']}: RTF {r['rtf']:.4f}  (wall {r['wall_s']:.2f} s; LM step \"
      f\"{statistics.median(r['step_periods_s']):.3f} s, bare {statistics.median(r['bare_s']):.3f} s; \"
      f\"load {r['load_s']:.1f} s; peak host RSS {r['peak_rss_mb'] / 1024:.2f} GB)\")
"
done
