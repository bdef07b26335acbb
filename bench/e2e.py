"""End-to-end speed: ``generate()`` wall time, ours (ggml) against the PyTorch reference.

Each run is a fresh process that loads one side, warms up with a short generation (pages the
weights in), then times one ``generate()`` of the same ~10 s utterance (``duration`` fixed, so
both sides decode the same number of frames) at the same number of MaskGIT steps: duration
estimation, prompt, every LM step, codec decode and post-processing included; with
``--shapes clone`` also the encoding of a 10 s reference. Sides: PyTorch upstream with its LM in
float32 and bfloat16 (bench/e2e_ref.py in the reference venv) and ours with F32, BF16 and Q8_0
LM weights. Runs alternate between the sides, in reversed order every other repeat, so drifting
load on a shared machine hits all of them alike.

Printed per shape and side: median wall time and every run, the spread ((max - min) / median),
the ratios ours / PyTorch (medians, and the range of the per-repeat ratios), our per-step time
inside ``generate()`` (period between the starts of successive LM calls: the LM call plus
scoring and sampling) next to a bare call of the same LM method at the same shape, and peak RSS
of each process (ours also against the size of its GGUFs).

    python -P bench/e2e.py [--steps 32] [--repeats 3] [--shapes auto,clone] [--types F32,BF16,Q8_0]
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))
from timing import run_reference, time_calls  # noqa: E402

CKPT = Path("/work/ckpt")
TEXT = ("Speech synthesis turns written words into sound. This sentence is long enough to fill "
        "about ten seconds of audio when it is read aloud at an easy pace.")
REF_TEXT = "This is the reference recording that the new voice is cloned from, read at an even pace."
DURATION = 10.0  # seconds of output: 250 frames
REF_SECONDS = 10.0
SAMPLE_RATE = 24000


def reference_audio(path: Path) -> None:
    """A deterministic voice-like 10 s signal (a gliding harmonic tone in syllable-sized bursts,
    plus a little noise, RMS 0.1): no silences for either side's trimming to remove."""
    t = np.arange(int(REF_SECONDS * SAMPLE_RATE)) / SAMPLE_RATE
    f0 = 140 + 30 * np.sin(2 * np.pi * 0.7 * t)
    phase = 2 * np.pi * np.cumsum(f0) / SAMPLE_RATE
    voice = sum(np.sin(h * phase) / h for h in range(1, 6))
    envelope = 0.6 + 0.4 * np.sin(2 * np.pi * 4 * t) ** 2
    wave = voice * envelope + 0.05 * np.random.default_rng(0).standard_normal(t.size)
    np.save(path, (wave * 0.1 / np.sqrt(np.mean(wave**2))).astype(np.float32))


class _TimedSession:
    """Wraps an LM session: records the start and duration of every method call."""

    def __init__(self, session, calls: list) -> None:
        self._session, self._calls = session, calls

    def __getattr__(self, name: str):
        attr = getattr(self._session, name)
        if not callable(attr):
            return attr

        def timed(*args, **kwargs):
            t = time.perf_counter()
            out = attr(*args, **kwargs)
            self._calls.append((name, t, time.perf_counter() - t, args, kwargs))
            return out
        return timed


class _TimedLM:
    """Stands in for the model's LM so that its sessions are timed; with `logits`, sessions
    without in-graph scoring."""

    def __init__(self, lm, calls: list, logits: bool) -> None:
        self._lm, self._calls, self._logits = lm, calls, logits

    def __getattr__(self, name: str):
        return getattr(self._lm, name)

    def session(self, segments, **kwargs):
        if self._logits:
            kwargs.pop("guidance_scale", None)
        self.last = self._lm.session(segments, **kwargs)
        return _TimedSession(self.last, self._calls)


def worker(args: argparse.Namespace) -> None:
    """One run of our side (in a process of its own): prints JSON."""
    from omnivoice import OmniVoice

    t0 = time.perf_counter()
    model = OmniVoice.from_pretrained(str(args.gguf_dir / f"omnivoice-base-{args.worker}.gguf"),
                                      codec=str(args.gguf_dir / "omnivoice-tokenizer-F32.gguf"),
                                      n_threads=args.threads)
    load_s = time.perf_counter() - t0
    calls: list = []
    owner = getattr(model, "pipeline", model)  # whichever object opens the LM sessions
    owner.lm = _TimedLM(owner.lm, calls, args.logits)
    if args.logits:  # MaskGIT scores cells in numpy from the logits, as before the in-graph scoring
        import omnivoice.models.omnivoice.pipeline as pipeline

        full = pipeline.maskgit_generate
        pipeline.maskgit_generate = lambda *args, score=None, **kwargs: full(*args, **kwargs)
    ref = {}
    if args.ref_audio:
        ref = {"ref_audio": (np.load(args.ref_audio), SAMPLE_RATE), "ref_text": REF_TEXT}

    def run(steps: int) -> tuple[float, int]:
        t = time.perf_counter()
        audio = model.generate(TEXT, language="English", duration=DURATION, num_step=steps, seed=0, **ref)[0]
        return time.perf_counter() - t, int(audio.size)

    run(args.warmup_steps)
    calls.clear()
    wall, n_samples = run(args.steps)
    starts = [c[1] for c in calls]
    # The same LM method with the last step's inputs, called bare.
    name, _, _, call_args, call_kwargs = calls[-1]
    bare, _ = time_calls(lambda: getattr(owner.lm.last, name)(*call_args, **call_kwargs), args.bare_repeats)
    print(json.dumps({
        "side": f"ours {args.worker}" + (" logits" if args.logits else ""), "backend": model.backend.name, "load_s": load_s, "wall_s": wall,
        "rtf": wall / DURATION, "samples": n_samples,
        "step_periods_s": np.diff(starts).tolist(), "steps": len(starts),
        "call_s": [c[2] for c in calls], "bare_s": bare, "method": name,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }))


def run_ours(args: argparse.Namespace, wtype: str, ref_audio: Path | None, logits: bool = False) -> dict:
    """Runs worker() in a fresh process."""
    cmd = [sys.executable, "-P", __file__, "--worker", wtype, "--gguf-dir", str(args.gguf_dir),
           "--threads", str(args.threads), "--steps", str(args.steps), "--warmup-steps", str(args.warmup_steps),
           "--bare-repeats", str(args.bare_repeats)]
    if ref_audio:
        cmd += ["--ref-audio", str(ref_audio)]
    if logits:
        cmd += ["--logits"]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def run_pytorch(args: argparse.Namespace, dtype: str, ref_audio: Path | None) -> dict:
    """Runs bench/e2e_ref.py in the reference venv."""
    extra = ["--ref-audio", str(ref_audio), "--ref-text", REF_TEXT] if ref_audio else []
    return run_reference(args.ref_python, "e2e_ref.py", [
        "--model-dir", str(args.hf_dir), "--dtype", dtype, "--text", TEXT, "--duration", str(DURATION),
        "--steps", str(args.steps), "--warmup-steps", str(args.warmup_steps), "--threads", str(args.threads),
        *extra])


def spread(xs: list[float]) -> str:
    return f"{(max(xs) - min(xs)) / statistics.median(xs):.0%}" if len(xs) > 1 else "-"


def report(args: argparse.Namespace, shape: str, runs: dict[str, list[dict]]) -> None:
    """Prints one shape's table."""
    med = {side: statistics.median(r["wall_s"] for r in rs) for side, rs in runs.items()}
    print(f"\n{shape}: {DURATION:.0f} s utterance, {args.steps} steps, {args.threads} threads, "
          f"{args.repeats} repeat(s), generate() wall time")
    for side, rs in runs.items():
        walls = [r["wall_s"] for r in rs]
        periods = [p for r in rs for p in r["step_periods_s"]]
        line = (f"  {side:17s} {med[side]:7.1f} s  (runs: {' '.join(f'{w:.1f}' for w in walls)}; spread "
                f"{spread(walls)})  step {statistics.median(periods):.2f} s")
        if "bare_s" in rs[0]:
            bare = statistics.median(b for r in rs for b in r["bare_s"])
            calls = statistics.median(c for r in rs for c in r["call_s"])
            line += f" (LM call {calls:.2f} s; bare {rs[0]['method']} {bare:.2f} s: step/bare {statistics.median(periods) / bare:.2f})"
        rss = max(r["peak_rss_mb"] for r in rs) / 1024
        line += f"  peak RSS {rss:.2f} GB"
        if side.startswith("ours"):
            gguf = sum((args.gguf_dir / f).stat().st_size for f in
                       (f"omnivoice-base-{side.split()[1]}.gguf", "omnivoice-tokenizer-F32.gguf")) / 2**30
            line += f" ({rss / gguf:.2f} x its {gguf:.2f} GB of GGUF)"
        print(line)
    for side in (s for s in runs if s.startswith("ours")):
        for ref in (s for s in runs if s.startswith("pytorch")):
            paired = [a["wall_s"] / b["wall_s"] for a, b in zip(runs[side], runs[ref])]
            print(f"  ratio {side} / {ref}: {med[side] / med[ref]:.2f}  "
                  f"(per repeat {min(paired):.2f}-{max(paired):.2f})")


def main() -> None:
    """Parses arguments and runs the end-to-end benchmark."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gguf-dir", type=Path, default=CKPT / "full_gguf")
    parser.add_argument("--hf-dir", type=Path, default=CKPT / "full_hf")
    parser.add_argument("--ref-python", default="/work/refvenv/bin/python")
    parser.add_argument("--shapes", default="auto,clone", help="auto (no reference) and/or clone (10 s reference)")
    parser.add_argument("--types", default="F32,BF16,Q8_0", help="our LM weight types")
    parser.add_argument("--ref-dtypes", default="float32,bfloat16", help="PyTorch LM dtypes ('' for none)")
    parser.add_argument("--logits-types", default="", help="our types to run also with MaskGIT scoring on "
                        "the logits in numpy (the path before in-graph scoring), e.g. BF16")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--steps", type=int, default=32)
    parser.add_argument("--warmup-steps", type=int, default=2, help="steps of the untimed first generation")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--bare-repeats", type=int, default=3, help="bare LM calls after the timed generation")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--ref-audio", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--logits", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args)
        return

    sides = [("ours", t) for t in args.types.split(",") if t] + \
            [("ours", f"{t} logits") for t in args.logits_types.split(",") if t] + \
            [("pytorch", d) for d in args.ref_dtypes.split(",") if d]
    with tempfile.TemporaryDirectory() as tmp:
        ref_path = Path(tmp) / "ref.npy"
        reference_audio(ref_path)
        for shape in args.shapes.split(","):
            ref_audio = ref_path if shape == "clone" else None
            runs: dict[str, list[dict]] = {f"{k} {v}": [] for k, v in sides}
            for r in range(args.repeats):
                for kind, v in (sides if r % 2 == 0 else sides[::-1]):
                    if kind == "ours":
                        out = run_ours(args, v.split()[0], ref_audio, logits=v.endswith("logits"))
                    else:
                        out = run_pytorch(args, v, ref_audio)
                    runs[f"{kind} {v}"].append(out)
                    print(f"  [{shape} repeat {r + 1}] {out['side']}: {out['wall_s']:.1f} s", file=sys.stderr,
                          flush=True)
            report(args, shape, runs)


if __name__ == "__main__":
    main()
