"""Audio formats of ``/v1/audio/speech``, encoded piece by piece as the pieces are generated.

``pcm`` is raw s16le; ``wav`` is a WAV header with unknown sizes (0xFFFFFFFF, as ffmpeg writes
for pipes) followed by s16le; ``mp3``, ``opus`` (in Ogg), ``aac`` (ADTS) and ``flac`` go through
PyAV's encoders into a muxer that writes to an append-only sink, so each piece's bytes can be sent
as soon as the encoder releases them (the encoders hold back at most one frame, 20-50 ms).
"""

from __future__ import annotations

import io
from typing import Optional, Union

import av
import numpy as np
import soundfile as sf

from ..audio import StreamingWavWriter, sample_bytes

# response_format -> (content type, PyAV container, PyAV codec); pcm and wav need no PyAV.
FORMATS: dict[str, tuple[str, Optional[str], Optional[str]]] = {
    "mp3": ("audio/mpeg", "mp3", "libmp3lame"),
    "opus": ("audio/ogg", "ogg", "libopus"),
    "aac": ("audio/aac", "adts", "aac"),
    "flac": ("audio/flac", "flac", "flac"),
    "wav": ("audio/wav", None, None),
    "pcm": ("audio/pcm", None, None),
}


class _Sink:
    """An append-only byte sink: no seek, so muxers never go back to rewrite what was sent."""

    def __init__(self) -> None:
        self._buf = bytearray()

    def write(self, data: bytes) -> int:
        self._buf += data
        return len(data)

    def flush(self) -> None:
        pass

    def seekable(self) -> bool:
        return False

    def take(self) -> bytes:
        out, self._buf = bytes(self._buf), bytearray()
        return out


class StreamEncoder:
    """Encodes float32 mono audio pieces into one ``response_format`` byte stream.

    Args:
        fmt: One of :data:`FORMATS`.
        sample_rate: Rate of the pieces (24000 for OmniVoice).
    """

    def __init__(self, fmt: str, sample_rate: int) -> None:
        if fmt not in FORMATS:
            raise ValueError(f"response_format must be one of {', '.join(FORMATS)}, got {fmt!r}")
        self.fmt = fmt
        self.content_type = FORMATS[fmt][0]
        self._rate = sample_rate
        self._sink = _Sink()
        self._wav: Optional[StreamingWavWriter] = None
        self._container: Optional[av.container.OutputContainer] = None
        self._pts = 0
        if fmt == "wav":
            self._wav = StreamingWavWriter(self._sink, sample_rate, "wav16")  # type: ignore[arg-type]
        elif fmt != "pcm":
            _, container, codec = FORMATS[fmt]
            self._container = av.open(self._sink, mode="w", format=container)
            self._stream = self._container.add_stream(codec, rate=sample_rate, layout="mono")

    def encode(self, audio: np.ndarray) -> bytes:
        """Encodes one piece; returns the bytes ready so far (may be empty)."""
        audio = np.clip(np.asarray(audio, dtype=np.float32).reshape(-1), -1.0, 1.0)
        if audio.size == 0:
            return b""
        if self._wav is not None:
            self._wav.write(audio)
        elif self._container is None:
            self._sink.write(pcm16(audio))
        else:
            if self._stream.codec_context.format.name == "s16":
                # Our own float -> int16 levels, so FLAC holds exactly the samples pcm and wav send.
                samples, sample_format = np.frombuffer(pcm16(audio), "<i2"), "s16"
            else:
                samples, sample_format = audio, "flt"
            frame = av.AudioFrame.from_ndarray(samples[np.newaxis], format=sample_format, layout="mono")
            frame.sample_rate, frame.pts = self._rate, self._pts
            self._pts += audio.size
            for packet in self._stream.encode(frame):
                self._container.mux(packet)
        return self._sink.take()

    def finish(self) -> bytes:
        """Flushes the encoder and closes the container; returns the last bytes."""
        if self._container is not None:
            for packet in self._stream.encode(None):
                self._container.mux(packet)
            self._container.close()
            self._container = None
        return self._sink.take()

    def close(self) -> None:
        """Releases the encoder without writing the end of the stream (the client went away)."""
        if self._container is not None:
            self._container.close()
            self._container = None


def pcm16(audio: np.ndarray) -> bytes:
    """Float samples as 16-bit little-endian PCM, clipped (the levels ``write_wav`` uses)."""
    return sample_bytes(np.clip(np.asarray(audio, dtype=np.float32).reshape(-1), -1.0, 1.0), "wav16")


def decode_audio(data: Union[bytes, bytearray]) -> tuple[np.ndarray, int]:
    """Decodes an uploaded file (anything libsndfile or ffmpeg reads) to ``(float32 samples, rate)``.

    Raises:
        ValueError: The bytes are not audio, or hold no samples.
    """
    try:
        wave, rate = sf.read(io.BytesIO(bytes(data)), dtype="float32", always_2d=True)
        wave = wave.T  # [channels, n]
    except (sf.LibsndfileError, RuntimeError, TypeError):
        wave, rate = _decode_with_av(bytes(data))
    if wave.shape[-1] == 0:
        raise ValueError("the audio file holds no samples")
    return wave, int(rate)


def _decode_with_av(data: bytes) -> tuple[np.ndarray, int]:
    """Formats libsndfile does not read (m4a, webm from a browser recorder, ...)."""
    try:
        with av.open(io.BytesIO(data), mode="r") as container:
            if not container.streams.audio:
                raise ValueError("the file has no audio stream")
            stream = container.streams.audio[0]
            resampler = av.AudioResampler(format="fltp", layout="mono", rate=stream.rate or None)
            parts = [f.to_ndarray() for frame in container.decode(stream) for f in resampler.resample(frame)]
            parts += [f.to_ndarray() for f in resampler.resample(None)]
            rate = stream.rate
    except av.error.FFmpegError:
        raise ValueError("the file is not audio that libsndfile or ffmpeg can read") from None
    if not parts or not rate:
        raise ValueError("the file is not audio that libsndfile or ffmpeg can read")
    return np.concatenate(parts, axis=1).astype(np.float32), int(rate)
