"""pydub's silence detection re-implemented on numpy, against pydub's own ranges.

Fixture: tests/data/fixtures/audio_postprocess.npz (tests/reference/dump_text_fixtures.py).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from omnivoice.silence import Pcm16, detect_leading_silence, detect_nonsilent, detect_silence

FIXTURES = Path(__file__).parents[1] / "data" / "fixtures"
_NPZ = np.load(FIXTURES / "audio_postprocess.npz")
CASES = json.loads(str(_NPZ["cases"]))
RATES = {"speechy22k": 22050, "near24k": 24000}


def pcm(name: str) -> Pcm16:
    """The named fixture signal as upstream converts it for pydub (stored as int16 or float32)."""
    stored = _NPZ[f"signal/{name}"]
    wave = stored.astype(np.float32) / np.float32(32768) if stored.dtype == np.int16 else stored
    return Pcm16.from_float(wave, RATES.get(name, 12000))


def case_id(case: dict) -> str:
    return "-".join(f"{v}" for k, v in case.items() if k not in ("op", "silent", "nonsilent", "leading", "trailing"))


@pytest.mark.parametrize("case", [c for c in CASES if c["op"] == "pydub_silence"], ids=case_id)
def test_detect_silence(case: dict) -> None:
    segment = pcm(case["signal"])
    args = (case["min_silence_len"], case["silence_thresh"], case["seek_step"])
    assert detect_silence(segment, *args) == case["silent"]
    assert detect_nonsilent(segment, *args) == case["nonsilent"]


@pytest.mark.parametrize("case", [c for c in CASES if c["op"] == "pydub_leading_silence"], ids=case_id)
def test_detect_leading_silence(case: dict) -> None:
    segment = pcm(case["signal"])
    assert len(segment) == case["length_ms"]
    assert detect_leading_silence(segment, case["silence_thresh"], case["chunk_size"]) == case["leading"]
    assert detect_leading_silence(segment.reverse(), case["silence_thresh"], case["chunk_size"]) == case["trailing"]


def test_slice_pads_past_the_end() -> None:
    # 24013 samples at 24 kHz round to 1001 ms; the last ms reaches past the data and is zero-padded.
    segment = Pcm16(np.ones((24013, 1), np.int16), 24000)
    assert len(segment) == 1001
    tail = segment.slice(1000)
    assert tail.samples.shape == (24, 1)
    assert tail.samples[:13].all() and not tail.samples[13:].any()


def test_window_rms_in_blocks_equals_each_window_alone() -> None:
    # 2000 windows: several of Pcm16.window_rms's blocks (the fixtures above stay inside one).
    rng = np.random.default_rng(0)
    samples = (rng.standard_normal((22050 * 21, 2)) * 3000).astype(np.int16)
    pcm = Pcm16(samples, 22050)
    starts = np.arange(0, len(pcm) + 5, 10)  # the last windows reach past the end
    got = pcm.window_rms(starts, 500)
    for i in (0, 1, 255, 256, 257, 1000, len(starts) - 3, len(starts) - 1):
        part = pcm.slice(int(starts[i]), int(starts[i]) + 500).samples.astype(np.int64)
        expected = int(np.sqrt(np.mean(part**2))) if part.size else 0
        assert got[i] == expected, i
