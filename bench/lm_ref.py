"""PyTorch reference timings for bench/lm.py; runs in the reference venv and prints JSON.

Times one MaskGIT step of upstream's `OmniVoice.forward` on the padded [cond, uncond] batch that
`_generate_iterative` builds for one item (4-D bool attention mask, default SDPA attention), in
float32 and bfloat16, and saves the float32 logits of the two target windows.

Usage (the torchaudio stand-in from tests/reference first on PYTHONPATH):
    python lm_ref.py --model-dir DIR --inputs in.npz --threads 2 --repeats 3 --warmup 1 --out-logits out.npy
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import numpy as np
import torch
from omnivoice.models.omnivoice import OmniVoice

sys.path.insert(0, str(Path(__file__).resolve().parent))
from timing import time_calls  # noqa: E402


def padded_batch(ids: np.ndarray, mask: np.ndarray, t_len: int) -> tuple[torch.Tensor, ...]:
    """Upstream's batch for one item: cond row, then the uncond row padded to the cond length."""
    n_cb, s_len = ids.shape
    input_ids = torch.full((2, n_cb, s_len), 1024, dtype=torch.long)
    audio_mask = torch.zeros((2, s_len), dtype=torch.bool)
    attention = torch.zeros((2, 1, s_len, s_len), dtype=torch.bool)
    input_ids[0] = torch.from_numpy(ids.astype(np.int64))
    audio_mask[0] = torch.from_numpy(mask)
    attention[0] = True
    input_ids[1, :, :t_len] = input_ids[0, :, -t_len:]
    audio_mask[1, :t_len] = audio_mask[0, -t_len:]
    attention[1, :, :t_len, :t_len] = True
    pad = torch.arange(t_len, s_len)
    attention[1, :, pad, pad] = True
    return input_ids, audio_mask, attention


def time_forward(
    model: OmniVoice, batch: tuple[torch.Tensor, ...], repeats: int, warmup: int
) -> tuple[list[float], torch.Tensor]:
    """Wall times of `repeats` forwards after `warmup` untimed ones, and the logits."""
    input_ids, audio_mask, attention = batch
    with torch.inference_mode():
        times, logits = time_calls(
            lambda: model(input_ids=input_ids, audio_mask=audio_mask, attention_mask=attention).logits,
            repeats, warmup)
    return times, logits.float()


def main() -> None:
    """Times the reference LM step in float32 and bfloat16 and prints JSON."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model-dir", required=True, help="Hugging Face OmniVoice directory")
    parser.add_argument("--inputs", required=True, help=".npz with ids [8, S] (int), mask [S] (bool), t_len")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=1, help="untimed runs first")
    parser.add_argument("--dtypes", default="float32,bfloat16")
    parser.add_argument("--out-logits", help="write the float32 target-window logits here (.npy, [2T, 8, V])")
    args = parser.parse_args()

    torch.set_num_threads(args.threads)
    with np.load(args.inputs) as f:
        ids, mask, t_len = f["ids"], f["mask"], int(f["t_len"])
    batch = padded_batch(ids, mask, t_len)
    s_len = ids.shape[1]
    model = OmniVoice.from_pretrained(args.model_dir, train=True).eval()
    result = {"shape": [2, ids.shape[0], s_len]}
    for name in args.dtypes.split(","):
        model = model.to(getattr(torch, name))
        times, logits = time_forward(model, batch, args.repeats, args.warmup)
        result[name] = {"times_s": times, "median_s": statistics.median(times)}
        if name == "float32" and args.out_logits:
            cond = logits[0, :, s_len - t_len :]
            uncond = logits[1, :, :t_len]
            np.save(args.out_logits, torch.cat([cond, uncond], dim=1).transpose(0, 1).numpy())
    print(json.dumps(result))


if __name__ == "__main__":
    main()
