"""Codec GGUFs of omnivoice.cpp (the other ggml port) -> our ``omnivoice-tokenizer`` layout.

Their LM file (``omnivoice-base-*.gguf``) loads as it is. Their codec file holds the same
tensors as ours but keeps HuBERT under ``semantic_model.``, whose names reach 71 bytes where
ggml's reader stops at 63, and it lacks metadata keys ours has; every one of those follows from
the tensors' shapes or from the keys it has. :func:`convert_cpp_codec` rewrites it (tensor data
unchanged); ``docs/gguf-layout.md`` lists the differences.
"""

from __future__ import annotations

import logging
import math
import os
from pathlib import Path
from typing import Any

import gguf
import numpy as np

from .codec import CODEC_ARCH, gguf_name, is_training_only
from ..writer import PlannedTensor, WrittenFile, write_gguf

__all__ = ["convert_cpp_codec", "is_cpp_codec"]

logger = logging.getLogger(__name__)

# Keys of theirs with no place in ours: the DAC config's 9 codebooks (8 are stored and used) and
# len(conv_dim).
_DROPPED_KEYS = {"omnivoice.acoustic.n_codebooks", "omnivoice.semantic.num_feat_extract_layers"}
# Keys gguf-py's writer sets itself.
_WRITER_KEYS = {"general.architecture", "general.alignment"}


def is_cpp_codec(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is a codec GGUF in omnivoice.cpp's layout (read from its header only).

    Ours always has ``omnivoice.n_quantizers``; theirs never does. A file that is no readable
    GGUF is not theirs either (the loader reports what is wrong with it).

    Raises:
        FileNotFoundError: ``path`` does not exist.
    """
    if not os.path.isfile(path):
        raise FileNotFoundError(f"no such GGUF file: {path}")
    with open(path, "rb") as f:
        head = f.read(1 << 20)
    # Our key in the header: ours, decided without parsing (GGUFReader walks a corrupt array
    # count of 2^31 for seconds; the loader refuses such a file at once).
    if b"omnivoice.n_quantizers" in head:
        return False
    try:
        fields = gguf.GGUFReader(path).fields
    except (ValueError, IndexError, OSError):  # not a GGUF, truncated, empty
        return False
    arch = fields.get("general.architecture")
    return arch is not None and arch.contents() == CODEC_ARCH and "omnivoice.n_quantizers" not in fields


def _value(field: Any) -> tuple[Any, gguf.GGUFValueType, gguf.GGUFValueType | None]:
    """A metadata value with the type ours stores it as: integers u32 (arrays i32), floats f32."""
    kind = field.types[0]
    value = field.contents()
    if kind == gguf.GGUFValueType.ARRAY:
        elem = field.types[-1]
        if elem in (gguf.GGUFValueType.STRING, gguf.GGUFValueType.BOOL):
            return value, kind, elem
        if elem in (gguf.GGUFValueType.FLOAT32, gguf.GGUFValueType.FLOAT64):
            return [float(v) for v in value], kind, gguf.GGUFValueType.FLOAT32
        return [int(v) for v in value], kind, gguf.GGUFValueType.INT32
    if kind in (gguf.GGUFValueType.STRING, gguf.GGUFValueType.BOOL):
        return value, kind, None
    if kind in (gguf.GGUFValueType.FLOAT32, gguf.GGUFValueType.FLOAT64):
        return float(value), gguf.GGUFValueType.FLOAT32, None
    return int(value), gguf.GGUFValueType.UINT32, None


def _derived_keys(md: dict[str, Any], shapes: dict[str, tuple[int, ...]]) -> dict[str, Any]:
    """Our keys that their file lacks, from their keys and the tensors' PyTorch shapes."""

    def need(key: str) -> Any:
        if key not in md:
            raise ValueError(f"omnivoice.cpp codec lacks metadata key {key}")
        return md[key]

    def kernel(name: str) -> int:
        if name not in shapes:
            raise ValueError(f"omnivoice.cpp codec lacks tensor {name}")
        return shapes[name][-1]

    sample_rate, hop = int(need("omnivoice.sample_rate")), int(need("omnivoice.acoustic.hop_length"))
    semantic_rate, factor = int(need("omnivoice.semantic_sample_rate")), int(need("omnivoice.downsample_factor"))
    hidden = int(need("omnivoice.semantic.hidden_size"))
    n_quantizers = sum(1 for n in shapes if n.startswith("quantizer.quantizers.") and n.endswith(".codebook.embed"))
    hubert = "semantic_model.feature_extractor.conv_layers."
    # Semantic-encoder blocks: a block conv of kernel 2 * stride (3 when the stride is 1) from
    # `hidden` to hidden * ratio channels, after one residual unit per dilation.
    strides, ratios, n_units = [], [], []
    ib = 0
    while f"encoder_semantic.conv_blocks.{ib}.conv.weight" in shapes:
        p = f"encoder_semantic.conv_blocks.{ib}."
        out_ch, _, k = shapes[p + "conv.weight"]
        strides.append(1 if k == 3 else k // 2)
        ratios.append(out_ch // hidden)
        n_units.append(sum(1 for n in shapes if n.startswith(p + "res_units.") and n.endswith(".conv1.weight")))
        ib += 1
    if not strides or len(set(n_units)) != 1:
        raise ValueError("omnivoice.cpp codec: semantic encoder blocks missing or uneven")
    return {
        "omnivoice.n_quantizers": n_quantizers,
        "omnivoice.frame_rate": math.ceil(sample_rate / hop),
        "omnivoice.has_encoder": "fc.weight" in shapes,
        "omnivoice.semantic.conv_bias": hubert + "0.conv.bias" in shapes,
        # GroupNorm on the first conv only ("group") leaves the other convs without a norm.
        "omnivoice.semantic.feat_extract_norm": "layer" if hubert + "1.layer_norm.weight" in shapes else "group",
        "omnivoice.semantic.feat_proj_layer_norm": "semantic_model.feature_projection.layer_norm.weight" in shapes,
        # Not visible in shapes; their port runs HuBERT base, which is post-norm.
        "omnivoice.semantic.do_stable_layer_norm": False,
        "omnivoice.semantic.downsample_factor": int(hop / (sample_rate / semantic_rate) / factor),
        "omnivoice.semantic_encoder.kernel_size": kernel("encoder_semantic.conv.weight"),
        "omnivoice.semantic_encoder.unit_kernel_size": kernel(
            "encoder_semantic.conv_blocks.0.res_units.0.conv1.weight"),
        "omnivoice.semantic_encoder.strides": strides,
        "omnivoice.semantic_encoder.channel_ratios": ratios,
        # Dilations are not visible in shapes either; the real codec's are all 1.
        "omnivoice.semantic_encoder.block_dilations": [1] * n_units[0],
    }


def convert_cpp_codec(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> WrittenFile:
    """Rewrites an omnivoice.cpp codec GGUF (``omnivoice-tokenizer-*.gguf``) in our layout.

    Tensor data is copied unchanged (F32 or F16); ``semantic_model.*`` becomes ``hubert.*`` and
    the missing metadata keys are derived (see ``docs/gguf-layout.md``).

    Args:
        src: their codec file.
        dst: the GGUF to write (removed again if anything fails).

    Returns:
        A summary of the written file.

    Raises:
        FileNotFoundError: ``src`` does not exist.
        ValueError: ``src`` is not a codec GGUF in their layout, or a tensor or key that the
            derivation needs is missing.
    """
    if not is_cpp_codec(src):
        raise ValueError(f"{src} is not an omnivoice.cpp codec GGUF (arch {CODEC_ARCH}, no omnivoice.n_quantizers)")
    reader = gguf.GGUFReader(src)
    md = {k: f.contents() for k, f in reader.fields.items() if not k.startswith("GGUF.")}
    shapes = {t.name: tuple(int(n) for n in reversed(t.shape)) for t in reader.tensors}
    planned = []
    for t in reader.tensors:
        if is_training_only(t.name):  # their converter keeps a semantic_model.masked_spec_embed
            continue
        if t.tensor_type not in (gguf.GGMLQuantizationType.F32, gguf.GGMLQuantizationType.F16):
            raise ValueError(f"{src}: tensor {t.name} is {t.tensor_type.name}; the codec takes F32 or F16")
        shape = shapes[t.name]
        planned.append(PlannedTensor(gguf_name(t.name), shape, t.tensor_type,
                                     lambda t=t, shape=shape: np.asarray(t.data, dtype=np.float32).reshape(shape)))

    writer = gguf.GGUFWriter(dst, CODEC_ARCH)
    for key, field in reader.fields.items():
        if key.startswith("GGUF.") or key in _WRITER_KEYS or key in _DROPPED_KEYS:
            continue
        if key == "general.file_type":
            continue  # written below: theirs may be a string
        value, kind, sub = _value(field)
        writer.add_key_value(key, value, kind, sub_type=sub)
    has_f16 = any(t.qtype == gguf.GGMLQuantizationType.F16 for t in planned)
    writer.add_file_type(int(gguf.LlamaFileType.MOSTLY_F16 if has_f16 else gguf.LlamaFileType.ALL_F32))
    for key, value in _derived_keys(md, shapes).items():
        if isinstance(value, bool):
            writer.add_bool(key, value)
        elif isinstance(value, str):
            writer.add_string(key, value)
        elif isinstance(value, list):
            writer.add_array(key, value)
        else:
            writer.add_uint32(key, value)
    written = write_gguf(writer, planned)
    logger.info("%s", written.describe())
    return written
