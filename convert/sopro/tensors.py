"""Sopro's four safetensors files -> the tensor plan of one ``sopro-tts`` GGUF."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import gguf
import numpy as np

from ..checkpoint import Checkpoint
from ..writer import PlannedTensor
from .config import SoproConfig

__all__ = ["STAGES", "SOPRO_TYPES", "plan_tensors", "tensor_type"]

# GGUF name prefix -> the file holding that stage's state_dict (sopro.hub's names)
STAGES = {
    "model": "model.safetensors",
    "semantic_encoder": "semantic_encoder.safetensors",
    "speaker_encoder": "speaker_encoder.safetensors",
    "vocoder": "vocoder.safetensors",
}

Q = gguf.GGMLQuantizationType
# --outtype name -> (storage of the weights it applies to, general.file_type)
SOPRO_TYPES: dict[str, tuple[gguf.GGMLQuantizationType, gguf.LlamaFileType]] = {
    "F32": (Q.F32, gguf.LlamaFileType.ALL_F32),
    "F16": (Q.F16, gguf.LlamaFileType.MOSTLY_F16),
    "Q8_0": (Q.Q8_0, gguf.LlamaFileType.MOSTLY_Q8_0),
}

_LAYER = re.compile(r"ar_prior\.temporal\.layers\.(\d+)\.")
# The Linears upstream's quantization="int8" replaces (sopro.nn.quant.quantize_ar_int8).
_INT8 = re.compile(
    r"(sem_in_proj|ar_prior\.token_head|ar_prior\.temporal\.layers\.\d+\.(attn\.(q|k|v|out)_proj|ffn\.(gate|up|down)_proj))"
    r"\.weight"
)
# Kept F32 whatever the type: front-end filterbanks and windows, and activations-like tables.
_KEPT_F32 = ("mel_scale.fb", ".window", "style_prefix.queries", "pos_emb")
# LayerScale folded into the bias-free projection feeding it: (projection, scale) suffixes.
_FOLDS = {"attn.out_proj.weight": "attn_scale.scale", "ffn.down_proj.weight": "ffn_scale.scale"}


def tensor_type(outtype: str, stage: str, key: str, shape: tuple[int, ...]) -> gguf.GGMLQuantizationType:
    """Storage type of ``stage``'s tensor ``key`` in an ``outtype`` file.

    The front ends' filterbanks and STFT windows and every 1-D tensor stay F32 (an F16 filterbank
    moves the log-mel by several dB, audio.cpp found), and so do the two 2-D tensors the graphs add
    to activations rather than multiply by (``style_prefix.queries``, ``pos_emb``). F16 stores every other tensor F16; Q8_0
    quantises what upstream's int8 option does (the LM's projections, ``sem_in_proj`` and
    ``token_head``; a row not a multiple of 32 stays F32) and keeps the rest F32, as upstream keeps
    it in the model's dtype.
    """
    if outtype not in SOPRO_TYPES:
        raise ValueError(f"unknown Sopro type {outtype!r}; choose one of {', '.join(SOPRO_TYPES)}")
    if len(shape) < 2 or key.endswith(_KEPT_F32) or outtype == "F32":
        return Q.F32
    if outtype == "F16":
        return Q.F16
    return Q.Q8_0 if stage == "model" and _INT8.fullmatch(key) and shape[-1] % 32 == 0 else Q.F32


def _lm_shapes(cfg: SoproConfig) -> dict[str, tuple[int, ...]]:
    """PyTorch shapes of the semantic LM's tensors in model.safetensors, from the config."""
    m = cfg["model"]
    d, n_ff = m["ar_model_dim"], cfg.ar_ffn_length
    hd = d // m["ar_heads"]
    n_kv = m["ar_kv_heads"] * hd
    n_sem = m["semantic_vocab_size"] + 2  # + BOS, EOS
    shapes = {
        "text_tok_emb.weight": (m["text_vocab_size"], d),
        "semantic_tok_emb.weight": (n_sem, m["latent_dim"]),
        "sem_in_proj.weight": (d, m["latent_dim"]),
        "sem_in_proj.bias": (d,),
        "style_prefix.queries": (m["style_prefix_tokens"], d),
        "style_prefix.kv_norm.weight": (d,),
        "style_prefix.q_proj.weight": (d, d),
        "style_prefix.k_proj.weight": (d, d),
        "style_prefix.v_proj.weight": (d, d),
        "style_prefix.out_proj.weight": (d, d),
        "style_prefix.out_norm.weight": (d,),
        "ar_prior.out_norm.weight": (d,),
        "ar_prior.token_head.weight": (n_sem, d),
        "ar_prior.token_head.bias": (n_sem,),
    }
    for i in range(m["ar_blocks"]):
        p = f"ar_prior.temporal.layers.{i}."
        shapes.update({
            p + "attn_norm.weight": (d,),
            p + "attn.q_proj.weight": (d, d),
            p + "attn.k_proj.weight": (n_kv, d),
            p + "attn.v_proj.weight": (n_kv, d),
            p + "attn.out_proj.weight": (d, d),
            p + "attn_scale.scale": (d,),
            p + "ffn_norm.weight": (d,),
            p + "ffn.gate_proj.weight": (n_ff, d),
            p + "ffn.up_proj.weight": (n_ff, d),
            p + "ffn.down_proj.weight": (d, n_ff),
            p + "ffn_scale.scale": (d,),
        })
        if m["ar_qk_rms_norm"]:
            shapes[p + "attn.q_norm.weight"] = (hd,)
            shapes[p + "attn.k_norm.weight"] = (hd,)
    return shapes


def _is_lm(key: str) -> bool:
    return key.startswith(("text_tok_emb.", "semantic_tok_emb.", "sem_in_proj.", "style_prefix.", "ar_prior."))


def _folded(ckpt: Checkpoint, key: str, scale_key: str) -> Callable[[], np.ndarray]:
    # LayerScale(x) = x * scale after a bias-free Linear: scale its output rows instead.
    return lambda: ckpt.read(key) * ckpt.read(scale_key)[:, None]


def plan_tensors(snapshot: Path, cfg: SoproConfig, outtype: str) -> list[PlannedTensor]:
    """Every tensor of the GGUF, ``<stage>.<state_dict key>``, in file order per stage.

    The LM's tensors are checked against ``config.json`` (shapes, layer count, nothing extra);
    the other stages' are stored as they are (their loaders check shapes). LayerScale is folded
    into ``attn.out_proj`` and ``ffn.down_proj`` and not stored.

    Raises:
        FileNotFoundError: one of the four files is missing.
        ValueError: an LM tensor is missing, misshaped or unexpected.
    """
    planned: list[PlannedTensor] = []
    for stage, file in STAGES.items():
        ckpt = Checkpoint.from_file(snapshot / file)
        names = ckpt.names()
        if stage == "model":
            expected = _lm_shapes(cfg)
            for key in names:
                if _is_lm(key) and key not in expected:
                    layer = _LAYER.match(key)
                    why = f" (config.json: ar_blocks {cfg['model']['ar_blocks']})" if layer else ""
                    raise ValueError(f"{snapshot / file}: unexpected tensor {key}{why}")
            for key, shape in expected.items():
                if ckpt.shape(key) != shape:
                    raise ValueError(f"{snapshot / file}: tensor {key} has shape {list(ckpt.shape(key))}, "
                                     f"expected {list(shape)} from config.json")
        for key in names:
            if key.endswith(tuple(_FOLDS.values())) and _LAYER.match(key):
                continue
            shape = ckpt.shape(key)
            load = lambda ckpt=ckpt, key=key: ckpt.read(key)
            for proj, scale in _FOLDS.items():
                if key.endswith(proj) and _LAYER.match(key):
                    load = _folded(ckpt, key, key[: -len(proj)] + scale)
            planned.append(PlannedTensor(f"{stage}.{key}", shape, tensor_type(outtype, stage, key, shape), load))
    return planned
