"""Peak memory of long-form ``generate()`` against the length of its text.

Each length runs in a fresh process: the model is loaded, its resident size noted, then one
``generate()`` of that many characters; the process's peak RSS (``ru_maxrss``) is printed next to
the output's own size (float32 at 24 kHz). The tiny test checkpoint shows the scaling in seconds:
memory does not depend on the weights, only on the length of the audio.

Tiny model, 2 steps, shared 2-core machine (peak RSS above the loaded model, / output size):
10k characters (622 s, 57 MB of output): 535 MB (9.39x) when chunks were kept and joined at the
end, 100 MB (1.76x) with postprocess.ChunkJoiner; 30k (1864 s, 171 MB): 1569 MB (9.19x), 211 MB
(1.24x); 100k (6215 s, 569 MB): 4.9 GB (last session's figure), 638 MB (1.12x).

    python -P bench/longform.py [--model DIR] [--chars 10000,30000,100000] [--steps 2] [--save DIR]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

SENTENCES = [
    "The river ran quietly past the old mill, where nobody had worked for years.",
    "Every morning she walked the same path, counting the stones along the wall.",
    "What would you do if the lights went out tonight?",
    "He laughed, and the sound carried all the way across the empty square!",
    "Numbers like 42 and 1,024 are read out the way a person would say them.",
    "Later that week, a letter arrived with no name and no return address.",
]


def book(chars: int) -> str:
    """A text of about ``chars`` characters: sentences in a fixed order, a paragraph break every 10."""
    parts: list[str] = []
    total = i = 0
    while total < chars:
        s = SENTENCES[i % len(SENTENCES)] + ("\n" if i % 10 == 9 else " ")
        parts.append(s)
        total += len(s)
        i += 1
    return "".join(parts)[:chars].strip()


def child(model_dir: str, chars: int, steps: int, save: str) -> None:
    """One measurement in this process; prints a JSON line."""
    from omnivoice import OmniVoice

    model = OmniVoice.from_pretrained(model_dir, n_threads=1)
    model.generate("Warm up.", num_step=steps, seed=0)
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    t0 = time.monotonic()
    audio = model.generate(book(chars), language="en", num_step=steps, seed=1)[0]
    seconds = time.monotonic() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    if save:
        np.save(Path(save) / f"auto_{chars}.npy", audio)
    print(json.dumps({"chars": chars, "audio_s": audio.size / model.sampling_rate, "out_mb": audio.nbytes / 2**20,
                      "base_mb": base, "peak_mb": peak, "seconds": seconds}))


def main() -> None:
    """Runs each length in a child process and prints the table."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", help="GGUF directory (default: the tiny test checkpoint, converted)")
    parser.add_argument("--chars", default="10000,30000,100000")
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--save", default="", help="directory to save each output as .npy")
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        child(args.model, args.child, args.steps, args.save)
        return

    with tempfile.TemporaryDirectory() as tmp:
        model = args.model
        if model is None:
            from omnivoice.convert import convert_model

            model = tmp
            convert_model(Path(__file__).resolve().parent.parent / "tests" / "data" / "tiny_hf", tmp)
        print("chars | audio | output | RSS before | peak RSS | peak - before | / output | seconds")
        for chars in (int(c) for c in args.chars.split(",")):
            cmd = [sys.executable, "-P", __file__, "--model", model, "--child", str(chars),
                   "--steps", str(args.steps), "--save", args.save]
            r = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.splitlines()[-1])
            grown = r["peak_mb"] - r["base_mb"]
            print(f"{chars} | {r['audio_s']:.0f} s | {r['out_mb']:.0f} MB | {r['base_mb']:.0f} MB | "
                  f"{r['peak_mb']:.0f} MB | {grown:.0f} MB | {grown / r['out_mb']:.2f} | {r['seconds']:.0f}")


if __name__ == "__main__":
    main()
