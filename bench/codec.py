"""Codec speed: ours (ggml) vs the PyTorch reference, measured in the same run.

Decodes random codes of --frames frames (250 = 10 s), and encodes as much audio (a mix of tones
and noise at 24 kHz), with the full-size random codec, each side on --threads threads, and prints
the median seconds of --repeats runs and the ratio ours / PyTorch (--task picks one or both).
The reference runs in its own venv (--ref-python) through bench/codec_ref.py, since upstream's
package cannot be imported beside ours.

    python -P bench/codec.py [--gguf ...] [--hf-dir ...] [--frames 250] [--threads 2]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np

from omnivoice.audio_tokenizer import AudioTokenizer

REPO = Path(__file__).resolve().parent.parent
CKPT = Path("/work/ckpt")


def run_reference(args: argparse.Namespace, task: str, extra: list[str]) -> dict:
    """Runs bench/codec_ref.py in the reference venv and returns its JSON."""
    env = dict(os.environ, PYTHONPATH=str(REPO / "tests" / "reference" / "torchaudio_stub"))
    cmd = [args.ref_python, "-P", str(REPO / "bench" / "codec_ref.py"), task, "--model-dir", str(args.hf_dir),
           "--threads", str(args.threads), "--repeats", str(args.repeats), *extra]
    out = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def bench_decode(args: argparse.Namespace, tok: AudioTokenizer) -> None:
    """Times decode of --frames random frames, ours and the reference's."""
    rng = np.random.default_rng(0)
    codes = rng.integers(0, tok.codebook_size, size=(tok.n_codebooks, args.frames), dtype=np.int32)
    audio = tok.decode(codes)  # warm-up
    times = []
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        tok.decode(codes)
        times.append(time.perf_counter() - t0)
    ours = statistics.median(times)
    seconds = args.frames / tok.frame_rate
    print(f"decode {args.frames} frames ({seconds:.0f} s audio), {args.threads} threads")
    print(f"  ours    {ours:.3f} s  (runs: {' '.join(f'{t:.3f}' for t in times)})")
    if args.no_ref:
        return
    with tempfile.TemporaryDirectory() as tmp:
        np.save(Path(tmp) / "codes.npy", codes)
        ref = run_reference(args, "decode", ["--codes", str(Path(tmp) / "codes.npy"),
                                             "--out-audio", str(Path(tmp) / "audio.npy")])
        ref_audio = np.load(Path(tmp) / "audio.npy")
    print(f"  pytorch {ref['median_s']:.3f} s  (runs: {' '.join(f'{t:.3f}' for t in ref['times_s'])})")
    print(f"  ratio ours/pytorch {ours / ref['median_s']:.2f}   max |audio diff| {np.abs(audio - ref_audio).max():.2e}")


def test_signal(n: int, sample_rate: int) -> np.ndarray:
    """A deterministic float32 test signal of n samples: two tones plus noise, RMS about 0.2."""
    t = np.arange(n) / sample_rate
    noise = np.random.default_rng(0).standard_normal(n)
    return (0.2 * np.sin(2 * np.pi * 220 * t) + 0.1 * np.sin(2 * np.pi * 1375 * t) + 0.05 * noise).astype(np.float32)


def bench_encode(args: argparse.Namespace, tok: AudioTokenizer) -> None:
    """Times encode of --frames frames of audio, ours and the reference's."""
    audio = test_signal(args.frames * tok.hop_length, tok.sample_rate)
    codes = tok.encode(audio, tok.sample_rate)  # warm-up
    times = []
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        tok.encode(audio, tok.sample_rate)
        times.append(time.perf_counter() - t0)
    ours = statistics.median(times)
    print(f"encode {audio.size / tok.sample_rate:.0f} s audio ({args.frames} frames), {args.threads} threads")
    print(f"  ours    {ours:.3f} s  (runs: {' '.join(f'{t:.3f}' for t in times)})")
    if args.no_ref:
        return
    with tempfile.TemporaryDirectory() as tmp:
        np.save(Path(tmp) / "audio.npy", audio)
        ref = run_reference(args, "encode", ["--audio", str(Path(tmp) / "audio.npy"),
                                             "--out-codes", str(Path(tmp) / "codes.npy")])
        ref_codes = np.load(Path(tmp) / "codes.npy")
    same = (codes == ref_codes).mean() if codes.shape == ref_codes.shape else float("nan")
    print(f"  pytorch {ref['median_s']:.3f} s  (runs: {' '.join(f'{t:.3f}' for t in ref['times_s'])})")
    print(f"  ratio ours/pytorch {ours / ref['median_s']:.2f}   codes identical {same:.2%}")


def main() -> None:
    """Parses arguments and runs the codec benchmarks."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gguf", type=Path, default=CKPT / "full_gguf" / "omnivoice-tokenizer-F32.gguf")
    parser.add_argument("--hf-dir", type=Path, default=CKPT / "full_hf" / "audio_tokenizer")
    parser.add_argument("--ref-python", default="/work/refvenv/bin/python")
    parser.add_argument("--frames", type=int, default=250)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--no-ref", action="store_true", help="time ours only")
    parser.add_argument("--task", choices=["decode", "encode", "both"], default="both")
    args = parser.parse_args()

    tok = AudioTokenizer.from_file(args.gguf, n_threads=args.threads)
    if args.task in ("decode", "both"):
        bench_decode(args, tok)
    if args.task in ("encode", "both"):
        bench_encode(args, tok)


if __name__ == "__main__":
    main()
