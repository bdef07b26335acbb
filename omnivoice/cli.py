"""``omnivoice-tts``: text to speech from the command line.

Text comes as the positional argument or on stdin; ``-o -`` streams a WAV to stdout chunk by
chunk as each is decoded. Errors print one line and exit non-zero.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any, Sequence

from ._cli import (check_output_path, finite_float, non_negative_float, non_negative_int, positive_float,
                   positive_int, run_command)

def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="omnivoice-tts",
        description="OmniVoice text-to-speech on ggml: auto voice, voice design (--instruct) and "
        "voice cloning (--ref-wav + --ref-text, or --voice).",
    )
    p.add_argument("text", nargs="?", help="text to speak (default: read stdin)")
    p.add_argument("-o", "--output", required=True, help="output WAV file, or - to stream to stdout")
    p.add_argument("--model", default="k2-fsa/OmniVoice",
                   help="LM GGUF, a directory of GGUFs, a Hugging Face snapshot directory, or a "
                        "Hub id (default: %(default)s)")
    p.add_argument("--codec", help="codec GGUF (default: found beside the LM GGUF)")
    p.add_argument("--format", choices=("wav16", "wav24", "wav32"), default="wav16",
                   help="WAV sample format: 16-bit, 24-bit PCM or 32-bit float (default: %(default)s)")
    p.add_argument("--lang", help="language name or code, e.g. English or en (default: language-agnostic)")
    p.add_argument("--instruct", help='voice design attributes, e.g. "female, low pitch, british accent"')
    p.add_argument("--duration", type=positive_float, help="output duration in seconds (default: estimated)")
    p.add_argument("--speed", type=positive_float, help="speaking speed factor (default: 1.0)")
    p.add_argument("--ref-wav", help="reference audio for voice cloning")
    p.add_argument("--ref-text", help="transcript of --ref-wav (required with it)")
    p.add_argument("--voice", help="a voice prompt saved with --save-voice (replaces --ref-wav/--ref-text)")
    p.add_argument("--save-voice", help="save the voice prompt made from --ref-wav/--ref-text to this file")
    p.add_argument("--seed", type=non_negative_int, help="random seed, an integer >= 0 (default: random)")
    p.add_argument("--steps", type=positive_int, default=32, help="MaskGIT steps (default: %(default)s)")
    p.add_argument("--guidance", type=finite_float, default=2.0, help="classifier-free guidance scale (default: %(default)s)")
    p.add_argument("--chunk-duration", type=positive_float, default=15.0,
                   help="long-form chunk length in seconds (default: %(default)s)")
    p.add_argument("--chunk-threshold", type=non_negative_float, default=30.0,
                   help="chunk only above this estimated duration in seconds (default: %(default)s)")
    p.add_argument("--no-denoise", action="store_true", help="omit the <|denoise|> token when cloning")
    p.add_argument("--no-preprocess", action="store_true",
                   help="keep the reference audio and transcript as given (no silence trim, no punctuation)")
    p.add_argument("--no-postprocess", action="store_true", help="return the raw decode (no silence removal, fade, pad)")
    p.add_argument("--threads", type=positive_int,
                   help="CPU threads, at most the usable cores (default: the cores other processes leave idle)")
    p.add_argument("--batch", help="JSONL file, one request per line (keys: text, output, and any of lang, "
                                   "instruct, duration, speed, ref_wav, ref_text, voice, seed); -o names "
                                   "the output directory for lines without 'output'")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    return p


class _Progress:
    """One progress line on stderr for every level at once (requests, chunks, steps), only when
    stderr is a terminal: a bar for the innermost level, counts for the outer ones."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled and sys.stderr.isatty()
        self.start = time.monotonic()
        self.levels: dict[str, tuple[int, int]] = {}  # label -> (done, total), outermost first

    def __call__(self, label: str, done: int, total: int) -> None:
        if not self.enabled:
            return
        self.levels[label] = (done, total)
        if label != "steps":  # an outer level moved on: the steps bar starts again
            self.levels.pop("steps", None)
        width = 30
        filled = int(width * done / max(total, 1))
        outer = "".join(f"{name} {d}/{t} | " for name, (d, t) in self.levels.items() if name != label)
        elapsed = time.monotonic() - self.start
        sys.stderr.write(f"\r\033[K{outer}{label} [{'#' * filled}{'.' * (width - filled)}] {done}/{total} "
                         f"{elapsed:5.1f}s")
        if done >= total and len(self.levels) == 1:
            sys.stderr.write("\n")
        sys.stderr.flush()


def _read_text(args: argparse.Namespace) -> str:
    if args.text is not None:
        text = args.text
    else:
        data = sys.stdin.buffer.read()
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as e:
            raise ValueError(f"stdin is not UTF-8 text (byte 0x{data[e.start]:02x} at offset {e.start})") from None
    if not text.strip():
        raise ValueError("no text to speak (give it as an argument or on stdin)")
    return text


def _voice_kwargs(model: Any, req: dict[str, Any], preprocess: bool) -> dict[str, Any]:
    from .model import VoiceClonePrompt

    if req.get("voice"):
        return {"voice_clone_prompt": VoiceClonePrompt.load(req["voice"])}
    if req.get("ref_wav"):
        if not req.get("ref_text"):
            raise ValueError("--ref-wav needs --ref-text (its transcript): there is no ASR model here")
        return {"voice_clone_prompt": model.create_voice_clone_prompt(
            req["ref_wav"], req["ref_text"], preprocess_prompt=preprocess)}
    if req.get("ref_text"):
        raise ValueError("--ref-text given without --ref-wav")
    return {}


def _gen_kwargs(args: argparse.Namespace, req: dict[str, Any]) -> dict[str, Any]:
    return dict(
        language=req.get("lang"),
        instruct=req.get("instruct"),
        duration=req.get("duration"),
        speed=req.get("speed"),
        seed=req.get("seed"),
        num_step=args.steps,
        guidance_scale=args.guidance,
        audio_chunk_duration=args.chunk_duration,
        audio_chunk_threshold=args.chunk_threshold,
        denoise=not args.no_denoise,
        preprocess_prompt=not args.no_preprocess,
        postprocess_output=not args.no_postprocess,
    )


def _run(args: argparse.Namespace) -> None:
    from .audio import StreamingWavWriter, write_wav
    from .model import OmniVoice

    progress = _Progress(not args.quiet)
    if not args.batch and args.output != "-":
        check_output_path(args.output)
    model = OmniVoice.from_pretrained(args.model, codec=args.codec, n_threads=args.threads)
    base = {k: getattr(args, k) for k in ("lang", "instruct", "duration", "speed", "seed")}
    base.update(ref_wav=args.ref_wav, ref_text=args.ref_text, voice=args.voice)

    if args.batch:
        outdir = Path(args.output)
        if args.output == "-":
            raise ValueError("--batch writes files: give -o a directory, not -")
        outdir.mkdir(parents=True, exist_ok=True)
        lines = [ln for ln in Path(args.batch).read_text(encoding="utf-8").splitlines() if ln.strip()]
        for n, line in enumerate(lines, 1):
            try:
                fields = json.loads(line)
            except json.JSONDecodeError as e:
                raise ValueError(f"{args.batch}:{n}: not valid JSON ({e.msg})") from None
            if not isinstance(fields, dict):
                raise ValueError(f"{args.batch}:{n}: must be a JSON object such as {{\"text\": ...}}, "
                                 f"got a JSON {type(fields).__name__}")
            req = {**base, **fields}
            if not isinstance(req.get("text"), str) or not req["text"].strip():
                raise ValueError(f"{args.batch}:{n}: needs a non-empty 'text'")
            out = outdir / str(req.get("output", f"{n:04d}.wav"))
            try:
                check_output_path(out)
                audio = model.generate(req["text"], **_voice_kwargs(model, req, not args.no_preprocess),
                                       **_gen_kwargs(args, req), progress=progress)[0]
            except (TypeError, ValueError) as e:  # the message names the key (seed, duration, ...)
                raise type(e)(f"{args.batch}:{n}: {e}") from None
            write_wav(out, audio, model.sampling_rate, args.format)
            progress("requests", n, len(lines))
        return

    text = _read_text(args)
    voice = _voice_kwargs(model, base, not args.no_preprocess)
    if args.save_voice:
        if "voice_clone_prompt" not in voice:
            raise ValueError("--save-voice needs --ref-wav and --ref-text")
        voice["voice_clone_prompt"].save(args.save_voice)
    kwargs = {**voice, **_gen_kwargs(args, base)}
    if args.output == "-":
        with StreamingWavWriter(sys.stdout.buffer, model.sampling_rate, args.format) as writer:
            for chunk in model.generate_stream(text, progress=progress, **kwargs):
                writer.write(chunk.audio)
    else:
        audio = model.generate(text, progress=progress, **kwargs)[0]
        write_wav(args.output, audio, model.sampling_rate, args.format)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``omnivoice-tts``; returns the exit status."""
    args = build_parser().parse_args(argv)
    return run_command("omnivoice-tts", lambda: _run(args))


if __name__ == "__main__":
    sys.exit(main())
