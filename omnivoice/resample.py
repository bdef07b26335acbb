"""Band-limited resampling as upstream does it (torchaudio's default ``resample``).

Upstream OmniVoice converts a reference recording to 24 kHz, and the codec converts 24 kHz to
16 kHz before HuBERT, with ``torchaudio.functional.resample`` at its defaults: windowed-sinc
interpolation, a Hann window over 6 zero crossings of the sinc, cutoff at 0.99 of the lower
Nyquist rate. With both rates divided by their gcd (``orig``, ``new``), output sample ``j`` is

    y[j] = sum_i x[i] * h(i / orig - j / new),   x[i] = 0 outside the signal,
    h(tau) = (base / orig) * sinc(base * tau) * cos^2(pi * base * tau / 12),  |base * tau| < 6,
    base = 0.99 * min(orig, new),

and the output has ``ceil(n * new / orig)`` samples. ``h`` only depends on ``j mod new`` and on
``i - floor(j * orig / new)``, so one table of ``new`` rows (phases) of ``2 * width + 2`` taps
serves the whole signal, ``width = ceil(6 * orig / base)``. The sum runs in float64; the result
agrees with torchaudio's float32 computation to about 1e-6 (its accumulation rounding).

soxr remains for conversions upstream never makes (such as generated audio to an output rate).
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["resample"]

# torchaudio's defaults, which upstream never changes.
ZERO_CROSSINGS = 6
ROLLOFF = 0.99


def _phase_table(orig: int, new: int, width: int, n_phases: int, grid: type) -> np.ndarray:
    """Filter taps ``[n_phases, 2 * width + 2]`` (float64) for output phases ``0 .. n_phases - 1``.

    The sinc argument is formed in ``grid`` precision with torchaudio's operations (two true
    divisions, a sum, a product with the cutoff): its float32 rounding of the argument moves
    the taps by up to 2e-5 at 22.05 -> 24 kHz, and that is what upstream's audio holds. Window
    and sinc are then evaluated in float64 (torchaudio's float32 sin/cos agree to 1e-7).
    """
    base = min(orig, new) * ROLLOFF
    p = np.arange(n_phases)
    # Offset of tap k from input sample 0 of output j's block of orig inputs (torchaudio's
    # kernel column index minus width): floor(p * orig / new) - width + k.
    k = (p[:, None] * orig) // new - width + np.arange(2 * width + 2)[None, :]
    t = (-p.astype(grid) / grid(new))[:, None] + k.astype(grid) / grid(orig)
    t = np.clip(t * grid(base), -ZERO_CROSSINGS, ZERO_CROSSINGS).astype(np.float64)
    window = np.cos(np.pi * t / (2 * ZERO_CROSSINGS)) ** 2
    taps = np.sinc(t) * window * (base / orig)
    # Beyond the last zero crossing the window is 0 (torchaudio: cos^2 of pi/2 in float32, 2e-15).
    taps[np.abs(t) >= ZERO_CROSSINGS] = 0.0
    return taps


def resample(wave: np.ndarray, orig_freq: int, new_freq: int) -> np.ndarray:
    """Resamples a mono signal as ``torchaudio.functional.resample`` does at its defaults.

    Args:
        wave: Float samples ``[n]``.
        orig_freq: Rate of ``wave`` in Hz, a positive integer.
        new_freq: Wanted rate in Hz, a positive integer.

    Returns:
        ``ceil(n * new_freq / orig_freq)`` samples, in ``wave``'s dtype; ``wave`` itself when the
        rates are equal.

    Raises:
        ValueError: ``wave`` is not a 1-D float array, or a rate is not a positive integer.
    """
    wave = np.asarray(wave)
    if wave.ndim != 1 or wave.dtype.kind != "f":
        raise ValueError(f"wave must be a 1-D float array, got {wave.ndim}-D {wave.dtype}")
    for name, rate in (("orig_freq", orig_freq), ("new_freq", new_freq)):
        if isinstance(rate, bool) or not isinstance(rate, (int, np.integer)) or rate <= 0:
            raise ValueError(f"{name} must be a positive integer, got {rate!r}")
    if orig_freq == new_freq:
        return wave
    gcd = math.gcd(int(orig_freq), int(new_freq))
    orig, new = int(orig_freq) // gcd, int(new_freq) // gcd
    width = math.ceil(ZERO_CROSSINGS * orig / (min(orig, new) * ROLLOFF))
    n_out = -(-wave.size * new // orig)
    grid = np.float64 if wave.dtype == np.float64 else np.float32
    table = _phase_table(orig, new, width, min(new, n_out), grid)
    n_taps = table.shape[1]
    # Zeros around the signal: tap 0 of output 0 reads x[-width], the last tap of the last
    # output reads at most x[n + width + 1].
    padded = np.zeros(wave.size + 2 * width + 3, np.float64)
    padded[width : width + wave.size] = wave
    windows = np.lib.stride_tricks.sliding_window_view(padded, n_taps)
    out = np.empty(n_out, np.float64)
    # Outputs j = m * new + p read the windows starting at m * orig + floor(p * orig / new): one
    # strided matrix-vector product per phase (10 s at 24 -> 16 kHz: 2 phases, about 20 ms).
    for p in range(table.shape[0]):
        rows = out[p::new]
        rows[:] = windows[(p * orig) // new :: orig][: rows.size] @ table[p]
    return out.astype(wave.dtype, copy=False)
