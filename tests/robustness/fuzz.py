"""Fuzzing of the files a user hands us: mutated LM and codec GGUFs, ``.ovrq`` codes, voice
``.npz`` files and WAVs, each loaded and used in a worker process.

Every outcome must be a success or a clean exception (ValueError, with ModelFormatError, or
TypeError / FileNotFoundError). A crash (signal), a hang, any other exception type, or a
non-finite result is a failure. Mutations aim at what parsers trust: the header numbers of a GGUF
(counts, lengths, dims, types, offsets; overwritten with boundary values), random bytes, and
truncation.

    python -P tests/robustness/fuzz.py --seconds 300 --out /tmp/fuzz     # long runs (scripts/fuzz.sh)

tests/robustness/test_fuzz.py runs a fixed, small set in CI.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import queue
import random
import struct
import subprocess
import sys
import threading
import time
import wave
from dataclasses import dataclass
from pathlib import Path

import numpy as np

KINDS = ("lm", "codec", "ovrq", "voice", "wav")
# Boundary values written over header numbers, by field width in bytes.
_BOUNDARY = {
    1: [0, 1, 0x7F, 0x80, 0xFF],
    2: [0, 1, 0x7FFF, 0x8000, 0xFFFF],
    4: [0, 1, 2, 3, 7, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF, 10**8, 1025],
    8: [0, 1, 2**31 - 1, 2**32, 2**40, 2**62, 2**63, 2**64 - 1, 10**8],
}
# Prefix of the worker's result lines (anything else on its stdout is ignored).
_MARK = "@fuzz "
# Seconds a worker may spend on one file before it counts as a hang.
HANG_S = 60.0


@dataclass
class Seeds:
    """The unmutated files each kind of mutant starts from."""

    lm: bytes
    codec: bytes
    ovrq: bytes
    voice: bytes
    wav: bytes


def make_seeds(model_dir: Path, tmp: Path) -> Seeds:
    """Seed files: the tiny GGUFs in ``model_dir`` and small codes, voice and WAV files."""
    from omnivoice.models.omnivoice.audio_tokenizer import save_codes
    from omnivoice.models.omnivoice.model import VoiceClonePrompt

    rng = np.random.default_rng(0)
    codes = rng.integers(0, 1024, (8, 4), dtype=np.int32)
    save_codes(tmp / "seed.ovrq", codes)
    VoiceClonePrompt(ref_audio_tokens=codes, ref_text="Nice to meet you.", ref_rms=0.1).save(tmp / "seed.npz")
    buf = io.BytesIO()
    with wave.open(buf, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(24000)
        tone = 0.3 * np.sin(2 * np.pi * 220 * np.arange(24000) / 24000)
        w.writeframes((tone * 32767).astype("<i2").tobytes())
    return Seeds(
        lm=(model_dir / "omnivoice-base-F32.gguf").read_bytes(),
        codec=(model_dir / "omnivoice-tokenizer-F32.gguf").read_bytes(),
        ovrq=(tmp / "seed.ovrq").read_bytes(),
        voice=(tmp / "seed.npz").read_bytes(),
        wav=buf.getvalue(),
    )


def gguf_number_spans(data: bytes) -> list[tuple[int, int, str]]:
    """(offset, width, what) of every header number of a GGUF: counts, string and array lengths,
    scalar values, tensor dims, types and offsets (``what`` starts with "tensor " for those). Walks the format itself (spec: ggml's
    docs/gguf.md), so it works on any file."""
    spans: list[tuple[int, int, str]] = [(8, 8, "n_tensors"), (16, 8, "n_kv")]
    scalar = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
    pos = 24
    n_tensors, n_kv = struct.unpack_from("<QQ", data, 8)

    def string(p: int, what: str) -> tuple[int, str]:
        n = struct.unpack_from("<Q", data, p)[0]
        spans.append((p, 8, f"{what} length"))
        return p + 8 + n, data[p + 8 : p + 8 + n].decode("utf-8", "replace")

    def value(p: int, vtype: int, what: str) -> int:
        if vtype == 8:
            return string(p, what)[0]
        if vtype == 9:
            sub, count = struct.unpack_from("<IQ", data, p)
            spans.extend([(p, 4, f"{what} item type"), (p + 4, 8, f"{what} count")])
            p += 12
            for i in range(count):
                p = value(p, sub, f"{what}[{i}]")
            return p
        spans.append((p, scalar[vtype], what))
        return p + scalar[vtype]

    for _ in range(n_kv):
        pos, key = string(pos, "key")
        spans.append((pos, 4, f"{key} type"))
        pos = value(pos + 4, struct.unpack_from("<I", data, pos)[0], key)
    for _ in range(n_tensors):
        pos, name = string(pos, "tensor name")
        n_dims = struct.unpack_from("<I", data, pos)[0]
        spans.append((pos, 4, f"tensor {name} n_dims"))
        spans.extend((pos + 4 + 8 * i, 8, f"tensor {name} ne[{i}]") for i in range(n_dims))
        pos += 4 + 8 * n_dims
        spans.extend([(pos, 4, f"tensor {name} type"), (pos + 4, 8, f"tensor {name} offset")])
        pos += 12
    return spans


def set_number(data: bytes, span: tuple[int, int, str], value: int) -> bytes:
    """``data`` with the number at ``span`` set to ``value`` (wrapped to its width)."""
    off, width, _ = span
    buf = bytearray(data)
    buf[off : off + width] = (value % (1 << (8 * width))).to_bytes(width, "little")
    return bytes(buf)


def mutate(kind: str, data: bytes, rng: random.Random, spans: list[tuple[int, int, str]] | None) -> bytes:
    """One mutant of ``data``: a header number set to a boundary value (GGUFs), bytes of a header
    overwritten, random bytes flipped, or the file truncated."""
    buf = bytearray(data)
    header = {"ovrq": 24, "wav": 44, "voice": len(buf)}.get(kind, 1 << 16)
    op = rng.random()
    if spans and op < 0.6:
        for _ in range(rng.choice([1, 1, 2])):
            span = rng.choice(spans)
            width = span[1]
            val = rng.choice(_BOUNDARY[width]) if rng.random() < 0.8 else rng.getrandbits(8 * width)
            buf = bytearray(set_number(bytes(buf), span, val))
    elif op < 0.8:
        for _ in range(rng.randint(1, 8)):
            off = rng.randrange(min(header, len(buf)))
            if kind == "ovrq" or kind == "wav":
                width = rng.choice([1, 2, 4])
                off = min(off, len(buf) - width)
                buf[off : off + width] = rng.choice(_BOUNDARY[width]).to_bytes(width, "little")
            else:
                buf[off] = rng.randrange(256)
    elif op < 0.9:
        for _ in range(rng.randint(1, 16)):
            off = rng.randrange(len(buf))
            buf[off] ^= 1 << rng.randrange(8)
    else:
        buf = buf[: rng.randrange(len(buf))]
    return bytes(buf)


def write_mutants(seeds: Seeds, out: Path, count: int, seed: int, kinds: tuple[str, ...] = KINDS) -> list[dict]:
    """Writes ``count`` mutants per kind under ``out``; returns their cases."""
    rng = random.Random(seed)
    spans = {"lm": gguf_number_spans(seeds.lm), "codec": gguf_number_spans(seeds.codec)}
    cases = []
    for kind in kinds:
        data = getattr(seeds, kind)
        for i in range(count):
            path = out / f"{kind}-{seed}-{i}.{ {'lm': 'gguf', 'codec': 'gguf', 'voice': 'npz'}.get(kind, kind)}"
            path.write_bytes(mutate(kind, data, rng, spans.get(kind)))
            cases.append({"kind": kind, "path": str(path)})
    return cases


# --------------------------------------------------------------------------- worker side


def _use(kind: str, path: str, model_dir: str, cache: dict) -> str:
    """Loads and uses one mutant; returns a short description of the success."""
    from omnivoice import AudioTokenizer, OmniVoice, VoiceClonePrompt, load_codes

    def model(lm: str | None = None) -> OmniVoice:
        if lm is not None:
            return OmniVoice.from_pretrained(lm, codec=str(Path(model_dir) / "omnivoice-tokenizer-F32.gguf"),
                                             n_threads=1)
        if "model" not in cache:
            cache["model"] = OmniVoice.from_pretrained(model_dir, n_threads=1)
        return cache["model"]

    def codec() -> AudioTokenizer:
        if "codec" not in cache:
            cache["codec"] = AudioTokenizer.from_file(Path(model_dir) / "omnivoice-tokenizer-F32.gguf", n_threads=1)
        return cache["codec"]

    def finite(audio: np.ndarray) -> str:
        if not np.all(np.isfinite(audio)):
            raise AssertionError("non-finite audio returned")
        return f"ok {audio.shape}"

    gen = dict(num_step=2, duration=0.4, seed=0)
    if kind == "lm":
        return finite(model(path).generate("Hi.", **gen)[0])
    if kind == "codec":
        tok = AudioTokenizer.from_file(path, n_threads=1)
        finite(tok.decode(np.zeros((tok.n_codebooks, 2), np.int32)))
        if tok.has_encoder:
            tok.encode(np.sin(np.arange(24000, dtype=np.float32) / 7), 24000)
        return "ok"
    if kind == "ovrq":
        return finite(codec().decode(load_codes(path)))
    if kind == "voice":
        prompt = VoiceClonePrompt.load(path)
        return finite(model().generate("Hi.", voice_clone_prompt=prompt, **gen)[0])
    if kind == "wav":
        prompt = model().create_voice_clone_prompt(path, ref_text="Nice to meet you.")
        return f"ok {prompt.ref_audio_tokens.shape}"
    raise AssertionError(f"unknown kind {kind}")


def worker(cases_file: str, model_dir: str) -> None:
    """Runs every case of ``cases_file`` (JSON lines), printing one JSON result line each."""
    import warnings

    import omnivoice

    warnings.simplefilter("ignore")
    clean = (ValueError, TypeError, FileNotFoundError, omnivoice.ModelFormatError)
    cache: dict = {}
    for line in Path(cases_file).read_text().splitlines():
        case = json.loads(line)
        print(_MARK + json.dumps({"start": case["path"]}), flush=True)
        try:
            result = {"outcome": "ok", "detail": _use(case["kind"], case["path"], model_dir, cache)}
        except clean as err:
            result = {"outcome": "clean", "detail": f"{type(err).__name__}: {str(err)[:200]}"}
        except BaseException as err:  # noqa: BLE001 - what the fuzzer is looking for
            result = {"outcome": "unclean", "detail": f"{type(err).__name__}: {str(err)[:300]}"}
        print(_MARK + json.dumps({"done": case["path"], **result}), flush=True)


# --------------------------------------------------------------------------- parent side


def run_cases(cases: list[dict], model_dir: Path, work: Path, hang_s: float = HANG_S) -> list[dict]:
    """Runs ``cases`` in worker processes, restarting after a crash or a case that takes longer
    than ``hang_s`` seconds; returns one result per case."""
    results: list[dict] = []
    pending = list(cases)
    while pending:
        cases_file = work / "cases.jsonl"
        cases_file.write_text("".join(json.dumps(c) + "\n" for c in pending))
        proc = subprocess.Popen(
            # -P: the script's directory stays off sys.path; omnivoice comes from the install.
            [sys.executable, "-P", __file__, "--worker", str(cases_file), str(model_dir)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            # ggml's abort would attach gdb for a backtrace: seconds per crash.
            env=dict(os.environ, GGML_NO_BACKTRACE="1"),
        )
        lines: queue.Queue = queue.Queue()
        threading.Thread(target=lambda: [lines.put(x) for x in proc.stdout] + [lines.put(None)], daemon=True).start()
        done: dict[str, dict] = {}
        current = None
        while True:
            try:
                line = lines.get(timeout=hang_s)
            except queue.Empty:  # one file took longer than hang_s
                proc.kill()
                break
            if line is None:
                break
            if not line.startswith(_MARK):  # ggml's or a library's own output
                continue
            msg = json.loads(line[len(_MARK) :])
            if "start" in msg:
                current = msg["start"]
            else:
                done[msg["done"]] = msg
                current = None
        proc.wait()
        stderr = proc.stderr.read()
        proc.stdout.close()
        proc.stderr.close()
        for case in pending:
            if case["path"] in done:
                results.append({**case, **done[case["path"]]})
        if current is not None:
            outcome = "hang" if proc.returncode == -9 else "crash"
            results.append({**case_for(pending, current), "outcome": outcome,
                            "detail": f"exit {proc.returncode}: {stderr.strip()[-300:]}"})
        finished = {r["path"] for r in results}
        pending = [c for c in pending if c["path"] not in finished]
        if current is None and pending:  # the worker ended without starting them: report once
            detail = f"worker exit {proc.returncode} before these cases: {stderr.strip()[-300:]}"
            results.extend({**c, "outcome": "crash", "detail": detail} for c in pending)
            break
    return results


def case_for(cases: list[dict], path: str) -> dict:
    """The case of ``path``."""
    return next(c for c in cases if c["path"] == path)


def main() -> None:
    """Long fuzz runs: mutants in rounds until --seconds pass; failures are kept in --out."""
    if sys.argv[1:2] == ["--worker"]:
        return worker(sys.argv[2], sys.argv[3])
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model-dir", type=Path, help="tiny GGUFs (default: converted from tests/data/tiny_hf)")
    parser.add_argument("--seconds", type=float, default=300)
    parser.add_argument("--per-round", type=int, default=40, help="mutants per kind per round")
    parser.add_argument("--kinds", default=",".join(KINDS))
    parser.add_argument("--out", type=Path, default=Path("fuzz-out"))
    parser.add_argument("--seed", type=int, default=int(time.time()))
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    if args.model_dir is None:
        from omnivoice.convert import convert_model

        args.model_dir = args.out / "tiny"
        if not (args.model_dir / "omnivoice-base-F32.gguf").exists():
            convert_model(Path(__file__).parent.parent / "data" / "tiny_hf", args.model_dir)
    seeds = make_seeds(args.model_dir, args.out)
    end = time.monotonic() + args.seconds
    counts: dict[str, int] = {}
    failures = 0
    round_no = 0
    while time.monotonic() < end:
        work = args.out / f"round-{args.seed}-{round_no}"
        work.mkdir(exist_ok=True)
        cases = write_mutants(seeds, work, args.per_round, args.seed + round_no, tuple(args.kinds.split(",")))
        for r in run_cases(cases, args.model_dir, work):
            counts[r["outcome"]] = counts.get(r["outcome"], 0) + 1
            if r["outcome"] in ("ok", "clean"):
                Path(r["path"]).unlink()
            else:
                failures += 1
                print(f"{r['outcome']}: {r['path']}: {r['detail']}", flush=True)
        round_no += 1
    print(f"{sum(counts.values())} files, outcomes {counts}; failures kept under {args.out}")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
