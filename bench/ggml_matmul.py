"""ggml's own matmul rate on the CPU, as a yardstick for the model benchmarks.

Calls libggml (the libggml-python install our package links) through ctypes: a weight
[k, m] of the given type times F32 activations [k, n], on a plain CPU graph.
"""

from __future__ import annotations

import ctypes
import os
import time

import libggml

# ggml_type values (ggml.h).
GGML_TYPES = {"F32": 0, "F16": 1, "Q8_0": 8, "BF16": 30, "Q4_K_M": 12}  # Q4_K_M: its main type, Q4_K


class _InitParams(ctypes.Structure):
    _fields_ = [("mem_size", ctypes.c_size_t), ("mem_buffer", ctypes.c_void_p), ("no_alloc", ctypes.c_bool)]


def _libs() -> tuple[ctypes.CDLL, ctypes.CDLL]:
    root = os.path.dirname(libggml.__file__)
    dirs = [os.path.join(root, d) for d in ("lib64", "lib")]
    libdir = next(d for d in dirs if os.path.exists(os.path.join(d, "libggml.so.0")))
    base = ctypes.CDLL(os.path.join(libdir, "libggml-base.so.0"))
    cpu = ctypes.CDLL(os.path.join(libdir, "libggml-cpu.so.0"))
    p = ctypes.c_void_p
    for name, res, args in [
        ("ggml_init", p, [_InitParams]),
        ("ggml_new_tensor_2d", p, [p, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]),
        ("ggml_mul_mat", p, [p, p, p]),
        ("ggml_new_graph", p, [p]),
        ("ggml_build_forward_expand", None, [p, p]),
        ("ggml_nbytes", ctypes.c_size_t, [p]),
        ("ggml_get_data", p, [p]),
        ("ggml_free", None, [p]),
    ]:
        fn = getattr(base, name)
        fn.restype, fn.argtypes = res, args
    cpu.ggml_graph_compute_with_ctx.restype = ctypes.c_int
    cpu.ggml_graph_compute_with_ctx.argtypes = [p, p, ctypes.c_int]
    return base, cpu


def matmul_gflops(wtype: str, k: int, m: int, n: int, n_threads: int, repeats: int = 5) -> float:
    """Best GFLOP/s of `repeats` runs of weight [k, m] (type `wtype`) x F32 [k, n]."""
    base, cpu = _libs()
    weight_bytes = k * m * 4 + k * n * 4 + m * n * 4
    ctx = base.ggml_init(_InitParams(weight_bytes + (64 << 20), None, False))
    if not ctx:
        raise MemoryError("ggml_init failed")
    try:
        a = base.ggml_new_tensor_2d(ctx, GGML_TYPES[wtype], k, m)
        b = base.ggml_new_tensor_2d(ctx, GGML_TYPES["F32"], k, n)
        # Zeros are valid in every type and cost the same as any other values.
        for t in (a, b):
            ctypes.memset(base.ggml_get_data(t), 0, base.ggml_nbytes(t))
        graph = base.ggml_new_graph(ctx)
        base.ggml_build_forward_expand(graph, base.ggml_mul_mat(ctx, a, b))
        cpu.ggml_graph_compute_with_ctx(ctx, graph, n_threads)  # warm-up
        best = float("inf")
        for _ in range(repeats):
            t0 = time.perf_counter()
            cpu.ggml_graph_compute_with_ctx(ctx, graph, n_threads)
            best = min(best, time.perf_counter() - t0)
    finally:
        base.ggml_free(ctx)
    return 2.0 * k * m * n / best / 1e9
