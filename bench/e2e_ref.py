"""PyTorch reference side of bench/e2e.py; runs in the reference venv and prints JSON.

Loads upstream's ``OmniVoice`` with its LM in ``--dtype`` (the codec stays float32, as
``from_pretrained`` loads it), warms up with a short generation, then times one
``generate()`` call (duration estimation, MaskGIT steps, decode and post-processing) and the
period of each LM step inside it.

Usage (the torchaudio stand-in from tests/reference first on PYTHONPATH):
    python e2e_ref.py --model-dir DIR --dtype bfloat16 --text "..." --duration 10 --steps 32 \
        [--ref-audio ref.npy --ref-text "..."] --threads 2
"""

from __future__ import annotations

import argparse
import json
import resource
import time

import numpy as np
import torch
from omnivoice.models.omnivoice import OmniVoice


def main() -> None:
    """Times one upstream generate() and prints JSON."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model-dir", required=True)
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    parser.add_argument("--text", required=True)
    parser.add_argument("--duration", type=float, required=True)
    parser.add_argument("--steps", type=int, default=32)
    parser.add_argument("--warmup-steps", type=int, default=2)
    parser.add_argument("--ref-audio", help=".npy float32 [n] at 24 kHz (cloning)")
    parser.add_argument("--ref-text")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    t0 = time.perf_counter()
    model = OmniVoice.from_pretrained(args.model_dir, dtype=getattr(torch, args.dtype))
    load_s = time.perf_counter() - t0
    ref = {}
    if args.ref_audio:
        ref = {"ref_audio": (torch.from_numpy(np.load(args.ref_audio))[None], 24000), "ref_text": args.ref_text}

    starts: list[float] = []
    model.register_forward_pre_hook(lambda *_: starts.append(time.perf_counter()))

    def run(steps: int) -> tuple[float, int]:
        t = time.perf_counter()
        audio = model.generate(args.text, language="English", duration=args.duration, num_step=steps, **ref)[0]
        return time.perf_counter() - t, int(audio.size)

    run(args.warmup_steps)  # pages the weights in
    starts.clear()
    wall, n_samples = run(args.steps)
    periods = np.diff(starts).tolist()
    print(json.dumps({
        "side": f"pytorch {args.dtype}", "load_s": load_s, "wall_s": wall, "samples": n_samples,
        "step_periods_s": periods, "steps": len(starts),
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }))


if __name__ == "__main__":
    main()
