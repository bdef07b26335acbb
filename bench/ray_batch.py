"""Throughput of a --batch job on Ray (omnivoice.distributed) with 1 and 2 actors against the plain
--batch loop, measured in the same run, the overhead Ray adds per request, and memory per actor.

    python -P bench/ray_batch.py --model /path/to/gguf_dir [--requests 8] [--steps 32]

Sides alternate (plain, 1 actor, 2 actors; repeated): audio seconds per wall second of the whole
job, start-up included (model load for plain; actor start and model loads for Ray, not the
one-off ray.init, printed apart). Overhead per request: in each actor, the time from one finished request to
the next less the next one's generation (start-up excluded): what Ray adds between requests. Memory per actor: a Ray worker's RSS after loading
the model, private (anonymous) and file-backed (mmapped GGUF pages, shared by the actors of a node).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from timing import REPO  # noqa: E402

sys.path.insert(0, str(REPO))
warnings.filterwarnings("ignore", module=r"ray(\..*)?")


def _requests(n: int, duration: float) -> list[dict]:
    return [{"text": f"This is request number {i} of the benchmark job.", "seed": i, "duration": duration}
            for i in range(1, n + 1)]


def plain(model: str, reqs: list[dict], out: Path, threads: int, settings: dict) -> tuple[float, float]:
    """The --batch loop in this process (as omnivoice-tts runs it): wall seconds, audio seconds."""
    from omnivoice import OmniVoice
    from omnivoice.batch import BatchRunner, validate_requests

    t0 = time.perf_counter()
    runner = BatchRunner(OmniVoice.from_pretrained(model, n_threads=threads), **settings)
    audio = sum(runner.run(r)["duration"] for r in validate_requests(reqs, out))
    return time.perf_counter() - t0, audio


def on_ray(model: str, reqs: list[dict], out: Path, actors: int, threads: int, settings: dict
           ) -> tuple[float, float, list[float]]:
    """A Ray job: wall seconds, audio seconds, and the overhead of each request after an actor's
    first: the time since that actor finished its previous request, less the generation time."""
    from omnivoice.distributed import run_batch

    summary = run_batch(reqs, out, model, actors=actors, threads_per_actor=threads, **settings)
    assert summary.ok == len(reqs), f"{summary.failed} requests failed: see {summary.manifest}"
    rows = sorted((json.loads(ln) for ln in summary.manifest.read_text().splitlines()),
                  key=lambda r: (r["worker"], r["finished"]))
    gaps = [b["finished"] - a["finished"] - b["seconds"] for a, b in zip(rows, rows[1:])
            if a["worker"] == b["worker"]]
    return summary.wall_seconds, summary.audio_seconds, gaps


def actor_memory(model: str, threads: int) -> dict[str, float]:
    """RSS of a Ray worker that imported omnivoice and loaded the model, in MB."""
    import ray

    @ray.remote(num_cpus=threads)
    def measure() -> dict[str, float]:
        def status() -> dict[str, float]:
            fields = dict(line.split(":", 1) for line in Path("/proc/self/status").read_text().splitlines())
            return {k: int(fields[k].split()[0]) / 1024 for k in ("VmRSS", "RssAnon", "RssFile")}

        from omnivoice import OmniVoice

        before = status()
        m = OmniVoice.from_pretrained(model, n_threads=threads)
        m.generate("Warm up once.", duration=1.0, num_step=2, seed=0)
        after = status()
        return {"worker_before_model": before["VmRSS"], **{k: after[k] for k in after}}

    return ray.get(measure.remote(), timeout=600)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="/work/ckpt/full_gguf", help="GGUF dir or LM GGUF (default: %(default)s)")
    p.add_argument("--requests", type=int, default=8, help="requests per job (default: %(default)s)")
    p.add_argument("--duration", type=float, default=3.0, help="audio seconds per request (default: %(default)s)")
    p.add_argument("--steps", type=int, default=32, help="MaskGIT steps (default: %(default)s)")
    p.add_argument("--cpus", type=int, default=2, help="CPUs for every side (default: %(default)s)")
    p.add_argument("--repeats", type=int, default=2, help="rounds of the three sides (default: %(default)s)")
    args = p.parse_args()

    import ray

    t0 = time.perf_counter()
    ray.init(num_cpus=args.cpus, include_dashboard=False, logging_level="WARNING",
             object_store_memory=200 * 2**20)
    init_s = time.perf_counter() - t0
    settings = {"num_step": args.steps}
    reqs = _requests(args.requests, args.duration)
    res: dict[str, list[float]] = {"plain": [], "ray 1 actor": [], "ray 2 actors": []}
    overhead: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.repeats):
            for side in res:
                out = Path(tmp) / f"{side.replace(' ', '_')}_{r}"
                if side == "plain":
                    wall, audio = plain(args.model, reqs, out, args.cpus, settings)
                else:
                    actors = 1 if "1" in side else 2
                    wall, audio, per_request = on_ray(args.model, reqs, out, actors, args.cpus // actors,
                                                      settings)
                    overhead.setdefault(side, []).extend(per_request)
                res[side].append(audio / wall)
                print(f"  round {r + 1} {side:13s} {wall:7.1f} s wall, {audio:5.1f} s audio", file=sys.stderr)
        mem = actor_memory(args.model, args.cpus // 2)
    ray.shutdown()

    print(f"model {args.model}; {args.requests} requests x {args.duration} s audio, {args.steps} steps, "
          f"{args.cpus} CPUs per side; ray.init {init_s:.1f} s (once per session, not counted below)")
    base = statistics.median(res["plain"])
    print(f"{'side':14s} {'audio s/s':>10s} {'vs plain':>9s}  runs")
    for side, v in res.items():
        print(f"{side:14s} {statistics.median(v):10.3f} {statistics.median(v) / base:9.2f}  "
              f"{' '.join(f'{x:.3f}' for x in v)}")
    for side, v in overhead.items():
        print(f"per-request overhead, {side}: median {statistics.median(v) * 1000:.0f} ms, "
              f"range {min(v) * 1000:.0f}..{max(v) * 1000:.0f} ms over {len(v)} requests "
              "(an actor's time between two results less the generation)")
    print("memory of one actor (MB): " + ", ".join(f"{k} {v:.0f}" for k, v in mem.items()))


if __name__ == "__main__":
    main()
