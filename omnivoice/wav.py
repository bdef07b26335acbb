"""Writing WAV files: whole files through soundfile, and a streaming writer for pipes.

Formats: ``wav16`` (16-bit PCM), ``wav24`` (24-bit PCM) and ``wav32`` (32-bit
IEEE float). Integer formats clip to [-1, 1] first: libsndfile would otherwise
wrap out-of-range samples around.

The streaming writer cannot know the length when it writes the header (e.g. for
``-o -``), so it writes the RIFF and data chunk sizes as 0xFFFFFFFF, the largest
value, as ffmpeg does for unseekable output; ffmpeg, sox and most players read
such a stream to its end. On a seekable file the sizes are patched on close.
"""

from __future__ import annotations

import struct
from os import PathLike
from types import TracebackType
from typing import BinaryIO, Optional, Union

import numpy as np
import soundfile as sf

__all__ = ["WAV_FORMATS", "WavStreamWriter", "write_wav"]

# Format name -> soundfile subtype.
WAV_FORMATS = {"wav16": "PCM_16", "wav24": "PCM_24", "wav32": "FLOAT"}
# Format name -> (WAVE format tag, bits per sample).
_WAVE_TAGS = {"wav16": (1, 16), "wav24": (1, 24), "wav32": (3, 32)}
# RIFF size field for a stream of unknown length.
_UNKNOWN_SIZE = 0xFFFFFFFF
# Bytes of the RIFF header before the sample data: RIFF/WAVE (12), fmt chunk (8 + 16), data chunk header (8).
_HEADER_BYTES = 44


def _check_format(fmt: str) -> None:
    """Raise ValueError for an unknown format name."""
    if fmt not in WAV_FORMATS:
        raise ValueError(f"unknown WAV format {fmt!r}; expected one of {', '.join(WAV_FORMATS)}")


def _frames(audio: np.ndarray, fmt: str) -> np.ndarray:
    """Return audio as [T, C] frames ready for ``fmt``: (T,) or (C, T) in, float, finite, clipped for PCM."""
    audio = np.asarray(audio)
    if audio.ndim not in (1, 2) or not np.issubdtype(audio.dtype, np.floating):
        raise ValueError("audio must be a float array of shape (samples,) or (channels, samples)")
    if not np.all(np.isfinite(audio)):
        raise ValueError("audio contains NaN or infinite samples")
    frames = audio[:, None] if audio.ndim == 1 else audio.T
    return frames if fmt == "wav32" else np.clip(frames, -1.0, 1.0)


def write_wav(file: Union[str, PathLike, BinaryIO], audio: np.ndarray, sample_rate: int, fmt: str = "wav16") -> None:
    """Write a whole waveform to a WAV file.

    Args:
        file: Path or binary file object.
        audio: Float waveform, (T,) or (C, T), nominally in [-1, 1].
        sample_rate: Sample rate in Hz.
        fmt: ``wav16``, ``wav24`` or ``wav32``.

    Raises:
        ValueError: Unknown format, bad shape or dtype, or non-finite samples.
    """
    _check_format(fmt)
    if sample_rate <= 0:
        raise ValueError(f"sample rate must be positive, got {sample_rate}")
    sf.write(file, _frames(audio, fmt), sample_rate, subtype=WAV_FORMATS[fmt], format="WAV")


class WavStreamWriter:
    """Write WAV audio piece by piece to a binary stream (a file or stdout).

    The header goes out on construction with sizes 0xFFFFFFFF ("unknown"); on
    :meth:`close` they are patched if the stream is seekable and the data fits
    the 32-bit size fields. The stream itself is not closed.

    Args:
        stream: Binary stream open for writing, e.g. ``sys.stdout.buffer``.
        sample_rate: Sample rate in Hz.
        channels: Number of channels.
        fmt: ``wav16``, ``wav24`` or ``wav32``.

    Example:
        >>> with WavStreamWriter(sys.stdout.buffer, 24000) as out:
        ...     for chunk in chunks:
        ...         out.write(chunk)
    """

    def __init__(self, stream: BinaryIO, sample_rate: int, channels: int = 1, fmt: str = "wav16") -> None:
        _check_format(fmt)
        if sample_rate <= 0 or channels <= 0:
            raise ValueError(f"sample rate and channels must be positive, got {sample_rate} and {channels}")
        self._stream = stream
        self._fmt = fmt
        self._channels = channels
        self._data_bytes = 0
        self._closed = False
        self._start = stream.tell() if stream.seekable() else None
        tag, bits = _WAVE_TAGS[fmt]
        block_align = channels * bits // 8
        header = b"".join(
            [
                b"RIFF",
                struct.pack("<I", _UNKNOWN_SIZE),
                b"WAVE",
                b"fmt ",
                struct.pack("<IHHIIHH", 16, tag, channels, sample_rate, sample_rate * block_align, block_align, bits),
                b"data",
                struct.pack("<I", _UNKNOWN_SIZE),
            ]
        )
        stream.write(header)

    def write(self, audio: np.ndarray) -> None:
        """Append samples.

        Args:
            audio: Float waveform, (T,) or (C, T) with C equal to ``channels``.

        Raises:
            ValueError: The writer is closed, or the audio is malformed or has the wrong channel count.
        """
        if self._closed:
            raise ValueError("write to a closed WavStreamWriter")
        frames = _frames(audio, self._fmt)
        if frames.shape[1] != self._channels:
            raise ValueError(f"expected {self._channels} channel(s), got {frames.shape[1]}")
        data = self._encode(frames)
        self._stream.write(data)
        self._data_bytes += len(data)

    def _encode(self, frames: np.ndarray) -> bytes:
        """Little-endian sample bytes of [T, C] frames.

        PCM levels are ``floor(x * 2**(bits - 1))`` clipped to the integer range,
        the conversion libsndfile 1.2 applies, so both writers give the same bytes.
        """
        if self._fmt == "wav32":
            return frames.astype("<f4").tobytes()
        bits = _WAVE_TAGS[self._fmt][1]
        full_scale = float(1 << (bits - 1))
        levels = np.clip(np.floor(frames * full_scale), -full_scale, full_scale - 1).astype("<i4")
        if bits == 16:
            return levels.astype("<i2").tobytes()
        # 24-bit: the low three bytes of each little-endian int32.
        return np.ascontiguousarray(levels).view(np.uint8).reshape(-1, 4)[:, :3].tobytes()

    def close(self) -> None:
        """Finish the stream: pad to an even length and patch the sizes when possible."""
        if self._closed:
            return
        self._closed = True
        pad = self._data_bytes % 2
        if pad:
            self._stream.write(b"\0")
        riff_size = _HEADER_BYTES - 8 + self._data_bytes + pad
        if self._start is not None and riff_size <= _UNKNOWN_SIZE:
            end = self._stream.tell()
            self._stream.seek(self._start + 4)
            self._stream.write(struct.pack("<I", riff_size))
            self._stream.seek(self._start + _HEADER_BYTES - 4)
            self._stream.write(struct.pack("<I", self._data_bytes))
            self._stream.seek(end)
        self._stream.flush()

    def __enter__(self) -> WavStreamWriter:
        return self

    def __exit__(
        self,
        exc_type: Optional[type[BaseException]],
        exc: Optional[BaseException],
        traceback: Optional[TracebackType],
    ) -> None:
        self.close()
