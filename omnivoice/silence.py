"""pydub's silence detection (``pydub/silence.py``) on numpy int16 samples.

Upstream OmniVoice finds silences with pydub; this module runs the same
algorithms without pydub, with pydub's millisecond addressing: a segment's
length is rounded to whole milliseconds, slice bounds are truncated to frames
and a slice reaching past the last frame is padded with zeros, and the RMS of a
slice is ``audioop.rms`` (integer, over all samples of all channels). Cut points
therefore fall on the same samples as upstream's.
"""

from __future__ import annotations

import functools
import itertools
import math
from dataclasses import dataclass
from typing import Optional

import numpy as np

__all__ = ["Pcm16", "detect_leading_silence", "detect_nonsilent", "detect_silence", "split_on_silence"]

# 16-bit full scale: pydub's max possible amplitude and the float <-> int16 scale.
FULL_SCALE = 32768.0
# Windows summed at once by Pcm16.window_rms: 256 windows 10 ms apart span about 2.5 s of audio.
WINDOW_BLOCK = 256


@functools.lru_cache(maxsize=8)
def _below_dbfs(threshold_db: float) -> np.ndarray:
    """Table over integer RMS 0..32768: is its level below ``threshold_db`` dBFS?

    Evaluated with pydub's own expression, ``20 * log(rms / 32768, 10)``, so that
    values at the boundary fall on the same side.
    """
    table = np.ones(int(FULL_SCALE) + 1, dtype=bool)  # RMS 0 is -inf dBFS
    for rms in range(1, table.size):
        table[rms] = 20 * math.log(rms / FULL_SCALE, 10) < threshold_db
    return table


@dataclass(frozen=True)
class Pcm16:
    """16-bit PCM addressed in milliseconds, as pydub's ``AudioSegment`` is.

    Attributes:
        samples: int16 samples, [T, C].
        rate: Sample rate in Hz.
    """

    samples: np.ndarray
    rate: int

    @classmethod
    def from_float(cls, audio: np.ndarray, rate: int) -> Pcm16:
        """Quantise a (C, T) float waveform the way upstream does (scale, clip, truncate)."""
        return cls(np.ascontiguousarray((audio * FULL_SCALE).clip(-32768, 32767).astype(np.int16).T), rate)

    def to_float(self) -> np.ndarray:
        """Return the samples as a float32 (C, T) waveform."""
        return np.ascontiguousarray(self.samples.T.astype(np.float32) / np.float32(FULL_SCALE))

    def __len__(self) -> int:
        """Duration in whole milliseconds (rounded half to even, as pydub)."""
        return round(1000 * (self.samples.shape[0] / self.rate))

    def frame(self, ms: int) -> int:
        """Frame index of a millisecond position (truncated)."""
        return int(ms * (self.rate / 1000.0))

    def slice(self, start_ms: int, end_ms: Optional[int] = None) -> Pcm16:
        """Return ``[start_ms, end_ms)``; a slice reaching past the last frame is padded with zeros."""
        start_ms = min(start_ms, len(self))
        end_ms = len(self) if end_ms is None else min(end_ms, len(self))
        start, end = self.frame(start_ms), self.frame(end_ms)
        part = self.samples[start:end]
        missing = end - start - part.shape[0]
        if missing > 0:
            part = np.concatenate([part, np.zeros((missing, part.shape[1]), np.int16)])
        return Pcm16(part, self.rate)

    def reverse(self) -> Pcm16:
        """Return the audio played backwards."""
        return Pcm16(self.samples[::-1], self.rate)

    def window_rms(self, starts_ms: np.ndarray, length_ms: int) -> np.ndarray:
        """Integer RMS (as ``audioop.rms``) of ``[s, s + length_ms)`` for each start ``s``.

        Ends are clipped to ``len(self)``; zero padding counts in the mean, as in
        :meth:`slice`. Windows are summed :data:`WINDOW_BLOCK` at a time from running sums of
        their own span only: for ascending starts (every caller here) the int64 temporaries stay
        a few MB however long the audio (whole-length running sums took 4 bytes per float32
        output byte, the peak of a long-form ``generate``).
        """
        n_frames, n_channels = self.samples.shape
        frames_per_ms = self.rate / 1000.0
        ends_ms = np.minimum(starts_ms + length_ms, len(self))
        starts_ms = np.minimum(starts_ms, len(self))
        # ms * (rate / 1000.0) then truncation, exactly as the frame() of each slice.
        start = (starts_ms * frames_per_ms).astype(np.int64)
        end = (ends_ms * frames_per_ms).astype(np.int64)
        total = np.zeros(start.shape, np.int64)
        for k in range(0, start.size, WINDOW_BLOCK):
            first = np.minimum(start[k : k + WINDOW_BLOCK], n_frames)
            last = np.minimum(end[k : k + WINDOW_BLOCK], n_frames)
            lo, hi = int(first.min()), int(last.max())
            squares = np.square(self.samples[lo:hi].astype(np.int64)).sum(axis=1)
            cumulative = np.concatenate([[0], np.cumsum(squares)])
            total[k : k + WINDOW_BLOCK] = cumulative[last - lo] - cumulative[first - lo]
        count = (end - start) * n_channels
        with np.errstate(divide="ignore", invalid="ignore"):
            rms = np.floor(np.sqrt(total.astype(np.float64) / count))
        return np.where(count > 0, rms, 0).astype(np.int64)


def detect_silence(pcm: Pcm16, min_silence_len: int, silence_thresh: float, seek_step: int) -> list[list[int]]:
    """Silent ranges ``[start_ms, end_ms]``, as ``pydub.silence.detect_silence``."""
    seg_len = len(pcm)
    if seg_len < min_silence_len:
        return []
    threshold = 10 ** (silence_thresh / 20) * FULL_SCALE
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


def detect_nonsilent(pcm: Pcm16, min_silence_len: int, silence_thresh: float, seek_step: int) -> list[list[int]]:
    """Non-silent ranges ``[start_ms, end_ms]``, as ``pydub.silence.detect_nonsilent``."""
    seg_len = len(pcm)
    silent = detect_silence(pcm, min_silence_len, silence_thresh, seek_step)
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


def split_on_silence(
    pcm: Pcm16, min_silence_len: int, silence_thresh: float, keep_silence: int, seek_step: int
) -> list[Pcm16]:
    """Non-silent pieces with up to ``keep_silence`` ms of margin, as ``pydub.silence.split_on_silence``.

    Where two margins would overlap, the gap between the pieces is split at its middle.
    """
    ranges = [
        [start - keep_silence, end + keep_silence]
        for start, end in detect_nonsilent(pcm, min_silence_len, silence_thresh, seek_step)
    ]
    for left, right in itertools.pairwise(ranges):
        if right[0] < left[1]:
            left[1] = (left[1] + right[0]) // 2
            right[0] = left[1]
    return [pcm.slice(max(start, 0), min(end, len(pcm))) for start, end in ranges]


def detect_leading_silence(pcm: Pcm16, silence_thresh: float, chunk_ms: int = 10) -> int:
    """End of the leading silence in ms, as ``pydub.silence.detect_leading_silence``.

    The audio is scanned in ``chunk_ms`` steps; a chunk is silent below ``silence_thresh`` dBFS.
    """
    seg_len = len(pcm)
    starts = np.arange(0, seg_len, chunk_ms)
    loud = ~_below_dbfs(float(silence_thresh))[pcm.window_rms(starts, chunk_ms)]
    return int(starts[np.argmax(loud)]) if loud.any() else seg_len
