"""LM step speed: ours (ggml, packed segments) vs the PyTorch reference, measured in the same run.

One MaskGIT step of one item at an auto-voice shape (cond 300 + uncond 250 tokens) and a cloning
shape (cond 1900 + uncond 350), with the full-size random LM. Ours runs the packed sequence
(cond S + uncond T tokens) from omnivoice-base-{F32,BF16,Q8_0}.gguf (--types adds Q4_K_M, e.g.
omnivoice.cpp's file or `omnivoice-convert --outtype Q4_K_M`, in --gguf-dir); the reference runs
upstream's padded [2, 8, S] batch with its 4-D bool mask in float32 and bfloat16, in its own venv
(--ref-python) through bench/lm_ref.py, in --rounds rounds of ours then the reference. Prints
median seconds of all runs, the ratios ours / PyTorch (per round: median and range), our
achieved GFLOP/s next to ggml's own matmul rate (weight hidden x ffn) and to the CPU's peak
(vdpbf16ps chains where the CPU has AVX512-BF16, else F32 FMAs on its widest vectors), each
type's logits' max relative difference from the reference's float32 ones, the CPU's flags and
the kernel that runs each type's projections.

    python -P bench/lm.py [--gguf-dir ...] [--hf-dir ...] [--shapes auto,clone] [--threads 2] [--rounds 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

import numpy as np

from omnivoice import _core

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))
from ggml_matmul import matmul_gflops  # noqa: E402
from timing import resident_kb, run_reference, runs_text, time_calls  # noqa: E402

CKPT = Path("/work/ckpt")
# name: (cond length S, target length T, reference audio frames inside the cond prompt)
SHAPES = {"auto": (300, 250, 0), "clone": (1900, 350, 1500)}
TYPES = ("F32", "BF16", "Q8_0")


def make_inputs(lm: _core.LM, s_len: int, t_len: int, n_ref: int, rng: np.random.Generator) -> tuple[np.ndarray, ...]:
    """A cond prompt mid-generation: text, reference codes, then a half-unmasked target window."""
    n_cb, n_text = lm.num_audio_codebook, s_len - t_len - n_ref
    ids = np.empty((n_cb, s_len), dtype=np.int32)
    ids[:, :n_text] = rng.integers(0, lm.vocab_size, n_text)
    ids[:, n_text:] = rng.integers(0, lm.audio_vocab_size - 1, (n_cb, s_len - n_text))
    target = ids[:, s_len - t_len :]
    target[rng.random(target.shape) < 0.5] = lm.audio_mask_id
    mask = np.zeros(s_len, dtype=bool)
    mask[n_text:] = True
    return ids, mask


def gguf_gb(gguf_dir: Path, wtype: str) -> float:
    """Size of the LM GGUF of `wtype`."""
    return (gguf_dir / f"omnivoice-base-{wtype}.gguf").stat().st_size / 1e9


def step_flops(lm: _core.LM, segments: list[tuple[int, int, int]]) -> float:
    """Multiply-adds x 2 of one packed step: projections, attention per segment, target heads."""
    hd, d = lm.head_dim, lm.hidden_size
    per_token = d * hd * (2 * lm.n_head + 2 * lm.n_head_kv) + 3 * d * lm.intermediate_size
    n_tokens = sum(s[0] for s in segments)
    attention = sum(2 * s[0] ** 2 * hd * lm.n_head for s in segments)
    heads = sum(s[2] for s in segments) * d * lm.num_audio_codebook * lm.audio_vocab_size
    return 2.0 * (lm.n_layer * (n_tokens * per_token + attention) + heads)


def reference(args: argparse.Namespace, inputs: Path, repeats: int, warmup: int, out_logits: Path) -> dict:
    """Runs bench/lm_ref.py in the reference venv and returns its JSON."""
    return run_reference(args.ref_python, "lm_ref.py", [
        "--model-dir", str(args.hf_dir), "--inputs", str(inputs), "--threads", str(args.threads),
        "--repeats", str(repeats), "--warmup", str(warmup), "--out-logits", str(out_logits),
        "--dtypes", args.ref_dtypes])


def main() -> None:
    """Parses arguments and runs the LM step benchmark."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gguf-dir", type=Path, default=CKPT / "full_gguf")
    parser.add_argument("--hf-dir", type=Path, default=CKPT / "full_hf")
    parser.add_argument("--ref-python", default="/work/refvenv/bin/python")
    parser.add_argument("--shapes", default="auto,clone")
    parser.add_argument("--types", default=",".join(TYPES))
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3, help="runs per measurement at the auto-voice shape")
    parser.add_argument("--clone-repeats", type=int, default=1, help="runs per measurement at the cloning shape")
    parser.add_argument("--no-ref", action="store_true", help="time ours only")
    parser.add_argument("--rounds", type=int, default=1,
                        help="rounds of ours then the reference; ratios are per round (median and range)")
    parser.add_argument("--ref-dtypes", default="float32,bfloat16",
                        help="PyTorch dtypes to time; include float32 (the logits compare against it)")
    args = parser.parse_args()

    types = args.types.split(",")
    flags = _core.testing.cpu_flags()
    bf16_peak = "avx512bf16" in flags
    print(f"CPU flags: {' '.join(flags)}")
    # A Q4_K_M file's projections are mostly Q4_K.
    print("projections: " + ", ".join(f"{t} {_core.testing.linear_kernel({'Q4_K_M': 'Q4_K'}.get(t, t))}" for t in types))
    backend = _core.Backend(args.threads)
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory() as tmp:
        for shape in args.shapes.split(","):
            s_len, t_len, n_ref = SHAPES[shape]
            repeats = args.repeats if shape == "auto" else args.clone_repeats
            segments = [(s_len, s_len - t_len, t_len), (t_len, 0, t_len)]
            # Per round: each of our types, then the reference, so every round's ratio compares
            # runs that saw the same load.
            ours, logits, mm, peak, rss, ids = {t: [] for t in types}, {}, {}, {}, {}, None
            refs: list[dict] = []
            for _ in range(args.rounds):
                for wtype in types:  # one model in memory at a time
                    lm = _core.LM(str(args.gguf_dir / f"omnivoice-base-{wtype}.gguf"), backend)
                    if ids is None:
                        ids, mask = make_inputs(lm, s_len, t_len, n_ref, rng)
                        np.savez(Path(tmp) / "inputs.npz", ids=ids, mask=mask, t_len=t_len)
                    packed_ids = np.concatenate([ids, ids[:, -t_len:]], axis=1)
                    packed_mask = np.concatenate([mask, mask[-t_len:]])
                    session = lm.session(segments)
                    # The warm-up call pages the weights in.
                    times, logits[wtype] = time_calls(lambda: session.forward(packed_ids, packed_mask), repeats)
                    ours[wtype].append(times)
                    rss[wtype] = resident_kb() / 1e6  # GB: touched weights, buffers, Python
                    # The yardstick right after our runs, so both see the same load on a shared machine.
                    mm[wtype] = matmul_gflops(wtype, lm.hidden_size, lm.intermediate_size, 512, args.threads)
                    peak[wtype] = _core.testing.fma_peak_gflops(args.threads, bf16=bf16_peak)
                    flops = step_flops(lm, segments)
                    del lm
                if not args.no_ref:
                    # At the cloning shape a PyTorch run takes about a minute: a warm-up's overhead is noise.
                    refs.append(reference(args, Path(tmp) / "inputs.npz", repeats, int(shape == "auto"),
                                          Path(tmp) / "ref_logits.npy"))
            print(f"\n{shape}: cond {s_len} + uncond {t_len} tokens ({flops / 1e9:.0f} GFLOP packed), "
                  f"{args.threads} threads, {args.rounds} round(s)")
            for wtype in types:
                runs = [t for times in ours[wtype] for t in times]
                rate = flops / statistics.median(runs) / 1e9
                print(f"  ours {wtype:5s} {runs_text(runs)}  {rate:5.0f} GFLOP/s; ggml's matmul "
                      f"{mm[wtype]:.0f} GFLOP/s (weight hidden x ffn, 512 tokens, last round): {rate / mm[wtype]:.0%}; "
                      f"{rate / peak[wtype]:.0%} of the {'bf16 dot' if bf16_peak else 'F32 FMA'} peak "
                      f"({peak[wtype]:.0f}); "
                      f"RSS {rss[wtype]:.2f} GB for a {gguf_gb(args.gguf_dir, wtype):.2f} GB GGUF")
            if args.no_ref:
                continue
            ref_logits = np.load(Path(tmp) / "ref_logits.npy")
            dtypes = [d for d in ("float32", "bfloat16") if d in refs[0]]
            for d in dtypes:
                runs = [t for ref in refs for t in ref[d]["times_s"]]
                print(f"  pytorch {d:8s} {runs_text(runs)}   [2, 8, {s_len}] padded")
            for wtype in types:
                # Per round: our median over the reference's median of the same round.
                texts = []
                for d in dtypes:
                    per_round = [statistics.median(o) / r[d]["median_s"] for o, r in zip(ours[wtype], refs)]
                    spread = f" ({min(per_round):.2f}-{max(per_round):.2f})" if len(per_round) > 1 else ""
                    texts.append(f"{statistics.median(per_round):.2f}{spread}")
                print(f"  ratio ours {wtype} / pytorch: " + " / ".join(texts) + f"  (vs {' / '.join(dtypes)}; per round)")
            for wtype in types:
                err = np.abs(logits[wtype] - ref_logits).max() / np.abs(ref_logits).max()
                print(f"  logits {wtype} vs pytorch float32: max rel diff {err:.1e}")

if __name__ == "__main__":
    main()
