"""The packed linear op (ov_linear) vs numpy in float64 and vs ggml's own mul_mat, on every
instruction-set build this CPU can run (forced through the dispatch cap), and the cap itself;
its vdpbf16ps build for BF16 weights where the CPU has AVX512-BF16."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from omnivoice import _core


# (N tokens, IN, [OUT per weight]): tails of every loop (tokens past whole 2-, 6- and 14-token
# tiles, outputs past whole 16- and 32-wide panels, inputs past whole 8-wide transposes and 384- or
# 192-input chunks), several weights stacked, and one token.
CASES = [
    (1, 32, [16]),
    (7, 40, [37]),
    (13, 520, [33, 16, 100]),
    (29, 264, [5]),
    (6, 2 * 384 + 8 + 3, [48]),
    # Past 8 MB of packed x the tokens run in blocks (here 2 of 516 or 518: whole tiles).
    (1031, 2048, [37, 16]),
]
TYPES = ["F32", "F16", "BF16", "Q8_0"]
# K-quant rows are whole super-blocks of 256 (their chunks too): several chunks, every tail else.
K_CASES = [(13, 768, [37, 16]), (1, 256, [5])]
K_TYPES = ["Q4_K", "Q5_K", "Q6_K"]
# The LM's projections (Qwen3-0.6B, bench/linear.py): (IN, OUT) of qkv, o, gate_up, down, heads.
LM_SHAPES = [(1024, 4096), (2048, 1024), (1024, 6144), (3072, 1024), (1024, 8200)]

HAS_BF16_DOT = "avx512bf16" in _core.testing.cpu_flags()
needs_bf16_dot = pytest.mark.skipif(not HAS_BF16_DOT, reason="the vdpbf16ps build needs a CPU with AVX512-BF16")


def x_as_multiplied(x: np.ndarray, wtype: str) -> np.ndarray:
    """x as the build running `wtype` multiplies it: rounded to bf16 for BF16 weights on vdpbf16ps."""
    return _core.testing.op_round_trip(x, "BF16") if wtype == "BF16" and _core.testing.bf16_dot() else x


def reference(x: np.ndarray, ws: list[np.ndarray], wtypes: list[str]) -> np.ndarray:
    """x W^T in float64 for the weights as ggml stores them, x as the build rounds it."""
    return np.concatenate([x_as_multiplied(x, t).astype(np.float64) @ _core.testing.op_round_trip(w, t).astype(np.float64).T
                           for w, t in zip(ws, wtypes)], 1)


def weights_for(rng: np.random.Generator, n_in: int, outs: list[int]) -> list[np.ndarray]:
    return [(rng.standard_normal((o, n_in)) / np.sqrt(n_in)).astype(np.float32) for o in outs]


# Q8_0 rows are whole blocks of 32.
@pytest.mark.parametrize(
    ("n", "n_in", "outs", "wtype"),
    [(*c, t) for c in CASES for t in TYPES if t != "Q8_0" or c[1] % 32 == 0] + [(*c, t) for c in K_CASES for t in K_TYPES],
)
def test_linear_matches_numpy(simd_build: str, n: int, n_in: int, outs: list[int], wtype: str) -> None:
    rng = np.random.default_rng(n * 1000 + n_in)
    x = rng.standard_normal((n, n_in)).astype(np.float32)
    ws = weights_for(rng, n_in, outs)
    # The reference multiplies by the weights as ggml stores them (rounded to the type).
    want = reference(x, ws, [wtype] * len(ws))
    for n_threads in (1, 2, 3):
        got = _core.testing.op_linear(x, ws, [wtype] * len(ws), n_threads)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=2e-5 * np.abs(want).max())


@pytest.mark.parametrize("wtype", ["F32", "BF16", "Q8_0", "Q4_K"])
@pytest.mark.parametrize("n", [31, 1031])
def test_linear_does_not_depend_on_thread_count(simd_build: str, wtype: str, n: int) -> None:
    # Threads take units of outputs over token blocks, never a share of the inputs: each output
    # sums its inputs in one order whichever thread runs it (1031 tokens: two blocks).
    rng = np.random.default_rng(9)
    x = rng.standard_normal((n, 2048)).astype(np.float32)
    ws = weights_for(rng, 2048, [70, 45])
    one = _core.testing.op_linear(x, ws, [wtype] * 2, 1)
    for n_threads in (2, 3, 4):
        np.testing.assert_array_equal(_core.testing.op_linear(x, ws, [wtype] * 2, n_threads), one)


def test_mixed_types_stack_in_order(simd_build: str) -> None:
    rng = np.random.default_rng(3)
    x = rng.standard_normal((11, 64)).astype(np.float32)
    ws = weights_for(rng, 64, [20, 9, 17, 16])
    types = ["BF16", "F32", "Q8_0", "BF16"]
    want = reference(x, ws, types)
    np.testing.assert_allclose(_core.testing.op_linear(x, ws, types), want, rtol=1e-5, atol=1e-5)


def test_k_quants_stack_with_other_types(simd_build: str) -> None:
    # As in a Q4_K_M file: q, k in Q4_K, v in Q6_K, next to a plain type.
    rng = np.random.default_rng(4)
    x = rng.standard_normal((8, 256)).astype(np.float32)
    ws = weights_for(rng, 256, [32, 16, 21])
    types = ["Q4_K", "Q6_K", "F32"]
    want = np.concatenate([x.astype(np.float64) @ _core.testing.op_round_trip(w, t).astype(np.float64).T
                           for w, t in zip(ws, types)], 1)
    np.testing.assert_allclose(_core.testing.op_linear(x, ws, types), want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("wtype", ["F32", "BF16"])
def test_linear_matches_ggml_mul_mat(simd_build: str, wtype: str) -> None:
    # ggml's own op on the same stored weights; its BF16 path rounds x to bf16 as well.
    rng = np.random.default_rng(5)
    x = rng.standard_normal((23, 288)).astype(np.float32)
    (w,) = weights_for(rng, 288, [72])
    want = _core.testing.op_linear(x, [w], [wtype], mul_mat=True)
    got = _core.testing.op_linear(x, [w], [wtype])
    # Where ggml's BF16 path and ours both round x to bf16 the same way, only the order of the F32
    # sums differs; ours unpacking BF16 to F32 keeps x as it is.
    tol = 1e-5 if wtype == "F32" or _core.testing.bf16_dot() else 1e-2
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * np.abs(want).max())


# The vdpbf16ps build rounds x to bf16 (8 significant bits, relative error up to 2^-9) where the F32
# path keeps it. Over IN random-signed terms that moves an output by about 2^-9 / sqrt(3) of its
# spread (1.1e-3), at most about 1.3e-3 of max |y| over these sizes: 2^-8 of it bounds it, while a
# wrong pairing of inputs or outputs errs by O(1). End to end it adds a little to the weights' own
# rounding: the BF16 LM's target logits on the tiny checkpoint against PyTorch f32 (Zen 4, 1 thread)
# differ by 3.2e-3 of their max with x in F32 (the avx2 build), 4.4e-3 on vdpbf16ps, as through
# ggml's mul_mat, which rounds x the same way (within 1e-6 of ours); tests/parity allows 1.5e-2.
X_ROUNDING = 2.0**-8


@needs_bf16_dot
@pytest.mark.parametrize(("n_in", "n_out"), LM_SHAPES + [(40, 37), (779, 48), (264, 5), (2 * 384 + 1, 33)])
@pytest.mark.parametrize("n", [1, 29])
def test_bf16_dot_on_lm_shapes(n: int, n_in: int, n_out: int) -> None:
    # Tails: 29 tokens = 2 whole 14-token tiles and one token; odd IN (the last input paired with
    # zero), IN past whole 384-input chunks and 8-pair transposes, OUT past 32-wide panels.
    rng = np.random.default_rng(n_in + n_out)
    x = rng.standard_normal((n, n_in)).astype(np.float32)
    ws = weights_for(rng, n_in, [n_out])
    assert _core.testing.bf16_dot() and _core.testing.linear_kernel("BF16") == "ov_linear avx512bf16"
    got = _core.testing.op_linear(x, ws, ["BF16"], 2)
    want = reference(x, ws, ["BF16"])
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=2e-5 * np.abs(want).max())
    previous = _core.testing.set_bf16_dot(False)
    try:
        unpacked = _core.testing.op_linear(x, ws, ["BF16"], 2)
    finally:
        _core.testing.set_bf16_dot(previous)
    np.testing.assert_allclose(got, unpacked, rtol=0, atol=X_ROUNDING * np.abs(unpacked).max())
    assert np.abs(got - unpacked).max() > 0  # x was rounded: the two builds really differ


@needs_bf16_dot
def test_bf16_dot_does_not_depend_on_thread_count_at_lm_shape() -> None:
    rng = np.random.default_rng(10)
    x = rng.standard_normal((550, 1024)).astype(np.float32)
    ws = weights_for(rng, 1024, [4096])
    one = _core.testing.op_linear(x, ws, ["BF16"], 1)
    for n_threads in (2, 3, 4):
        np.testing.assert_array_equal(_core.testing.op_linear(x, ws, ["BF16"], n_threads), one)


def test_bf16_falls_back_without_the_dot_build(simd_build: str) -> None:
    # Switched off, or below AVX-512, or on a CPU without AVX512-BF16: BF16 is unpacked to F32 (x
    # kept as it is), and models send it to ggml's mul_mat only where the CPU has AVX512-BF16.
    rng = np.random.default_rng(6)
    x = rng.standard_normal((17, 264)).astype(np.float32)
    ws = weights_for(rng, 264, [40])
    assert _core.testing.bf16_dot() == (HAS_BF16_DOT and simd_build == "avx512")
    previous = _core.testing.set_bf16_dot(False)
    try:
        assert not _core.testing.bf16_dot()
        want = x.astype(np.float64) @ _core.testing.op_round_trip(ws[0], "BF16").astype(np.float64).T
        got = _core.testing.op_linear(x, ws, ["BF16"])
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=2e-5 * np.abs(want).max())
        fallback = "ggml mul_mat" if HAS_BF16_DOT and simd_build == "avx512" else f"ov_linear {simd_build}"
        assert _core.testing.linear_kernel("BF16") == fallback
        assert _core.testing.linear_kernel("F32") == f"ov_linear {simd_build}"
    finally:
        _core.testing.set_bf16_dot(previous)


def test_bad_arguments_raise() -> None:
    x = np.zeros((2, 64), np.float32)
    with pytest.raises(ValueError, match="wtype"):
        _core.testing.op_linear(x, [np.zeros((4, 64), np.float32)], ["Q4_0"])
    with pytest.raises(ValueError, match="multiple of 256"):
        _core.testing.op_linear(x, [np.zeros((4, 64), np.float32)], ["Q4_K"])
    with pytest.raises(ValueError, match="IN"):
        _core.testing.op_linear(x, [np.zeros((4, 32), np.float32)], ["F32"])
    with pytest.raises(ValueError, match="multiple of 32"):
        _core.testing.op_linear(np.zeros((2, 40), np.float32), [np.zeros((4, 40), np.float32)], ["Q8_0"])
    with pytest.raises(ValueError, match="simd"):
        _core.testing.set_simd_cap("sse9")


def test_cap_lowers_the_build_never_raises_it() -> None:
    order = ["base", "avx2", "avx512"]
    previous = _core.testing.set_simd_cap("avx512")
    try:
        widest = _core.testing.simd()
        for cap in order:
            assert _core.testing.set_simd_cap(cap) in order
            assert _core.testing.simd() == order[min(order.index(cap), order.index(widest))]
    finally:
        _core.testing.set_simd_cap(previous)


def test_environment_sets_the_cap_at_start() -> None:
    code = "from omnivoice import _core; print(_core.testing.simd())"
    env = {**os.environ, "OMNIVOICE_SIMD": "base"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    assert out.strip() == "base"
