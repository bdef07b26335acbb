"""Soak: many generations on one model, mixing every mode, streaming and refused inputs, watching
memory; then the same requests from 4 threads at once, which must equal the sequential results.

Prints the process RSS after the 10th and the last call (target: under 30 MB of growth between
them) and whether the concurrent results are bit-identical to the sequential ones. Short requests
(--steps, --duration) keep a full-size run to minutes.

    python -P bench/soak.py [--model /work/ckpt/full_gguf/omnivoice-base-BF16.gguf] [--calls 200]
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

from omnivoice import OmniVoice

sys.path.insert(0, str(Path(__file__).resolve().parent))
from timing import resident_kb  # noqa: E402

CKPT = Path("/work/ckpt")


def rss_mb() -> float:
    """Resident set size of this process in MB."""
    return resident_kb() / 1024


def requests(model: OmniVoice, steps: int, duration: float) -> list[tuple[str, Callable[[int], Any]]]:
    """(name, call(seed)) of each kind of request; the error kinds must raise ValueError/TypeError."""
    sr = model.sampling_rate
    t = np.arange(int(1.5 * sr)) / sr
    ref = (0.2 * np.sin(2 * np.pi * 180 * t) * (1 + np.sin(2 * np.pi * 3 * t))).astype(np.float32)
    voice = model.create_voice_clone_prompt((ref, sr), "A short reference.")
    fast = dict(num_step=steps, duration=duration)

    def stream(seed: int) -> np.ndarray:
        # Chunked: the threshold below the text's length makes two pieces.
        chunks = model.generate_stream("First sentence here. And a second one.", seed=seed, num_step=steps,
                                       audio_chunk_threshold=0.5, audio_chunk_duration=1.0)
        return np.concatenate([c.audio for c in chunks])

    return [
        ("auto", lambda s: model.generate("Hello there.", seed=s, **fast)[0]),
        ("design", lambda s: model.generate("Hello there.", instruct="female, low pitch", seed=s, **fast)[0]),
        ("clone", lambda s: model.generate("Hello there.", ref_audio=(ref, sr), ref_text="A short reference.",
                                           seed=s, **fast)[0]),
        ("voice", lambda s: model.generate("Hello there.", voice_clone_prompt=voice, seed=s, **fast)[0]),
        ("batch", lambda s: np.concatenate(model.generate(["One.", "Two."], language=["en", "de"], seed=s,
                                                          **fast))),
        ("stream", stream),
        ("error", lambda s: model.generate("Hi.", speed="fast")),
        ("error", lambda s: model.generate(None)),
        ("error", lambda s: model.generate("Hi.", ref_audio=(ref, 22050.5), ref_text="x")),
    ]


def main() -> None:
    """Parses arguments, runs the soak and prints the figures."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=str(CKPT / "full_gguf" / "omnivoice-base-BF16.gguf"))
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--duration", type=float, default=1.0)
    parser.add_argument("--threads", type=int, help="CPU threads (default: load-aware)")
    args = parser.parse_args()

    t0 = time.monotonic()
    model = OmniVoice.from_pretrained(args.model, n_threads=args.threads)
    kinds = requests(model, args.steps, args.duration)
    results: dict[int, np.ndarray] = {}
    rss_10 = errors = 0
    for i in range(args.calls):
        name, call = kinds[i % len(kinds)]
        try:
            out = call(i)
        except (ValueError, TypeError):
            if name != "error":
                raise
            errors += 1
        else:
            if name == "error":
                raise AssertionError(f"call {i}: a bad request was accepted")
            if not np.all(np.isfinite(out)) or not np.abs(out).max() > 0:
                raise AssertionError(f"call {i} ({name}): silent or non-finite audio")
            results[i] = out
        if i + 1 == 10:
            rss_10 = rss_mb()
        if (i + 1) % 10 == 0:  # progress, for runs cut short
            print(f"call {i + 1}: RSS {rss_mb():.0f} MB, {time.monotonic() - t0:.0f} s", flush=True)
    rss_end = rss_mb()
    seq_s = time.monotonic() - t0
    print(f"{args.calls} sequential calls ({len(results)} generations, {errors} refused) in {seq_s:.0f} s; "
          f"RSS after call 10: {rss_10:.0f} MB, after call {args.calls}: {rss_end:.0f} MB "
          f"(growth {rss_end - rss_10:+.1f} MB)")

    # The first generations again, 4 threads at once on the same model.
    todo = [i for i in sorted(results) if kinds[i % len(kinds)][0] != "error"][:16]
    got: dict[int, np.ndarray] = {}

    def worker(part: list[int]) -> None:
        for i in part:
            got[i] = kinds[i % len(kinds)][1](i)

    threads = [threading.Thread(target=worker, args=(todo[k::4],)) for k in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    same = sum(np.array_equal(got[i], results[i]) for i in todo)
    print(f"4 threads, {len(todo)} calls: {same}/{len(todo)} bit-identical to the sequential results")
    if same != len(todo):
        raise SystemExit(1)


if __name__ == "__main__":
    main()
