"""Sopro's three STFT/mel front ends in numpy, from the window and filterbank the checkpoint stores.

Each mirrors a torchaudio ``MelSpectrogram`` (``center=True``, reflect padding, one-sided, not
normalised) followed by upstream's log and normalisation:

- speaker encoder, 16 kHz: power 2, ``log(max(mel, floor))``, then LayerNorm over the mels without
  an affine (eps 1e-5);
- semantic encoder, 16 kHz, Whisper style: the audio right-padded by ``n_fft``, power 2, the first
  ``ceil(n/hop) + 2`` frames, ``log10(max(mel, 1e-10))`` floored at its maximum minus 8, then
  ``(x + 4) / 4``;
- vocoder, 24 kHz: power 1 (magnitude), ``log(max(mel, 1e-7))``.

The FFT runs in float64 on float32 audio and the filterbank product in float64, so these sit
closer to the exact values than torch's float32 STFT; the results are float32 [n_mels, frames].
"""

from __future__ import annotations

import numpy as np

__all__ = ["log_mel", "semantic_log_mel", "speaker_log_mel", "stft_power", "vocoder_log_mel"]

# Frames the semantic encoder's convs read past the audio's own (upstream's
# CONV_RIGHT_CONTEXT_FRAMES).
SEMANTIC_RIGHT_CONTEXT = 2
# Its log floor and dynamic range (Whisper's).
_SEMANTIC_FLOOR = 1e-10
_SEMANTIC_RANGE = 8.0
# The vocoder's log floor.
_VOCODER_FLOOR = 1e-7
# F.layer_norm's default epsilon, which the speaker front end uses.
_LAYER_NORM_EPS = 1e-5


def _check_wav(wav: np.ndarray, n_fft: int) -> np.ndarray:
    wav = np.asarray(wav)
    if wav.ndim != 1 or not np.issubdtype(wav.dtype, np.floating):
        raise ValueError(f"wav must be a 1-D float array, got shape {wav.shape} and dtype {wav.dtype}")
    if wav.shape[0] <= n_fft // 2:
        raise ValueError(f"wav must be longer than n_fft // 2 = {n_fft // 2} samples (reflect padding), "
                         f"got {wav.shape[0]}")
    return wav.astype(np.float32, copy=False)


def stft_power(wav: np.ndarray, window: np.ndarray, n_fft: int, hop: int, power: float) -> np.ndarray:
    """|STFT|^power of a 1-D signal as torch.stft(center=True, pad_mode="reflect") frames it.

    Args:
        wav: samples, 1-D float.
        window: the analysis window, ``win_length <= n_fft`` values, centred in the frame
            (zero-padded to ``n_fft`` as torch.stft does).
        n_fft: FFT size.
        hop: frame step in samples.
        power: 1 for magnitude, 2 for power.

    Returns:
        float64 [1 + n // hop, n_fft // 2 + 1].
    """
    wav = _check_wav(wav, n_fft)
    window = np.asarray(window, dtype=np.float64)
    if window.ndim != 1 or not 1 <= window.shape[0] <= n_fft:
        raise ValueError(f"window must be 1-D with 1 to n_fft = {n_fft} values, got shape {window.shape}")
    left = (n_fft - window.shape[0]) // 2
    full = np.zeros(n_fft)
    full[left : left + window.shape[0]] = window
    padded = np.pad(wav.astype(np.float64), n_fft // 2, mode="reflect")
    n_frames = 1 + (padded.shape[0] - n_fft) // hop
    frames = np.lib.stride_tricks.sliding_window_view(padded, n_fft)[::hop][:n_frames]
    mag = np.abs(np.fft.rfft(frames * full, axis=1))
    return mag if power == 1 else mag**power


def log_mel(wav: np.ndarray, window: np.ndarray, fb: np.ndarray, n_fft: int, hop: int, power: float) -> np.ndarray:
    """torchaudio's MelSpectrogram: the STFT's |.|^power times the filterbank fb [n_fft//2+1, n_mels].

    Returns float64 [n_mels, frames] (not yet logged; the name says what every caller does next).
    """
    fb = np.asarray(fb, dtype=np.float64)
    if fb.ndim != 2 or fb.shape[0] != n_fft // 2 + 1:
        raise ValueError(f"fb must be (n_fft // 2 + 1 = {n_fft // 2 + 1}, n_mels), got shape {fb.shape}")
    return (stft_power(wav, window, n_fft, hop, power) @ fb).T


def speaker_log_mel(wav16: np.ndarray, window: np.ndarray, fb: np.ndarray, n_fft: int, hop: int,
                    log_floor: float) -> np.ndarray:
    """The speaker encoder's input: log power mel, then LayerNorm over the mels per frame.

    Returns float32 [n_mels, frames].
    """
    mel = np.log(np.maximum(log_mel(wav16, window, fb, n_fft, hop, 2.0), log_floor))
    mean = mel.mean(axis=0, keepdims=True)
    var = mel.var(axis=0, keepdims=True)
    return ((mel - mean) / np.sqrt(var + _LAYER_NORM_EPS)).astype(np.float32)


def semantic_log_mel(wav16: np.ndarray, window: np.ndarray, fb: np.ndarray, n_fft: int,
                     hop: int) -> tuple[np.ndarray, int]:
    """The semantic encoder's Whisper-style input and its frame count ``ceil(n / hop)``.

    Returns (float32 [n_mels, frames + 2], frames).
    """
    wav16 = _check_wav(wav16, n_fft)
    frames = (wav16.shape[0] + hop - 1) // hop
    padded = np.concatenate([wav16, np.zeros(n_fft, np.float32)])
    spec = log_mel(padded, window, fb, n_fft, hop, 2.0)[:, : frames + SEMANTIC_RIGHT_CONTEXT]
    log_spec = np.log10(np.maximum(spec, _SEMANTIC_FLOOR))
    log_spec = np.maximum(log_spec, log_spec.max() - _SEMANTIC_RANGE)
    return ((log_spec + 4.0) / 4.0).astype(np.float32), frames


def vocoder_log_mel(wav24: np.ndarray, window: np.ndarray, fb: np.ndarray, n_fft: int, hop: int) -> np.ndarray:
    """The vocoder's (and the acoustic head's reference) log magnitude mel.

    Returns float32 [n_mels, 1 + n // hop].
    """
    return np.log(np.maximum(log_mel(wav24, window, fb, n_fft, hop, 1.0), _VOCODER_FLOOR)).astype(np.float32)
