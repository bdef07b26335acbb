#!/usr/bin/env bash
# Creates the Sopro reference venv: PyPI sopro==2.2.0 (the only version served) on CPU torch,
# used only to make tests/data/sopro_tiny and the fixtures under tests/data/fixtures/sopro.
#
# Usage: tests/reference/sopro/setup_venv.sh [VENV_DIR] [TORCH_WHEEL]
#   VENV_DIR     defaults to /work/refvenv-sopro (apart from /work/refvenv: a torchaudio there
#                would change upstream OmniVoice's resampling path)
#   TORCH_WHEEL  the torch 2.13.0 CPU wheel on disk (pip must not pull another torch)
#
# torchaudio: PyPI's 2.11.1 wheel is a CUDA build whose _torchaudio.so needs libc10_cuda.so.
# Its compiled libraries are moved aside, so torchaudio's _load_lib finds none and returns False;
# what sopro calls (transforms.MelSpectrogram, transforms.Resample, functional.resample) is plain torch.
set -euo pipefail

VENV=${1:-/work/refvenv-sopro}
TORCH_WHEEL=${2:-/opt/wheels/torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl}

python3.11 -m venv "$VENV"
PIP="$VENV/bin/pip"
"$PIP" install -q "$TORCH_WHEEL"
"$VENV/bin/python" -c 'import torch; print(f"torch=={torch.__version__}")' > "$VENV/torch-constraint.txt"
# Upstream declares huggingface-hub (only for downloads by repo id) and torchaudio (handled below).
"$PIP" install -q --no-deps sopro==2.2.0 torchaudio==2.11.1
# Versions the committed checkpoint and fixtures were made with.
"$PIP" install -q -c "$VENV/torch-constraint.txt" \
    sentencepiece==0.2.3 safetensors==0.8.0 numpy==2.4.6 soundfile==0.14.0
SITE=$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
mkdir -p "$SITE/torchaudio/lib.cuda-disabled"
shopt -s nullglob
for so in "$SITE"/torchaudio/lib/*.so; do mv "$so" "$SITE/torchaudio/lib.cuda-disabled/"; done
"$VENV/bin/python" -P -c '
import torch, torchaudio, sopro.model, sentencepiece
x = torch.randn(1, 24000)
torchaudio.transforms.MelSpectrogram(sample_rate=24000, n_fft=1024, hop_length=256, n_mels=100)(x)
torchaudio.functional.resample(x, 24000, 16000)
print("torch", torch.__version__, "torchaudio", torchaudio.__version__, "sentencepiece", sentencepiece.__version__)'
