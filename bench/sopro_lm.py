"""Sopro LM decode step against the memory bound: the time of one generated token (one-token step on
the KV cache) next to the time to read the weights the step touches once at this machine's measured
memory bandwidth, on the full-size random checkpoint.

The step reads every projection of the 12 blocks, token_head and sem_in_proj (the embedding tables
only one row each) plus the K/V of the attended positions; that sum over the bandwidth is the floor
a step cannot beat. The bandwidth is measured here, in the same run: the best of --rounds passes of
numpy summing a 1 GiB float32 array split over --threads threads (numpy releases the GIL). Rounds
alternate the two measurements; the spread of each is printed.

    tests/reference/sopro/make_checkpoint.py --variant full --out /work/ckpt/sopro_full   (reference venv)
    python -P bench/sopro_lm.py [--hf-dir /work/ckpt/sopro_full] [--types F32,Q8_0] [--threads 2] [--rounds 3]
"""

from __future__ import annotations

import argparse
import statistics
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import gguf
import numpy as np

from omnivoice import _core
from omnivoice.convert.sopro import convert_sopro, output_name

# A typical prefix: 8 style queries, 40 text ids, 120 prompt tokens, BOS; then --steps tokens.
N_TEXT, N_PROMPT = 40, 120


def cpu_name() -> str:
    with open("/proc/cpuinfo", encoding="ascii", errors="replace") as f:
        return next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), "unknown CPU")


def read_bandwidth(n_threads: int, nbytes: int = 1 << 30) -> float:
    """Bytes per second of one read pass over `nbytes`, split over `n_threads` threads."""
    data = np.ones(nbytes // 4, dtype=np.float32)
    parts = np.array_split(data, n_threads)
    with ThreadPoolExecutor(n_threads) as pool:
        list(pool.map(np.sum, parts))  # touch the pages once
        t0 = time.perf_counter()
        list(pool.map(np.sum, parts))
        return nbytes / (time.perf_counter() - t0)


def step_bytes(path: Path, n_kv: int, n_layer: int, width: int) -> int:
    """Bytes a one-token step reads: its projections and head, plus K and V of n_kv positions."""
    weights = sum(int(t.n_bytes) for t in gguf.GGUFReader(path).tensors
                  if t.name.startswith(("model.ar_prior.", "model.sem_in_proj.")))
    return weights + 2 * n_layer * n_kv * width * 4


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hf-dir", type=Path, default=Path("/work/ckpt/sopro_full"))
    parser.add_argument("--gguf-dir", type=Path, default=Path("/work/ckpt/sopro_full_gguf"))
    parser.add_argument("--types", default="F32,Q8_0")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--steps", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()

    print(f"{cpu_name()}, {args.threads} threads")
    rng = np.random.default_rng(0)
    for outtype in args.types.split(","):
        path = args.gguf_dir / output_name(outtype)
        if not path.is_file():
            args.gguf_dir.mkdir(parents=True, exist_ok=True)
            convert_sopro(args.hf_dir, path, outtype)
        lm = _core.SoproLM(str(path), _core.Backend(args.threads))
        text = rng.integers(0, lm.text_vocab_size, N_TEXT)
        style = rng.integers(0, lm.semantic_vocab_size, 160)
        prompt = style[:N_PROMPT]
        tokens = rng.integers(0, lm.semantic_vocab_size, args.steps)
        s = lm.session(lm.style_prefix_tokens + N_TEXT + N_PROMPT + 1 + args.steps)
        n_kv = s.n_ctx  # one bucket: every step attends to all of it
        nbytes = step_bytes(path, n_kv, lm.n_layer, lm.hidden_size)

        def decode() -> float:
            s.prefill(text, style, prompt)
            t0 = time.perf_counter()
            for t in tokens:
                s.step([t])
            return (time.perf_counter() - t0) / len(tokens)

        steps, bandwidths = [], []
        decode()  # graphs built, weights paged in
        for _ in range(args.rounds):
            steps.append(decode())
            bandwidths.append(read_bandwidth(args.threads))
        bw = max(bandwidths)
        floor = nbytes / bw
        step = statistics.median(steps)
        print(f"{outtype:5s} step {step * 1e3:7.2f} ms (runs {' '.join(f'{t * 1e3:.2f}' for t in steps)}), "
              f"{1 / step:6.1f} tokens/s; reads {nbytes / 2**20:.1f} MiB at {bw / 1e9:.1f} GB/s "
              f"(runs {' '.join(f'{b / 1e9:.1f}' for b in bandwidths)}) = {floor * 1e3:.2f} ms; "
              f"step / floor = {step / floor:.2f}")


if __name__ == "__main__":
    main()
