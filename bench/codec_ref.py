"""PyTorch reference timings for bench/codec.py; runs in the reference venv and prints JSON.

Usage (the torchaudio stand-in from tests/reference first on PYTHONPATH):
    python codec_ref.py decode --model-dir DIR --codes codes.npy --threads 2 --repeats 5 --out-audio a.npy
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np
import torch
from transformers import HiggsAudioV2TokenizerModel


def main() -> None:
    """Times HiggsAudioV2TokenizerModel.decode on the given codes and prints JSON."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("task", choices=["decode"])
    parser.add_argument("--model-dir", required=True, help="Hugging Face audio_tokenizer directory")
    parser.add_argument("--codes", required=True, help=".npy int array [n_codebooks, T]")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out-audio", help="write the decoded audio here (.npy)")
    args = parser.parse_args()

    torch.set_num_threads(args.threads)
    model = HiggsAudioV2TokenizerModel.from_pretrained(args.model_dir).eval()
    codes = torch.from_numpy(np.load(args.codes).astype(np.int64))[None]
    times = []
    with torch.inference_mode():
        audio = model.decode(codes, return_dict=False)  # warm-up
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            model.decode(codes, return_dict=False)
            times.append(time.perf_counter() - t0)
    if args.out_audio:
        np.save(args.out_audio, audio.reshape(-1).numpy().astype(np.float32))
    print(json.dumps({"task": args.task, "times_s": times, "median_s": statistics.median(times)}))


if __name__ == "__main__":
    main()
