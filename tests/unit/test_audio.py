"""Audio pre/post-processing against upstream (fixture: tests/reference/dump_text_fixtures.py).

Silence removal and trimming work on 16-bit samples, so their outputs must match
upstream's (pydub) exactly; the float fades and volume rules are held to float32
rounding (they are bit-exact with the same numpy).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import numpy as np
import pytest

from omnivoice import audio, postprocess

FIXTURES = Path(__file__).parents[1] / "data" / "fixtures"
_NPZ = np.load(FIXTURES / "audio_postprocess.npz")
CASES = json.loads(str(_NPZ["cases"]))


def load(key: str) -> np.ndarray:
    """Return a stored waveform as float32 (int16-grid arrays are stored as int16)."""
    array = _NPZ[key]
    return array.astype(np.float32) / np.float32(32768) if array.dtype == np.int16 else array


def signal(name: str) -> np.ndarray:
    return load(f"signal/{name}")


def cases(op: str) -> list[dict]:
    return [c for c in CASES if c["op"] == op]


def case_id(case: dict) -> str:
    return "-".join(f"{v}" for k, v in case.items() if k not in ("op", "output"))


def rate_of(name: str) -> int:
    return {"speechy22k": 22050, "near24k": 24000}.get(name, 12000)


@pytest.mark.parametrize("case", cases("remove_silence"), ids=case_id)
def test_remove_silence(case: dict) -> None:
    name = case["signal"]
    out = postprocess.remove_silence(signal(name), rate_of(name), case["mid_sil"], case["lead_sil"], case["trail_sil"])
    np.testing.assert_array_equal(out, load(case["output"]))


@pytest.mark.parametrize("case", cases("trim_long_audio"), ids=case_id)
def test_trim_long_audio(case: dict) -> None:
    name = case["signal"]
    out = postprocess.trim_long_audio(
        signal(name), rate_of(name), case["max_duration"], case["min_duration"], case["trim_threshold"]
    )
    np.testing.assert_array_equal(out, load(case["output"]))


@pytest.mark.parametrize("case", cases("fade_and_pad_audio"), ids=case_id)
def test_fade_and_pad_audio(case: dict) -> None:
    out = postprocess.fade_and_pad_audio(
        signal(case["signal"]), case["pad_duration"], case["fade_duration"], case["sample_rate"]
    )
    np.testing.assert_allclose(out, load(case["output"]), rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("case", cases("cross_fade_chunks"), ids=case_id)
def test_cross_fade_chunks(case: dict) -> None:
    chunks = [signal(name) for name in case["chunks"]]
    out = postprocess.cross_fade_chunks(chunks, case["sample_rate"], case["silence_duration"])
    np.testing.assert_allclose(out, load(case["output"]), rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("case", cases("preprocess_reference"), ids=case_id)
def test_preprocess_reference(case: dict) -> None:
    name = case["signal"]
    wave = signal(name) * np.float32(case["gain"])
    out, rms = postprocess.preprocess_reference(wave, rate_of(name), case["ref_text_given"])
    out = audio.truncate_to_hop(out, case["hop_length"])
    assert rms == pytest.approx(case["ref_rms"], rel=1e-6)
    np.testing.assert_array_equal(out, load(case["output"]))


def _chunk_pieces() -> list[np.ndarray]:
    # The chunk audio the fixture's stand-in decoder returned for token values 0, 1, 2.
    wave = signal("speechy12k")
    return [wave * 0.2, wave[:, :6000] * 1.5, wave[:, 5000:]]


@pytest.mark.parametrize("case", cases("post_process"), ids=case_id)
def test_post_process(case: dict) -> None:
    pieces = _chunk_pieces()
    chunks = [pieces[i] for i in case["pieces"]]
    rate = case["sample_rate"]
    decoded = postprocess.cross_fade_chunks(chunks, rate) if len(chunks) > 1 else chunks[0]
    out = postprocess.post_process_audio(decoded, rate, case["ref_rms"], case["postprocess_output"])
    np.testing.assert_allclose(out[0], load(case["output"]), rtol=1e-6, atol=1e-7)


def _joined(chunks: list[np.ndarray], rate: int, ref_rms: Optional[float], postprocess_output: bool) -> np.ndarray:
    joiner = postprocess.ChunkJoiner(rate, ref_rms, postprocess_output)
    for chunk in chunks:
        joiner.add(chunk)
    return joiner.finish()


@pytest.mark.parametrize("case", cases("post_process"), ids=case_id)
def test_chunk_joiner_equals_upstream_post_process(case: dict) -> None:
    pieces = _chunk_pieces()
    chunks = [pieces[i][0] for i in case["pieces"]]
    out = _joined(chunks, case["sample_rate"], case["ref_rms"], case["postprocess_output"])
    np.testing.assert_allclose(out, load(case["output"]), rtol=1e-6, atol=1e-7)
    whole = postprocess.cross_fade_chunks(chunks, case["sample_rate"]) if len(chunks) > 1 else chunks[0]
    whole = postprocess.post_process_audio(whole, case["sample_rate"], case["ref_rms"], case["postprocess_output"])
    np.testing.assert_array_equal(out, whole.astype(np.float32))


@pytest.mark.parametrize("ref_rms", [None, 0.04, 0.3])
@pytest.mark.parametrize("postprocess_output", [True, False])
def test_chunk_joiner_equals_whole_signal_functions(ref_rms: Optional[float], postprocess_output: bool) -> None:
    # 22.05 kHz: milliseconds are not whole frames, and this length makes the last piece and the
    # trimmed edge reach past the last frame (pydub pads them with zeros); long pauses get cut, one
    # chunk is shorter than the cross-fade, and ChunkJoiner converts in blocks smaller than the signal.
    wave = signal("speechy22k")[0]
    pause = np.zeros(30011, np.float32)
    chunks = [np.concatenate([pause, wave[:20001], pause]), wave[100:400], wave[7:], wave[:39995]]
    whole = postprocess.cross_fade_chunks(chunks, 22050)
    expected = postprocess.post_process_audio(whole, 22050, ref_rms, postprocess_output).astype(np.float32)
    for block in (postprocess.ChunkJoiner.BLOCK, 4097):
        postprocess.ChunkJoiner.BLOCK = block
        try:
            np.testing.assert_array_equal(_joined(chunks, 22050, ref_rms, postprocess_output), expected)
        finally:
            postprocess.ChunkJoiner.BLOCK = 1 << 16
    silent = np.zeros(44100, np.float32)  # nothing left after silence removal
    assert _joined([silent], 22050, ref_rms, True).shape == (0,)
    np.testing.assert_array_equal(_joined([silent], 22050, ref_rms, False),
                                  postprocess.post_process_audio(silent, 22050, ref_rms, False))


def test_reference_rms_boost() -> None:
    quiet = np.full((1, 100), 0.01, np.float32)
    boosted, rms = postprocess.normalize_reference_rms(quiet)
    assert rms == pytest.approx(0.01)
    np.testing.assert_allclose(boosted, 0.1, rtol=1e-6)
    loud = np.full((1, 100), 0.5, np.float32)
    assert postprocess.normalize_reference_rms(loud)[0] is loud


def test_truncate_to_hop() -> None:
    wave = np.zeros((1, 1000), np.float32)
    assert audio.truncate_to_hop(wave, 960).shape == (1, 960)
    assert audio.truncate_to_hop(wave, 100).shape == (1, 1000)


def test_mono_1d_matches_2d() -> None:
    wave = signal("speechy12k")
    np.testing.assert_array_equal(
        postprocess.remove_silence(wave[0], 12000), postprocess.remove_silence(wave, 12000)[0]
    )
    np.testing.assert_array_equal(
        postprocess.post_process_audio(wave[0], 12000, None), postprocess.post_process_audio(wave, 12000, None)[0]
    )
    chunks = [wave[0, :500], wave[0, 500:900]]
    np.testing.assert_array_equal(
        postprocess.cross_fade_chunks(chunks, 1000), postprocess.cross_fade_chunks([c[None] for c in chunks], 1000)[0]
    )
    assert audio.truncate_to_hop(wave[0], 960).shape == (wave.shape[1] // 960 * 960,)


def test_load_audio(tmp_path: Path) -> None:
    stereo = np.stack([np.full(4800, 0.25), np.full(4800, -0.75)]).astype(np.float32)
    path = tmp_path / "ref.wav"
    audio.write_wav(path, stereo, 48000, "wav32")
    same_rate = audio.load_audio(path, 48000)
    assert same_rate.dtype == np.float32
    np.testing.assert_allclose(same_rate, -0.25)
    resampled = audio.load_audio(path, 24000)
    assert resampled.shape == (2400,)
    np.testing.assert_allclose(resampled[200:-200], -0.25, atol=1e-3)


def test_load_audio_errors(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        audio.load_audio(tmp_path / "missing.wav", 24000)
    junk = tmp_path / "junk.wav"
    junk.write_bytes(b"not audio at all")
    with pytest.raises(ValueError, match="cannot read"):
        audio.load_audio(junk, 24000)


@pytest.mark.parametrize(
    "bad, message",
    [
        (np.zeros((1, 1, 100), np.float32), "shape"),
        (np.zeros((1, 100), np.int16), "float"),
        (np.full((1, 100), np.nan, np.float32), "NaN"),
    ],
)
def test_bad_waveform_rejected(bad: np.ndarray, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        postprocess.remove_silence(bad, 24000)


def test_reference_all_silence_rejected() -> None:
    with pytest.raises(ValueError, match="empty after silence removal"):
        postprocess.preprocess_reference(np.zeros((1, 24000), np.float32), 24000, ref_text_given=True)


def test_cross_fade_needs_chunks() -> None:
    with pytest.raises(ValueError, match="at least one"):
        postprocess.cross_fade_chunks([], 24000)
