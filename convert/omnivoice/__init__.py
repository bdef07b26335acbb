"""OmniVoice (k2-fsa) snapshot -> GGUF: the OmniVoice family's converter.

A snapshot of ``k2-fsa/OmniVoice`` becomes two files, laid out as ``docs/gguf-layout.md`` says:
``omnivoice-base-<TYPE>.gguf`` (the LM and its text vocabulary) and
``omnivoice-tokenizer-<CTYPE>.gguf`` (the audio codec).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .codec import CODEC_ARCH, CODEC_TYPES, convert_codec
from .lm import LM_ARCH, LM_TYPES, convert_lm
from ..writer import WrittenFile

__all__ = [
    "CODEC_ARCH",
    "CODEC_TYPES",
    "LM_ARCH",
    "LM_TYPES",
    "ConvertedModel",
    "WrittenFile",
    "convert_codec",
    "convert_lm",
    "convert_model",
]


@dataclass(frozen=True)
class ConvertedModel:
    """The two files written from one snapshot."""

    lm: WrittenFile
    codec: WrittenFile


def convert_model(
    model_dir: str | Path,
    outdir: str | Path,
    outtype: str = "F32",
    codec_type: str = "F32",
    encoder: bool = True,
) -> ConvertedModel:
    """Converts an OmniVoice snapshot into ``outdir``.

    Args:
        model_dir: the snapshot directory (with ``audio_tokenizer/`` inside).
        outdir: where to write; created when missing.
        outtype: LM 2-D weights: F32, F16, BF16, Q8_0 or Q4_K_M.
        codec_type: codec weights: F32 or F16.
        encoder: False writes a decode-only codec.

    Returns:
        Summaries of ``omnivoice-base-<outtype>.gguf`` and ``omnivoice-tokenizer-<codec_type>.gguf``.

    Raises:
        FileNotFoundError: ``model_dir`` or a file in it is missing.
        ValueError: ``model_dir`` is a file; a config field or tensor is missing or unsupported, or a type is unknown.
    """
    model_dir, outdir = Path(model_dir), Path(outdir)
    # Inputs and types are checked before the long LM conversion, and a failure leaves no file
    # behind: a lone LM GGUF would look like a converted model.
    if model_dir.is_file():
        hint = " (--from-omnivoice-cpp rewrites an omnivoice.cpp codec GGUF)" if model_dir.suffix == ".gguf" else ""
        raise ValueError(f"model_dir must be a snapshot directory, got the file {model_dir}{hint}")
    for need in (model_dir, model_dir / "audio_tokenizer"):
        if not need.is_dir():
            raise FileNotFoundError(f"missing model directory {need}")
    for need in (model_dir / "config.json", model_dir / "audio_tokenizer" / "config.json"):
        if not need.is_file():
            raise FileNotFoundError(f"missing {need}")
    for value, known in ((outtype, LM_TYPES), (codec_type, CODEC_TYPES)):
        if value not in known:
            raise ValueError(f"unknown type {value!r}; choose one of {', '.join(known)}")
    outdir.mkdir(parents=True, exist_ok=True)
    lm_path = outdir / f"omnivoice-base-{outtype}.gguf"
    codec_path = outdir / f"omnivoice-tokenizer-{codec_type}.gguf"
    try:
        lm = convert_lm(model_dir, lm_path, outtype)
        codec = convert_codec(model_dir / "audio_tokenizer", codec_path, codec_type, encoder)
    except BaseException:
        lm_path.unlink(missing_ok=True)
        codec_path.unlink(missing_ok=True)
        raise
    return ConvertedModel(lm, codec)
