"""Dumps fixtures for Sopro's audio stages (front ends, vocoder, semantic and speaker encoders) from
sopro 2.2.0 on a checkpoint made by make_checkpoint.py.

Usage (reference venv, repository root):
    /work/refvenv-sopro/bin/python -P tests/reference/sopro/dump_stage_fixtures.py \
        --ckpt tests/data/sopro_tiny --out tests/data/fixtures/sopro

Writes (per case i; shapes in PyTorch order, batch dropped):
    frontends.npz  ``f{i}.wav16`` and ``f{i}.wav24`` (float32 audio), ``f{i}.speaker_mel`` [80, T]
                   (SpeakerEncoder.frontend), ``f{i}.semantic_mel`` [80, frames + 2] and
                   ``f{i}.semantic_frames`` (WhisperMelFrontend), ``f{i}.vocoder_mel`` [n_mels, T]
                   (Vocoder.mel).
    vocoder.npz    ``v{i}.mel`` [n_mels, T] (a log-mel of synthetic audio, as decode receives it),
                   ``v{i}.backbone`` [T, dim] (Backbone output) and ``v{i}.wav`` [(T-1)*256]
                   (Vocoder.decode).
    semantic.npz   ``s{i}.wav24``, ``s{i}.wav16`` (the resampled, length-fixed encoder input),
                   ``s{i}.hidden`` [n50, d] (final_norm output), ``s{i}.logits`` [n_tokens, sum(levels)]
                   (digit_head output) and ``s{i}.tokens`` [n_tokens] (SemanticEncoder.encode).
    speaker.npz    ``k{i}.wav16``, ``k{i}.trunk`` [C, T] (the fuse block's output, what the pooling
                   heads read), ``k{i}.id_emb``, ``k{i}.style_emb``, ``k{i}.style_ctrl`` and
                   ``k{i}.cond_vec`` (SoproModel.build_condition).
The audio is synthetic (harmonic tones with a gliding pitch, noise bursts, a near-silent gap, a -60 dB
noise floor), the same bytes on every run.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import torch
import torchaudio
from sopro.model import SoproTTS

SEED = 4321
# Audio lengths in seconds at 24 kHz: odd sample counts, one shorter than a token (1024 samples).
SECONDS = [1.37, 0.61, 0.04]


def synth(seconds: float, sr: int, rng: np.random.Generator) -> np.ndarray:
    """A speech-like test signal: harmonics of a gliding f0, noise bursts, a 0.1 s near-silent gap, and
    a recording's noise floor 60 dB down (without it the top mel bands of pure harmonics fall under
    the rounding noise of torch's float32 FFT, which no other FFT reproduces)."""
    n = int(round(seconds * sr)) | 1
    t = np.arange(n) / sr
    f0 = 110.0 + 60.0 * np.sin(2 * np.pi * 1.3 * t) + rng.uniform(0, 40)
    phase = 2 * np.pi * np.cumsum(f0) / sr
    x = sum(np.sin(h * phase) / h for h in range(1, 12))
    x *= 0.5 + 0.5 * np.sin(2 * np.pi * 3.1 * t + rng.uniform(0, np.pi)) ** 2
    x += 0.3 * rng.standard_normal(n) * (np.sin(2 * np.pi * 2.3 * t) > 0.7)
    gap = slice(n // 3, n // 3 + int(0.1 * sr))
    x[gap] *= 1e-4
    x = x / np.max(np.abs(x)) + 1e-3 * rng.standard_normal(n)
    return (0.3 * x).astype(np.float32)


def dump_frontends(tts: SoproTTS, rng: np.random.Generator) -> dict:
    arrays = {}
    for i, seconds in enumerate(SECONDS[:2]):
        wav24 = synth(seconds, 24000, rng)
        wav16 = synth(seconds, 16000, rng)
        w16 = torch.from_numpy(wav16)[None]
        sem, frames = tts.semantic_encoder.frontend(w16)
        arrays.update({
            f"f{i}.wav16": wav16,
            f"f{i}.wav24": wav24,
            f"f{i}.speaker_mel": tts.speaker_encoder.frontend(w16)[0].numpy(),
            f"f{i}.semantic_mel": sem[0].numpy(),
            f"f{i}.semantic_frames": np.int64(frames),
            f"f{i}.vocoder_mel": tts.vocoder.mel(torch.from_numpy(wav24)[None])[0].numpy(),
        })
    return arrays


def dump_vocoder(tts: SoproTTS, rng: np.random.Generator) -> dict:
    arrays = {}
    for i, seconds in enumerate(SECONDS[:2]):
        mel = tts.vocoder.mel(torch.from_numpy(synth(seconds, 24000, rng))[None])
        with torch.no_grad():
            backbone = tts.vocoder.backbone(mel)
        arrays.update({
            f"v{i}.mel": mel[0].numpy(),
            f"v{i}.backbone": backbone[0].numpy(),
            f"v{i}.wav": tts.vocoder.decode(mel)[0].numpy(),
        })
    return arrays


def capture(module: torch.nn.Module, store: dict, key: str):
    def hook(_mod, _inp, out):
        store[key] = out.detach()[0].numpy().copy()
    return module.register_forward_hook(hook)


def dump_semantic(tts: SoproTTS, rng: np.random.Generator) -> dict:
    enc = tts.semantic_encoder
    arrays = {}
    for i, seconds in enumerate(SECONDS):
        wav24 = synth(seconds, 24000, rng)
        got: dict = {}
        hooks = [capture(enc.final_norm, got, "hidden"), capture(enc.digit_head, got, "logits")]
        w24 = torch.from_numpy(wav24)[None]
        tokens = enc.encode(w24)
        for h in hooks:
            h.remove()
        n16 = (wav24.shape[0] * 2 + 2) // 3
        wav16 = torchaudio.functional.resample(w24, 24000, int(enc.cfg.sample_rate))[0].numpy()
        wav16 = wav16[:n16] if wav16.shape[0] >= n16 else np.pad(wav16, (0, n16 - wav16.shape[0]))
        arrays.update({
            f"s{i}.wav24": wav24,
            f"s{i}.wav16": wav16,
            f"s{i}.hidden": got["hidden"],
            f"s{i}.logits": got["logits"],
            f"s{i}.tokens": tokens[0].numpy(),
        })
    return arrays


def dump_speaker(tts: SoproTTS, rng: np.random.Generator) -> dict:
    enc = tts.speaker_encoder
    arrays = {}
    for i, seconds in enumerate(SECONDS[:2]):
        wav16 = synth(seconds, 16000, rng)
        got: dict = {}
        hook = capture(enc.fuse, got, "trunk")
        spk = enc(torch.from_numpy(wav16)[None])
        hook.remove()
        with torch.no_grad():
            cond = tts.model.build_condition(spk["id_emb"], spk["style_emb"], spk["style_ctrl"])
        arrays.update({
            f"k{i}.wav16": wav16,
            f"k{i}.trunk": got["trunk"],
            f"k{i}.id_emb": spk["id_emb"][0].numpy(),
            f"k{i}.style_emb": spk["style_emb"][0].numpy(),
            f"k{i}.style_ctrl": spk["style_ctrl"][0].numpy(),
            f"k{i}.cond_vec": cond[0].numpy(),
        })
    return arrays


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ckpt", type=Path, required=True)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    torch.manual_seed(SEED)
    tts = SoproTTS.from_pretrained(str(args.ckpt))
    args.out.mkdir(parents=True, exist_ok=True)
    stages = [("frontends", dump_frontends), ("vocoder", dump_vocoder), ("semantic", dump_semantic),
              ("speaker", dump_speaker)]
    for k, (name, dump) in enumerate(stages):
        arrays = dump(tts, np.random.default_rng([SEED, k]))
        np.savez_compressed(args.out / f"{name}.npz", **arrays)
        print(f"{name}.npz: {len(arrays)} arrays")


if __name__ == "__main__":
    main()
