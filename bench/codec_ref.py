"""PyTorch reference timings for bench/codec.py; runs in the reference venv and prints JSON.

Usage (the torchaudio stand-in from tests/reference first on PYTHONPATH):
    python codec_ref.py decode --model-dir DIR --codes codes.npy --threads 2 --repeats 5 --out-audio a.npy
    python codec_ref.py encode --model-dir DIR --audio audio.npy --threads 2 --repeats 5 --out-codes c.npy
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import numpy as np
import torch
import torchaudio
from transformers import HiggsAudioV2TokenizerModel

sys.path.insert(0, str(Path(__file__).resolve().parent))
from timing import time_calls  # noqa: E402


def main() -> None:
    """Times HiggsAudioV2TokenizerModel.decode (or .encode) on the given input and prints JSON."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("task", choices=["decode", "encode"])
    parser.add_argument("--model-dir", required=True, help="Hugging Face audio_tokenizer directory")
    parser.add_argument("--codes", help="decode: .npy int array [n_codebooks, T]")
    parser.add_argument("--audio", help="encode: .npy float32 array [n] at --rate")
    parser.add_argument("--rate", type=int, default=24000, help="encode: rate of --audio, resampled to 24 kHz "
                        "first (outside the timing) with torchaudio's resample, as upstream's voice cloning")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out-audio", help="write the decoded audio here (.npy)")
    parser.add_argument("--out-codes", help="write the encoded codes here (.npy)")
    args = parser.parse_args()

    torch.set_num_threads(args.threads)
    model = HiggsAudioV2TokenizerModel.from_pretrained(args.model_dir).eval()
    if args.task == "decode":
        inputs = torch.from_numpy(np.load(args.codes).astype(np.int64))[None]
        run = model.decode
    else:
        inputs = torch.from_numpy(np.load(args.audio).astype(np.float32))[None]
        if args.rate != model.config.sample_rate:
            inputs = torchaudio.functional.resample(inputs, args.rate, model.config.sample_rate)
        inputs = inputs[None]
        run = model.encode
    with torch.inference_mode():
        times, out = time_calls(lambda: run(inputs, return_dict=False), args.repeats)
    if args.out_audio and args.task == "decode":
        np.save(args.out_audio, out.reshape(-1).numpy().astype(np.float32))
    if args.out_codes and args.task == "encode":
        np.save(args.out_codes, out[0].numpy().astype(np.int32))
    print(json.dumps({"task": args.task, "times_s": times, "median_s": statistics.median(times)}))


if __name__ == "__main__":
    main()
