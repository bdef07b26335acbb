"""The Snake op (fused custom op and composed stock ops) vs numpy in float64."""

from __future__ import annotations

import numpy as np
import pytest

from omnivoice import _core


def snake_ref(x: np.ndarray, alpha: np.ndarray) -> np.ndarray:
    """Snake in float64 from the float32 product alpha * x, as PyTorch rounds it."""
    z = (alpha * x).astype(np.float64)
    return x.astype(np.float64) + np.sin(z) ** 2 / (alpha.astype(np.float64) + 1e-9)


@pytest.mark.parametrize("fused", [True, False])
@pytest.mark.parametrize("scale", [1.0, 30.0, 3e4])
def test_snake_matches_numpy(fused: bool, scale: float) -> None:
    rng = np.random.default_rng(0)
    # 37 channels: not a multiple of the vector width; scale 3e4 takes |alpha*x| past the fast
    # range reduction (8192), where the op recomputes with std::sin.
    x = (rng.standard_normal((53, 37)) * scale).astype(np.float32)
    alpha = rng.uniform(0.5, 2.0, 37).astype(np.float32)
    got = _core.testing.op_snake(x, alpha, fused=fused)
    # A few float32 ulps of the result (|y| ~ |x|), the sin^2 term itself to about 1e-6.
    np.testing.assert_allclose(got, snake_ref(x, alpha), rtol=3e-7, atol=2e-6)


def test_snake_threads_agree() -> None:
    rng = np.random.default_rng(1)
    x = rng.standard_normal((1000, 32)).astype(np.float32)
    alpha = rng.uniform(0.5, 2.0, 32).astype(np.float32)
    np.testing.assert_array_equal(_core.testing.op_snake(x, alpha, n_threads=1),
                                  _core.testing.op_snake(x, alpha, n_threads=3))


def test_snake_bad_input() -> None:
    with pytest.raises(ValueError, match="snake"):
        _core.testing.op_snake(np.zeros((4, 3), np.float32), np.ones(2, np.float32))
