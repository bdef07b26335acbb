"""Sopro's numpy front ends vs sopro 2.2.0's torchaudio transforms (fixtures/sopro/frontends.npz),
with the windows and filterbanks the tiny checkpoint stores."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import load_file

from omnivoice.models.sopro import frontend

DATA = Path(__file__).parents[2] / "data"
CKPT = DATA / "sopro_tiny"
FIXTURES = np.load(DATA / "fixtures" / "sopro" / "frontends.npz")
CASES = sorted({k.split(".")[0] for k in FIXTURES.files})


@pytest.fixture(scope="module")
def tables() -> dict:
    cfg = json.loads((CKPT / "config.json").read_text())
    spk = load_file(CKPT / "speaker_encoder.safetensors")
    sem = load_file(CKPT / "semantic_encoder.safetensors")
    voc = load_file(CKPT / "vocoder.safetensors")
    return {
        "cfg": cfg,
        "spk": (spk["frontend.mel.spectrogram.window"], spk["frontend.mel.mel_scale.fb"]),
        "sem": (sem["frontend.mel.spectrogram.window"], sem["frontend.mel.mel_scale.fb"]),
        "voc": (voc["feature_extractor.mel_spec.spectrogram.window"], voc["feature_extractor.mel_spec.mel_scale.fb"]),
    }


def rel_max(got: np.ndarray, want: np.ndarray) -> float:
    assert got.shape == want.shape
    return float(np.max(np.abs(got - want)) / np.max(np.abs(want)))


@pytest.mark.parametrize("case", CASES)
def test_speaker_log_mel(tables: dict, case: str) -> None:
    c = tables["cfg"]["speaker_encoder"]
    got = frontend.speaker_log_mel(FIXTURES[f"{case}.wav16"], *tables["spk"], c["n_fft"], c["hop_length"],
                                   c["mel_log_floor"])
    assert rel_max(got, FIXTURES[f"{case}.speaker_mel"]) < 2e-6  # measured 5e-7


@pytest.mark.parametrize("case", CASES)
def test_semantic_log_mel(tables: dict, case: str) -> None:
    c = tables["cfg"]["semantic_encoder"]
    got, frames = frontend.semantic_log_mel(FIXTURES[f"{case}.wav16"], *tables["sem"], c["n_fft"], c["hop_length"])
    assert frames == int(FIXTURES[f"{case}.semantic_frames"])
    want = FIXTURES[f"{case}.semantic_mel"]
    # Whisper's 80 dB range reaches cells whose power is 1e-7.5 of the peak, where torch's float32
    # FFT rounding (about 1e-7 of the peak magnitude) is a few 1e-4 of the cell: 2.6e-5 measured
    # there, 2e-6 over the whole array.
    assert rel_max(got, want) < 5e-5
    assert np.linalg.norm(got - want) / np.linalg.norm(want) < 5e-6


@pytest.mark.parametrize("case", CASES)
def test_vocoder_log_mel(tables: dict, case: str) -> None:
    c = tables["cfg"]["vocoder"]
    got = frontend.vocoder_log_mel(FIXTURES[f"{case}.wav24"], *tables["voc"], c["n_fft"], c["hop_length"])
    want = FIXTURES[f"{case}.vocoder_mel"]
    # The quietest top bands, 1e-7 of the peak magnitude, carry torch's float32 FFT rounding: 6.6e-6
    # measured there, 1e-6 over the whole array.
    assert rel_max(got, want) < 2e-5
    assert np.linalg.norm(got - want) / np.linalg.norm(want) < 3e-6


def test_frontend_bad_input(tables: dict) -> None:
    window, fb = tables["voc"]
    with pytest.raises(ValueError, match="wav must be a 1-D float array"):
        frontend.vocoder_log_mel(np.zeros((2, 3000), np.float32), window, fb, 1024, 256)
    with pytest.raises(ValueError, match="longer than n_fft // 2"):
        frontend.vocoder_log_mel(np.zeros(300, np.float32), window, fb, 1024, 256)
    with pytest.raises(ValueError, match="fb must be"):
        frontend.vocoder_log_mel(np.zeros(3000, np.float32), window, fb[:-1], 1024, 256)
