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
import statistics
import sys
import tempfile
from pathlib import Path

import numpy as np

from omnivoice.models.omnivoice.audio_tokenizer import AudioTokenizer

sys.path.insert(0, str(Path(__file__).resolve().parent))
from timing import run_reference, runs_text, time_calls  # noqa: E402

CKPT = Path("/work/ckpt")


def reference(args: argparse.Namespace, task: str, extra: list[str]) -> dict:
    """Runs bench/codec_ref.py in the reference venv and returns its JSON."""
    return run_reference(args.ref_python, "codec_ref.py", [task, "--model-dir", str(args.hf_dir), "--threads",
                                                           str(args.threads), "--repeats", str(args.repeats), *extra])


def report(label: str, times: list[float], ref: dict | None, agreement: str) -> None:
    """Prints our runs and, with a reference, its runs, the ratio and how close the outputs are."""
    print(label)
    print(f"  ours    {runs_text(times)}")
    if ref is not None:
        print(f"  pytorch {runs_text(ref['times_s'])}")
        print(f"  ratio ours/pytorch {statistics.median(times) / ref['median_s']:.2f}   {agreement}")


def bench_decode(args: argparse.Namespace, tok: AudioTokenizer) -> None:
    """Times decode of --frames random frames, ours and the reference's."""
    rng = np.random.default_rng(0)
    codes = rng.integers(0, tok.codebook_size, size=(tok.n_codebooks, args.frames), dtype=np.int32)
    times, audio = time_calls(lambda: tok.decode(codes), args.repeats)
    label = f"decode {args.frames} frames ({args.frames / tok.frame_rate:.0f} s audio), {args.threads} threads"
    if args.no_ref:
        return report(label, times, None, "")
    with tempfile.TemporaryDirectory() as tmp:
        np.save(Path(tmp) / "codes.npy", codes)
        ref = reference(args, "decode", ["--codes", str(Path(tmp) / "codes.npy"),
                                         "--out-audio", str(Path(tmp) / "audio.npy")])
        ref_audio = np.load(Path(tmp) / "audio.npy")
    report(label, times, ref, f"max |audio diff| {np.abs(audio - ref_audio).max():.2e}")


def test_signal(n: int, sample_rate: int) -> np.ndarray:
    """A deterministic float32 test signal of n samples: two tones plus noise, RMS about 0.2."""
    t = np.arange(n) / sample_rate
    noise = np.random.default_rng(0).standard_normal(n)
    return (0.2 * np.sin(2 * np.pi * 220 * t) + 0.1 * np.sin(2 * np.pi * 1375 * t) + 0.05 * noise).astype(np.float32)


def bench_encode(args: argparse.Namespace, tok: AudioTokenizer) -> None:
    """Times encode of --frames frames of audio, ours and the reference's."""
    rate = args.rate or tok.sample_rate
    audio = test_signal(args.frames * tok.hop_length * rate // tok.sample_rate, rate)
    times, codes = time_calls(lambda: tok.encode(audio, rate), args.repeats)
    label = f"encode {audio.size / rate:.0f} s audio at {rate} Hz ({args.frames} frames), {args.threads} threads"
    if args.no_ref:
        return report(label, times, None, "")
    with tempfile.TemporaryDirectory() as tmp:
        np.save(Path(tmp) / "audio.npy", audio)
        ref = reference(args, "encode", ["--audio", str(Path(tmp) / "audio.npy"), "--rate", str(rate),
                                         "--out-codes", str(Path(tmp) / "codes.npy")])
        ref_codes = np.load(Path(tmp) / "codes.npy")
    same = (codes == ref_codes).mean() if codes.shape == ref_codes.shape else float("nan")
    report(label, times, ref, f"codes identical {same:.2%}")


def main() -> None:
    """Parses arguments and runs the codec benchmarks."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gguf", type=Path, default=CKPT / "full_gguf" / "omnivoice-tokenizer-F32.gguf")
    parser.add_argument("--hf-dir", type=Path, default=CKPT / "full_hf" / "audio_tokenizer")
    parser.add_argument("--ref-python", default="/work/refvenv/bin/python")
    parser.add_argument("--frames", type=int, default=250)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--rate", type=int, help="encode: input sample rate (default 24000; others are "
                        "resampled, on the reference side by torchaudio as upstream's voice cloning does)")
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
