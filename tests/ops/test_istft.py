"""The ISTFT (inverse-DFT matmul, overlap-add, envelope) vs numpy's irfft in float64, as
torch.istft(center=True) defines it: Vocos's n_fft 1024, hop 256, periodic Hann, and odd sizes."""

from __future__ import annotations

import numpy as np
import pytest

from omnivoice import _core


def istft_ref(real: np.ndarray, imag: np.ndarray, window: np.ndarray, hop: int) -> np.ndarray:
    """Frames irfft'ed (bins 0 and n_fft/2's imaginary parts dropped), windowed, overlap-added,
    divided by the overlap-added squared window, n_fft/2 trimmed per side; float64."""
    n_fft = window.shape[0]
    frames = np.fft.irfft(real.astype(np.float64) + 1j * imag.astype(np.float64), n=n_fft, axis=1)
    frames *= window
    n = n_fft + hop * (len(frames) - 1)
    y = np.zeros(n)
    env = np.zeros(n)
    for t, f in enumerate(frames):
        y[t * hop : t * hop + n_fft] += f
        env[t * hop : t * hop + n_fft] += window.astype(np.float64) ** 2
    keep = slice(n_fft // 2, n - n_fft // 2)  # the envelope is 0 at the uncropped ends
    return y[keep] / env[keep]


def hann(n: int) -> np.ndarray:
    """torch.hann_window(n) (periodic)."""
    return (0.5 - 0.5 * np.cos(2 * np.pi * np.arange(n) / n)).astype(np.float32)


@pytest.mark.parametrize(("n_frames", "n_fft", "hop"), [(37, 1024, 256), (2, 1024, 256), (50, 64, 16), (23, 40, 10)])
@pytest.mark.parametrize("stock", [False, True])
def test_istft_matches_numpy(n_frames: int, n_fft: int, hop: int, stock: bool) -> None:
    rng = np.random.default_rng(n_frames + n_fft)
    # Vocos's spectra: magnitude exp(<= ln 100) times a phase.
    mag = np.exp(np.minimum(rng.standard_normal((n_frames, n_fft // 2 + 1)), np.log(100.0)))
    phase = rng.uniform(-np.pi, np.pi, mag.shape)
    real = (mag * np.cos(phase)).astype(np.float32)
    imag = (mag * np.sin(phase)).astype(np.float32)
    window = hann(n_fft)
    want = istft_ref(real, imag, window, hop)
    got = _core.testing.op_istft(real, imag, window, hop, stock=stock)
    assert got.shape == ((n_frames - 1) * hop,)
    # float32 dot products of 2*(n_fft/2+1) terms against an RMS of about 0.1
    scale = np.sqrt(np.mean(want**2))
    np.testing.assert_allclose(got, want, rtol=0, atol=2e-6 * scale * np.sqrt(n_fft / 64))


def test_istft_threads_agree() -> None:
    rng = np.random.default_rng(5)
    real = rng.standard_normal((61, 513)).astype(np.float32)
    imag = rng.standard_normal((61, 513)).astype(np.float32)
    one = _core.testing.op_istft(real, imag, hann(1024), 256, n_threads=1)
    np.testing.assert_array_equal(one, _core.testing.op_istft(real, imag, hann(1024), 256, n_threads=3))


def test_istft_bad_input() -> None:
    with pytest.raises(ValueError, match="istft"):
        _core.testing.op_istft(np.zeros((5, 512), np.float32), np.zeros((5, 512), np.float32), hann(1024), 256)
