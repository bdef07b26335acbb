"""Dumps Sopro reference fixtures from sopro 2.2.0 on a checkpoint made by make_checkpoint.py.

Usage (reference venv, repository root):
    /work/refvenv-sopro/bin/python -P tests/reference/sopro/dump_fixtures.py \
        --ckpt tests/data/sopro_tiny --out tests/data/fixtures/sopro

Writes:
    lm.npz        per case ``c{i}.*``: text ``text_ids`` (TextTokenizer.encode), ``style_tokens`` and
                  ``prompt_tokens`` (the prefix inputs upstream takes from the reference), ``style``
                  (StylePrefixEncoder output [n_style, D]), ``prefix`` (build_prefix [L, D]),
                  ``tokens`` (greedy, temperature 0: what stream_semantic_tokens yields) and
                  ``logits`` [n_logits, V]: every logits row the greedy loop computed, the prefill's
                  first, each later one after feeding the previous token through the KV cache (one
                  more than the tokens when EOS ended the run). ``lm.json`` holds each case's text,
                  language, min/max steps and how it ended.
    sampling.npz  per case ``s{i}.*``: ``logits`` [1, 4377] and ``probs`` [1, 4377], the distribution
                  sample_next_token hands to torch.multinomial (BOS/EOS masking, temperature, top-k,
                  top-p); settings in ``sampling.json``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import torch
from sopro import sampling
from sopro.model import SoproTTS

SEED = 1234
# (text, lang, reference tokens, prompt: "ref" = the first prompt_tokens of the reference, "carry" =
# another segment's last tokens, None = no prompt, max_seconds)
LM_CASES = [
    ("Hello there.", None, 200, "ref", 6.0),
    ("Bom dia, tudo bem com voce?", "pt", 100, "ref", 6.0),
    ("The quick brown fox jumps over the lazy dog.", "en", 180, None, 4.0),
    ("Guten Morgen, wie geht es dir heute?", "de", 40, "carry", 6.0),
    ("Is this the real life?", "fr", 170, "ref", 8.0),
    # a long run: prefix and tokens cross 256 positions (a KV bucket of the port)
    ("The quick brown fox jumps over the lazy dog.", "en", 180, "ref", 10.0),
]
# (temperature, top_p, top_k, allow_eos)
SAMPLING_CASES = [
    (0.8, 0.9, 25, True),
    (0.8, 0.9, 25, False),
    (1.0, 1.0, 0, True),
    (0.5, 0.5, 0, True),
    (1.3, 1.0, 5, True),
    (0.7, 0.95, 3, False),
]


def greedy_with_logits(tts: SoproTTS, prefix: torch.Tensor, max_steps: int, min_steps: int):
    """stream_semantic_tokens at temperature 0, keeping every logits row it computes."""
    model = tts.model
    cfg = model.cfg
    bos, eos = int(cfg.semantic_bos_id), int(cfg.semantic_eos_id)
    decoder = model.decoder(int(prefix.shape[1]) + max_steps)
    logits = decoder.prefill(prefix)
    rows, tokens, ended = [logits[0].clone()], [], "max_steps"
    for step in range(max_steps):
        allow_eos = (step + 1) >= max(1, min_steps)
        tok = sampling.sample_next_token(logits, 0.0, 1.0, 0, bos, eos, allow_eos)
        if allow_eos and int(tok.item()) == eos:
            ended = "eos"
            break
        tok = tok.clamp_min(0).clamp_max(int(cfg.semantic_vocab_size) - 1)
        tokens.append(int(tok.item()))
        if step + 1 < max_steps:
            logits = decoder.step(tok)
            rows.append(logits[0].clone())
    return torch.stack(rows), tokens, ended


def dump_lm(tts: SoproTTS, out: Path) -> None:
    gen, cfg = tts.generation, tts.config.model
    g = torch.Generator().manual_seed(SEED)
    arrays, meta = {}, []
    for i, (text, lang, n_ref, prompt_kind, max_seconds) in enumerate(LM_CASES):
        ref = torch.randint(0, int(cfg.semantic_vocab_size), (1, n_ref), generator=g)
        text_ids = tts.tokenizer.encode_tensor(text, lang, torch.device("cpu"))
        style_tokens = ref[:, : int(gen.style_tokens)]
        if prompt_kind == "ref":
            prompt = ref[:, : int(gen.prompt_tokens)]
        elif prompt_kind == "carry":
            prompt = torch.randint(0, int(cfg.semantic_vocab_size), (1, 150), generator=g)[:, -int(gen.prompt_tokens) :]
        else:
            prompt = None
        max_steps, min_steps = tts._steps(max_seconds), tts._steps(gen.min_seconds)
        with torch.no_grad():
            style = tts.model.style_prefix(tts.model.embed_semantic(style_tokens))
            prefix = tts.model.build_prefix(text_ids, style_tokens, prompt)
            logits, tokens, ended = greedy_with_logits(tts, prefix, max_steps, min_steps)
            streamed = list(tts.model.stream_semantic_tokens(
                text_ids, style_tokens, prompt, chunk_size=max_steps, max_steps=max_steps, min_steps=min_steps,
                temperature=0.0, top_p=1.0, top_k=0))
        streamed = torch.cat(streamed, dim=1)[0].tolist() if streamed else []
        if streamed != tokens:
            raise SystemExit(f"case {i}: the recorded loop differs from stream_semantic_tokens")
        p = f"c{i}."
        arrays[p + "text_ids"] = text_ids[0].numpy().astype(np.int32)
        arrays[p + "style_tokens"] = style_tokens[0].numpy().astype(np.int32)
        arrays[p + "prompt_tokens"] = (prompt[0] if prompt is not None else torch.zeros(0)).numpy().astype(np.int32)
        arrays[p + "style"] = style[0].numpy()
        arrays[p + "prefix"] = prefix[0].numpy()
        arrays[p + "tokens"] = np.asarray(tokens, dtype=np.int32)
        arrays[p + "logits"] = logits.numpy()
        meta.append(dict(text=text, lang=lang, max_steps=max_steps, min_steps=min_steps, ended=ended,
                         n_tokens=len(tokens)))
        print(f"lm case {i}: prefix {prefix.shape[1]}, {len(tokens)} tokens, ended by {ended}")
    np.savez_compressed(out / "lm.npz", **arrays)
    (out / "lm.json").write_text(json.dumps(dict(seed=SEED, cases=meta), indent=2) + "\n")


def dump_sampling(out: Path) -> None:
    # The real model's vocabulary (4375 codes + BOS + EOS): top-k and top-p then cut inside a long tail.
    n_vocab = 4377
    bos, eos = n_vocab - 2, n_vocab - 1
    g = torch.Generator().manual_seed(SEED + 1)
    captured = []
    real_multinomial = torch.multinomial

    def capture(probs, num_samples, *args, **kwargs):
        captured.append(probs.clone())
        return real_multinomial(probs, num_samples, *args, **kwargs)

    arrays, meta = {}, []
    torch.multinomial = capture
    try:
        for i, (temperature, top_p, top_k, allow_eos) in enumerate(SAMPLING_CASES):
            logits = torch.randn(1, n_vocab, generator=g) * 2.0
            logits[0, eos] = logits.max() + 1.0  # EOS would win where it is allowed
            captured.clear()
            sampling.sample_next_token(logits, temperature, top_p, top_k, bos, eos, allow_eos)
            arrays[f"s{i}.logits"] = logits.numpy()
            arrays[f"s{i}.probs"] = captured[0].numpy()
            meta.append(dict(temperature=temperature, top_p=top_p, top_k=top_k, allow_eos=allow_eos, bos_id=bos,
                             eos_id=eos))
    finally:
        torch.multinomial = real_multinomial
    np.savez_compressed(out / "sampling.npz", **arrays)
    (out / "sampling.json").write_text(json.dumps(dict(seed=SEED + 1, cases=meta), indent=2) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ckpt", required=True, type=Path)
    parser.add_argument("--out", required=True, type=Path)
    args = parser.parse_args()
    torch.manual_seed(SEED)
    torch.set_num_threads(1)  # the same float sums on every run
    tts = SoproTTS.from_pretrained(str(args.ckpt))
    args.out.mkdir(parents=True, exist_ok=True)
    dump_lm(tts, args.out)
    dump_sampling(args.out)


if __name__ == "__main__":
    main()
