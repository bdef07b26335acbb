"""``omnivoice-convert``: Hugging Face OmniVoice snapshot -> two GGUF files; or an omnivoice.cpp
codec GGUF -> our layout (``--from-omnivoice-cpp``)."""

from __future__ import annotations

import argparse
import logging
import sys
import time

from pathlib import Path

from .._cli import run_command
from . import CODEC_TYPES, LM_TYPES, convert_model
from .omnivoice.omnivoice_cpp import convert_cpp_codec


def main(argv: list[str] | None = None) -> int:
    """Runs the converter; prints one line and returns 1 on a bad input."""
    parser = argparse.ArgumentParser(
        prog="omnivoice-convert",
        description="Convert a k2-fsa/OmniVoice snapshot to omnivoice-base-<TYPE>.gguf and "
        "omnivoice-tokenizer-<CTYPE>.gguf; or, with --from-omnivoice-cpp, rewrite omnivoice.cpp's codec "
        "GGUF in our layout (their LM GGUFs load as they are).",
    )
    parser.add_argument("model_dir", help="snapshot directory (config.json, model.safetensors, tokenizer files, "
                        "audio_tokenizer/); with --from-omnivoice-cpp, their omnivoice-tokenizer-*.gguf")
    parser.add_argument("--from-omnivoice-cpp", action="store_true",
                        help="convert omnivoice.cpp's codec GGUF (given as model_dir) into OUTDIR, same file name")
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
        if args.from_omnivoice_cpp:
            src, outdir = Path(args.model_dir), Path(args.outdir)
            if (outdir / src.name).resolve() == src.resolve():
                raise ValueError(f"--outdir must differ from the directory of {src}: the output has the same name")
            outdir.mkdir(parents=True, exist_ok=True)
            print(convert_cpp_codec(src, outdir / src.name).describe())
            print(f"done in {time.perf_counter() - start:.1f} s")
            return
        result = convert_model(args.model_dir, args.outdir, args.outtype, args.codec_type, not args.no_encoder)
        print(result.lm.describe())
        print(result.codec.describe())
        print(f"done in {time.perf_counter() - start:.1f} s")

    return run_command("omnivoice-convert", run)


if __name__ == "__main__":
    sys.exit(main())
