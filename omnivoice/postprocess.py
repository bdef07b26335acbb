"""Upstream OmniVoice's waveform processing: silence removal, trimming, fades, volume, chunk joining.

The processing matches upstream OmniVoice (``omnivoice/utils/audio.py`` and the
pre/post-processing in ``OmniVoice.create_voice_clone_prompt`` and
``generate``). Waveforms are float arrays in [-1, 1], either mono ``(T,)`` or
channels-first ``(C, T)``; every function returns the rank it was given.
Silence detection runs upstream's pydub algorithm on 16-bit samples (see
:mod:`omnivoice.silence`), so its cuts land on the same samples. One
difference: for sample rates below 11025 Hz upstream's ``remove_silence``
resamples through pydub's 11025 Hz empty segment; this module does not.
"""

from __future__ import annotations

import warnings
from typing import Optional

import numpy as np

from .audio import _as_2d, _check_rate, _like
from .silence import FULL_SCALE, Pcm16, detect_leading_silence, detect_nonsilent, split_on_silence

__all__ = [
    "ChunkJoiner",
    "apply_volume",
    "cross_fade_chunks",
    "fade_edges",
    "fade_and_pad_audio",
    "normalize_reference_rms",
    "post_process_audio",
    "preprocess_reference",
    "remove_silence",
    "trim_long_audio",
]

# Quieter references are boosted to this RMS before encoding; generated audio is scaled back.
REFERENCE_MIN_RMS = 0.1
# Without a reference, generated audio is peak-normalised to this level.
PEAK_LEVEL = 0.5
# Level (dBFS) below which upstream's silence removal and edge trimming call audio silent.
SILENCE_DBFS = -50
# post_process_audio's silence removal (ms): inner silences to 500 ms margins, edges to 100 ms.
OUTPUT_SILENCE = {"mid_sil": 500, "lead_sil": 100, "trail_sil": 100}
# Upstream's defaults (s): silence padded on each side of the output and the fade at each end;
# the fade-out, silence and fade-in between long-form chunks.
PAD_DURATION = 0.1
FADE_DURATION = 0.1
CHUNK_SILENCE = 0.3


def _trim_edges(pcm: Pcm16, lead_ms: Optional[int], trail_ms: Optional[int], silence_thresh: float) -> Pcm16:
    """Cut leading and trailing silence, keeping ``lead_ms`` / ``trail_ms`` of it (``None``: all)."""
    if lead_ms is not None:
        pcm = pcm.slice(max(0, detect_leading_silence(pcm, silence_thresh) - lead_ms))
    if trail_ms is not None:
        backwards = pcm.reverse()
        pcm = backwards.slice(max(0, detect_leading_silence(backwards, silence_thresh) - trail_ms)).reverse()
    return pcm


def remove_silence(
    audio: np.ndarray,
    sample_rate: int,
    mid_sil: int = 300,
    lead_sil: Optional[int] = 100,
    trail_sil: Optional[int] = 300,
) -> np.ndarray:
    """Shorten inner silences and trim edge silences (below -50 dBFS).

    Inner silences of at least ``mid_sil`` ms are cut down to at most
    ``2 * mid_sil`` ms (``mid_sil`` kept on each side of the speech, found with
    10 ms steps); then leading and trailing silence is cut to ``lead_sil`` and
    ``trail_sil`` ms. The result is quantised to 16 bits, as upstream's is.

    Args:
        audio: Float waveform, (T,) or (C, T).
        sample_rate: Sample rate in Hz.
        mid_sil: Inner silence threshold and kept margin in ms; 0 leaves inner silences alone.
        lead_sil: Leading silence to keep, in ms; ``None`` leaves the start alone (a streamed
            piece that is not the first).
        trail_sil: Trailing silence to keep, in ms; ``None`` leaves the end alone.

    Returns:
        float32 waveform, (T',) or (C, T').
    """
    _check_rate(sample_rate)
    pcm = _cut_silence(Pcm16.from_float(_as_2d(audio), sample_rate), mid_sil, lead_sil, trail_sil)
    return _like(pcm.to_float(), audio)


def _cut_silence(pcm: Pcm16, mid_sil: int, lead_sil: Optional[int], trail_sil: Optional[int]) -> Pcm16:
    """:func:`remove_silence`'s cuts, made inside ``pcm``'s own samples (overwritten): the kept pieces
    are moved down in place, so the result is a view of them. Only where a piece or an edge is
    padded past the last frame (pydub's rule, at rates whose milliseconds are not whole frames) is
    it a copy."""
    if mid_sil > 0:
        samples, kept = pcm.samples, 0
        for piece in split_on_silence(pcm, mid_sil, SILENCE_DBFS, keep_silence=mid_sil, seek_step=10):
            # Pieces come in order without overlap: each moves down to ``kept`` <= its start.
            n = piece.samples.shape[0]
            at = _row_offset(piece.samples, samples)
            if at is not None:
                _move(samples, at, kept, n)
            elif kept + n <= samples.shape[0]:
                samples[kept : kept + n] = piece.samples
            else:  # the last piece, padded past the end
                samples = np.concatenate([samples[:kept], piece.samples])
            kept += n
        pcm = Pcm16(samples[:kept], pcm.rate)
    return _trim_edges(pcm, lead_sil, trail_sil, SILENCE_DBFS)


def _row_offset(view: np.ndarray, base: np.ndarray) -> Optional[int]:
    """The row of ``base`` where ``view`` (a slice of it, rows ascending) starts; None for a copy."""
    if view.size == 0 or not np.may_share_memory(view, base):
        return None
    return (view.__array_interface__["data"][0] - base.__array_interface__["data"][0]) // base.strides[0]


def _move(array: np.ndarray, src: int, dst: int, n: int, block: int = 1 << 20) -> None:
    """``array[dst:dst + n] = array[src:src + n]`` for overlapping ranges, a block at a time in the
    safe direction (numpy would first copy the whole overlapping source)."""
    starts = range(0, n, block)
    for i in starts if dst < src else reversed(starts):
        m = min(block, n - i)
        array[dst + i : dst + i + m] = array[src + i : src + i + m]


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
        audio: Float waveform, (T,) or (C, T).
        sample_rate: Sample rate in Hz.
        max_duration: Longest result, in seconds.
        min_duration: Shortest result when cutting at a pause, in seconds.
        trim_threshold: Audio up to this long (seconds) is returned unchanged.

    Returns:
        The input itself, or the trimmed float32 waveform (quantised to 16 bits).
    """
    _check_rate(sample_rate)
    wave = _as_2d(audio)
    if wave.shape[-1] / sample_rate <= trim_threshold:
        return audio
    pcm = Pcm16.from_float(wave, sample_rate)
    speech = detect_nonsilent(pcm, min_silence_len=100, silence_thresh=-40, seek_step=10)
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
    return _like(pcm.slice(0, cut).to_float(), audio)


def fade_edges(audio: np.ndarray, fade_in: int = 0, fade_out: int = 0) -> np.ndarray:
    """A copy with a linear fade-in over its first ``fade_in`` samples and a fade-out over its last
    ``fade_out`` (0: that edge untouched): the one ramp of every fade here and in streaming.

    Args:
        audio: Float waveform, (T,) or (C, T); each count at most T.
        fade_in: Samples faded in at the start.
        fade_out: Samples faded out at the end (when both overlap, both apply).
    """
    out = audio.copy()
    if fade_in > 0:
        out[..., :fade_in] *= _ramp(fade_in, rising=True)
    if fade_out > 0:
        out[..., -fade_out:] *= _ramp(fade_out, rising=False)
    return out


def _ramp(n: int, rising: bool) -> np.ndarray:
    """The gains of a linear fade over n samples: 0 up to 1, or 1 down to 0 (float32)."""
    return np.linspace(0, 1, n, dtype=np.float32) if rising else np.linspace(1, 0, n, dtype=np.float32)


def fade_and_pad_audio(
    audio: np.ndarray, pad_duration: float = PAD_DURATION, fade_duration: float = FADE_DURATION,
    sample_rate: int = 24000
) -> np.ndarray:
    """Fade both ends linearly and surround with silence, against clicks.

    Args:
        audio: Float waveform, (T,) or (C, T).
        pad_duration: Silence added on each side, in seconds (0 for none).
        fade_duration: Length of each fade, in seconds, at most half the audio (0 for none).
        sample_rate: Sample rate in Hz.

    Returns:
        A new waveform with T + 2 * pad samples; empty audio is returned as is.
    """
    _as_2d(audio)
    _check_rate(sample_rate)
    if audio.shape[-1] == 0:
        return audio
    fade = min(int(fade_duration * sample_rate), audio.shape[-1] // 2)
    out = fade_edges(audio, fade, fade)
    pad = int(pad_duration * sample_rate)
    if pad > 0:
        out = np.pad(out, [(0, 0)] * (out.ndim - 1) + [(pad, pad)])
    return out


def cross_fade_chunks(chunks: list[np.ndarray], sample_rate: int,
                      silence_duration: float = CHUNK_SILENCE) -> np.ndarray:
    """Join separately generated chunks with a fade-out, a silence and a fade-in.

    ``silence_duration`` is split in three equal parts: the fade-out at the end
    of each chunk, the inserted silence and the fade-in at the start of the next.

    Args:
        chunks: Float waveforms, all (T_i,) or all (C, T_i) with the same C.
        sample_rate: Sample rate in Hz.
        silence_duration: Length of the whole transition in seconds.

    Returns:
        The joined waveform, sum T_i + (len(chunks) - 1) * silence samples long;
        a single chunk is returned as is.

    Raises:
        ValueError: ``chunks`` is empty or the chunks differ in shape other than length.
    """
    if not chunks:
        raise ValueError("cross_fade_chunks needs at least one chunk")
    for chunk in chunks:
        _as_2d(chunk, "chunk")
    if len({chunk.shape[:-1] for chunk in chunks}) != 1:
        raise ValueError("all chunks must have the same number of channels")
    _check_rate(sample_rate)
    if len(chunks) == 1:
        return chunks[0]

    fader = _CrossFader(sample_rate, silence_duration)
    return np.concatenate([fader.push(chunk) for chunk in chunks] + [fader.close()], axis=-1)


class _CrossFader:
    """:func:`cross_fade_chunks` one chunk at a time: :meth:`push` returns the samples that are
    final, holding back the last third of the transition (the next chunk fades it out)."""

    def __init__(self, sample_rate: int, silence_duration: float) -> None:
        self.third = int(silence_duration * sample_rate) // 3
        self._tail: Optional[np.ndarray] = None  # the last min(third, length so far) samples

    def push(self, chunk: np.ndarray) -> np.ndarray:
        """Joins ``chunk`` ((T,) or (C, T)); returns what comes before the new held tail."""
        if self._tail is None:
            pending = chunk
        else:
            gap = np.zeros(chunk.shape[:-1] + (self.third,), dtype=np.float32)
            pending = np.concatenate([fade_edges(self._tail, fade_out=self._tail.shape[-1]), gap,
                                      fade_edges(chunk, fade_in=min(self.third, chunk.shape[-1]))], axis=-1)
        cut = max(pending.shape[-1] - self.third, 0)
        self._tail = pending[..., cut:].copy()
        return pending[..., :cut]

    def close(self) -> np.ndarray:
        """The held tail, as it ends the signal (no fade)."""
        tail, self._tail = self._tail, None
        return tail if tail is not None else np.zeros(0, np.float32)


def normalize_reference_rms(audio: np.ndarray) -> tuple[np.ndarray, float]:
    """Boost a quiet reference to RMS 0.1; report its original RMS.

    Args:
        audio: Float reference waveform, (T,) or (C, T).

    Returns:
        ``(audio, rms)``: the waveform, scaled up if its RMS was in (0, 0.1), and
        the RMS before scaling (used to scale the generated audio back).

    Raises:
        ValueError: The waveform is empty or malformed.
    """
    _as_2d(audio)
    if audio.size == 0:
        raise ValueError("reference audio is empty")
    rms = float(np.sqrt(np.mean(audio**2)))
    if 0 < rms < REFERENCE_MIN_RMS:
        audio = audio * REFERENCE_MIN_RMS / rms
    return audio, rms


def preprocess_reference(
    audio: np.ndarray, sample_rate: int, ref_text_given: bool, preprocess: bool = True
) -> tuple[np.ndarray, float]:
    """Prepare a reference waveform for voice cloning, as upstream ``create_voice_clone_prompt``.

    Boosts a quiet reference (:func:`normalize_reference_rms`); with
    ``preprocess``, trims references over 20 s at a pause (only without a
    transcript, which would no longer match) and removes silences (inner ones
    to 200 ms margins, 100 ms lead, 200 ms trail). The caller then drops the
    partial last codec frame (:func:`truncate_to_hop`).

    Args:
        audio: Mono float waveform at the model's rate, (T,) or (1, T).
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
    pad_duration: float = PAD_DURATION,
    fade_duration: float = FADE_DURATION,
) -> np.ndarray:
    """Finish generated audio, as upstream ``_post_process_audio``.

    With ``postprocess_output``, inner silences are cut to 500 ms margins and the
    edges to 100 ms. Volume: audio cloned from a quiet reference (RMS below 0.1,
    boosted before encoding) is scaled back by ``ref_rms / 0.1``; audio made
    without a reference is peak-normalised to 0.5. Then the ends are faded and
    padded (:func:`fade_and_pad_audio`).

    Args:
        audio: Decoded float waveform, (T,) or (C, T).
        sample_rate: Sample rate in Hz.
        ref_rms: RMS of the reference before boosting, or ``None`` without a reference.
        postprocess_output: Remove silences.
        pad_duration: Silence added on each side, in seconds.
        fade_duration: Fade length, in seconds.

    Returns:
        The processed waveform, same rank as ``audio``.
    """
    if postprocess_output:
        audio = remove_silence(audio, sample_rate, **OUTPUT_SILENCE)
    return fade_and_pad_audio(apply_volume(audio, ref_rms), pad_duration, fade_duration, sample_rate)


def apply_volume(audio: np.ndarray, ref_rms: Optional[float], peak: Optional[float] = None) -> np.ndarray:
    """The volume rule of :func:`post_process_audio`.

    Audio cloned from a quiet reference (RMS below 0.1) is scaled by ``ref_rms / 0.1``;
    audio made without a reference is scaled so that ``peak`` (default: its own peak)
    becomes 0.5.
    """
    if ref_rms is not None and ref_rms < REFERENCE_MIN_RMS:
        return audio * ref_rms / REFERENCE_MIN_RMS
    if ref_rms is None:
        if peak is None:
            peak = np.abs(audio).max(initial=0.0)
        if peak > 1e-6:
            return audio / peak * PEAK_LEVEL
    return audio


class ChunkJoiner:
    """:func:`cross_fade_chunks` then :func:`post_process_audio` (defaults) on mono chunks that
    arrive one by one: the same samples, in about the output's own memory.

    Long-form ``generate`` used to keep every decoded chunk, join them and post-process the join
    through whole-length copies (int64 running sums among them): about 9x the output. Here each
    chunk is cross-faded as it comes and stored in one growing buffer, as 16-bit samples when
    post-processed (silence removal quantises to them anyway) or float32 when not; :meth:`finish`
    removes silences inside that buffer, then widens it in place into the float32 output. Peak:
    the larger of the stored samples and the output (``bench/longform.py`` measures it).

    Args:
        sample_rate: Sample rate in Hz.
        ref_rms: Reference RMS for the volume rule (:func:`apply_volume`), or None.
        postprocess_output: Remove silences, as :func:`post_process_audio`.
    """

    # Samples converted at a time in finish().
    BLOCK = 1 << 16

    def __init__(self, sample_rate: int, ref_rms: Optional[float], postprocess_output: bool = True) -> None:
        _check_rate(sample_rate)
        self.sample_rate = sample_rate
        self.ref_rms = ref_rms
        self._fader = _CrossFader(sample_rate, CHUNK_SILENCE)
        self._dtype = np.dtype(np.int16 if postprocess_output else np.float32)
        # Raw bytes, grown by realloc (ndarray.resize): no second copy while it grows.
        self._buf = np.zeros(0, np.uint8)
        self._count = 0

    def add(self, chunk: np.ndarray) -> None:
        """Appends a decoded chunk: a float32 array (T,)."""
        _as_2d(chunk, "chunk")
        if chunk.ndim != 1:
            raise ValueError("ChunkJoiner takes mono chunks of shape (samples,)")
        self._store(self._fader.push(chunk.astype(np.float32, copy=False)))

    def finish(self) -> np.ndarray:
        """The joined, post-processed float32 audio (T',); the joiner is empty afterwards."""
        self._store(self._fader.close())
        if self._dtype == np.int16:
            pcm = Pcm16(self._samples()[: self._count, None], self.sample_rate)
            kept = _cut_silence(pcm, **OUTPUT_SILENCE).samples[:, 0]
            start = _row_offset(kept, pcm.samples)
            del pcm
            if start is None:  # padded past the end: a copy (see _cut_silence)
                self._reserve(kept.nbytes)
                self._samples()[: kept.size] = kept
                start = 0
            count = kept.size
            del kept
        else:
            start, count = 0, self._count
        return self._widen(start, count)

    def _samples(self) -> np.ndarray:
        return self._buf.view(self._dtype)

    def _reserve(self, nbytes: int) -> None:
        # Views of the buffer must not outlive this call: realloc may move it.
        if self._buf.size < nbytes:
            self._buf.resize(nbytes, refcheck=False)

    def _store(self, audio: np.ndarray) -> None:
        if self._dtype == np.int16:
            audio = Pcm16.from_float(audio[None], self.sample_rate).samples[:, 0]
        self._reserve((self._count + audio.size) * self._dtype.itemsize)
        self._samples()[self._count : self._count + audio.size] = audio
        self._count += audio.size

    def _to_float(self, offset: int, count: int) -> np.ndarray:
        """A float32 copy of ``count`` stored samples at byte ``offset`` (as Pcm16.to_float)."""
        stored = self._buf[offset : offset + count * self._dtype.itemsize].view(self._dtype)
        return stored.astype(np.float32) / np.float32(FULL_SCALE) if self._dtype == np.int16 else stored.copy()

    def _widen(self, start: int, count: int) -> np.ndarray:
        """Volume, fades and pads of :func:`post_process_audio` on the ``count`` stored samples from
        ``start``, written as float32 over the same buffer.

        The samples first move up to byte ``base``; then block by block, output sample j goes to
        byte 4 (pad + j), which never reaches a sample not yet read, as
        4 (pad + j) <= base + k j for every j <= count (k: bytes per stored sample)."""
        if count == 0:
            self._buf = np.zeros(0, np.uint8)
            return np.zeros(0, np.float32)
        k, block = self._dtype.itemsize, self.BLOCK
        pad = int(PAD_DURATION * self.sample_rate)
        fade = min(int(FADE_DURATION * self.sample_rate), count // 2)
        peak = None
        if self.ref_rms is None:  # apply_volume's peak of the whole
            peak = max(np.abs(self._to_float(start * k + j * k, min(block, count - j))).max(initial=0.0)
                       for j in range(0, count, block))
        total, base = 4 * (count + 2 * pad), (4 - k) * count + 4 * pad
        self._reserve(max(total, base + count * k))
        _move(self._buf, start * k, base, count * k)
        ramp_in, ramp_out = _ramp(fade, rising=True), _ramp(fade, rising=False)
        for j in range(0, count, block):
            m = min(block, count - j)
            # In the dtype apply_volume gives, as fade_edges applies them before the cast.
            out = apply_volume(self._to_float(base + j * k, m), self.ref_rms, peak)
            if j < fade:
                out[: fade - j] *= ramp_in[j : j + m]
            if j + m > count - fade:
                first = max(j, count - fade)
                out[first - j :] *= ramp_out[first - (count - fade) : j + m - (count - fade)]
            self._buf[4 * (pad + j) : 4 * (pad + j + m)].view(np.float32)[:] = out
        self._buf[: 4 * pad] = 0
        self._buf[4 * (pad + count) : total] = 0
        self._buf.resize(total, refcheck=False)
        out, self._buf, self._count = self._buf.view(np.float32), np.zeros(0, np.uint8), 0
        return out
