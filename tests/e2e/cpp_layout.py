"""Files in omnivoice.cpp's layout, built for the tests as their architecture document describes.

omnivoice.cpp (ServeurpersoCom/omnivoice.cpp, docs/ARCHITECTURE.md, "GGUF layout") publishes
``omnivoice-base-{BF16,Q8_0,Q4_K_M}.gguf`` and ``omnivoice-tokenizer-F32.gguf``; their files
cannot be downloaded here. Their tensor data equals ours (same names, shapes and PyTorch-order
convolution weights, HuBERT's pos-conv weight norm folded), so the files are rebuilt from ours,
with the layout's differences applied:

- LM: ``omnivoice.audio_codebook_weights`` an INT32 array; no ``tokenizer.ggml.token_type``,
  ``tokenizer.ggml.pre`` or eos / padding ids; ``general.name``; no ``general.file_type`` from
  their converter (F32), a string from their quantize tool (with ``general.quantization_version``);
  tensors sorted by name; gguf-py's default 32-byte alignment.
- codec: HuBERT under ``semantic_model.`` (names up to 71 bytes), tensors sorted by name,
  ``general.name``; their two extra keys
  ``omnivoice.acoustic.n_codebooks`` (9) and ``omnivoice.semantic.num_feat_extract_layers``;
  none of the keys ours adds (``n_quantizers``, ``frame_rate``, ``has_encoder``,
  ``semantic.{conv_bias, feat_extract_norm, feat_proj_layer_norm, do_stable_layer_norm,
  downsample_factor}``, ``semantic_encoder.*``).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import gguf
import numpy as np

from omnivoice import _core

LM_DROPPED = {
    "tokenizer.ggml.token_type",
    "tokenizer.ggml.pre",
    "tokenizer.ggml.eos_token_id",
    "tokenizer.ggml.padding_token_id",
    "general.quantization_version",
    "general.file_type",
    "omnivoice.audio_codebook_weights",
}
CODEC_DROPPED = {
    "omnivoice.n_quantizers",
    "omnivoice.frame_rate",
    "omnivoice.has_encoder",
    "omnivoice.semantic.conv_bias",
    "omnivoice.semantic.feat_extract_norm",
    "omnivoice.semantic.feat_proj_layer_norm",
    "omnivoice.semantic.do_stable_layer_norm",
    "omnivoice.semantic.downsample_factor",
    "omnivoice.semantic_encoder.kernel_size",
    "omnivoice.semantic_encoder.unit_kernel_size",
    "omnivoice.semantic_encoder.strides",
    "omnivoice.semantic_encoder.block_dilations",
    "omnivoice.semantic_encoder.channel_ratios",
}


def _copy_fields(reader: gguf.GGUFReader, writer: gguf.GGUFWriter, dropped: set[str]) -> None:
    for field in reader.fields.values():
        name = field.name
        if name.startswith("GGUF.") or name in ("general.architecture", "general.alignment") or name in dropped:
            continue
        sub = field.types[-1] if field.types[0] == gguf.GGUFValueType.ARRAY else None
        writer.add_key_value(name, field.contents(), field.types[0], sub_type=sub)


def _finish(writer: gguf.GGUFWriter) -> None:
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def write_cpp_lm(ours: Path, dst: Path, file_type: str | None,
                 qtype: Callable[[str, tuple[int, ...]], str | None] | None = None) -> None:
    """Their LM file from our LM ``ours``: as their converter writes it (``file_type`` None) or
    their quantize tool (``file_type`` the variant's name, e.g. ``"Q4_K_M"``).

    ``qtype(name, shape)`` names the ggml type a 2-D weight is quantised to with ggml's
    quantiser, or ``"f32"`` to store its values dequantised (``None`` or no function keeps the
    stored data).
    """
    reader = gguf.GGUFReader(ours)
    writer = gguf.GGUFWriter(dst, "omnivoice-lm")
    writer.add_name("OmniVoice")
    _copy_fields(reader, writer, LM_DROPPED)
    weights = reader.fields["omnivoice.audio_codebook_weights"].contents()
    writer.add_array("omnivoice.audio_codebook_weights", [int(w) for w in weights])  # INT32
    if file_type is not None:
        writer.add_uint32("general.quantization_version", 2)
        writer.add_string("general.file_type", file_type)
    for t in sorted(reader.tensors, key=lambda t: t.name):
        shape = tuple(int(n) for n in reversed(t.shape))
        want = qtype(t.name, shape) if qtype and len(shape) == 2 else None
        # Quantised data goes in as uint8 rows, whose byte shape gguf-py turns into the tensor's.
        if want == "f32":
            data = gguf.quants.dequantize(t.data, t.tensor_type).reshape(shape)
            writer.add_tensor(t.name, data, raw_dtype=gguf.GGMLQuantizationType.F32)
        elif want:
            data = _core.quantize(np.asarray(t.data, dtype=np.float32).reshape(shape), want)
            writer.add_tensor(t.name, data, raw_dtype=gguf.GGMLQuantizationType[want.upper()])
        else:
            writer.add_tensor(t.name, np.asarray(t.data), raw_dtype=t.tensor_type)
    _finish(writer)


def write_cpp_codec(ours: Path, dst: Path) -> None:
    """Their codec file from our codec GGUF ``ours`` (with its encoder)."""
    reader = gguf.GGUFReader(ours)
    writer = gguf.GGUFWriter(dst, "omnivoice-tokenizer")
    writer.add_name("OmniVoice-tokenizer")
    _copy_fields(reader, writer, CODEC_DROPPED | {"general.file_type"})
    writer.add_uint32("omnivoice.acoustic.n_codebooks", 9)
    writer.add_uint32("omnivoice.semantic.num_feat_extract_layers",
                      len(reader.fields["omnivoice.semantic.conv_dim"].contents()))
    renamed = {("semantic_model." + t.name[len("hubert."):] if t.name.startswith("hubert.") else t.name): t
               for t in reader.tensors}
    for name in sorted(renamed):
        writer.add_tensor(name, np.asarray(renamed[name].data), raw_dtype=renamed[name].tensor_type)
    _finish(writer)
