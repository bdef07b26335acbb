"""Checkpoint -> GGUF converters (``omnivoice-convert``), one subpackage per model family.

Shared here: the safetensors reader (``checkpoint``), typed config access (``config``) and the
GGUF writer (``writer``). Each family's converter lives in ``convert/<family>/``.
"""

from __future__ import annotations

from .omnivoice import (CODEC_ARCH, CODEC_TYPES, LM_ARCH, LM_TYPES, ConvertedModel, convert_codec, convert_lm,
                        convert_model)
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
]
