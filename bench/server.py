"""omnivoice-server under load, on the full-size checkpoint: time to first audio against the whole
answer, and 4 concurrent clients against 4 sequential requests.

Starts ``python -m omnivoice.server`` on a free 127.0.0.1 port and talks raw HTTP to it:

- time to first audio: a 3-sentence input streamed (``response_format=pcm``): seconds from sending
  the request to the first audio byte, against the seconds to its last byte (the whole answer, what
  a non-streaming client waits for). Target: first audio in at most a third of the whole.
- throughput: 4 one-sentence requests sent at once (the server batches them) against the same 4
  sent one after another: wall seconds and seconds of audio per wall second.

Run under the heavy lock: ``flock /work/tools/heavy.lock .venv/bin/python -P bench/server.py``.
"""

from __future__ import annotations

import argparse
import http.client
import json
import socket
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from timing import REPO, runs_text  # noqa: E402

THREE = ("The morning train was late again, so Maria walked to the office. "
         "On the way she stopped at the bakery on the corner and bought two warm rolls. "
         "By the time she arrived, the meeting had already started without her.")
ONE = ["The weather will be sunny tomorrow afternoon.", "Please remember to water the plants.",
       "Our next stop is the central station.", "Thank you for calling, how can I help you?"]


def speak(port: int, text: str, steps: int, seed: int) -> tuple[float, float, int]:
    """(seconds to first audio byte, seconds to last byte, audio samples) of one request."""
    body = json.dumps({"model": "tts-1", "input": text, "voice": "auto", "response_format": "pcm",
                       "num_step": steps, "seed": seed, "language": "en"})
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=1800)
    t0 = time.perf_counter()
    conn.request("POST", "/v1/audio/speech", body, {"Content-Type": "application/json"})
    r = conn.getresponse()
    if r.status != 200:
        raise RuntimeError(f"HTTP {r.status}: {r.read()[:300]!r}")
    first, size = None, 0
    while True:
        piece = r.read1(65536)
        if not piece:
            break
        if first is None:
            first = time.perf_counter() - t0
        size += len(piece)
    total = time.perf_counter() - t0
    conn.close()
    return first or total, total, size // 2


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default="/work/ckpt/full_gguf/omnivoice-base-BF16.gguf")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--steps", type=int, default=32, help="MaskGIT steps per request")
    p.add_argument("--repeats", type=int, default=2)
    args = p.parse_args()

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen([sys.executable, "-m", "omnivoice.server", "--model", args.model, "--port", str(port),
                               "--threads", str(args.threads), "--log-level", "warning"], cwd=REPO)
    try:
        end = time.monotonic() + 600
        while True:
            try:
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
                conn.request("GET", "/health")
                if conn.getresponse().status == 200:
                    break
            except OSError:
                pass
            if time.monotonic() > end or server.poll() is not None:
                raise SystemExit("the server did not become ready")
            time.sleep(1)
        print(f"model {Path(args.model).name}, {args.threads} threads, {args.steps} steps, auto voice, en")

        firsts, totals = [], []
        for i in range(args.repeats):
            first, total, samples = speak(port, THREE, args.steps, seed=i)
            firsts.append(first)
            totals.append(total)
        print(f"3 sentences ({samples / 24000:.1f} s of audio), streamed:")
        print(f"  time to first audio   {runs_text(firsts)}")
        print(f"  whole answer          {runs_text(totals)}")
        print(f"  ratio first / whole   {statistics.median(firsts) / statistics.median(totals):.2f} "
              f"(target <= 0.33)")

        seq, conc = [], []
        audio = 0
        for i in range(args.repeats):
            t0 = time.perf_counter()
            audio = sum(speak(port, text, args.steps, seed=None)[2] for text in ONE)
            seq.append(time.perf_counter() - t0)
            results: list[int] = []
            threads = [threading.Thread(target=lambda t=text: results.append(speak(port, t, args.steps, None)[2]))
                       for text in ONE]
            t0 = time.perf_counter()
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            conc.append(time.perf_counter() - t0)
        seconds = audio / 24000
        print(f"4 one-sentence requests ({seconds:.1f} s of audio in all):")
        print(f"  sequential            {runs_text(seq)}  {seconds / statistics.median(seq):.2f} audio s/s")
        print(f"  4 concurrent clients  {runs_text(conc)}  {seconds / statistics.median(conc):.2f} audio s/s")
        print(f"  ratio concurrent / sequential wall time {statistics.median(conc) / statistics.median(seq):.2f}")
    finally:
        server.terminate()
        server.wait(timeout=60)


if __name__ == "__main__":
    main()
