"""Our packed linear op (ov_linear) against ggml's own mul_mat on the same stored weights.

The LM's projection shapes (full-size model, the auto-voice step's 550 packed tokens; the heads
see the 500 target tokens), per weight type, in rounds that alternate the two ops so both see the
same load on a shared machine. Prints the median GFLOP/s of each and the range over rounds, and
the ratio ours / ggml per round (median and range), and ours against the CPU's peak on the same
threads (register-only chains, `_core.testing.fma_peak_gflops`) measured in each round: the
machine's load moves both alike. The peak is that of F32 FMAs on the CPU's widest vectors, or for
BF16 on our vdpbf16ps build (AVX512-BF16 CPUs) that of vdpbf16ps. Prints the CPU's flags and the
kernel each type runs on. Random weights: speed does not depend on values.

    python -P bench/linear.py [--types F32,BF16,Q8_0] [--rounds 5] [--threads 2] [--simd avx2] [--no-bf16-dot]
"""

from __future__ import annotations

import argparse
import statistics

import numpy as np

from omnivoice import _core

# name: (IN, OUT, tokens)
SHAPES = {
    "qkv": (1024, 4096, 550),
    "o": (2048, 1024, 550),
    "gate_up": (1024, 6144, 550),
    "down": (3072, 1024, 550),
    "heads": (1024, 8200, 500),
}


def main() -> None:
    """Parses arguments and runs the comparison."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--types", default="F32,BF16,Q8_0")
    parser.add_argument("--shapes", default=",".join(SHAPES))
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--simd", default=None, help="cap our kernels' build: base, avx2 or avx512")
    parser.add_argument("--no-bf16-dot", action="store_true", help="BF16 unpacked to F32 even on AVX512-BF16")
    args = parser.parse_args()
    if args.simd:
        _core.testing.set_simd_cap(args.simd)
    if args.no_bf16_dot:
        _core.testing.set_bf16_dot(False)
    print(f"CPU flags: {' '.join(_core.testing.cpu_flags())}")
    print(f"our build: {_core.testing.simd()}, {args.threads} threads, {args.rounds} alternated rounds (1 compute each)")
    for wtype in args.types.split(","):
        bf16 = wtype == "BF16" and _core.testing.bf16_dot()
        print(f"  {wtype}: ours {'ov_linear avx512bf16' if bf16 else 'ov_linear ' + _core.testing.simd()}, "
              f"in models {_core.testing.linear_kernel(wtype)}; peak of {'vdpbf16ps' if bf16 else 'F32 FMAs'}")
    rng = np.random.default_rng(0)
    for name in args.shapes.split(","):
        n_in, n_out, n_tok = SHAPES[name]
        x = rng.standard_normal((n_tok, n_in), dtype=np.float32)
        w = rng.standard_normal((n_out, n_in), dtype=np.float32) / np.sqrt(n_in)
        flops = 2.0 * n_in * n_out * n_tok
        for wtype in args.types.split(","):
            rates: dict[bool, list[float]] = {False: [], True: []}
            peaks = []
            bf16 = wtype == "BF16" and _core.testing.bf16_dot()
            for _ in range(args.rounds):
                peaks.append(_core.testing.fma_peak_gflops(args.threads, bf16=bf16))
                for mul_mat in (False, True):
                    (sec,) = _core.testing.linear_seconds(x, [w], [wtype], args.threads, mul_mat, 1)
                    rates[mul_mat].append(flops / sec / 1e9)
            ratios = [a / b for a, b in zip(rates[False], rates[True])]
            of_peak = [100 * a / b for a, b in zip(rates[False], peaks)]
            cells = [f"{statistics.median(r):6.1f} ({min(r):.0f}-{max(r):.0f})" for r in (rates[False], rates[True], peaks)]
            print(f"{name:8s} {n_in:5d}x{n_out:<5d} N={n_tok} {wtype:5s} ours {cells[0]}  ggml {cells[1]} GFLOP/s"
                  f"  ours/ggml {statistics.median(ratios):.2f} ({min(ratios):.2f}-{max(ratios):.2f})"
                  f"  peak {cells[2]}, ours {statistics.median(of_peak):.0f}% ({min(of_peak):.0f}-{max(of_peak):.0f}%)")


if __name__ == "__main__":
    main()
