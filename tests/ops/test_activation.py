"""tanh-GELU and Mish (our ops and their stock compositions) and GroupNorm(1, C) vs numpy in
float64."""

from __future__ import annotations

import numpy as np
import pytest

from omnivoice import _core


def gelu_tanh_ref(x: np.ndarray) -> np.ndarray:
    v = x.astype(np.float64)
    return 0.5 * v * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (v + 0.044715 * v**3)))


def mish_ref(x: np.ndarray) -> np.ndarray:
    v = x.astype(np.float64)
    return v * np.tanh(np.log1p(np.exp(v)))


def inputs() -> np.ndarray:
    """(T, C) = (61, 37) of unit normals, scaled rows reaching +-30, and exact zeros."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((61, 37)) * np.linspace(0.1, 30.0, 61)[:, None]
    x[0, :5] = 0.0
    return x.astype(np.float32)


@pytest.mark.parametrize(("name", "ref"), [("gelu_tanh", gelu_tanh_ref), ("mish", mish_ref)])
def test_activation_op_matches_numpy(name: str, ref) -> None:
    x = inputs()
    got = getattr(_core.testing, f"op_{name}")(x).astype(np.float64)
    want = ref(x)
    # A few float32 ulps of each element, plus for tanh-GELU the rounding of 1 + tanh(u) near 0
    # (u << 0), an ulp of 1 times |x|/2: PyTorch's float32 kernel computes the same expression.
    bound = 1e-6 * np.abs(want) + 1.2e-7 * np.abs(x) + 1e-37
    assert np.all(np.abs(got - want) <= bound), np.max(np.abs(got - want) / bound)


@pytest.mark.parametrize(("name", "ref"), [("gelu_tanh", gelu_tanh_ref), ("mish", mish_ref)])
def test_activation_stock_matches_numpy(name: str, ref) -> None:
    x = inputs()
    got = getattr(_core.testing, f"op_{name}")(x, stock=True)
    # log(1 + exp(x)) in ggml_softplus and the composed tanh-GELU's rounding: absolute ~1e-6 where
    # the outputs are near zero.
    np.testing.assert_allclose(got, ref(x), rtol=1e-5, atol=2e-6)


@pytest.mark.parametrize("name", ["gelu_tanh", "mish"])
def test_activation_threads_agree(name: str) -> None:
    x = np.random.default_rng(4).standard_normal((997, 13)).astype(np.float32)
    op = getattr(_core.testing, f"op_{name}")
    np.testing.assert_array_equal(op(x, n_threads=1), op(x, n_threads=3))


@pytest.mark.parametrize(("t", "c"), [(1, 1), (53, 24), (400, 224)])
def test_group_norm_one_matches_numpy(t: int, c: int) -> None:
    rng = np.random.default_rng(t + c)
    # An offset the sums must survive (mean 3, std 0.5).
    x = (3.0 + 0.5 * rng.standard_normal((t, c))).astype(np.float32)
    w = rng.standard_normal(c).astype(np.float32)
    b = rng.standard_normal(c).astype(np.float32)
    v = x.astype(np.float64)
    want = (v - v.mean()) / np.sqrt(v.var() + 1e-5) * w + b
    got = _core.testing.op_group_norm_one(x, w, b, 1e-5)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=2e-6)
    np.testing.assert_array_equal(got, _core.testing.op_group_norm_one(x, w, b, 1e-5, n_threads=3))


def test_activation_bad_input() -> None:
    with pytest.raises(ValueError, match="gelu_tanh"):
        _core.testing.op_gelu_tanh(np.zeros((0, 3), np.float32))
    with pytest.raises(ValueError, match="group_norm_one"):
        _core.testing.op_group_norm_one(np.zeros((4, 3), np.float32), np.ones(2, np.float32), np.ones(3, np.float32), 1e-5)
