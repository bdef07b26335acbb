"""Grouped and depthwise Conv1d (our ops and the stock im2col form) vs numpy in float64: Sopro's
speaker (depthwise k5, dilation 1-8, "same"), vocoder (depthwise k7, 3/3) and DiT (k31, 16
groups, causal) shapes in small, with odd lengths and channel counts."""

from __future__ import annotations

import numpy as np
import pytest

from omnivoice import _core


def grouped_conv_ref(
    x: np.ndarray, w: np.ndarray, b: np.ndarray | None, groups: int, pad_left: int, pad_right: int, dilation: int
) -> np.ndarray:
    """PyTorch's Conv1d(groups=groups) on x (T, IC) padded (pad_left, pad_right), w (OC, IC/groups, K),
    in float64; returns (T_out, OC)."""
    oc, icg, k = w.shape
    ocg = oc // groups
    xp = np.pad(x.astype(np.float64), ((pad_left, pad_right), (0, 0)))
    t_out = xp.shape[0] - dilation * (k - 1)
    y = np.zeros((t_out, oc))
    for g in range(groups):
        xg = xp[:, g * icg : (g + 1) * icg]
        wg = w[g * ocg : (g + 1) * ocg].astype(np.float64)
        for j in range(k):
            y[:, g * ocg : (g + 1) * ocg] += xg[j * dilation : j * dilation + t_out] @ wg[:, :, j].T
    return y if b is None else y + b


# (T, IC, OC, groups, K, pad_left, pad_right, dilation)
CASES = [
    (37, 13, 13, 13, 5, 2, 2, 1),  # depthwise, odd channel count
    (41, 24, 24, 24, 5, 8, 8, 4),
    (29, 32, 32, 32, 5, 16, 16, 8),  # dilation 8 on a clip shorter than the receptive field's span
    (53, 20, 20, 20, 7, 3, 3, 1),  # the vocoder's centred k7
    (45, 17, 17, 17, 3, 2, 0, 1),  # causal depthwise
    (70, 64, 64, 16, 31, 30, 0, 1),  # DiT's pos conv in small: 4 channels per group, direct op
    (50, 128, 128, 16, 31, 30, 0, 1),  # 8 per group
    (33, 32, 32, 16, 31, 30, 0, 1),  # 2 per group (the tiny checkpoint's): im2col
    (40, 12, 24, 4, 3, 1, 2, 2),  # asymmetric, OC/groups 6: im2col
    (25, 8, 16, 1, 3, 1, 1, 1),  # no groups: direct
]


@pytest.mark.parametrize(("t", "ic", "oc", "groups", "k", "pl", "pr", "dil"), CASES)
@pytest.mark.parametrize("impl", ["own", "stock"])
def test_grouped_conv_matches_numpy(
    t: int, ic: int, oc: int, groups: int, k: int, pl: int, pr: int, dil: int, impl: str
) -> None:
    rng = np.random.default_rng(t * 31 + oc + groups)
    x = rng.standard_normal((t, ic)).astype(np.float32)
    w = (rng.standard_normal((oc, ic // groups, k)) / np.sqrt(ic // groups * k)).astype(np.float32)
    b = rng.standard_normal(oc).astype(np.float32)
    want = grouped_conv_ref(x, w, b, groups, pl, pr, dil)
    got = _core.testing.op_grouped_conv1d(x, w, b, groups, pl, pr, dil, impl)
    assert got.shape == want.shape
    # float32 sums of at most 31*8 products of unit-scale terms
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=2e-6)
    got = _core.testing.op_grouped_conv1d(x, w, None, groups, pl, pr, dil, impl)
    np.testing.assert_allclose(got, want - b, rtol=1e-5, atol=2e-6)


@pytest.mark.parametrize(("ic", "groups", "k", "pl", "dil"), [(48, 48, 5, 8, 4), (64, 16, 31, 30, 1)])
def test_grouped_conv_threads_agree(ic: int, groups: int, k: int, pl: int, dil: int) -> None:
    rng = np.random.default_rng(7)
    x = rng.standard_normal((301, ic)).astype(np.float32)
    w = rng.standard_normal((ic, ic // groups, k)).astype(np.float32)
    one = _core.testing.op_grouped_conv1d(x, w, None, groups, pl, pl if groups == ic else 0, dil, n_threads=1)
    three = _core.testing.op_grouped_conv1d(x, w, None, groups, pl, pl if groups == ic else 0, dil, n_threads=3)
    np.testing.assert_array_equal(one, three)


def test_grouped_conv_bad_input() -> None:
    x = np.zeros((10, 6), np.float32)
    with pytest.raises(ValueError, match="groups dividing"):
        _core.testing.op_grouped_conv1d(x, np.zeros((6, 1, 3), np.float32), groups=4)
    with pytest.raises(ValueError, match="shorter"):
        _core.testing.op_grouped_conv1d(x, np.zeros((6, 1, 12), np.float32), groups=6)
