#!/usr/bin/env bash
# Creates the reference venv: upstream OmniVoice (PyTorch) used only to make
# the random checkpoints and the fixtures under tests/data/.
#
# Usage: tests/reference/setup_venv.sh [VENV_DIR] [TORCH_WHEEL]
#   VENV_DIR     defaults to /work/refvenv
#   TORCH_WHEEL  the torch 2.13.0 CPU wheel on disk (pip must not pull another torch)
#
# torchaudio is NOT installed (no wheel matches this torch): its wheel is only downloaded into
# VENV_DIR/wheels, and tests/reference/torchaudio_stub (first on PYTHONPATH, see README.md) loads
# torchaudio's own resample functions from it.
# Never install our own omnivoice package into this venv: the import names clash.
set -euo pipefail

VENV=${1:-/work/refvenv}
TORCH_WHEEL=${2:-/opt/wheels/torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl}

python3.11 -m venv "$VENV"
PIP="$VENV/bin/pip"
"$PIP" install -q "$TORCH_WHEEL"
# Upstream declares gradio, librosa, torchaudio, ... which inference does not need.
"$PIP" install -q --no-deps omnivoice==0.2.1
# A constraint keeps pip from replacing the torch installed above.
"$VENV/bin/python" -c 'import torch; print(f"torch=={torch.__version__}")' > "$VENV/torch-constraint.txt"
# Versions the committed fixtures were made with.
"$PIP" install -q -c "$VENV/torch-constraint.txt" \
    transformers==5.24.0 tokenizers==0.23.3 safetensors==0.8.0 accelerate==1.15.0 \
    numpy==2.4.6 soundfile==0.14.0 pydub==0.25.1 soxr==1.1.0
# torchaudio's resample code (plain torch) for the stub; its compiled parts are never loaded.
"$PIP" download -q --no-deps torchaudio==2.11.1 -d "$VENV/wheels"
"$VENV/bin/python" -c 'import torch, transformers, soxr; print("torch", torch.__version__, "transformers", transformers.__version__)'
PYTHONPATH="$(dirname "$0")/torchaudio_stub" "$VENV/bin/python" -P -c 'import torchaudio.functional'
