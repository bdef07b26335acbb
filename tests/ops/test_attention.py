"""Our attention op (ov_attention) on packed segments vs numpy in float64, on every
instruction-set build this CPU can run (forced through the dispatch cap), at 1, 2 and 3 threads."""

from __future__ import annotations

import numpy as np
import pytest

from omnivoice import _core


def reference(q: np.ndarray, k: np.ndarray, v: np.ndarray, segments: list[int], scale: float) -> np.ndarray:
    """softmax(scale q k^T) v of each segment with itself, in float64; head h reads KV head h // G."""
    q, k, v = (a.astype(np.float64) for a in (q, k, v))
    group = q.shape[1] // k.shape[1]
    k, v = np.repeat(k, group, axis=1), np.repeat(v, group, axis=1)
    out = np.empty_like(q)
    start = 0
    for n in segments:
        sl = slice(start, start + n)
        s = np.einsum("qhd,khd->hqk", q[sl], k[sl]) * scale
        p = np.exp(s - s.max(-1, keepdims=True))
        out[sl] = np.einsum("hqk,khd->qhd", p / p.sum(-1, keepdims=True), v[sl])
        start += n
    return out


# (segments, n_head, n_head_kv, head dim): lengths past whole 4-key tiles, 256-key chunks and
# query panels (12/24/48 rows), 1-token segments, GQA ratios 1 and 2, head sizes past whole
# value tiles (8/16/32 columns).
CASES = [
    ([1], 2, 1, 16),
    ([7], 3, 3, 40),
    ([1, 13, 1, 30], 4, 2, 32),
    ([29, 5], 16, 8, 128),
    ([259, 3], 2, 1, 64),
]


@pytest.mark.parametrize(("segments", "n_head", "n_head_kv", "head_dim"), CASES)
def test_attention_matches_numpy(simd_build: str, segments: list[int], n_head: int, n_head_kv: int,
                                 head_dim: int) -> None:
    rng = np.random.default_rng(sum(segments) * 100 + n_head)
    n = sum(segments)
    # Scaled-up queries give peaked softmax rows, as trained models do.
    q = 3 * rng.standard_normal((n, n_head, head_dim), dtype=np.float32)
    k = rng.standard_normal((n, n_head_kv, head_dim), dtype=np.float32)
    v = rng.standard_normal((n, n_head_kv, head_dim), dtype=np.float32)
    scale = head_dim**-0.5
    want = reference(q, k, v, segments, scale)
    outs = [_core.testing.op_attention(q, k, v, segments, scale, "own", n_threads) for n_threads in (1, 2, 3)]
    np.testing.assert_allclose(outs[0], want, rtol=1e-5, atol=1e-5)
    for out in outs[1:]:
        np.testing.assert_array_equal(out, outs[0])


def test_attention_matches_ggml() -> None:
    # ggml's flash_attn_ext and its stock mul_mat + soft_max per segment, the LM's other paths.
    rng = np.random.default_rng(1)
    segments = [40, 17]
    q, k, v = (rng.standard_normal((57, h, 64), dtype=np.float32) for h in (4, 2, 2))
    ours = _core.testing.op_attention(q, k, v, segments, 0.125)
    for impl in ("flash", "stock"):
        np.testing.assert_allclose(_core.testing.op_attention(q, k, v, segments, 0.125, impl), ours, rtol=1e-5, atol=1e-5)


def test_bad_arguments_raise() -> None:
    q = np.zeros((4, 2, 32), np.float32)
    kv = np.zeros((4, 1, 32), np.float32)
    with pytest.raises(ValueError, match="sum to N"):
        _core.testing.op_attention(q, kv, kv, [3], 1.0)
    with pytest.raises(ValueError, match=">= 1"):
        _core.testing.op_attention(q, kv, kv, [4, 0], 1.0)
    with pytest.raises(ValueError, match="n_head_kv"):
        _core.testing.op_attention(np.zeros((4, 3, 32), np.float32), np.zeros((4, 2, 32), np.float32),
                                   np.zeros((4, 2, 32), np.float32), [4], 1.0)
    with pytest.raises(ValueError, match="impl"):
        _core.testing.op_attention(q, kv, kv, [4], 1.0, "fast")
