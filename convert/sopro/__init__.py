"""Hugging Face Sopro V2 Turbo snapshot -> one ``sopro-tts`` GGUF (docs/gguf-layout.md, "Sopro").

The snapshot is what ``samuel-vitorino/sopro-v2-turbo`` holds: ``config.json``, ``tokenizer.model``
and four safetensors (``model``, ``semantic_encoder``, ``speaker_encoder``, ``vocoder``).
"""

from __future__ import annotations

import logging
from pathlib import Path

import gguf

from ..writer import WrittenFile, write_gguf
from .config import ARCH, SoproConfig, is_sopro_config
from .tensors import SOPRO_TYPES, STAGES, plan_tensors, tensor_type

__all__ = ["ARCH", "SOPRO_TYPES", "TOKENIZER_KEY", "convert_sopro", "is_sopro_config", "output_name", "tensor_type"]

logger = logging.getLogger(__name__)

# The SentencePiece model's bytes, as a UINT8 array.
TOKENIZER_KEY = f"{ARCH}.tokenizer.sentencepiece_model"


def output_name(outtype: str) -> str:
    """The file name ``convert_sopro`` writes for ``outtype``."""
    return f"sopro-v2-turbo-{outtype}.gguf"


def convert_sopro(snapshot: str | Path, out_path: str | Path, outtype: str = "F32") -> WrittenFile:
    """Converts a Sopro snapshot to one GGUF.

    Args:
        snapshot: the snapshot directory.
        out_path: the GGUF to write.
        outtype: F32, F16 or Q8_0 (see :func:`tensor_type`).

    Returns:
        A summary of the written file.

    Raises:
        FileNotFoundError: the directory or one of its six files is missing.
        ValueError: a config field or LM tensor is missing or misshaped, a value is not finite,
            or ``outtype`` is unknown.
    """
    if outtype not in SOPRO_TYPES:
        raise ValueError(f"unknown Sopro type {outtype!r}; choose one of {', '.join(SOPRO_TYPES)}")
    snapshot = Path(snapshot)
    if not snapshot.is_dir():
        raise FileNotFoundError(f"missing model directory {snapshot}")
    for name in ("config.json", "tokenizer.model", *STAGES.values()):
        if not (snapshot / name).is_file():
            raise FileNotFoundError(f"missing {snapshot / name}")
    cfg = SoproConfig.load(snapshot / "config.json")
    planned = plan_tensors(snapshot, cfg, outtype)
    tokenizer = (snapshot / "tokenizer.model").read_bytes()
    if not tokenizer:
        raise ValueError(f"{snapshot / 'tokenizer.model'} is empty")

    writer = gguf.GGUFWriter(Path(out_path), ARCH)
    writer.add_file_type(int(SOPRO_TYPES[outtype][1]))
    writer.add_quantization_version(gguf.GGML_QUANT_VERSION)
    cfg.add_metadata(writer)
    writer.add_key_value(TOKENIZER_KEY, tokenizer, gguf.GGUFValueType.ARRAY, sub_type=gguf.GGUFValueType.UINT8)
    written = write_gguf(writer, planned)
    logger.info("%s", written.describe())
    return written
