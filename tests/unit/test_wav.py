"""WAV writers: whole-file (soundfile) and streaming (our own header and sample encoding)."""

from __future__ import annotations

import io
import struct

import numpy as np
import pytest
import soundfile as sf

from omnivoice.audio import WAV_FORMATS, StreamingWavWriter, write_wav

SUBTYPE_DTYPE = {"wav16": "int16", "wav24": "int32", "wav32": "float32"}


class _Pipe(io.BytesIO):
    """A BytesIO that claims to be unseekable, like stdout on a pipe."""

    def seekable(self) -> bool:
        return False


def _signal(channels: int) -> np.ndarray:
    rng = np.random.default_rng(0)
    wave = rng.uniform(-1.2, 1.2, (channels, 1001)).astype(np.float32)  # odd length, some clipping
    wave[:, :4] = [1.0, -1.0, 0.5, -0.5]
    return wave[0] if channels == 1 else wave


@pytest.mark.parametrize("fmt", list(WAV_FORMATS))
@pytest.mark.parametrize("channels", [1, 2])
def test_stream_matches_soundfile(fmt: str, channels: int) -> None:
    wave = _signal(channels)
    whole = io.BytesIO()
    write_wav(whole, wave, 24000, fmt)
    whole.seek(0)
    expected, rate = sf.read(whole, dtype=SUBTYPE_DTYPE[fmt], always_2d=True)
    assert rate == 24000
    assert sf.info(io.BytesIO(whole.getvalue())).subtype == WAV_FORMATS[fmt][0]

    stream = io.BytesIO()
    with StreamingWavWriter(stream, 24000, fmt, channels) as out:
        out.write(wave[..., :500])
        out.write(wave[..., 500:])
    assert len(stream.getvalue()) % 2 == 0
    stream.seek(0)
    got, rate = sf.read(stream, dtype=SUBTYPE_DTYPE[fmt], always_2d=True)
    assert rate == 24000
    np.testing.assert_array_equal(got, expected)


def test_pcm16_levels() -> None:
    stream = io.BytesIO()
    with StreamingWavWriter(stream, 8000) as out:
        out.write(np.array([0.0, 0.5, -0.5, 1.0, -1.0, 2.0, -2.0, 1.9 / 32768, -0.1 / 32768]))
    levels = np.frombuffer(stream.getvalue()[44:], "<i2")
    np.testing.assert_array_equal(levels, [0, 16384, -16384, 32767, -32768, 32767, -32768, 1, -1])


def test_unseekable_stream_keeps_unknown_sizes() -> None:
    pipe = _Pipe()
    with StreamingWavWriter(pipe, 24000, fmt="wav24") as out:
        out.write(np.zeros(3, np.float32))
    data = pipe.getvalue()
    assert data[:4] == b"RIFF" and data[8:16] == b"WAVEfmt "
    assert struct.unpack("<I", data[4:8])[0] == 0xFFFFFFFF
    assert data[36:40] == b"data" and struct.unpack("<I", data[40:44])[0] == 0xFFFFFFFF
    assert struct.unpack("<HHIIHH", data[20:36]) == (1, 1, 24000, 72000, 3, 24)
    assert len(data) == 44 + 9 + 1  # 3 samples of 3 bytes, then the pad byte


def test_seekable_stream_gets_sizes() -> None:
    stream = io.BytesIO(b"prefix")
    stream.seek(6)
    with StreamingWavWriter(stream, 16000, fmt="wav32") as out:
        out.write(np.ones((1, 10), np.float32))
    data = stream.getvalue()[6:]
    assert struct.unpack("<I", data[4:8])[0] == 36 + 40
    assert struct.unpack("<I", data[40:44])[0] == 40


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: write_wav(io.BytesIO(), np.zeros(10), 24000, "mp3"), "unknown WAV format"),
        (lambda: write_wav(io.BytesIO(), np.zeros((1, 2, 3)), 24000), "shape"),
        (lambda: write_wav(io.BytesIO(), np.zeros(3), -1), "positive"),
        (lambda: write_wav(io.BytesIO(), np.array([0.0, np.inf]), 24000), "NaN or infinite"),
        (lambda: write_wav(io.BytesIO(), np.zeros(10, np.int16), 24000), "float"),
        (lambda: StreamingWavWriter(io.BytesIO(), 24000, channels=1).write(np.zeros((2, 5))), "channel"),
        (lambda: StreamingWavWriter(io.BytesIO(), 0), "positive"),
    ],
)
def test_bad_input(call, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        call()


def test_write_after_close() -> None:
    out = StreamingWavWriter(io.BytesIO(), 24000)
    out.close()
    with pytest.raises(ValueError, match="closed"):
        out.write(np.zeros(4))
