"""The direct Conv1d op vs numpy in float64: padding, stride, dilation, bias, residual."""

from __future__ import annotations

import numpy as np
import pytest

from omnivoice import _core


def conv1d_ref(
    x: np.ndarray, w: np.ndarray, b: np.ndarray | None, stride: int, padding: int, dilation: int
) -> np.ndarray:
    """PyTorch's Conv1d on x (T, IC) with w (OC, IC, K), in float64; returns (T_out, OC)."""
    k = w.shape[2]
    xp = np.pad(x.astype(np.float64), ((padding, padding), (0, 0)))
    t_out = (xp.shape[0] - dilation * (k - 1) - 1) // stride + 1
    y = np.zeros((t_out, w.shape[0]))
    for j in range(k):
        taps = xp[j * dilation : j * dilation + stride * (t_out - 1) + 1 : stride]
        y += taps @ w[:, :, j].astype(np.float64).T
    return y if b is None else y + b


def direct_weight(w: np.ndarray) -> np.ndarray:
    """(OC, IC, K) -> (K*IC, OC), row k*IC + ic: the layout the loader gives the op."""
    return np.ascontiguousarray(w.transpose(2, 1, 0).reshape(-1, w.shape[0]))


# (T, IC, OC, K, stride, padding, dilation): the codec's shapes in small, plus strided and
# odd-length cases; OC 48 and 80 mix vector blocks, T not a multiple of a tile.
CASES = [
    (50, 8, 16, 7, 1, 3, 1),
    (61, 8, 32, 7, 1, 27, 9),
    (40, 5, 48, 7, 1, 9, 3),
    (33, 16, 64, 1, 1, 0, 1),
    (97, 3, 80, 4, 2, 1, 1),
    (100, 1, 16, 10, 5, 0, 1),
    (7, 4, 16, 3, 1, 5, 2),
    # Reductions of 448 and 480 rows: split into chunks (64 KiB of weights per 64 channels).
    (30, 64, 64, 7, 1, 3, 1),
    (20, 160, 80, 3, 2, 1, 1),
    # OC left over after whole 16-float vectors: 92 = 64 + 16 + 8 + 4, 4 alone.
    (25, 12, 92, 3, 1, 1, 1),
    (9, 6, 4, 1, 1, 0, 1),
]


@pytest.mark.parametrize(("t", "ic", "oc", "k", "stride", "padding", "dilation"), CASES)
@pytest.mark.parametrize("n_threads", [1, 2])
def test_conv_matches_numpy(
    simd_build: str, t: int, ic: int, oc: int, k: int, stride: int, padding: int, dilation: int, n_threads: int
) -> None:
    rng = np.random.default_rng(t * 7 + oc)
    x = rng.standard_normal((t, ic)).astype(np.float32)
    w = (rng.standard_normal((oc, ic, k)) / np.sqrt(ic * k)).astype(np.float32)
    b = rng.standard_normal(oc).astype(np.float32)
    want = conv1d_ref(x, w, b, stride, padding, dilation)
    got = _core.testing.op_conv1d(x, direct_weight(w), b, None, stride, padding, dilation, n_threads)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)

    res = rng.standard_normal(want.shape).astype(np.float32)
    got = _core.testing.op_conv1d(x, direct_weight(w), None, res, stride, padding, dilation, n_threads)
    np.testing.assert_allclose(got, want - b + res, rtol=1e-5, atol=1e-5)


def test_conv_bad_input() -> None:
    x = np.zeros((10, 4), np.float32)
    with pytest.raises(ValueError, match="multiple of 4"):
        _core.testing.op_conv1d(x, np.zeros((8, 10), np.float32))
    with pytest.raises(ValueError, match="shorter"):
        _core.testing.op_conv1d(x, np.zeros((4 * 20, 16), np.float32))
