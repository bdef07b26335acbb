"""Checkpoint -> GGUF converters (``omnivoice-convert``), one subpackage per model family.

Shared here: the safetensors reader (``checkpoint``), typed config access (``config``) and the
GGUF writer (``writer``). Each family's converter lives in ``convert/<family>/``;
:func:`detect_family` tells a snapshot's family from its ``config.json``.
"""

from __future__ import annotations

from pathlib import Path

from .checkpoint import read_json
from .omnivoice import (CODEC_ARCH, CODEC_TYPES, LM_ARCH, LM_TYPES, ConvertedModel, convert_codec, convert_lm,
                        convert_model)
from .sopro import is_sopro_config
from .writer import WrittenFile

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
    "detect_family",
]


def detect_family(model_dir: str | Path) -> str:
    """The family of a snapshot, from its ``config.json``'s content: ``"omnivoice"`` (its
    ``model_type``) or ``"sopro"`` (objects ``model``, ``semantic_encoder``, ``speaker_encoder`` and
    ``vocoder``).

    Raises:
        FileNotFoundError: ``model_dir`` or its ``config.json`` is missing.
        ValueError: ``model_dir`` is a file, or the config is neither family's.
    """
    model_dir = Path(model_dir)
    if model_dir.is_file():
        hint = " (--from-omnivoice-cpp rewrites an omnivoice.cpp codec GGUF)" if model_dir.suffix == ".gguf" else ""
        raise ValueError(f"model_dir must be a snapshot directory, got the file {model_dir}{hint}")
    if not model_dir.is_dir():
        raise FileNotFoundError(f"missing model directory {model_dir}")
    config = read_json(model_dir / "config.json")
    if config.get("model_type") == "omnivoice":
        return "omnivoice"
    if is_sopro_config(config):
        return "sopro"
    raise ValueError(
        f"{model_dir / 'config.json'}: not a known family's config (OmniVoice has model_type 'omnivoice'; "
        "Sopro has objects model, semantic_encoder, speaker_encoder and vocoder)"
    )
