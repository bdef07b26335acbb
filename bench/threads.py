"""Thread count under load: LM steps with fixed thread counts and with the load-aware default,
on a quiet machine and with busy-looping processes taking some of the cores.

Prints the median seconds per step of --steps steps (after one warm-up) for each thread setting
and number of busy processes, and checks that the logits do not depend on the thread count (so
changing it between steps keeps output reproducible). Run it alone (heavy lock): other jobs are
load too.

    python -P bench/threads.py [--gguf .../omnivoice-base-BF16.gguf] [--busy 0,1] [--threads 1,2,4,auto]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from omnivoice import _core
from omnivoice.threads import LoadAwareThreads, usable_cores

sys.path.insert(0, str(Path(__file__).resolve().parent))
from lm import SHAPES, make_inputs  # noqa: E402

CKPT = Path("/work/ckpt")


def run_steps(session: object, backend: _core.Backend, inputs: tuple, steps: int, setting: str) -> tuple:
    """Times `steps` forward calls (after one warm-up); `setting` is a thread count or "auto"."""
    cores = usable_cores()
    tuner = LoadAwareThreads(cores) if setting == "auto" else None
    backend.n_threads = cores if tuner else int(setting)
    session.forward(*inputs)
    times, used = [], []
    for _ in range(steps):
        if tuner:
            backend.n_threads = tuner.update()
        used.append(backend.n_threads)
        t0 = time.perf_counter()
        logits = session.forward(*inputs)
        times.append(time.perf_counter() - t0)
    return times, used, logits


def main() -> None:
    """Parses arguments and prints the table."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gguf", type=Path, default=CKPT / "full_gguf" / "omnivoice-base-BF16.gguf")
    parser.add_argument("--shape", choices=sorted(SHAPES), default="auto")
    parser.add_argument("--busy", default="0,1", help="numbers of busy-looping processes to run beside")
    parser.add_argument("--threads", default="1,2,auto", help="thread counts to time, 'auto' = load-aware")
    parser.add_argument("--steps", type=int, default=5)
    args = parser.parse_args()

    backend = _core.Backend(1)
    lm = _core.LM(str(args.gguf), backend)
    s_len, t_len, n_ref = SHAPES[args.shape]
    ids, mask = make_inputs(lm, s_len, t_len, n_ref, np.random.default_rng(0))
    session = lm.session([(s_len, s_len - t_len, t_len), (t_len, 0, t_len)])
    inputs = (np.concatenate([ids, ids[:, -t_len:]], axis=1), np.concatenate([mask, mask[-t_len:]]))
    print(f"{args.gguf.name}, {args.shape} shape (cond {s_len} + uncond {t_len}), {usable_cores()} usable cores, "
          f"median of {args.steps} steps")
    reference = None
    for n_busy in (int(b) for b in args.busy.split(",")):
        hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n_busy)]
        try:
            time.sleep(0.5)
            for setting in args.threads.split(","):
                times, used, logits = run_steps(session, backend, inputs, args.steps, setting)
                reference = logits if reference is None else reference
                same = "logits identical" if np.array_equal(logits, reference) else "LOGITS DIFFER"
                print(f"  busy {n_busy}  threads {setting:>4}: {statistics.median(times):7.3f} s/step  "
                      f"(runs {' '.join(f'{t:.2f}' for t in times)}; threads used {used})  {same}")
        finally:
            for hog in hogs:
                hog.kill()
                hog.wait()


if __name__ == "__main__":
    main()
