"""Audio in and out: loading files, mixing to mono and resampling, WAV writing.

Waveforms are float arrays in [-1, 1], either mono ``(T,)`` or channels-first ``(C, T)``.
Upstream's pre- and post-processing of waveforms lives in :mod:`omnivoice.postprocess`.

WAV formats: ``wav16`` (16-bit PCM), ``wav24`` (24-bit PCM), ``wav32`` (32-bit
float). The streaming writer cannot know the length when it writes the header
(``-o -``), so it writes the RIFF and data sizes as 0xFFFFFFFF, the largest
value, as ffmpeg does for unseekable output; ffmpeg, sox and most players then
read to the end of the stream. On a seekable file the sizes are patched on close.
"""

from __future__ import annotations

import struct
from os import PathLike
from pathlib import Path
from types import TracebackType
from typing import BinaryIO, Optional, Union

import numpy as np
import numpy.typing as npt
import soundfile as sf

from .resample import resample

__all__ = [
    "WAV_FORMATS",
    "StreamingWavWriter",
    "load_audio",
    "sample_bytes",
    "to_mono",
    "truncate_to_hop",
    "write_wav",
]

# Sample rates accepted (as the codec loader's): a 7 Hz "WAV" would resample 1 s to an hour.
MIN_RATE, MAX_RATE = 1000, 384000
# Full scale of the integer sample types accepted, mapped to [-1, 1).
_INT_FULL_SCALE = {np.dtype(np.int16): 2.0**15, np.dtype(np.int32): 2.0**31}

# Format name -> (soundfile subtype, WAVE format tag, bits per sample).
WAV_FORMATS = {"wav16": ("PCM_16", 1, 16), "wav24": ("PCM_24", 1, 24), "wav32": ("FLOAT", 3, 32)}
# Size field value for a stream of unknown length.
_UNKNOWN_SIZE = 0xFFFFFFFF
# RIFF/WAVE (12 bytes), fmt chunk (8 + 16), data chunk header (8).
_HEADER_BYTES = 44


def _as_2d(audio: np.ndarray, name: str = "audio") -> np.ndarray:
    """Check a waveform (finite floats, (T,) or (C, T)) and return it as (C, T)."""
    if not isinstance(audio, np.ndarray) or audio.ndim not in (1, 2) or not np.issubdtype(audio.dtype, np.floating):
        raise ValueError(f"{name} must be a float numpy array of shape (samples,) or (channels, samples)")
    if not np.all(np.isfinite(audio)):
        raise ValueError(f"{name} contains NaN or infinite samples")
    return audio[np.newaxis] if audio.ndim == 1 else audio


def _like(out: np.ndarray, audio: np.ndarray) -> np.ndarray:
    """Give a (C, T) result the rank of the input ``audio``."""
    return out[0] if audio.ndim == 1 else out


def _check_rate(sample_rate: int) -> None:
    """Raise ValueError for a non-positive sample rate."""
    if sample_rate <= 0:
        raise ValueError(f"sample rate must be positive, got {sample_rate}")


def load_audio(path: Union[str, PathLike], sample_rate: int) -> np.ndarray:
    """Read an audio file as mono float32 at ``sample_rate``.

    Channels are averaged and other rates converted by :func:`to_mono`, as upstream does.

    Args:
        path: Any format libsndfile reads (WAV, FLAC, OGG, MP3, ...).
        sample_rate: Wanted sample rate in Hz.

    Returns:
        float32 waveform, (T,).

    Raises:
        FileNotFoundError: No such file.
        ValueError: The file cannot be decoded, or holds no samples.
    """
    _check_rate(sample_rate)
    if not Path(path).is_file():
        raise FileNotFoundError(f"audio file not found: {path}")
    try:
        data, file_rate = sf.read(path, dtype="float32", always_2d=True)
    except sf.LibsndfileError as err:
        raise ValueError(f"cannot read audio file {path}: {err}") from None
    return to_mono(data.T, file_rate, sample_rate)


def to_mono(wave: npt.ArrayLike, sample_rate: int, target_rate: int) -> np.ndarray:
    """Converts audio to mono float32 at ``target_rate``: the one home of channel mixing and
    resampling (files through :func:`load_audio`, arrays directly, the codec's 16 kHz stream).

    Args:
        wave: Mono ``[n]`` or channels-first ``[channels, n]`` samples: floats in [-1, 1], or
            int16 / int32 PCM (scaled to [-1, 1)). Channels are averaged.
        sample_rate: Rate of ``wave`` in Hz.
        target_rate: Wanted rate in Hz; other rates are converted as upstream does
            (:func:`omnivoice.resample.resample`), in float32 unless ``wave`` is float64.

    Returns:
        float32 array ``[m]``.

    Raises:
        ValueError: ``wave`` is empty, not 1-D or 2-D, of an unsupported dtype, or holds NaN
            or inf; or a rate is not positive.
    """
    arr = np.asarray(wave)
    if arr.ndim not in (1, 2):
        raise ValueError(f"audio must be [samples] or [channels, samples], got {arr.ndim} dimensions")
    if arr.dtype in _INT_FULL_SCALE:
        arr = (arr / _INT_FULL_SCALE[arr.dtype]).astype(np.float32)
    elif arr.dtype.kind != "f":
        raise ValueError(f"audio must be float, int16 or int32, got dtype {arr.dtype}")
    if arr.size == 0:
        raise ValueError("audio is empty")
    if arr.ndim == 2 and arr.shape[0] > arr.shape[1]:
        raise ValueError(f"audio of shape {arr.shape} looks channels-last ({arr.shape[1]} channels of "
                         f"{arr.shape[0]} samples); pass it channels-first, e.g. wave.T")
    if not np.all(np.isfinite(arr)):
        raise ValueError("audio contains NaN or infinite samples")
    for name, rate in (("sample_rate", sample_rate), ("target_rate", target_rate)):
        if isinstance(rate, bool) or not isinstance(rate, (int, np.integer)) or rate <= 0:
            raise ValueError(f"{name} must be a positive integer, got {rate!r}")
        if not MIN_RATE <= rate <= MAX_RATE:
            raise ValueError(f"{name} {rate} Hz is outside the audio rates accepted, {MIN_RATE} to {MAX_RATE} Hz")
    # Upstream averages and resamples in the array's own precision (float32 from a file or
    # the codec's 24 kHz signal); the resampler's float32 grid is part of its result.
    mono = arr if arr.dtype == np.float64 else arr.astype(np.float32, copy=False)
    if mono.ndim == 2:
        mono = mono.mean(axis=0)
    return resample(mono, int(sample_rate), int(target_rate)).astype(np.float32)


def truncate_to_hop(audio: np.ndarray, hop_length: int) -> np.ndarray:
    """Drop the trailing samples that do not fill a whole codec frame.

    Args:
        audio: Waveform, (T,) or (C, T).
        hop_length: Samples per codec frame.

    Returns:
        The first ``T - T % hop_length`` samples (a view).

    Raises:
        ValueError: ``hop_length`` is not positive, or the audio is shorter than one frame.
    """
    if hop_length <= 0:
        raise ValueError(f"hop_length must be positive, got {hop_length}")
    n = audio.shape[-1]
    if n < hop_length:
        raise ValueError(f"audio of {n} samples is shorter than one codec frame ({hop_length} samples)")
    return audio[..., : n - n % hop_length]


def _check_format(fmt: str) -> None:
    """Raise ValueError for an unknown WAV format name."""
    if fmt not in WAV_FORMATS:
        raise ValueError(f"unknown WAV format {fmt!r}; expected one of {', '.join(WAV_FORMATS)}")


def _frames(audio: np.ndarray, fmt: str) -> np.ndarray:
    """Audio as [T, C] frames for ``fmt``, clipped to [-1, 1] for PCM (libsndfile would wrap around)."""
    frames = _as_2d(np.asarray(audio)).T
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
    _check_rate(sample_rate)
    sf.write(file, _frames(audio, fmt), sample_rate, subtype=WAV_FORMATS[fmt][0], format="WAV")


def sample_bytes(frames: np.ndarray, fmt: str) -> bytes:
    """Little-endian sample bytes of float frames (interleaved if [T, C]) as libsndfile 1.2 writes
    them: PCM levels are ``floor(x * 2**(bits - 1))``, clipped; ``wav32`` is float."""
    if fmt == "wav32":
        return frames.astype("<f4").tobytes()
    bits = WAV_FORMATS[fmt][2]
    full_scale = float(1 << (bits - 1))
    levels = np.clip(np.floor(frames * full_scale), -full_scale, full_scale - 1).astype("<i4")
    if bits == 16:
        return levels.astype("<i2").tobytes()
    # 24-bit: the low three bytes of each little-endian int32.
    return np.ascontiguousarray(levels).view(np.uint8).reshape(-1, 4)[:, :3].tobytes()


class StreamingWavWriter:
    """Write WAV audio piece by piece to a binary stream (a file or stdout).

    The header goes out on construction with sizes 0xFFFFFFFF ("unknown"); on
    :meth:`close` they are patched if the stream is seekable and the data fits
    the 32-bit size fields. The stream itself is not closed. Samples are encoded
    as libsndfile 1.2 does, so the bytes equal :func:`write_wav`'s.

    Args:
        stream: Binary stream open for writing, e.g. ``sys.stdout.buffer``.
        sample_rate: Sample rate in Hz.
        fmt: ``wav16``, ``wav24`` or ``wav32``.
        channels: Number of channels.

    Example:
        >>> with StreamingWavWriter(sys.stdout.buffer, 24000) as out:
        ...     for chunk in chunks:
        ...         out.write(chunk)
    """

    def __init__(self, stream: BinaryIO, sample_rate: int, fmt: str = "wav16", channels: int = 1) -> None:
        _check_format(fmt)
        _check_rate(sample_rate)
        if channels <= 0:
            raise ValueError(f"channels must be positive, got {channels}")
        self._stream = stream
        self._fmt = fmt
        self._channels = channels
        self._data_bytes = 0
        self._closed = False
        self._start = stream.tell() if stream.seekable() else None
        _, tag, bits = WAV_FORMATS[fmt]
        block_align = channels * bits // 8
        fmt_chunk = struct.pack("<IHHIIHH", 16, tag, channels, sample_rate, sample_rate * block_align, block_align, bits)
        unknown = struct.pack("<I", _UNKNOWN_SIZE)
        stream.write(b"RIFF" + unknown + b"WAVE" + b"fmt " + fmt_chunk + b"data" + unknown)

    def write(self, audio: np.ndarray) -> None:
        """Append samples.

        Args:
            audio: Float waveform, (T,) or (C, T) with C equal to ``channels``.

        Raises:
            ValueError: The writer is closed, or the audio is malformed or has the wrong channel count.
        """
        if self._closed:
            raise ValueError("write to a closed StreamingWavWriter")
        frames = _frames(audio, self._fmt)
        if frames.shape[1] != self._channels:
            raise ValueError(f"expected {self._channels} channel(s), got {frames.shape[1]}")
        data = sample_bytes(frames, self._fmt)
        self._stream.write(data)
        self._data_bytes += len(data)

    def close(self) -> None:
        """Finish the stream: pad the data to an even length and patch the sizes when possible."""
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

    def __enter__(self) -> StreamingWavWriter:
        return self

    def __exit__(
        self,
        exc_type: Optional[type[BaseException]],
        exc: Optional[BaseException],
        traceback: Optional[TracebackType],
    ) -> None:
        self.close()
