"""OmniVoice LM (Qwen3 backbone + audio embeddings/heads + text vocabulary) -> GGUF ``omnivoice-lm``."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import gguf

from ..checkpoint import Checkpoint
from ..config import Config
from .text_tokenizer import TextVocab, read_text_vocab
from ..writer import PlannedTensor, WrittenFile, write_gguf

__all__ = ["LM_ARCH", "LM_TYPES", "LMHparams", "convert_lm", "lm_tensor_type"]

logger = logging.getLogger(__name__)

LM_ARCH = "omnivoice-lm"

# --outtype name -> (storage type of 2-D weights, general.file_type)
LM_TYPES: dict[str, tuple[gguf.GGMLQuantizationType, gguf.LlamaFileType]] = {
    "F32": (gguf.GGMLQuantizationType.F32, gguf.LlamaFileType.ALL_F32),
    "F16": (gguf.GGMLQuantizationType.F16, gguf.LlamaFileType.MOSTLY_F16),
    "BF16": (gguf.GGMLQuantizationType.BF16, gguf.LlamaFileType.MOSTLY_BF16),
    "Q8_0": (gguf.GGMLQuantizationType.Q8_0, gguf.LlamaFileType.MOSTLY_Q8_0),
    # omnivoice.cpp's mix (see lm_tensor_type): mostly Q4_K, some tensors Q6_K.
    "Q4_K_M": (gguf.GGMLQuantizationType.Q4_K, gguf.LlamaFileType.MOSTLY_Q4_K_M),
}

# metadata key suffix -> added token of OmniVoice's prompt format
SPECIAL_TOKENS = {
    "denoise": "<|denoise|>",
    "lang_start": "<|lang_start|>",
    "lang_end": "<|lang_end|>",
    "instruct_start": "<|instruct_start|>",
    "instruct_end": "<|instruct_end|>",
    "text_start": "<|text_start|>",
    "text_end": "<|text_end|>",
}

# Checkpoint entries with no place in the GGUF: the offsets buffer is arange(n_codebook) * vocab.
DROPPED = {"codebook_layer_offsets"}


@dataclass(frozen=True)
class LMHparams:
    """What ``config.json`` says about the LM."""

    n_layer: int
    n_embd: int
    n_ff: int
    n_head: int
    n_head_kv: int
    head_dim: int
    rms_eps: float
    rope_theta: float
    n_ctx: int
    n_vocab: int
    tie_word_embeddings: bool
    n_codebook: int
    audio_vocab_size: int
    audio_mask_id: int
    codebook_weights: list[float]

    @classmethod
    def from_config(cls, cfg: Config) -> LMHparams:
        """Reads the hparams; raises ValueError naming a missing or unsupported field."""
        llm = cfg.sub("llm_config")
        if llm.get_str("model_type") != "qwen3":
            raise ValueError(f"llm_config.model_type is {llm.get_str('model_type')!r}, expected 'qwen3'")
        if llm.get_str("hidden_act") != "silu":
            raise ValueError(f"llm_config.hidden_act is {llm.get_str('hidden_act')!r}, expected 'silu'")
        # transformers >= 5 nests the RoPE settings in rope_parameters; older configs keep rope_theta.
        if llm.has("rope_parameters"):
            rope = llm.sub("rope_parameters")
            if rope.has("rope_type") and rope.get_str("rope_type") != "default":
                raise ValueError(f"unsupported RoPE type {rope.get_str('rope_type')!r} (only 'default')")
            rope_theta = rope.get_float("rope_theta")
        else:
            rope_theta = llm.get_float("rope_theta")
        n_codebook = cfg.get_int("num_audio_codebook")
        weights = cfg.get_floats("audio_codebook_weights")
        if len(weights) != n_codebook:
            raise ValueError(f"audio_codebook_weights has {len(weights)} entries for {n_codebook} codebooks")
        return cls(
            n_layer=llm.get_int("num_hidden_layers"),
            n_embd=llm.get_int("hidden_size"),
            n_ff=llm.get_int("intermediate_size"),
            n_head=llm.get_int("num_attention_heads"),
            n_head_kv=llm.get_int("num_key_value_heads"),
            head_dim=llm.get_int("head_dim"),
            rms_eps=llm.get_float("rms_norm_eps"),
            rope_theta=rope_theta,
            n_ctx=llm.get_int("max_position_embeddings"),
            n_vocab=llm.get_int("vocab_size"),
            # Not used at inference (audio_heads is the output); transformers defaults it to true.
            tie_word_embeddings=llm.get_bool("tie_word_embeddings") if llm.has("tie_word_embeddings") else True,
            n_codebook=n_codebook,
            audio_vocab_size=cfg.get_int("audio_vocab_size"),
            audio_mask_id=cfg.get_int("audio_mask_id"),
            codebook_weights=weights,
        )

    def tensor_shapes(self) -> dict[str, tuple[int, ...]]:
        """Every tensor of the GGUF with its PyTorch shape, in file order."""
        h, hd = self.n_embd, self.head_dim
        shapes: dict[str, tuple[int, ...]] = {"llm.embed_tokens.weight": (self.n_vocab, h)}
        for il in range(self.n_layer):
            p = f"llm.layers.{il}."
            shapes[p + "input_layernorm.weight"] = (h,)
            shapes[p + "self_attn.q_proj.weight"] = (self.n_head * hd, h)
            shapes[p + "self_attn.k_proj.weight"] = (self.n_head_kv * hd, h)
            shapes[p + "self_attn.v_proj.weight"] = (self.n_head_kv * hd, h)
            shapes[p + "self_attn.o_proj.weight"] = (h, self.n_head * hd)
            shapes[p + "self_attn.q_norm.weight"] = (hd,)
            shapes[p + "self_attn.k_norm.weight"] = (hd,)
            shapes[p + "post_attention_layernorm.weight"] = (h,)
            shapes[p + "mlp.gate_proj.weight"] = (self.n_ff, h)
            shapes[p + "mlp.up_proj.weight"] = (self.n_ff, h)
            shapes[p + "mlp.down_proj.weight"] = (h, self.n_ff)
        shapes["llm.norm.weight"] = (h,)
        shapes["audio_embeddings.weight"] = (self.n_codebook * self.audio_vocab_size, h)
        shapes["audio_heads.weight"] = (self.n_codebook * self.audio_vocab_size, h)
        return shapes


def _add_metadata(w: gguf.GGUFWriter, hp: LMHparams, vocab: TextVocab, file_type: gguf.LlamaFileType) -> None:
    a = LM_ARCH
    w.add_file_type(int(file_type))
    w.add_quantization_version(gguf.GGML_QUANT_VERSION)
    w.add_uint32(f"{a}.block_count", hp.n_layer)
    w.add_uint32(f"{a}.embedding_length", hp.n_embd)
    w.add_uint32(f"{a}.feed_forward_length", hp.n_ff)
    w.add_uint32(f"{a}.attention.head_count", hp.n_head)
    w.add_uint32(f"{a}.attention.head_count_kv", hp.n_head_kv)
    w.add_uint32(f"{a}.attention.key_length", hp.head_dim)
    w.add_uint32(f"{a}.attention.value_length", hp.head_dim)
    w.add_float32(f"{a}.attention.layer_norm_rms_epsilon", hp.rms_eps)
    w.add_float32(f"{a}.rope.freq_base", hp.rope_theta)
    w.add_uint32(f"{a}.context_length", hp.n_ctx)
    w.add_uint32(f"{a}.vocab_size", hp.n_vocab)
    w.add_bool("omnivoice.tie_word_embeddings", hp.tie_word_embeddings)
    w.add_uint32("omnivoice.num_audio_codebook", hp.n_codebook)
    w.add_uint32("omnivoice.audio_vocab_size", hp.audio_vocab_size)
    w.add_uint32("omnivoice.audio_mask_id", hp.audio_mask_id)
    w.add_array("omnivoice.audio_codebook_weights", [float(x) for x in hp.codebook_weights])
    for key, token in SPECIAL_TOKENS.items():
        if token not in vocab.ids:
            raise ValueError(f"tokenizer.json: missing added token {token}")
        w.add_uint32(f"omnivoice.special.{key}", vocab.ids[token])
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("qwen2")
    w.add_token_list(vocab.tokens)
    w.add_token_types(vocab.token_types)
    w.add_token_merges(vocab.merges)
    if vocab.eos_id is not None:
        w.add_eos_token_id(vocab.eos_id)
    if vocab.pad_id is not None:
        w.add_pad_token_id(vocab.pad_id)


def _bumped(il: int, n_layer: int) -> bool:
    # omnivoice.cpp's Q4_K_M layers (tools/quantize.cpp): the first ninth, the last seventh and
    # every third layer; 14 of 28.
    return il < n_layer // 9 or il >= n_layer - n_layer // 7 or il % 3 == 0


def lm_tensor_type(outtype: str, name: str, shape: tuple[int, ...], n_layer: int) -> gguf.GGMLQuantizationType:
    """Storage type of LM tensor ``name`` (PyTorch ``shape``) in an ``outtype`` file.

    1-D tensors stay F32. Q4_K_M is omnivoice.cpp's mix (its quantize tool's, after
    llama.cpp's): Q6_K for the two embedding tables and for ``v_proj`` and ``down_proj`` in the
    layers :func:`_bumped` picks, Q4_K for the rest; a tensor whose rows are not a multiple of
    256 is stored Q8_0 instead.

    Raises:
        ValueError: ``outtype`` is unknown.
    """
    if outtype not in LM_TYPES:
        raise ValueError(f"unknown LM type {outtype!r}; choose one of {', '.join(LM_TYPES)}")
    if len(shape) != 2:
        return gguf.GGMLQuantizationType.F32
    qtype = LM_TYPES[outtype][0]
    if outtype == "Q4_K_M":
        parts = name.split(".")
        bumped = len(parts) > 3 and parts[1] == "layers" and _bumped(int(parts[2]), n_layer)
        if name in ("llm.embed_tokens.weight", "audio_embeddings.weight") or (
            bumped and parts[-2] in ("v_proj", "down_proj")
        ):
            qtype = gguf.GGMLQuantizationType.Q6_K
        if shape[-1] % 256:
            qtype = gguf.GGMLQuantizationType.Q8_0
    return qtype


def convert_lm(model_dir: Path, out_path: Path, outtype: str = "F32") -> WrittenFile:
    """Converts the LM of an OmniVoice snapshot to an ``omnivoice-lm`` GGUF.

    Args:
        model_dir: the snapshot (``config.json``, ``model.safetensors`` or shards + index,
            ``tokenizer.json``, ``tokenizer_config.json``).
        out_path: the GGUF to write.
        outtype: storage of the 2-D weights: F32, F16, BF16, Q8_0 or Q4_K_M (a mix, see
            :func:`lm_tensor_type`); 1-D weights stay F32.

    Returns:
        A summary of the written file.

    Raises:
        FileNotFoundError: a file of the snapshot is missing.
        ValueError: a config field or tensor is missing, misshaped or unexpected, or ``outtype``
            is unknown.
    """
    if outtype not in LM_TYPES:
        raise ValueError(f"unknown LM type {outtype!r}; choose one of {', '.join(LM_TYPES)}")
    model_dir = Path(model_dir)
    hp = LMHparams.from_config(Config.load(model_dir / "config.json"))
    vocab = read_text_vocab(model_dir)
    if len(vocab.tokens) > hp.n_vocab:
        raise ValueError(f"tokenizer has {len(vocab.tokens)} tokens, more than the LM vocab_size {hp.n_vocab}")
    ckpt = Checkpoint(model_dir)
    file_type = LM_TYPES[outtype][1]

    planned: list[PlannedTensor] = []
    used = set(DROPPED)
    for name, shape in hp.tensor_shapes().items():
        got, load, keys = ckpt.resolve(name)
        if got != shape:
            raise ValueError(f"tensor {name} has shape {list(got)}, expected {list(shape)} from config.json")
        used.update(keys)
        planned.append(PlannedTensor(name, shape, lm_tensor_type(outtype, name, shape, hp.n_layer), load))
    unexpected = [n for n in ckpt.names() if n not in used]
    if unexpected:
        raise ValueError(f"{model_dir}: unexpected tensor {unexpected[0]} ({len(unexpected)} in all)")

    writer = gguf.GGUFWriter(out_path, LM_ARCH)
    _add_metadata(writer, hp, vocab, file_type)
    written = write_gguf(writer, planned)
    logger.info("%s", written.describe())
    return written
