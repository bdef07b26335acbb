"""``omnivoice-convert``: Hugging Face OmniVoice snapshot -> two GGUF files."""

from __future__ import annotations

import argparse
import logging
import sys
import time

from .._cli import run_command
from . import CODEC_TYPES, LM_TYPES, convert_model


def main(argv: list[str] | None = None) -> int:
    """Runs the converter; prints one line and returns 1 on a bad input."""
    parser = argparse.ArgumentParser(
        prog="omnivoice-convert",
        description="Convert a k2-fsa/OmniVoice snapshot to omnivoice-base-<TYPE>.gguf and "
        "omnivoice-tokenizer-<CTYPE>.gguf.",
    )
    parser.add_argument("model_dir", help="snapshot directory (config.json, model.safetensors, tokenizer files, "
                        "audio_tokenizer/)")
    parser.add_argument("--outdir", default=".", help="output directory (default: current directory)")
    parser.add_argument("--outtype", choices=list(LM_TYPES), default="F32", help="LM 2-D weights (default F32)")
    parser.add_argument("--codec-type", choices=list(CODEC_TYPES), default="F32",
                        help="codec weights (default F32)")
    parser.add_argument("--no-encoder", action="store_true", help="write a decode-only codec (no audio encoder)")
    parser.add_argument("-v", "--verbose", action="store_true", help="log every tensor")
    args = parser.parse_args(argv)
    if args.verbose:
        logging.basicConfig(level=logging.DEBUG, format="%(message)s")


    def run() -> None:
        start = time.perf_counter()
        result = convert_model(args.model_dir, args.outdir, args.outtype, args.codec_type, not args.no_encoder)
        print(result.lm.describe())
        print(result.codec.describe())
        print(f"done in {time.perf_counter() - start:.1f} s")

    return run_command("omnivoice-convert", run)


if __name__ == "__main__":
    sys.exit(main())
