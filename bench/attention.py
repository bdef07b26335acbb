"""Our attention op (ov_attention) against ggml's flash_attn_ext per segment on the same inputs.

The LM's attention of one MaskGIT step per layer (Qwen3-0.6B: 16 query heads, 8 KV heads, head
dim 128; q, k and v viewed in one stacked q|k|v row per token as the LM lays them out), at the
auto-voice packing (segments 300 + 250) and the cloning packing (1900 + 350), in rounds that
alternate the two ops so both see the same load on a shared machine. Prints the median GFLOP/s
(2 x QK^T + 2 x PV multiply-adds) and range over rounds, the ratio ours / flash per round, and
the seconds of a step's 28 layers. Random inputs: speed does not depend on values.

    [OMNIVOICE_SIMD=base|avx2] python -P bench/attention.py [--shapes auto,clone] [--threads 2] [--rounds 5]
"""

from __future__ import annotations

import argparse
import statistics

import numpy as np

from omnivoice import _core

SHAPES = {"auto": [300, 250], "clone": [1900, 350]}
N_HEAD, N_HEAD_KV, HEAD_DIM, N_LAYER = 16, 8, 128, 28


def main() -> None:
    """Parses arguments and runs the comparison."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shapes", default=",".join(SHAPES), help="comma-separated: auto, clone")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=5, help="alternated rounds of one compute per op")
    args = parser.parse_args()
    print(f"ov_attention's {_core.testing.simd()} build (OMNIVOICE_SIMD caps it) against flash_attn_ext, "
          f"{args.threads} threads, {args.rounds} rounds")
    rng = np.random.default_rng(0)
    for name in args.shapes.split(","):
        segments = SHAPES[name]
        n = sum(segments)
        q = rng.standard_normal((n, N_HEAD, HEAD_DIM), dtype=np.float32)
        k = rng.standard_normal((n, N_HEAD_KV, HEAD_DIM), dtype=np.float32)
        v = rng.standard_normal((n, N_HEAD_KV, HEAD_DIM), dtype=np.float32)
        flops = sum(4.0 * s * s * HEAD_DIM * N_HEAD for s in segments)
        seconds: dict[str, list[float]] = {"own": [], "flash": []}
        for _ in range(args.rounds):
            for impl in seconds:
                seconds[impl] += _core.testing.attention_seconds(q, k, v, segments, HEAD_DIM**-0.5, impl, args.threads, 1)
        ratios = [a / b for a, b in zip(seconds["own"], seconds["flash"])]
        print(f"{name} (segments {' + '.join(map(str, segments))}, {flops / 1e9:.1f} GFLOP per layer):")
        for impl, secs in seconds.items():
            rates = [flops / s / 1e9 for s in secs]
            print(f"  {impl:5s} {statistics.median(rates):6.1f} GFLOP/s ({min(rates):.0f}-{max(rates):.0f}), "
                  f"{N_LAYER} layers {N_LAYER * statistics.median(secs):.3f} s")
        print(f"  time ours / flash_attn_ext {statistics.median(ratios):.2f} ({min(ratios):.2f}-{max(ratios):.2f})")


if __name__ == "__main__":
    main()
