"""Writes a random-weight Sopro V2 Turbo checkpoint in the Hugging Face layout.

The files are the ones ``sopro.hub.ARTIFACT_FILES`` names: ``config.json`` (``SoproConfig.to_dict()``),
the four safetensors (each a module's plain ``state_dict``, as ``SoproTTS.from_pretrained`` loads them
strictly) and a SentencePiece ``tokenizer.model``. The modules are sopro 2.2.0's own classes on a
shrunk config; every rate, hop, n_fft and kernel size stays as upstream has it.

Usage (reference venv, repository root):
    /work/refvenv-sopro/bin/python -P tests/reference/sopro/make_checkpoint.py --out DIR [--variant tiny|dev] [--check]

``tiny`` is the committed test checkpoint (tests/data/sopro_tiny); ``dev`` has other sizes and another
seed, for tuning without touching what the tests compare against; ``full`` has upstream's sizes
(for bench/, ~634 MB).
"""

from __future__ import annotations

import argparse
import io
import json
import math
from pathlib import Path

import sentencepiece as spm
import torch
from safetensors.torch import save_file
from sopro.config import SoproConfig
from sopro.encoders.semantic import SemanticEncoder
from sopro.encoders.speaker import SpeakerEncoder
from sopro.hub import MODEL_FILE, SEMANTIC_ENCODER_FILE, SPEAKER_ENCODER_FILE, TOKENIZER_FILE, VOCODER_FILE
from sopro.nn.model import SoproModel
from sopro.text import LANGUAGE_TAGS
from sopro.vocoder import Vocoder

# Sizes per variant. Linear input widths of the LM (ar_model_dim, latent_dim, the FFN width) are
# multiples of 32 so that a Q8_0 conversion quantises every projection it would in the real model.
VARIANTS = {
    "tiny": dict(
        seed=20261201,
        eos_bias=2.75,
        n_mels=20,
        model=dict(latent_dim=64, text_vocab_size=96, ar_model_dim=64, ar_blocks=3, ar_heads=4, ar_ffn_mult=2.0,
                   cond_in_dim=24, cond_hidden_dim=40, acoustic_time_embed_dim=16, acoustic_dit_dim=32,
                   acoustic_dit_depth=2, acoustic_dit_heads=2, acoustic_dit_dim_head=16, acoustic_spk_dim=12),
        fsq_levels=[3, 3, 2],
        semantic=dict(d_model=32, layers=2, heads=2, ffn_dim=64),
        speaker=dict(stem_channels=16, stage_channels=[16, 24, 32], blocks_per_stage=[1, 1, 2], id_emb_dim=12,
                     style_emb_dim=8, style_ctrl_dim=4, id_head_hidden=24, style_head_hidden=24, attn_hidden=16),
        vocoder=dict(dim=32, intermediate_dim=48, num_layers=2),
    ),
    "dev": dict(
        seed=7,
        eos_bias=2.0,
        n_mels=16,
        model=dict(latent_dim=32, text_vocab_size=80, ar_model_dim=32, ar_blocks=2, ar_heads=2, ar_ffn_mult=4.0,
                   cond_in_dim=20, cond_hidden_dim=24, acoustic_time_embed_dim=16, acoustic_dit_dim=32,
                   acoustic_dit_depth=1, acoustic_dit_heads=2, acoustic_dit_dim_head=16, acoustic_spk_dim=8),
        fsq_levels=[2, 3, 2],
        semantic=dict(d_model=32, layers=1, heads=4, ffn_dim=48),
        speaker=dict(stem_channels=16, stage_channels=[16, 16, 24], blocks_per_stage=[1, 2, 1], id_emb_dim=8,
                     style_emb_dim=8, style_ctrl_dim=4, id_head_hidden=16, style_head_hidden=16, attn_hidden=8),
        vocoder=dict(dim=32, intermediate_dim=64, num_layers=1),
    ),
    # upstream's sizes (sopro/config.py defaults), for the benchmarks; not committed (634 MB)
    "full": dict(seed=99, eos_bias=0.0, n_mels=100, model={}, fsq_levels=[7, 5, 5, 5, 5], semantic={}, speaker={},
                 vocoder={}),
}

# Text for the SentencePiece model: the four languages sopro tags, so that every tag and a few
# common pieces exist.
CORPUS = [
    "The quick brown fox jumps over the lazy dog.",
    "Hello there, how are you doing today?",
    "She sells sea shells by the sea shore.",
    "A journey of a thousand miles begins with a single step.",
    "O rato roeu a roupa do rei de Roma.",
    "Bom dia, tudo bem com voce?",
    "Le petit chat dort sur le canape.",
    "Bonjour, comment allez-vous aujourd'hui?",
    "Der schnelle braune Fuchs springt uber den faulen Hund.",
    "Guten Morgen, wie geht es dir heute?",
    "Numbers like one, two, three and four are spoken too.",
    "Is this the real life? Is this just fantasy!",
]


def make_config(variant: dict) -> SoproConfig:
    """The shrunk config: sizes from ``variant``, rates and kernels upstream's defaults."""
    cfg = SoproConfig()
    levels = variant["fsq_levels"]
    n_mels = variant["n_mels"]
    for key, value in variant["model"].items():
        setattr(cfg.model, key, value)
    cfg.model.semantic_vocab_size = math.prod(levels)
    cfg.model.acoustic_mel_n_mels = n_mels
    cfg.model.acoustic_mu_dim = n_mels
    cfg.model.ar_kv_heads = cfg.model.ar_heads
    g = torch.Generator().manual_seed(variant["seed"] + 1)
    cfg.model.acoustic_mel_mean = (torch.randn(n_mels, generator=g) - 5.0).tolist()
    cfg.model.acoustic_mel_std = (1.0 + torch.rand(n_mels, generator=g)).tolist()
    cfg.semantic_encoder.fsq_levels = list(levels)
    for key, value in variant["semantic"].items():
        setattr(cfg.semantic_encoder, key, value)
    for key, value in variant["speaker"].items():
        setattr(cfg.speaker_encoder, key, value)
    cfg.vocoder.n_mels = n_mels
    for key, value in variant["vocoder"].items():
        setattr(cfg.vocoder, key, value)
    cfg.vocoder.block_lookaheads = [int(cfg.vocoder.lookahead_frames)] * int(cfg.vocoder.num_layers)
    return cfg


def randomize(module: torch.nn.Module, g: torch.Generator) -> None:
    """Draws every parameter and the learned buffer ``pos_emb``; torchaudio's buffers stay.

    Matrices and embeddings: N(0, 1) / sqrt(fan-in). Norm weights 1 + 0.2 N(0, 1), biases
    0.1 N(0, 1), LayerScale/gamma 0.5 N(0, 1) (so that folding them is tested), the style
    queries N(0, 1) (upstream's zeros would hide the query path).
    """
    with torch.no_grad():
        for name, p in module.named_parameters():
            leaf = name.rsplit(".", 1)[-1]
            if p.dim() >= 2:
                fan_in = math.prod(p.shape[1:])
                scale = 1.0 if leaf == "queries" else 1.0 / math.sqrt(fan_in)
                p.copy_(torch.randn(p.shape, generator=g) * scale)
            elif leaf == "bias":
                p.copy_(0.1 * torch.randn(p.shape, generator=g))
            elif leaf in ("scale", "gamma"):
                p.copy_(0.5 * torch.randn(p.shape, generator=g))
            else:
                p.copy_(1.0 + 0.2 * torch.randn(p.shape, generator=g))
        for name, b in module.named_buffers():
            if name.endswith("pos_emb"):
                b.copy_(torch.randn(b.shape, generator=g) / math.sqrt(b.shape[-1]))


def train_tokenizer(vocab_size: int) -> bytes:
    """A unigram SentencePiece model of ``vocab_size`` pieces holding sopro's language tags."""
    out = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(CORPUS * 4),
        model_writer=out,
        model_type="unigram",
        vocab_size=vocab_size,
        user_defined_symbols=list(LANGUAGE_TAGS.values()),
        character_coverage=1.0,
        hard_vocab_limit=False,
        num_threads=1,
        minloglevel=2,
    )
    return out.getvalue()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--variant", choices=sorted(VARIANTS), default="tiny")
    parser.add_argument("--check", action="store_true", help="load it back with SoproTTS and synthesize once")
    args = parser.parse_args()
    variant = VARIANTS[args.variant]
    torch.manual_seed(variant["seed"])
    g = torch.Generator().manual_seed(variant["seed"])
    cfg = make_config(variant)

    tok = train_tokenizer(64)
    n_pieces = spm.SentencePieceProcessor(model_proto=tok).get_piece_size()
    if n_pieces > cfg.model.text_vocab_size:
        raise SystemExit(f"tokenizer has {n_pieces} pieces, more than text_vocab_size {cfg.model.text_vocab_size}")

    model = SoproModel(cfg.model)
    semantic = SemanticEncoder(cfg.semantic_encoder)
    speaker = SpeakerEncoder(cfg.speaker_encoder)
    vocoder = Vocoder(cfg.vocoder)
    for m in (model, semantic, speaker, vocoder):
        randomize(m, g)
    with torch.no_grad():
        # Random weights rarely pick EOS; a raised bias makes greedy lengths depend on the text.
        model.ar_prior.token_head.bias[cfg.model.semantic_eos_id] += variant["eos_bias"]

    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "config.json").write_text(json.dumps(cfg.to_dict(), indent=2) + "\n")
    (args.out / TOKENIZER_FILE).write_bytes(tok)
    for file, m in ((MODEL_FILE, model), (SEMANTIC_ENCODER_FILE, semantic), (SPEAKER_ENCODER_FILE, speaker),
                    (VOCODER_FILE, vocoder)):
        save_file({k: v.contiguous() for k, v in m.state_dict().items()}, str(args.out / file))
    print(f"wrote {args.out} ({args.variant}, seed {variant['seed']}, {n_pieces} pieces)")

    if args.check:
        from sopro.model import SoproTTS

        tts = SoproTTS.from_pretrained(str(args.out))
        ref = tts.prepare_reference(ref_audio=torch.randn(1, 24000 * 3) * 0.1, sample_rate=24000)
        wav = tts.synthesize("Hello there.", ref=ref, temperature=0.0, max_seconds=2.0)
        print(f"check: {int(ref.semantic_tokens.shape[-1])} reference tokens, {wav.shape[-1]} samples")


if __name__ == "__main__":
    main()
