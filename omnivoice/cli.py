"""``omnivoice-tts``: text to speech from the command line, on the streaming engine.

Text comes as the positional argument or on stdin, read as it arrives: speech starts at the first
complete sentence. ``-o -`` streams a WAV to stdout piece by piece; ``--stream-by-line`` writes a
WAV per input line; ``--srt`` dubs subtitles onto one timeline. Errors print one line and exit
non-zero.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import sys
import time
from pathlib import Path
from typing import Any, BinaryIO, Iterator, Optional, Sequence, Union

import numpy as np

from ._cli import (add_device_argument, check_output_path, finite_float, non_negative_float, non_negative_int, positive_float,
                   positive_int, run_command)
from .batch import write_audio_file

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
    p.add_argument("--sample-rate", type=positive_int,
                   help="write WAVs at this rate, resampled with soxr (default: the model's 24000)")
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
                   help="longest piece (or --split chunk: chunk) in seconds (default: %(default)s)")
    p.add_argument("--chunk-threshold", type=non_negative_float, default=30.0,
                   help="--split chunk and --batch: chunk only above this estimated duration in seconds "
                        "(default: %(default)s)")
    p.add_argument("--split", choices=("sentence", "chunk"), default="sentence",
                   help="sentence: speak sentence by sentence as text arrives; chunk: generate()'s own "
                        "chunks, after reading all the text (default: %(default)s)")
    p.add_argument("--stream-by-line", action="store_true",
                   help="one WAV per input line, written into the -o directory as each line is spoken "
                        "(its path printed on stdout); one voice for all lines")
    p.add_argument("--srt", help="dub this SubRip file onto one timeline WAV (-o): each cue spoken in its "
                                 "time slot, clipped at the next cue")
    p.add_argument("--no-denoise", action="store_true", help="omit the <|denoise|> token when cloning")
    p.add_argument("--no-preprocess", action="store_true",
                   help="keep the reference audio and transcript as given (no silence trim, no punctuation)")
    p.add_argument("--no-postprocess", action="store_true", help="return the raw decode (no silence removal, fade, pad)")
    p.add_argument("--threads", type=positive_int,
                   help="CPU threads, at most the usable cores (default: the cores other processes leave idle); "
                        "with --ray, per actor (default: the cluster's CPUs divided among the actors)")
    add_device_argument(p)
    p.add_argument("--batch", help="JSONL file, one request per line (keys: text, output, and any of lang, "
                                   "instruct, duration, speed, ref_wav, ref_text, voice, seed); -o names "
                                   "the output directory for lines without 'output'. Every line is "
                                   "checked first; any bad line (all are listed) refuses the job")
    p.add_argument("--skip-bad-lines", action="store_true",
                   help="with --batch: list the bad lines, then run the good ones (default: run nothing)")
    p.add_argument("--ray", nargs="?", const="", metavar="ADDRESS",
                   help="run the --batch job on Ray (pip install omnivoice-ggml[ray]): no ADDRESS starts a "
                        "local Ray, 'auto' joins the running cluster. Existing outputs are skipped; "
                        "-o/manifest.jsonl reports each request")
    p.add_argument("--actors", type=positive_int, default=1,
                   help="with --ray: actors, each holding one model (default: %(default)s)")
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


def _stdin_fragments() -> Iterator[str]:
    """stdin as it arrives (whatever is available, up to 64 KiB at a time), decoded as UTF-8."""
    import codecs

    stream = sys.stdin.buffer
    read = getattr(stream, "read1", stream.read)
    decoder = codecs.getincrementaldecoder("utf-8")()
    offset = 0  # bytes read before this block, for the error message
    while True:
        data = read(1 << 16)
        try:
            text = decoder.decode(data, final=not data)
        except UnicodeDecodeError as e:
            raise ValueError(f"stdin is not UTF-8 text (byte 0x{e.object[e.start]:02x} at offset "
                             f"{offset + e.start})") from None
        offset += len(data)
        if text:
            yield text
        if not data:
            return


def _text_source(args: argparse.Namespace) -> Union[str, Iterator[str]]:
    """The positional text, or stdin: incrementally unless the whole text is needed first."""
    if args.text is not None:
        text = args.text
    elif args.split == "chunk" or args.duration is not None:
        text = "".join(_stdin_fragments())
    else:
        return _stdin_fragments()
    if not text.strip():
        raise ValueError("no text to speak (give it as an argument or on stdin)")
    return text


class _AudioOut:
    """A WAV written piece by piece at ``rate`` (soxr's streaming resampler when it is not the model's)."""

    def __init__(self, stream: BinaryIO, model_rate: int, rate: Optional[int], fmt: str) -> None:
        from .audio import StreamingWavWriter

        self._resampler = None
        if rate is not None and rate != model_rate:
            import soxr

            self._resampler = soxr.ResampleStream(model_rate, rate, 1, dtype="float32")
        self._stream = stream
        self._writer = StreamingWavWriter(stream, rate or model_rate, fmt)

    def write(self, audio: np.ndarray) -> None:
        if self._resampler is not None:
            audio = self._resampler.resample_chunk(audio)
        self._writer.write(audio)
        self._stream.flush()

    def close(self) -> None:
        if self._resampler is not None:
            self._writer.write(self._resampler.resample_chunk(np.zeros(0, np.float32), last=True))
        self._writer.close()


def _voice_kwargs(model: Any, req: dict[str, Any], settings: dict[str, Any]) -> dict[str, Any]:
    # A mode the family lacks is refused before a reference is encoded or a model run.
    model.capabilities.check_mode(req.get("voice"), req.get("ref_wav"), req.get("instruct"))
    if req.get("voice"):
        return {"voice": model.load_voice(req["voice"])}
    if req.get("ref_wav"):
        if not req.get("ref_text") and model.capabilities.clone_needs_transcript:
            raise ValueError("--ref-wav needs --ref-text (its transcript): there is no ASR model here")
        return {"voice": model.create_voice(req["ref_wav"], req["ref_text"], **settings)}
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
        **_settings(args),
    )


def _settings(args: argparse.Namespace) -> dict[str, Any]:
    """The generation settings that flags give for every request."""
    return dict(
        num_step=args.steps,
        guidance_scale=args.guidance,
        audio_chunk_duration=args.chunk_duration,
        audio_chunk_threshold=args.chunk_threshold,
        denoise=not args.no_denoise,
        preprocess_prompt=not args.no_preprocess,
        postprocess_output=not args.no_postprocess,
    )


def _speak(model: Any, text: Union[str, Iterator[str]], args: argparse.Namespace, kwargs: dict[str, Any],
           progress: _Progress) -> None:
    """Streams the speech of ``text`` into ``-o`` (a file or stdout), piece by piece."""
    chunks = model.generate_stream(text, progress=progress, split=args.split, **kwargs)
    first = next(chunks)  # errors in the text or settings come before any output is opened
    with contextlib.nullcontext(sys.stdout.buffer) if args.output == "-" else open(args.output, "wb") as f:
        try:
            out = _AudioOut(f, model.sampling_rate, args.sample_rate, args.format)
            for chunk in itertools.chain([first], chunks):
                out.write(chunk.audio)
            out.close()
        except BaseException:
            if args.output != "-":
                Path(args.output).unlink()  # no half-written file left behind as if it were the result
            raise


def _speak_lines(model: Any, text: Union[str, Iterator[str]], args: argparse.Namespace, kwargs: dict[str, Any],
                 progress: _Progress) -> None:
    """One WAV per non-empty input line, in one voice: without a reference, the first line's
    speech becomes the clone prompt of the later lines."""
    if args.output == "-":
        raise ValueError("--stream-by-line writes one file per line: give -o a directory, not -")
    outdir = Path(args.output)
    outdir.mkdir(parents=True, exist_ok=True)

    def lines() -> Iterator[str]:
        pending = ""
        for fragment in [text] if isinstance(text, str) else text:
            pending += fragment
            *done, pending = pending.split("\n")
            yield from (ln for ln in done if ln.strip())
        if pending.strip():
            yield pending

    n = 0
    for n, line in enumerate(lines(), 1):
        audio = np.concatenate([c.audio for c in model.generate_stream(line, progress=progress, split=args.split,
                                                                       **kwargs)])
        path = outdir / f"{n:04d}.wav"
        write_audio_file(path, audio, model.sampling_rate, args.sample_rate, args.format)
        print(path, flush=True)
        if "voice" not in kwargs:
            kwargs = {**kwargs, "voice": model.create_voice((audio, model.sampling_rate), line)}
    if n == 0:
        raise ValueError("no text to speak (give it as an argument or on stdin)")


def _dub(model: Any, args: argparse.Namespace, kwargs: dict[str, Any], progress: _Progress) -> None:
    """``--srt``: every cue spoken in its slot, in one voice, laid onto one timeline WAV."""
    from .streaming import TextPiece
    from .subtitles import Timeline, read_srt

    if args.output == "-":
        raise ValueError("--srt writes one timeline WAV: give -o a file, not -")
    if args.text is not None:
        raise ValueError("--srt takes its text from the subtitle file: give no text argument")
    for flag, value in (("--duration", kwargs.pop("duration")), ("--speed", kwargs.pop("speed"))):
        if value is not None:
            raise ValueError(f"{flag} does not apply to --srt: each cue is fitted to its time slot")
    cues = read_srt(args.srt)
    timeline = Timeline(cues, model.sampling_rate)
    pieces = (TextPiece(c.text, duration=c.end - c.start) for c in cues)
    for i, chunk in enumerate(model.generate_pieces(pieces, progress=progress, **kwargs)):
        timeline.place(i, chunk.audio)
        progress("cues", i + 1, len(cues))
    write_audio_file(args.output, timeline.audio, model.sampling_rate, args.sample_rate, args.format)


def _run_batch(args: argparse.Namespace, base: dict[str, Any], progress: _Progress) -> None:
    from .batch import BatchRunner, check_job, read_requests
    from .registry import load

    if args.output == "-":
        raise ValueError("--batch writes files: give -o a directory, not -")
    # The whole job is checked first, the same way with and without --ray.
    requests = check_job(read_requests(args.batch, args.output, base), args.batch, args.skip_bad_lines,
                         report=lambda line: print(f"omnivoice-tts: {line}", file=sys.stderr))
    if args.ray is not None:
        return _run_ray(args, base)
    model = load(args.model, n_threads=args.threads, device=args.device, **_load_kwargs(args))
    runner = BatchRunner(model, args.format, sample_rate=args.sample_rate, **_settings(args))
    for n, req in enumerate(requests, 1):
        runner.run(req, progress=progress)
        progress("requests", n, len(requests))


def _run_ray(args: argparse.Namespace, base: dict[str, Any]) -> None:
    try:
        from . import distributed
    except ImportError as e:
        raise RuntimeError(f"--ray needs Ray: pip install 'omnivoice-ggml[ray]' ({e})") from None
    distributed.init(args.ray or None)
    summary = distributed.run_batch(
        args.batch, args.output, args.model, codec=args.codec, actors=args.actors, threads_per_actor=args.threads,
        fmt=args.format, sample_rate=args.sample_rate, defaults=base, progress=not args.quiet,
        skip_bad_lines=args.skip_bad_lines, **_settings(args))
    if not args.quiet:
        bad = f", {summary.invalid} bad lines skipped" if summary.invalid else ""
        print(f"{summary.ok} written, {summary.skipped} skipped, {summary.failed} failed{bad}; "
              f"{summary.audio_seconds:.1f} s of audio in {summary.wall_seconds:.1f} s; manifest: "
              f"{summary.manifest}", file=sys.stderr)
    if summary.failed:
        raise RuntimeError(f"{summary.failed} of {summary.total} requests failed: see {summary.manifest}")


def _load_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    """``--codec`` is OmniVoice's (its codec is a second file); passed only when given."""
    return {"codec": args.codec} if args.codec else {}


def _run(args: argparse.Namespace) -> None:
    from .registry import load

    progress = _Progress(not args.quiet)
    base = {k: getattr(args, k) for k in ("lang", "instruct", "duration", "speed", "seed")}
    base.update(ref_wav=args.ref_wav, ref_text=args.ref_text, voice=args.voice)
    if args.batch:
        return _run_batch(args, base, progress)
    if args.ray is not None or args.skip_bad_lines:
        flag = "--ray" if args.ray is not None else "--skip-bad-lines"
        raise ValueError(f"{flag} applies to a --batch job: give --batch FILE")
    if not args.stream_by_line and args.output != "-":  # --stream-by-line writes into a directory
        check_output_path(args.output)
    model = load(args.model, n_threads=args.threads, device=args.device, **_load_kwargs(args))

    voice = _voice_kwargs(model, base, _settings(args))
    if args.save_voice:
        if "voice" not in voice:
            raise ValueError("--save-voice needs --ref-wav and --ref-text")
        voice["voice"].save(args.save_voice)
    kwargs = {**voice, **_gen_kwargs(args, base)}
    if args.srt:
        _dub(model, args, kwargs, progress)
    elif args.stream_by_line:
        _speak_lines(model, _text_source(args), args, kwargs, progress)
    else:
        _speak(model, _text_source(args), args, kwargs, progress)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``omnivoice-tts``; returns the exit status."""
    args = build_parser().parse_args(argv)
    return run_command("omnivoice-tts", lambda: _run(args))


if __name__ == "__main__":
    sys.exit(main())
