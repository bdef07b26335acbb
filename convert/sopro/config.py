"""Sopro's ``config.json`` as typed GGUF metadata.

Every field is written as ``sopro-tts.<section>.<field>`` (``sopro-tts.sample_rate`` at the top), with
the type this table gives it. A field ``config.json`` omits takes sopro 2.2.0's default, as
``SoproConfig.from_dict`` does (the converter logs each one); null is accepted only where upstream
declares the field Optional. Fields it does not know are ignored as upstream ignores them, with a
warning. Nulls upstream resolves at load time are written resolved (``ar_kv_heads``,
``acoustic_mu_dim``, the vocoder's lookaheads), and the two FFN widths upstream computes from a
multiplier are added as ``sopro-tts.model.ar_ffn_length`` and ``sopro-tts.model.acoustic_dit_ff_length``
(Python's ``round``, so that C++ need not repeat it).
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from pathlib import Path

import gguf

from ..checkpoint import read_json

__all__ = ["ARCH", "SoproConfig", "is_sopro_config"]

logger = logging.getLogger(__name__)

ARCH = "sopro-tts"

# section -> field -> (GGUF kind, sopro 2.2.0's default; None: required, or resolved below)
FIELDS: dict[str, dict[str, tuple[str, object]]] = {
    "": {"sample_rate": ("u32", 24000)},
    "model": {
        "latent_dim": ("u32", 1280),
        "semantic_vocab_size": ("u32", 4375),
        "text_vocab_size": ("u32", 8192),
        "max_text_len": ("u32", 2048),
        "cond_in_dim": ("u32", 328),
        "cond_hidden_dim": ("u32", 512),
        "ar_model_dim": ("u32", 512),
        "ar_blocks": ("u32", 12),
        "ar_heads": ("u32", 8),
        "ar_kv_heads": ("u32", None),  # null: ar_heads
        "ar_ffn_mult": ("f32", 4.0),
        "ar_qk_rms_norm": ("bool", True),
        "style_prefix_tokens": ("u32", 8),
        "acoustic_time_embed_dim": ("u32", 256),
        "acoustic_sway_sampling_coef": ("f32", -1.0),
        "acoustic_upsampler_kernel_size": ("u32", 3),
        "acoustic_dit_dim": ("u32", 512),
        "acoustic_dit_depth": ("u32", 8),
        "acoustic_dit_heads": ("u32", 8),
        "acoustic_dit_dim_head": ("u32", 64),
        "acoustic_dit_ff_mult": ("f32", 2.0),
        "acoustic_mu_dim": ("u32", None),  # null: acoustic_mel_n_mels
        "acoustic_spk_dim": ("u32", 80),
        "acoustic_pre_lookahead_frames": ("u32", 3),
        "acoustic_pos_kernel_size": ("u32", 31),
        "acoustic_sigma_min": ("f32", 1.0e-6),
        "acoustic_num_left_chunks": ("i32", -1),
        "acoustic_mel_n_mels": ("u32", 100),
        "acoustic_mel_hop_length": ("u32", 256),
        "acoustic_mel_mean": ("f32[]", None),  # required: SoproTTS fails without it
        "acoustic_mel_std": ("f32[]", None),
    },
    "semantic_encoder": {
        "n_mels": ("u32", 80),
        "d_model": ("u32", 512),
        "layers": ("u32", 6),
        "heads": ("u32", 8),
        "ffn_dim": ("u32", 2048),
        "max_positions": ("u32", 1500),
        "fsq_levels": ("u32[]", [7, 5, 5, 5, 5]),
        "sample_rate": ("u32", 16000),
        "n_fft": ("u32", 400),
        "hop_length": ("u32", 160),
        "token_samples_24k": ("u32", 1024),
    },
    "speaker_encoder": {
        "sample_rate": ("u32", 16000),
        "n_mels": ("u32", 80),
        "n_fft": ("u32", 1024),
        "win_length": ("u32", 400),
        "hop_length": ("u32", 160),
        "f_min": ("f32", 20.0),
        "f_max": ("f32", 7600.0),
        "mel_log_floor": ("f32", 1e-5),
        "stem_channels": ("u32", 128),
        "stage_channels": ("u32[]", [160, 192, 224]),
        "blocks_per_stage": ("u32[]", [4, 4, 4]),
        "dilation_cycle": ("u32[]", [1, 2, 4, 8]),
        "depthwise_kernel_size": ("u32", 5),
        "se_reduction": ("u32", 8),
        "id_emb_dim": ("u32", 192),
        "style_emb_dim": ("u32", 128),
        "style_ctrl_dim": ("u32", 8),
        "id_head_hidden": ("u32", 256),
        "style_head_hidden": ("u32", 256),
        "attn_hidden": ("u32", 128),
    },
    "vocoder": {
        "sample_rate": ("u32", 24000),
        "n_fft": ("u32", 1024),
        "hop_length": ("u32", 256),
        "n_mels": ("u32", 100),
        "dim": ("u32", 512),
        "intermediate_dim": ("u32", 1536),
        "num_layers": ("u32", 8),
        "max_magnitude": ("f32", 100.0),
        "causal": ("bool", True),
        "lookahead_frames": ("u32", 3),
        "block_lookaheads": ("u32[]", [3] * 8),  # null or empty, or causal false: zeros
    },
    "generation": {
        "temperature": ("f32", 0.8),
        "top_p": ("f32", 0.9),
        "top_k": ("u32", 25),
        "steps": ("u32", 2),
        "max_seconds": ("f32", 30.0),
        "min_seconds": ("f32", 0.4),
        "max_segment_chars": ("u32", 300),
        "ref_seconds": ("f32", 15.0),
        "style_tokens": ("u32", 160),
        "prompt_tokens": ("u32", 120),
        "stream_chunk_frames": ("u32", 64),
    },
}

# Fields upstream declares Optional (null there means "resolve", see SoproConfig._resolve).
_NULLABLE = {"ar_kv_heads", "acoustic_mu_dim", "block_lookaheads"}
# Top-level objects only Sopro's config.json has (OmniVoice's has model_type "omnivoice").
_SECTIONS = ("model", "semantic_encoder", "speaker_encoder", "vocoder")


def is_sopro_config(data: dict) -> bool:
    """Whether a parsed ``config.json`` is Sopro's: objects ``model``, ``semantic_encoder``,
    ``speaker_encoder`` and ``vocoder``, and no ``model_type``."""
    return "model_type" not in data and all(isinstance(data.get(s), dict) for s in _SECTIONS)


def _checked(where: str, kind: str, v: object) -> object:
    def bad(what: str) -> ValueError:
        return ValueError(f"{where} must be {what}, got {v!r}")

    def is_int(x: object) -> bool:
        return isinstance(x, int) and not isinstance(x, bool) or isinstance(x, float) and x.is_integer()

    if kind == "bool":
        if not isinstance(v, bool):
            raise bad("true or false")
        return v
    if kind == "f32":
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise bad("a finite number")
        return float(v)
    if kind in ("u32", "i32"):
        lo = 0 if kind == "u32" else -(2**31)
        if not is_int(v) or not lo <= int(v) < 2**31:
            raise bad("a non-negative integer" if kind == "u32" else "an integer")
        return int(v)
    if not isinstance(v, list) or not v:
        raise bad("a non-empty list")
    return [_checked(f"{where}[{i}]", kind[:-2], x) for i, x in enumerate(v)]


@dataclass(frozen=True)
class SoproConfig:
    """The resolved fields: ``values[section][field]`` (section ``""`` for the top level)."""

    values: dict[str, dict[str, object]]

    @classmethod
    def load(cls, path: Path) -> SoproConfig:
        """Reads and checks ``config.json``; raises ValueError naming a bad or missing field."""
        data = read_json(path)
        if not is_sopro_config(data):
            raise ValueError(f"{path}: not a Sopro config (needs objects {', '.join(_SECTIONS)})")
        values: dict[str, dict[str, object]] = {}
        for section, fields in FIELDS.items():
            src = data if section == "" else data.get(section) or {}
            if not isinstance(src, dict):
                raise ValueError(f"{path}: {section} must be an object")
            known = set(fields) | (set(FIELDS) if section == "" else set())
            for extra in sorted(set(src) - known):
                logger.warning("%s: ignoring unknown field %s%s", path, f"{section}." if section else "", extra)
            out: dict[str, object] = {}
            for name, (kind, default) in fields.items():
                where = f"{path}: {section + '.' if section else ''}{name}"
                v = src.get(name)
                if name in ("acoustic_mel_mean", "acoustic_mel_std") and v is None:
                    raise ValueError(f"{where} is required (100 floats: the mel statistics)")
                if name not in src:
                    logger.info("%s: missing, using sopro 2.2.0's default %r", where, default)
                    out[name] = default
                elif v is None or name == "block_lookaheads" and v == []:
                    if name not in _NULLABLE:
                        raise ValueError(f"{where} must not be null")
                    out[name] = None
                else:
                    out[name] = _checked(where, kind, v)
            values[section] = out
        cls._resolve(values, path)
        return cls(values)

    @staticmethod
    def _resolve(values: dict[str, dict[str, object]], path: Path) -> None:
        m, voc = values["model"], values["vocoder"]
        if m["ar_kv_heads"] is None:
            m["ar_kv_heads"] = m["ar_heads"]
        if m["acoustic_mu_dim"] is None:
            m["acoustic_mu_dim"] = m["acoustic_mel_n_mels"]
        # Backbone: lookaheads only in causal mode, zeros when the list is null or empty.
        if not voc["causal"]:
            voc["lookahead_frames"] = 0
        if not voc["causal"] or not voc["block_lookaheads"]:
            voc["block_lookaheads"] = [0] * int(voc["num_layers"])
        if len(voc["block_lookaheads"]) != voc["num_layers"]:
            raise ValueError(f"{path}: vocoder.block_lookaheads needs one entry per layer ({voc['num_layers']})")
        for section, name in (("model", "acoustic_mel_mean"), ("model", "acoustic_mel_std")):
            if len(values[section][name]) != m["acoustic_mel_n_mels"]:
                raise ValueError(f"{path}: model.{name} has {len(values[section][name])} values for "
                                 f"acoustic_mel_n_mels {m['acoustic_mel_n_mels']}")
        if any(s <= 0 for s in m["acoustic_mel_std"]):
            raise ValueError(f"{path}: model.acoustic_mel_std must be positive")
        if m["ar_heads"] == 0 or m["ar_model_dim"] % m["ar_heads"] or m["ar_heads"] % max(1, m["ar_kv_heads"]):
            raise ValueError(f"{path}: model.ar_model_dim must split into ar_heads heads, a multiple of ar_kv_heads")
        if math.prod(values["semantic_encoder"]["fsq_levels"]) != m["semantic_vocab_size"]:
            raise ValueError(f"{path}: model.semantic_vocab_size {m['semantic_vocab_size']} differs from the "
                             f"product of semantic_encoder.fsq_levels {values['semantic_encoder']['fsq_levels']}")

    def __getitem__(self, section: str) -> dict[str, object]:
        return self.values[section]

    @property
    def ar_ffn_length(self) -> int:
        """SwiGLUFeedForward's hidden width: ``max(1, int(round(ar_ffn_mult * ar_model_dim)))``."""
        m = self.values["model"]
        return max(1, int(round(m["ar_ffn_mult"] * m["ar_model_dim"])))

    @property
    def acoustic_dit_ff_length(self) -> int:
        """DiTBlock's FF width, the same rule on ``acoustic_dit_ff_mult`` and ``acoustic_dit_dim``."""
        m = self.values["model"]
        return max(1, int(round(m["acoustic_dit_ff_mult"] * m["acoustic_dit_dim"])))

    def add_metadata(self, w: gguf.GGUFWriter) -> None:
        """Writes every field, typed as :data:`FIELDS` says, plus the two derived widths."""
        for section, fields in FIELDS.items():
            for name, (kind, _) in fields.items():
                key = ".".join(p for p in (ARCH, section, name) if p)
                v = self.values[section][name]
                if kind == "u32":
                    w.add_uint32(key, v)
                elif kind == "i32":
                    w.add_int32(key, v)
                elif kind == "f32":
                    w.add_float32(key, v)
                elif kind == "bool":
                    w.add_bool(key, v)
                else:
                    sub = gguf.GGUFValueType.UINT32 if kind == "u32[]" else gguf.GGUFValueType.FLOAT32
                    w.add_key_value(key, list(v), gguf.GGUFValueType.ARRAY, sub_type=sub)
        w.add_uint32(f"{ARCH}.model.ar_ffn_length", self.ar_ffn_length)
        w.add_uint32(f"{ARCH}.model.acoustic_dit_ff_length", self.acoustic_dit_ff_length)
