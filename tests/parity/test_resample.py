"""Resampling as upstream does it (torchaudio's sinc interpolation) vs torchaudio 2.11.1 itself.

Expected values: tests/data/fixtures/resample.npz (+ .json), written by
tests/reference/dump_fixtures.py with torchaudio's own resample functions (loaded from its wheel).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from omnivoice import OmniVoice
from omnivoice.audio import load_audio
from omnivoice.models.omnivoice.audio_tokenizer import AudioTokenizer
from omnivoice.resample import resample

FIXTURES = Path(__file__).parent.parent / "data" / "fixtures"
# torchaudio evaluates in float32: its sums differ from ours (float64) by rounding, up to
# 5e-7 on these signals (peak about 0.3).
ATOL = 2e-6


@pytest.fixture(scope="module")
def ref() -> dict[str, np.ndarray]:
    with np.load(FIXTURES / "resample.npz") as f:
        return dict(f)


@pytest.fixture(scope="module")
def meta() -> dict:
    return json.loads((FIXTURES / "resample.json").read_text(encoding="utf-8"))


RATES = [8000, 16000, 22050, 44100, 48000]


@pytest.mark.parametrize("rate", RATES)
def test_resample_matches_torchaudio(ref: dict[str, np.ndarray], rate: int) -> None:
    got = resample(ref[f"wave_{rate}"], rate, 24000)
    assert got.dtype == np.float32
    assert got.shape == ref[f"to24k_{rate}"].shape
    np.testing.assert_allclose(got, ref[f"to24k_{rate}"], rtol=0, atol=ATOL)


def test_codec_downsampling_matches_torchaudio() -> None:
    with np.load(FIXTURES / "codec_encode.npz") as f:
        np.testing.assert_allclose(resample(f["audio_24k"], 24000, 16000), f["audio_16k"], rtol=0, atol=ATOL)


@pytest.mark.parametrize("n", [0, 1, 2, 7, 441, 1000])
def test_output_length_is_torchaudios(n: int) -> None:
    # ceil(n * new / orig); both directions, co-prime and integer ratios.
    for orig, new in [(44100, 24000), (24000, 16000), (8000, 24000), (22050, 24000), (24001, 24000)]:
        assert resample(np.ones(n, np.float32), orig, new).size == -(-n * new // orig)


def test_equal_rates_return_the_input() -> None:
    wave = np.arange(5, dtype=np.float32)
    assert resample(wave, 16000, 16000) is wave


@pytest.mark.parametrize(
    ("wave", "orig", "new", "match"),
    [
        (np.zeros((2, 5), np.float32), 8000, 16000, "1-D"),
        (np.zeros(5, np.int16), 8000, 16000, "float"),
        (np.zeros(5, np.float32), 0, 16000, "orig_freq"),
        (np.zeros(5, np.float32), 8000, 22050.5, "new_freq"),
        (np.zeros(5, np.float32), True, 16000, "orig_freq"),
    ],
)
def test_rejects_bad_arguments(wave: np.ndarray, orig: object, new: object, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        resample(wave, orig, new)  # type: ignore[arg-type]


@pytest.mark.parametrize("rate", RATES)
def test_encode_at_other_rates_gives_upstreams_codes(
    tiny_codec_gguf: Path, ref: dict[str, np.ndarray], rate: int
) -> None:
    tok = AudioTokenizer.from_file(tiny_codec_gguf, n_threads=1)
    np.testing.assert_array_equal(tok.encode(ref[f"wave_{rate}"], rate), ref[f"codes_{rate}"])


@pytest.fixture(scope="module")
def model(tiny_model_dir: Path) -> OmniVoice:
    return OmniVoice.from_pretrained(tiny_model_dir, n_threads=1)


@pytest.mark.parametrize("rate", RATES)
def test_clone_prompt_at_other_rates_is_upstreams(
    model: OmniVoice, ref: dict[str, np.ndarray], meta: dict, rate: int, tmp_path: Path
) -> None:
    wave = ref[f"wave_{rate}"]
    prompt = model.create_voice_clone_prompt((wave, rate), ref_text=meta["ref_text"])
    np.testing.assert_array_equal(prompt.ref_audio_tokens, ref[f"prompt_codes_{rate}"])
    assert prompt.ref_rms == pytest.approx(meta["prompt_ref_rms"][str(rate)], rel=1e-5)
    # The same from a float WAV file at that rate.
    path = tmp_path / "ref.wav"
    sf.write(path, wave, rate, subtype="FLOAT")
    np.testing.assert_allclose(load_audio(path, 24000), ref[f"to24k_{rate}"], rtol=0, atol=ATOL)
    from_file = model.create_voice_clone_prompt(str(path), ref_text=meta["ref_text"])
    np.testing.assert_array_equal(from_file.ref_audio_tokens, ref[f"prompt_codes_{rate}"])
