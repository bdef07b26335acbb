"""``omnivoice-codec``: audio <-> codes with the Higgs Audio v2 tokenizer.

An audio file (any format and rate libsndfile reads) is encoded to a codes file (``.ovrq``, see
:mod:`omnivoice.models.omnivoice.audio_tokenizer`); a codes file is decoded to a 24 kHz WAV. The direction follows
the input: a file that starts with the codes magic is decoded, anything else is encoded. The
output defaults to the input's name with the other extension, unless that file exists (then -o
is required). Errors print one line and exit non-zero.

    omnivoice-codec --model omnivoice-tokenizer-F32.gguf -i clip.wav            # -> clip.ovrq
    omnivoice-codec --model omnivoice-tokenizer-F32.gguf -i clip.ovrq -o out.wav --format wav24
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path
from typing import Sequence

from ._cli import check_output_path, positive_int, run_command
from .audio import WAV_FORMATS, load_audio, truncate_to_hop, write_wav
from .models.omnivoice.audio_tokenizer import CODES_MAGIC, AudioTokenizer, load_codes, save_codes

__all__ = ["main"]

logger = logging.getLogger(__name__)

CODES_SUFFIX = ".ovrq"


def build_parser() -> argparse.ArgumentParser:
    """Returns the command-line parser of ``omnivoice-codec``."""
    p = argparse.ArgumentParser(
        prog="omnivoice-codec",
        description="Encode audio to OmniVoice audio codes (.ovrq) or decode codes to a 24 kHz WAV.",
    )
    p.add_argument("--model", required=True, help="codec GGUF (omnivoice-tokenizer-*.gguf)")
    p.add_argument("-i", "--input", required=True, help="audio file to encode, or .ovrq codes file to decode")
    p.add_argument("-o", "--output", help="output file (default: the input with .ovrq or .wav, if no such file)")
    p.add_argument("--format", choices=tuple(WAV_FORMATS), default="wav16",
                   help="WAV sample format when decoding (default: %(default)s)")
    p.add_argument("--threads", type=positive_int, help="CPU threads (default: every core)")
    return p


def _is_codes_file(path: Path) -> bool:
    with open(path, "rb") as f:
        return f.read(len(CODES_MAGIC)) == CODES_MAGIC


def _run(args: argparse.Namespace) -> None:
    src = Path(args.input)
    if not src.is_file():
        raise FileNotFoundError(f"input not found: {src}")
    decode = _is_codes_file(src)
    dst = Path(args.output) if args.output else src.with_suffix(".wav" if decode else CODES_SUFFIX)
    if dst.resolve() == src.resolve():
        raise ValueError(f"output {dst} would overwrite the input; give -o "
                         + ("another file" if args.output else "an output file"))
    check_output_path(dst)
    if not args.output and dst.exists():
        # The default name may be the recording the codes came from: never replace it unasked.
        raise ValueError(f"{dst} exists; give -o to choose the output (an explicit -o overwrites)")
    tok = AudioTokenizer.from_file(args.model, n_threads=args.threads)
    if decode:
        audio = tok.decode(load_codes(src))
        write_wav(dst, audio, tok.sample_rate, args.format)
        logger.info("decoded %s -> %s (%.2f s)", src, dst, audio.size / tok.sample_rate)
    else:
        # Whole frames only, as upstream OmniVoice trims a reference before encoding it.
        wave = truncate_to_hop(load_audio(src, tok.sample_rate), tok.hop_length)
        codes = tok.encode(wave, tok.sample_rate)
        save_codes(dst, codes, tok.sample_rate, tok.frame_rate)
        logger.info("encoded %s -> %s (%d frames)", src, dst, codes.shape[1])


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``omnivoice-codec``; returns the exit status."""
    args = build_parser().parse_args(argv)
    return run_command("omnivoice-codec", lambda: _run(args))


if __name__ == "__main__":
    sys.exit(main())
