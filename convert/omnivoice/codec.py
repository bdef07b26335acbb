"""Higgs Audio v2 tokenizer (``audio_tokenizer/``) -> GGUF ``omnivoice-tokenizer``."""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from pathlib import Path

import gguf

from ..checkpoint import Checkpoint
from ..config import Config
from ..writer import PlannedTensor, WrittenFile, write_gguf

__all__ = ["CODEC_ARCH", "CODEC_TYPES", "CodecHparams", "convert_codec", "gguf_name", "is_training_only"]

logger = logging.getLogger(__name__)

CODEC_ARCH = "omnivoice-tokenizer"

# --codec-type name -> (storage type of 2-D/3-D weights, general.file_type)
CODEC_TYPES: dict[str, tuple[gguf.GGMLQuantizationType, gguf.LlamaFileType]] = {
    "F32": (gguf.GGMLQuantizationType.F32, gguf.LlamaFileType.ALL_F32),
    "F16": (gguf.GGMLQuantizationType.F16, gguf.LlamaFileType.MOSTLY_F16),
}

# Checkpoint prefix -> GGUF prefix. ggml names hold at most 63 bytes and the HuBERT keys under
# "semantic_model." reach 71.
RENAMED = {"semantic_model.": "hubert."}

# Residual units of every DAC block, with dilations 1, 3, 9.
DAC_RES_UNITS = ("res_unit1", "res_unit2", "res_unit3")


def is_training_only(name: str) -> bool:
    """Whether checkpoint tensor ``name`` is used only in training (dropped from the GGUF)."""
    # EMA codebook statistics, the semantic reconstruction branch (fc1 -> decoder_semantic),
    # and HuBERT's SpecAugment mask vector: none of them is used to encode or decode.
    return (
        name.startswith(("fc1.", "decoder_semantic."))
        or name == "semantic_model.masked_spec_embed"
        or name.rsplit(".", 1)[-1] in ("inited", "cluster_size", "embed_avg")
    )


@dataclass(frozen=True)
class CodecHparams:
    """What ``audio_tokenizer/config.json`` says about the codec."""

    sample_rate: int
    semantic_sample_rate: int
    downsample_factor: int
    codebook_size: int
    codebook_dim: int
    n_quantizers: int
    hop_length: int
    frame_rate: int
    semantic_downsample_factor: int
    kernel_size: int
    unit_kernel_size: int
    strides: list[int]
    channel_ratios: list[int]
    block_dilations: list[int]
    acoustic_encoder_hidden_size: int
    acoustic_decoder_hidden_size: int
    acoustic_hidden_size: int
    downsampling_ratios: list[int]
    upsampling_ratios: list[int]
    semantic_hidden_size: int
    semantic_intermediate_size: int
    semantic_n_head: int
    semantic_n_layer: int
    conv_dim: list[int]
    conv_kernel: list[int]
    conv_stride: list[int]
    conv_bias: bool
    num_conv_pos_embeddings: int
    num_conv_pos_embedding_groups: int
    layer_norm_eps: float
    feat_extract_norm: str
    feat_proj_layer_norm: bool
    do_stable_layer_norm: bool

    @classmethod
    def from_config(cls, cfg: Config) -> CodecHparams:
        """Reads the hparams; raises ValueError naming a missing or unsupported field."""
        ac = cfg.sub("acoustic_model_config")
        sc = cfg.sub("semantic_model_config")
        for key in ("hidden_act", "feat_extract_activation"):
            if sc.get_str(key) != "gelu":
                raise ValueError(f"semantic_model_config.{key} is {sc.get_str(key)!r}, expected 'gelu'")
        if sc.has("conv_pos_batch_norm") and sc.get_bool("conv_pos_batch_norm"):
            raise ValueError("semantic_model_config.conv_pos_batch_norm is not supported")
        feat_extract_norm = sc.get_str("feat_extract_norm")
        if feat_extract_norm not in ("group", "layer"):
            raise ValueError(f"semantic_model_config.feat_extract_norm {feat_extract_norm!r} is not 'group' or 'layer'")
        conv_dim, conv_kernel, conv_stride = sc.get_ints("conv_dim"), sc.get_ints("conv_kernel"), sc.get_ints("conv_stride")
        if not len(conv_dim) == len(conv_kernel) == len(conv_stride):
            raise ValueError("semantic_model_config conv_dim, conv_kernel and conv_stride differ in length")
        strides, ratios = cfg.get_ints("strides"), cfg.get_ints("channel_ratios")
        if len(strides) != len(ratios):
            raise ValueError("config fields 'strides' and 'channel_ratios' differ in length")

        # Derived exactly as HiggsAudioV2TokenizerConfig's properties derive them.
        sample_rate = cfg.get_int("sample_rate")
        semantic_sample_rate = cfg.get_int("semantic_sample_rate")
        downsample_factor = cfg.get_int("downsample_factor")
        codebook_size = cfg.get_int("codebook_size")
        downsampling_ratios = ac.get_ints("downsampling_ratios")
        hop_length = math.prod(downsampling_ratios)
        frame_rate = math.ceil(sample_rate / hop_length)
        bandwidth_kbps = cfg.get_floats("target_bandwidths")[-1]
        n_quantizers = int(1000 * bandwidth_kbps // (frame_rate * math.ceil(math.log2(codebook_size))))
        semantic_downsample = int(hop_length / (sample_rate / semantic_sample_rate) / downsample_factor)
        return cls(
            sample_rate=sample_rate,
            semantic_sample_rate=semantic_sample_rate,
            downsample_factor=downsample_factor,
            codebook_size=codebook_size,
            codebook_dim=cfg.get_int("codebook_dim"),
            n_quantizers=n_quantizers,
            hop_length=hop_length,
            frame_rate=frame_rate,
            semantic_downsample_factor=semantic_downsample,
            kernel_size=cfg.get_int("kernel_size"),
            unit_kernel_size=cfg.get_int("unit_kernel_size"),
            strides=strides,
            channel_ratios=ratios,
            block_dilations=cfg.get_ints("block_dilations"),
            acoustic_encoder_hidden_size=ac.get_int("encoder_hidden_size"),
            acoustic_decoder_hidden_size=ac.get_int("decoder_hidden_size"),
            acoustic_hidden_size=ac.get_int("hidden_size"),
            downsampling_ratios=downsampling_ratios,
            upsampling_ratios=ac.get_ints("upsampling_ratios"),
            semantic_hidden_size=sc.get_int("hidden_size"),
            semantic_intermediate_size=sc.get_int("intermediate_size"),
            semantic_n_head=sc.get_int("num_attention_heads"),
            semantic_n_layer=sc.get_int("num_hidden_layers"),
            conv_dim=conv_dim,
            conv_kernel=conv_kernel,
            conv_stride=conv_stride,
            conv_bias=sc.get_bool("conv_bias"),
            num_conv_pos_embeddings=sc.get_int("num_conv_pos_embeddings"),
            num_conv_pos_embedding_groups=sc.get_int("num_conv_pos_embedding_groups"),
            layer_norm_eps=sc.get_float("layer_norm_eps"),
            feat_extract_norm=feat_extract_norm,
            feat_proj_layer_norm=sc.get_bool("feat_proj_layer_norm"),
            do_stable_layer_norm=sc.get_bool("do_stable_layer_norm"),
        )

    def decoder_tensors(self) -> list[str]:
        """Checkpoint names of everything codes -> audio needs, in file order."""
        names: list[str] = []
        for iq in range(self.n_quantizers):
            p = f"quantizer.quantizers.{iq}."
            names += [p + "codebook.embed", p + "project_out.weight", p + "project_out.bias"]
        names += ["fc2.weight", "fc2.bias", "acoustic_decoder.conv1.weight", "acoustic_decoder.conv1.bias"]
        for ib in range(len(self.upsampling_ratios)):
            p = f"acoustic_decoder.block.{ib}."
            names += [p + "snake1.alpha", p + "conv_t1.weight", p + "conv_t1.bias"]
            names += _dac_res_unit(p)
        names += ["acoustic_decoder.snake1.alpha", "acoustic_decoder.conv2.weight", "acoustic_decoder.conv2.bias"]
        return names

    def encoder_tensors(self) -> list[str]:
        """Checkpoint names of what only audio -> codes needs, in file order."""
        names = ["semantic_model." + n for n in self._hubert_tensors()]
        names.append("encoder_semantic.conv.weight")
        for ib in range(len(self.strides)):
            p = f"encoder_semantic.conv_blocks.{ib}."
            for iu in range(len(self.block_dilations)):
                names += [f"{p}res_units.{iu}.conv1.weight", f"{p}res_units.{iu}.conv2.weight"]
            names += [p + "conv.weight", p + "conv.bias"]
        names += ["acoustic_encoder.conv1.weight", "acoustic_encoder.conv1.bias"]
        for ib in range(len(self.downsampling_ratios)):
            p = f"acoustic_encoder.block.{ib}."
            names += _dac_res_unit(p)
            names += [p + "snake1.alpha", p + "conv1.weight", p + "conv1.bias"]
        names += ["acoustic_encoder.snake1.alpha", "acoustic_encoder.conv2.weight", "acoustic_encoder.conv2.bias"]
        names += ["fc.weight", "fc.bias"]
        for iq in range(self.n_quantizers):
            names += [f"quantizer.quantizers.{iq}.project_in.weight", f"quantizer.quantizers.{iq}.project_in.bias"]
        return names

    def _hubert_tensors(self) -> list[str]:
        names: list[str] = []
        for il in range(len(self.conv_dim)):
            p = f"feature_extractor.conv_layers.{il}."
            names.append(p + "conv.weight")
            if self.conv_bias:
                names.append(p + "conv.bias")
            # "group" normalises the first conv only (GroupNorm); "layer" every conv (LayerNorm).
            if self.feat_extract_norm == "layer" or il == 0:
                names += [p + "layer_norm.weight", p + "layer_norm.bias"]
        if self.feat_proj_layer_norm:
            names += ["feature_projection.layer_norm.weight", "feature_projection.layer_norm.bias"]
        names += ["feature_projection.projection.weight", "feature_projection.projection.bias"]
        names += ["encoder.pos_conv_embed.conv.weight", "encoder.pos_conv_embed.conv.bias"]
        names += ["encoder.layer_norm.weight", "encoder.layer_norm.bias"]
        for il in range(self.semantic_n_layer):
            p = f"encoder.layers.{il}."
            for proj in ("q_proj", "k_proj", "v_proj", "out_proj"):
                names += [f"{p}attention.{proj}.weight", f"{p}attention.{proj}.bias"]
            names += [p + "layer_norm.weight", p + "layer_norm.bias"]
            for dense in ("intermediate_dense", "output_dense"):
                names += [f"{p}feed_forward.{dense}.weight", f"{p}feed_forward.{dense}.bias"]
            names += [p + "final_layer_norm.weight", p + "final_layer_norm.bias"]
        return names


def _dac_res_unit(prefix: str) -> list[str]:
    names: list[str] = []
    for unit in DAC_RES_UNITS:
        p = f"{prefix}{unit}."
        names += [p + "snake1.alpha", p + "conv1.weight", p + "conv1.bias"]
        names += [p + "snake2.alpha", p + "conv2.weight", p + "conv2.bias"]
    return names


def gguf_name(name: str) -> str:
    """The GGUF name of checkpoint tensor ``name``."""
    for old, new in RENAMED.items():
        if name.startswith(old):
            return new + name[len(old) :]
    return name


def _add_metadata(w: gguf.GGUFWriter, hp: CodecHparams, has_encoder: bool, file_type: gguf.LlamaFileType) -> None:
    w.add_file_type(int(file_type))
    w.add_uint32("omnivoice.sample_rate", hp.sample_rate)
    w.add_uint32("omnivoice.semantic_sample_rate", hp.semantic_sample_rate)
    w.add_uint32("omnivoice.downsample_factor", hp.downsample_factor)
    w.add_uint32("omnivoice.codebook_size", hp.codebook_size)
    w.add_uint32("omnivoice.codebook_dim", hp.codebook_dim)
    w.add_uint32("omnivoice.n_quantizers", hp.n_quantizers)
    w.add_uint32("omnivoice.frame_rate", hp.frame_rate)
    w.add_bool("omnivoice.has_encoder", has_encoder)
    w.add_uint32("omnivoice.acoustic.encoder_hidden_size", hp.acoustic_encoder_hidden_size)
    w.add_uint32("omnivoice.acoustic.decoder_hidden_size", hp.acoustic_decoder_hidden_size)
    w.add_uint32("omnivoice.acoustic.hidden_size", hp.acoustic_hidden_size)
    w.add_uint32("omnivoice.acoustic.hop_length", hp.hop_length)
    w.add_array("omnivoice.acoustic.upsampling_ratios", hp.upsampling_ratios)
    w.add_array("omnivoice.acoustic.downsampling_ratios", hp.downsampling_ratios)
    w.add_uint32("omnivoice.semantic.hidden_size", hp.semantic_hidden_size)
    w.add_uint32("omnivoice.semantic.intermediate_size", hp.semantic_intermediate_size)
    w.add_uint32("omnivoice.semantic.num_attention_heads", hp.semantic_n_head)
    w.add_uint32("omnivoice.semantic.num_hidden_layers", hp.semantic_n_layer)
    w.add_array("omnivoice.semantic.conv_dim", hp.conv_dim)
    w.add_array("omnivoice.semantic.conv_kernel", hp.conv_kernel)
    w.add_array("omnivoice.semantic.conv_stride", hp.conv_stride)
    w.add_bool("omnivoice.semantic.conv_bias", hp.conv_bias)
    w.add_uint32("omnivoice.semantic.num_conv_pos_embeddings", hp.num_conv_pos_embeddings)
    w.add_uint32("omnivoice.semantic.num_conv_pos_embedding_groups", hp.num_conv_pos_embedding_groups)
    w.add_float32("omnivoice.semantic.layer_norm_eps", hp.layer_norm_eps)
    w.add_string("omnivoice.semantic.feat_extract_norm", hp.feat_extract_norm)
    w.add_bool("omnivoice.semantic.feat_proj_layer_norm", hp.feat_proj_layer_norm)
    w.add_bool("omnivoice.semantic.do_stable_layer_norm", hp.do_stable_layer_norm)
    w.add_uint32("omnivoice.semantic.downsample_factor", hp.semantic_downsample_factor)
    w.add_uint32("omnivoice.semantic_encoder.kernel_size", hp.kernel_size)
    w.add_uint32("omnivoice.semantic_encoder.unit_kernel_size", hp.unit_kernel_size)
    w.add_array("omnivoice.semantic_encoder.strides", hp.strides)
    w.add_array("omnivoice.semantic_encoder.block_dilations", hp.block_dilations)
    w.add_array("omnivoice.semantic_encoder.channel_ratios", hp.channel_ratios)


def convert_codec(codec_dir: Path, out_path: Path, codec_type: str = "F32", encoder: bool = True) -> WrittenFile:
    """Converts the audio tokenizer of an OmniVoice snapshot to an ``omnivoice-tokenizer`` GGUF.

    Args:
        codec_dir: the snapshot's ``audio_tokenizer/`` (``config.json``, ``model.safetensors``).
        out_path: the GGUF to write.
        codec_type: F32, or F16 for the ``.weight`` tensors of 2+ dims (biases, norms, Snake
            alphas and codebooks stay F32).
        encoder: False writes only what decoding needs (``omnivoice.has_encoder`` false).

    Returns:
        A summary of the written file.

    Raises:
        FileNotFoundError: a file is missing.
        ValueError: a config field or tensor is missing or unexpected, or ``codec_type`` is
            unknown.
    """
    if codec_type not in CODEC_TYPES:
        raise ValueError(f"unknown codec type {codec_type!r}; choose one of {', '.join(CODEC_TYPES)}")
    codec_dir = Path(codec_dir)
    hp = CodecHparams.from_config(Config.load(codec_dir / "config.json"))
    ckpt = Checkpoint(codec_dir)
    wtype, file_type = CODEC_TYPES[codec_type]

    kept = hp.decoder_tensors() + (hp.encoder_tensors() if encoder else [])
    known = set(hp.decoder_tensors() + hp.encoder_tensors())
    planned: list[PlannedTensor] = []
    used: set[str] = set()
    for name in kept:
        shape, load, keys = ckpt.resolve(name)
        used.update(keys)
        qtype = wtype if name.endswith(".weight") and len(shape) >= 2 else gguf.GGMLQuantizationType.F32
        planned.append(PlannedTensor(gguf_name(name), shape, qtype, load))
    # Without the encoder its tensors are skipped (and may be absent), but are not unexpected.
    for name in known.difference(kept):
        used.update(ckpt.weight_keys(name) or [])
    unexpected = [n for n in ckpt.names() if n not in used and not is_training_only(n)]
    if unexpected:
        raise ValueError(f"{codec_dir}: unexpected tensor {unexpected[0]} ({len(unexpected)} in all)")

    writer = gguf.GGUFWriter(out_path, CODEC_ARCH)
    _add_metadata(writer, hp, encoder, file_type)
    written = write_gguf(writer, planned)
    logger.info("%s", written.describe())
    return written
