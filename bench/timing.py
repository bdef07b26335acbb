"""Timing helpers shared by the benchmarks and their reference-side scripts (stdlib only, so the
reference venv can import it too)."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import time
from pathlib import Path
from typing import Any, Callable

REPO = Path(__file__).resolve().parent.parent


def resident_kb() -> int:
    """This process's resident set size now, in kB (Linux: VmRSS of /proc/self/status)."""
    with open("/proc/self/status", encoding="ascii") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))


def time_calls(fn: Callable[[], Any], repeats: int, warmup: int = 1) -> tuple[list[float], Any]:
    """Wall times of `repeats` calls of `fn` after `warmup` untimed ones, and the last result."""
    result = None
    for _ in range(warmup):
        result = fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t0)
    return times, result


def runs_text(times: list[float], digits: int = 3) -> str:
    """Median and every run, in seconds."""
    return f"{statistics.median(times):7.3f} s  (runs: {' '.join(f'{t:.{digits}f}' for t in times)})"


def run_reference(ref_python: str, script: str, args: list[str]) -> dict:
    """Runs bench/`script` with the reference venv's Python (torchaudio stand-in first on the path)
    and returns the JSON it prints last."""
    env = dict(os.environ, PYTHONPATH=str(REPO / "tests" / "reference" / "torchaudio_stub"))
    cmd = [ref_python, "-P", str(REPO / "bench" / script), *args]
    out = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])
