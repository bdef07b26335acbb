"""Audio pre- and post-processing: silence removal, trimming, fades, volume, chunk joining.

Waveforms are float arrays of shape ``(C, T)`` (channels first) in [-1, 1], as in
upstream OmniVoice (``omnivoice/utils/audio.py`` and the post-processing in
``OmniVoice.generate``). Upstream finds silences with pydub on 16-bit PCM; the
same algorithm is implemented here on numpy int16 samples, without pydub, with
pydub's millisecond addressing (lengths rounded to whole ms, slice bounds
truncated to frames, short slices padded with zeros) so that the cut points are
the same sample for sample. One difference: for sample rates below 11025 Hz,
upstream's ``remove_silence`` resamples through pydub's 11025 Hz empty segment;
this module does not.
"""

from __future__ import annotations

import functools
import itertools
import math
import warnings
from dataclasses import dataclass
from typing import Optional

import numpy as np

__all__ = [
    "cross_fade_chunks",
    "fade_and_pad_audio",
    "normalize_reference_rms",
    "post_process_audio",
    "preprocess_reference",
    "remove_silence",
    "trim_long_audio",
    "truncate_to_hop",
]

# 16-bit full scale: pydub's max possible amplitude and the float <-> int16 scale.
_FULL_SCALE = 32768.0
# Quieter references are boosted to this RMS before encoding; generated audio is scaled back.
REFERENCE_MIN_RMS = 0.1
# Without a reference, generated audio is peak-normalised to this level.
PEAK_LEVEL = 0.5


def _check_waveform(audio: np.ndarray, name: str = "audio") -> None:
    """Raise ValueError unless ``audio`` is a finite float array of shape (C, T)."""
    if not isinstance(audio, np.ndarray) or audio.ndim != 2 or not np.issubdtype(audio.dtype, np.floating):
        raise ValueError(f"{name} must be a float numpy array of shape (channels, samples)")
    if not np.all(np.isfinite(audio)):
        raise ValueError(f"{name} contains NaN or infinite samples")


def _check_rate(sample_rate: int) -> None:
    """Raise ValueError for a non-positive sample rate."""
    if sample_rate <= 0:
        raise ValueError(f"sample rate must be positive, got {sample_rate}")


@functools.lru_cache(maxsize=8)
def _below_dbfs(threshold_db: float) -> np.ndarray:
    """Table over integer RMS 0..32768: is its level below ``threshold_db`` dBFS?

    Evaluated with pydub's own expression, ``20 * log(rms / 32768, 10)``, so that
    values at the boundary fall on the same side.
    """
    table = np.ones(int(_FULL_SCALE) + 1, dtype=bool)  # RMS 0 is -inf dBFS
    for rms in range(1, table.size):
        table[rms] = 20 * math.log(rms / _FULL_SCALE, 10) < threshold_db
    return table


@dataclass(frozen=True)
class _Pcm:
    """16-bit PCM addressed in milliseconds, as pydub's ``AudioSegment`` is.

    Attributes:
        samples: int16 samples, [T, C].
        rate: Sample rate in Hz.
    """

    samples: np.ndarray
    rate: int

    @classmethod
    def from_float(cls, audio: np.ndarray, rate: int) -> _Pcm:
        """Quantise a (C, T) float waveform the way upstream does (scale, clip, truncate)."""
        return cls(np.ascontiguousarray((audio * _FULL_SCALE).clip(-32768, 32767).astype(np.int16).T), rate)

    def to_float(self) -> np.ndarray:
        """Return the samples as a float32 (C, T) waveform."""
        return np.ascontiguousarray(self.samples.T.astype(np.float32) / np.float32(_FULL_SCALE))

    def __len__(self) -> int:
        """Duration in whole milliseconds (rounded half to even, as pydub)."""
        return round(1000 * (self.samples.shape[0] / self.rate))

    def frame(self, ms: int) -> int:
        """Frame index of a millisecond position (truncated)."""
        return int(ms * (self.rate / 1000.0))

    def slice(self, start_ms: int, end_ms: Optional[int] = None) -> _Pcm:
        """Return ``[start_ms, end_ms)``; a slice reaching past the last frame is padded with zeros."""
        start_ms = min(start_ms, len(self))
        end_ms = len(self) if end_ms is None else min(end_ms, len(self))
        start, end = self.frame(start_ms), self.frame(end_ms)
        part = self.samples[start:end]
        missing = end - start - part.shape[0]
        if missing > 0:
            part = np.concatenate([part, np.zeros((missing, part.shape[1]), np.int16)])
        return _Pcm(part, self.rate)

    def reverse(self) -> _Pcm:
        """Return the audio played backwards."""
        return _Pcm(self.samples[::-1], self.rate)

    def window_rms(self, starts_ms: np.ndarray, length_ms: int) -> np.ndarray:
        """Integer RMS (as ``audioop.rms``) of ``[s, s + length_ms)`` for each start ``s``.

        Ends are clipped to ``len(self)``; zero padding counts in the mean, as in
        :meth:`slice`.
        """
        n_frames, n_channels = self.samples.shape
        squares = np.square(self.samples.astype(np.int64)).sum(axis=1)
        cumulative = np.concatenate([[0], np.cumsum(squares)])
        frames_per_ms = self.rate / 1000.0
        ends_ms = np.minimum(starts_ms + length_ms, len(self))
        starts_ms = np.minimum(starts_ms, len(self))
        # ms * (rate / 1000.0) then truncation, exactly as the frame() of each slice.
        start = (starts_ms * frames_per_ms).astype(np.int64)
        end = (ends_ms * frames_per_ms).astype(np.int64)
        total = cumulative[np.minimum(end, n_frames)] - cumulative[np.minimum(start, n_frames)]
        count = (end - start) * n_channels
        with np.errstate(divide="ignore", invalid="ignore"):
            rms = np.floor(np.sqrt(total.astype(np.float64) / count))
        return np.where(count > 0, rms, 0).astype(np.int64)


def _detect_silence(pcm: _Pcm, min_silence_len: int, silence_thresh: float, seek_step: int) -> list[list[int]]:
    """Silent ranges ``[start_ms, end_ms]``, as ``pydub.silence.detect_silence``."""
    seg_len = len(pcm)
    if seg_len < min_silence_len:
        return []
    threshold = 10 ** (silence_thresh / 20) * _FULL_SCALE
    last_start = seg_len - min_silence_len
    starts = np.arange(0, last_start + 1, seek_step)
    if last_start % seek_step:
        starts = np.append(starts, last_start)
    silent_starts = starts[pcm.window_rms(starts, min_silence_len) <= threshold].tolist()
    if not silent_starts:
        return []

    # Windows that follow each other, or overlap, make one range.
    ranges = []
    range_start = prev = silent_starts[0]
    for start in silent_starts[1:]:
        if start != prev + seek_step and start > prev + min_silence_len:
            ranges.append([range_start, prev + min_silence_len])
            range_start = start
        prev = start
    ranges.append([range_start, prev + min_silence_len])
    return ranges


def _detect_nonsilent(pcm: _Pcm, min_silence_len: int, silence_thresh: float, seek_step: int) -> list[list[int]]:
    """Non-silent ranges ``[start_ms, end_ms]``, as ``pydub.silence.detect_nonsilent``."""
    seg_len = len(pcm)
    silent = _detect_silence(pcm, min_silence_len, silence_thresh, seek_step)
    if not silent:
        return [[0, seg_len]]
    if silent[0] == [0, seg_len]:
        return []
    previous_ends = [0] + [end for _, end in silent]
    ranges = [[previous_end, start] for previous_end, (start, _) in zip(previous_ends, silent)]
    if silent[-1][1] != seg_len:
        ranges.append([silent[-1][1], seg_len])
    if ranges[0] == [0, 0]:
        ranges.pop(0)
    return ranges


def _split_on_silence(
    pcm: _Pcm, min_silence_len: int, silence_thresh: float, keep_silence: int, seek_step: int
) -> list[_Pcm]:
    """Non-silent pieces with up to ``keep_silence`` ms of margin, as ``pydub.silence.split_on_silence``.

    Where two margins would overlap, the gap between the pieces is split at its middle.
    """
    ranges = [
        [start - keep_silence, end + keep_silence]
        for start, end in _detect_nonsilent(pcm, min_silence_len, silence_thresh, seek_step)
    ]
    for left, right in itertools.pairwise(ranges):
        if right[0] < left[1]:
            left[1] = (left[1] + right[0]) // 2
            right[0] = left[1]
    return [pcm.slice(max(start, 0), min(end, len(pcm))) for start, end in ranges]


def _leading_silence(pcm: _Pcm, silence_thresh: float, chunk_ms: int = 10) -> int:
    """End of the leading silence in ms, as ``pydub.silence.detect_leading_silence``.

    The audio is scanned in ``chunk_ms`` steps; a chunk is silent below ``silence_thresh`` dBFS.
    """
    seg_len = len(pcm)
    starts = np.arange(0, seg_len, chunk_ms)
    loud = ~_below_dbfs(float(silence_thresh))[pcm.window_rms(starts, chunk_ms)]
    return int(starts[np.argmax(loud)]) if loud.any() else seg_len


def _trim_edges(pcm: _Pcm, lead_ms: int, trail_ms: int, silence_thresh: float) -> _Pcm:
    """Cut leading and trailing silence, keeping ``lead_ms`` / ``trail_ms`` of it."""
    pcm = pcm.slice(max(0, _leading_silence(pcm, silence_thresh) - lead_ms))
    backwards = pcm.reverse()
    backwards = backwards.slice(max(0, _leading_silence(backwards, silence_thresh) - trail_ms))
    return backwards.reverse()


def remove_silence(
    audio: np.ndarray,
    sample_rate: int,
    mid_sil: int = 300,
    lead_sil: int = 100,
    trail_sil: int = 300,
) -> np.ndarray:
    """Shorten inner silences and trim edge silences (below -50 dBFS).

    Inner silences of at least ``mid_sil`` ms are cut down to at most
    ``2 * mid_sil`` ms (``mid_sil`` kept on each side of the speech, found with
    10 ms steps); then leading and trailing silence is cut to ``lead_sil`` and
    ``trail_sil`` ms. The result is quantised to 16 bits, as upstream's is.

    Args:
        audio: Float waveform, (C, T).
        sample_rate: Sample rate in Hz.
        mid_sil: Inner silence threshold and kept margin in ms; 0 leaves inner silences alone.
        lead_sil: Leading silence to keep, in ms.
        trail_sil: Trailing silence to keep, in ms.

    Returns:
        float32 waveform, (C, T').
    """
    _check_waveform(audio)
    _check_rate(sample_rate)
    pcm = _Pcm.from_float(audio, sample_rate)
    if mid_sil > 0:
        pieces = _split_on_silence(pcm, mid_sil, -50, keep_silence=mid_sil, seek_step=10)
        joined = [piece.samples for piece in pieces] or [np.zeros((0, audio.shape[0]), np.int16)]
        pcm = _Pcm(np.concatenate(joined), sample_rate)
    return _trim_edges(pcm, lead_sil, trail_sil, -50).to_float()


def trim_long_audio(
    audio: np.ndarray,
    sample_rate: int,
    max_duration: float = 15.0,
    min_duration: float = 3.0,
    trim_threshold: float = 20.0,
) -> np.ndarray:
    """Cut audio longer than ``trim_threshold`` s at a pause, to at most ``max_duration`` s.

    The cut goes at the start of the last speech segment (after a pause of at
    least 100 ms below -40 dBFS) that begins within ``max_duration``; if that
    would leave less than ``min_duration``, the audio is cut at ``max_duration``.

    Args:
        audio: Float waveform, (C, T).
        sample_rate: Sample rate in Hz.
        max_duration: Longest result, in seconds.
        min_duration: Shortest result when cutting at a pause, in seconds.
        trim_threshold: Audio up to this long (seconds) is returned unchanged.

    Returns:
        The input itself, or the trimmed float32 waveform (quantised to 16 bits).
    """
    _check_waveform(audio)
    _check_rate(sample_rate)
    if audio.shape[-1] / sample_rate <= trim_threshold:
        return audio
    pcm = _Pcm.from_float(audio, sample_rate)
    speech = _detect_nonsilent(pcm, min_silence_len=100, silence_thresh=-40, seek_step=10)
    if not speech:
        return audio

    max_ms = int(max_duration * 1000)
    min_ms = int(min_duration * 1000)
    cut = 0
    for start, end in speech:
        if cut < start <= max_ms:
            cut = start
        if end > max_ms:
            break
    if cut < min_ms:
        cut = min(max_ms, len(pcm))
    return pcm.slice(0, cut).to_float()


def fade_and_pad_audio(
    audio: np.ndarray, pad_duration: float = 0.1, fade_duration: float = 0.1, sample_rate: int = 24000
) -> np.ndarray:
    """Fade both ends linearly and surround with silence, against clicks.

    Args:
        audio: Float waveform, (C, T).
        pad_duration: Silence added on each side, in seconds (0 for none).
        fade_duration: Length of each fade, in seconds, at most half the audio (0 for none).
        sample_rate: Sample rate in Hz.

    Returns:
        A new waveform, (C, T + 2 * pad); empty audio is returned as is.
    """
    _check_waveform(audio)
    _check_rate(sample_rate)
    if audio.shape[-1] == 0:
        return audio
    out = audio.copy()
    fade = min(int(fade_duration * sample_rate), out.shape[-1] // 2)
    if fade > 0:
        out[:, :fade] *= np.linspace(0, 1, fade, dtype=np.float32)
        out[:, -fade:] *= np.linspace(1, 0, fade, dtype=np.float32)
    pad = int(pad_duration * sample_rate)
    if pad > 0:
        out = np.pad(out, ((0, 0), (pad, pad)))
    return out


def cross_fade_chunks(chunks: list[np.ndarray], sample_rate: int, silence_duration: float = 0.3) -> np.ndarray:
    """Join separately generated chunks with a fade-out, a silence and a fade-in.

    ``silence_duration`` is split in three equal parts: the fade-out at the end
    of each chunk, the inserted silence and the fade-in at the start of the next.

    Args:
        chunks: Float waveforms, (C, T_i), same C.
        sample_rate: Sample rate in Hz.
        silence_duration: Length of the whole transition in seconds.

    Returns:
        float32 waveform, (C, sum T_i + (len(chunks) - 1) * silence); a single chunk is returned as is.

    Raises:
        ValueError: ``chunks`` is empty or the chunks differ in channel count.
    """
    if not chunks:
        raise ValueError("cross_fade_chunks needs at least one chunk")
    for chunk in chunks:
        _check_waveform(chunk, "chunk")
    if len({chunk.shape[0] for chunk in chunks}) != 1:
        raise ValueError("all chunks must have the same number of channels")
    _check_rate(sample_rate)
    if len(chunks) == 1:
        return chunks[0]

    third = int(silence_duration * sample_rate) // 3
    gap = np.zeros((chunks[0].shape[0], third), dtype=np.float32)
    merged = chunks[0].copy()
    for chunk in chunks[1:]:
        fade_out = min(third, merged.shape[-1])
        if fade_out > 0:
            merged[:, -fade_out:] *= np.linspace(1, 0, fade_out, dtype=np.float32)
        incoming = chunk.copy()
        fade_in = min(third, incoming.shape[-1])
        if fade_in > 0:
            incoming[:, :fade_in] *= np.linspace(0, 1, fade_in, dtype=np.float32)
        merged = np.concatenate([merged, gap, incoming], axis=-1)
    return merged


def normalize_reference_rms(audio: np.ndarray) -> tuple[np.ndarray, float]:
    """Boost a quiet reference to RMS 0.1; report its original RMS.

    Args:
        audio: Float reference waveform, (C, T).

    Returns:
        ``(audio, rms)``: the waveform, scaled up if its RMS was in (0, 0.1), and
        the RMS before scaling (used to scale the generated audio back).
    """
    _check_waveform(audio)
    if audio.size == 0:
        raise ValueError("reference audio is empty")
    rms = float(np.sqrt(np.mean(audio**2)))
    if 0 < rms < REFERENCE_MIN_RMS:
        audio = audio * REFERENCE_MIN_RMS / rms
    return audio, rms


def truncate_to_hop(audio: np.ndarray, hop_length: int) -> np.ndarray:
    """Drop the trailing samples that do not fill a whole codec frame.

    Args:
        audio: Waveform, (C, T).
        hop_length: Samples per codec frame.

    Returns:
        ``audio[:, :T - T % hop_length]`` (a view).
    """
    if hop_length <= 0:
        raise ValueError(f"hop_length must be positive, got {hop_length}")
    return audio[:, : audio.shape[-1] - audio.shape[-1] % hop_length]


def preprocess_reference(
    audio: np.ndarray, sample_rate: int, ref_text_given: bool, preprocess: bool = True
) -> tuple[np.ndarray, float]:
    """Prepare a reference waveform for voice cloning, as upstream ``create_voice_clone_prompt``.

    Boosts a quiet reference (:func:`normalize_reference_rms`); with
    ``preprocess``, trims references over 20 s at a pause (only without a
    transcript, which would no longer match) and removes silences (inner ones
    to 200 ms margins, 100 ms lead, 200 ms trail).

    Args:
        audio: Mono float waveform at the model's rate, (1, T).
        sample_rate: Sample rate in Hz.
        ref_text_given: Whether the user gave the reference transcript.
        preprocess: Apply trimming and silence removal.

    Returns:
        ``(audio, rms)``: the processed waveform and the reference's original RMS.

    Raises:
        ValueError: Nothing but silence is left after silence removal.

    Warns:
        UserWarning: The reference is over 20 s long.
    """
    audio, rms = normalize_reference_rms(audio)
    if preprocess:
        if not ref_text_given:
            audio = trim_long_audio(audio, sample_rate, trim_threshold=20.0)
        audio = remove_silence(audio, sample_rate, mid_sil=200, lead_sil=100, trail_sil=200)
        if audio.shape[-1] == 0:
            raise ValueError("Reference audio is empty after silence removal. Try setting preprocess_prompt=False.")
    duration = audio.shape[-1] / sample_rate
    if duration > 20.0:
        warnings.warn(
            f"Reference audio is {duration:.1f}s long (>20s). This may cause slower generation, higher "
            "memory usage, and degraded voice cloning quality. We recommend trimming it to 3-10s.",
            stacklevel=2,
        )
    return audio, rms


def post_process_audio(
    audio: np.ndarray,
    sample_rate: int,
    ref_rms: Optional[float],
    postprocess_output: bool = True,
    pad_duration: float = 0.1,
    fade_duration: float = 0.1,
) -> np.ndarray:
    """Finish generated audio, as upstream ``_post_process_audio``.

    With ``postprocess_output``, inner silences are cut to 500 ms margins and the
    edges to 100 ms. Volume: audio cloned from a quiet reference (RMS below 0.1,
    boosted before encoding) is scaled back by ``ref_rms / 0.1``; audio made
    without a reference is peak-normalised to 0.5. Then the ends are faded and
    padded (:func:`fade_and_pad_audio`).

    Args:
        audio: Decoded float waveform, (C, T).
        sample_rate: Sample rate in Hz.
        ref_rms: RMS of the reference before boosting, or ``None`` without a reference.
        postprocess_output: Remove silences.
        pad_duration: Silence added on each side, in seconds.
        fade_duration: Fade length, in seconds.

    Returns:
        The processed waveform, (C, T').
    """
    if postprocess_output:
        audio = remove_silence(audio, sample_rate, mid_sil=500, lead_sil=100, trail_sil=100)
    if ref_rms is not None and ref_rms < REFERENCE_MIN_RMS:
        audio = audio * ref_rms / REFERENCE_MIN_RMS
    elif ref_rms is None:
        peak = np.abs(audio).max(initial=0.0)
        if peak > 1e-6:
            audio = audio / peak * PEAK_LEVEL
    return fade_and_pad_audio(audio, pad_duration, fade_duration, sample_rate)
