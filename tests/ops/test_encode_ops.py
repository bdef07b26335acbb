"""The encoder's custom ops (erf GELU with bias, LayerNorm, per-channel GroupNorm,
RVQ encode) vs numpy in float64."""

from __future__ import annotations

import math

import numpy as np
import pytest

from omnivoice import _core

EPS = 1e-5


def gelu_ref(x: np.ndarray) -> np.ndarray:
    erf = np.vectorize(math.erf)
    x = x.astype(np.float64)
    return 0.5 * x * (1.0 + erf(x / math.sqrt(2.0)))


def test_gelu_erf_matches_numpy() -> None:
    rng = np.random.default_rng(0)
    # 37 channels: not a multiple of the vector width; values out to the saturated tails.
    x = (rng.standard_normal((53, 37)) * 4).astype(np.float32)
    bias = rng.standard_normal(37).astype(np.float32)
    # The op's erfc approximation is good to 3e-7 absolute (Abramowitz & Stegun 7.1.28).
    np.testing.assert_allclose(_core.testing.op_gelu_erf(x), gelu_ref(x), rtol=1e-6, atol=2e-6)
    np.testing.assert_allclose(_core.testing.op_gelu_erf(x, bias), gelu_ref(x + bias), rtol=1e-6, atol=2e-6)


def test_gelu_erf_threads_agree() -> None:
    x = np.random.default_rng(1).standard_normal((999, 48)).astype(np.float32)
    np.testing.assert_array_equal(_core.testing.op_gelu_erf(x, n_threads=1), _core.testing.op_gelu_erf(x, n_threads=3))


@pytest.mark.parametrize("over_time", [False, True])
def test_norm_matches_numpy(over_time: bool) -> None:
    rng = np.random.default_rng(2)
    x = (rng.standard_normal((301, 37)) * 3 + 5).astype(np.float32)
    w = rng.uniform(0.5, 1.5, 37).astype(np.float32)
    b = rng.standard_normal(37).astype(np.float32)
    xd = x.astype(np.float64)
    axis = 0 if over_time else 1  # numpy (T, C): over time per channel, or over channels per step
    mean = xd.mean(axis=axis, keepdims=True)
    var = xd.var(axis=axis, keepdims=True)
    want = (xd - mean) / np.sqrt(var + EPS) * w + b
    got = _core.testing.op_norm(x, w, b, EPS, over_time)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(got, _core.testing.op_norm(x, w, b, EPS, over_time, n_threads=3))


def test_layer_norm_adds_bias_and_residual_first() -> None:
    rng = np.random.default_rng(4)
    x, res = (rng.standard_normal((2, 64, 48)) * 2).astype(np.float32)
    w = rng.uniform(0.5, 1.5, 48).astype(np.float32)
    b, xb = rng.standard_normal((2, 48)).astype(np.float32)
    v = ((x + xb) + res).astype(np.float64)
    want = (v - v.mean(1, keepdims=True)) / np.sqrt(v.var(1, keepdims=True) + EPS) * w + b
    got = _core.testing.op_norm(x, w, b, EPS, False, residual=res, x_bias=xb)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_ops_bad_input() -> None:
    x = np.zeros((4, 3), np.float32)
    with pytest.raises(ValueError, match="gelu_erf"):
        _core.testing.op_gelu_erf(x, np.zeros(2, np.float32))
    with pytest.raises(ValueError, match="norm"):
        _core.testing.op_norm(x, np.ones(3, np.float32), np.zeros(2, np.float32), EPS, False)


def rvq_encode_ref(x, w_in, b_in, embed, w_out, b_out):
    """The reference's residual VQ encode in float64: codes (n_q, T)."""
    residual = x.astype(np.float64)
    codes = []
    for q in range(w_in.shape[0]):
        h = residual @ w_in[q].T.astype(np.float64) + b_in[q]
        e = embed[q].astype(np.float64)
        dist = (h**2).sum(1, keepdims=True) - 2 * h @ e.T + (e**2).sum(1)
        ids = dist.argmin(1)
        residual = residual - (e[ids] @ w_out[q].T.astype(np.float64) + b_out[q])
        codes.append(ids)
    return np.stack(codes)


def test_rvq_encode_matches_numpy() -> None:
    rng = np.random.default_rng(3)
    n_q, hidden, dim, size = 4, 48, 8, 1024
    x = rng.standard_normal((257, hidden)).astype(np.float32)
    w_in = (rng.standard_normal((n_q, dim, hidden)) / np.sqrt(hidden)).astype(np.float32)
    b_in = (rng.standard_normal((n_q, dim)) * 0.1).astype(np.float32)
    embed = rng.standard_normal((n_q, size, dim)).astype(np.float32)
    w_out = (rng.standard_normal((n_q, hidden, dim)) / np.sqrt(dim)).astype(np.float32)
    b_out = (rng.standard_normal((n_q, hidden)) * 0.1).astype(np.float32)
    args = (x, w_in, b_in, embed, w_out, b_out)
    got = _core.testing.op_rvq_encode(*args)
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, rvq_encode_ref(*args))
    np.testing.assert_array_equal(got, _core.testing.op_rvq_encode(*args, n_threads=3))


def test_rvq_encode_ties_take_the_first_entry() -> None:
    # Identity projections, entries 0/2 and 1/3 equal; the last frame is equidistant from all four.
    eye = np.eye(2, dtype=np.float32)[None]
    embed = np.array([[[1, 0], [0, 1], [1, 0], [0, 1]]], np.float32)
    x = np.array([[2, 0], [0, 3], [1, 1]], np.float32)
    zeros = np.zeros((1, 2), np.float32)
    np.testing.assert_array_equal(_core.testing.op_rvq_encode(x, eye, zeros, embed, eye, zeros), [[0, 1, 0]])
