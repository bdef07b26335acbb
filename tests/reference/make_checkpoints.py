"""Write a random-weight OmniVoice checkpoint in the Hugging Face snapshot layout.

The checkpoint is built and saved with the UPSTREAM classes (``omnivoice==0.2.1``
and transformers' ``HiggsAudioV2TokenizerModel``), so it loads with
``OmniVoice.from_pretrained(DIR)`` offline and has exactly the tensor names,
shapes and config keys of the released model. Only the weights are random.

Run it with the reference venv, stub first on the path (see README.md)::

    PYTHONPATH=tests/reference/torchaudio_stub /work/refvenv/bin/python -P \
        tests/reference/make_checkpoints.py --out /work/ckpt/tiny_hf --size tiny

Sizes:
    tiny: every stride, kernel, rate and codebook size of the real model, with
        narrow widths (a few MB). Used by the tests.
    full: the real configuration (Qwen3-0.6B body, 200M-parameter codec).
"""

import argparse
import json
import logging
import math
import os
import shutil
from pathlib import Path
from typing import Any

import torch
from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
from transformers import (
    AutoTokenizer,
    DacFeatureExtractor,
    HiggsAudioV2TokenizerConfig,
    HiggsAudioV2TokenizerModel,
    Qwen3Config,
)

from omnivoice.models.omnivoice import OmniVoice, OmniVoiceConfig

logger = logging.getLogger("make_checkpoints")

# Qwen2/Qwen3 pre-tokenizer regex.
QWEN_SPLIT_REGEX = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)

# Added tokens of Qwen3 (ids follow the BPE vocab in this order), with their
# `special` flag as in Qwen3's tokenizer_config.json.
QWEN_ADDED_TOKENS: list[tuple[str, bool]] = [
    ("<|endoftext|>", True),
    ("<|im_start|>", True),
    ("<|im_end|>", True),
    ("<|object_ref_start|>", True),
    ("<|object_ref_end|>", True),
    ("<|box_start|>", True),
    ("<|box_end|>", True),
    ("<|quad_start|>", True),
    ("<|quad_end|>", True),
    ("<|vision_start|>", True),
    ("<|vision_end|>", True),
    ("<|vision_pad|>", True),
    ("<|image_pad|>", True),
    ("<|video_pad|>", True),
    ("<tool_call>", False),
    ("</tool_call>", False),
    ("<|fim_prefix|>", False),
    ("<|fim_middle|>", False),
    ("<|fim_suffix|>", False),
    ("<|fim_pad|>", False),
    ("<|repo_name|>", False),
    ("<|file_sep|>", False),
    ("<tool_response>", False),
    ("</tool_response>", False),
    ("<think>", False),
    ("</think>", False),
]

# Tokens OmniVoice adds on top of Qwen3's (all special).
OMNIVOICE_ADDED_TOKENS = [
    "<|denoise|>",
    "<|lang_start|>",
    "<|lang_end|>",
    "<|instruct_start|>",
    "<|instruct_end|>",
    "<|text_start|>",
    "<|text_end|>",
]

BPE_MERGES = 2000

# Gains of the random acoustic convs: residual branches are damped so the
# signal does not grow block after block, and the last decoder conv is small
# so the random decoder's waveform stays within about [-1, 1].
RESIDUAL_BRANCH_GAIN = 0.5
DECODER_OUTPUT_GAIN = 0.1
BYTE_ALPHABET_SIZE = 256

# Training text for the toy BPE: several scripts, accents, digits, emoji,
# punctuation, the non-verbal tags and instruct words OmniVoice uses.
CORPUS_LINES = [
    "Hello world! This is a small test of the OmniVoice text-to-speech model.",
    "The quick brown fox jumps over the lazy dog while the cat watches quietly.",
    "She sells sea shells by the sea shore; the shells she sells are surely seashells.",
    "I'm sure you'll like it, we've tried, they'd agree and it's done, isn't it?",
    "Numbers: 0 1 2 3 4 5 6 7 8 9, 42, 3.14159, 2026-11-29, $19.99, 100% and 1,000,000.",
    "Call me at +1 (555) 010-0199 or e-mail test@example.com before 10:30 a.m.",
    "Nice to meet you. How are you doing today? I am doing well, thank you very much.",
    "Speech synthesis turns written text into natural sounding audio for every listener.",
    "A bidirectional transformer predicts masked audio tokens over several decoding steps.",
    "[laughter] That was funny! [sigh] Well, let's move on. [surprise-ah] Really? [question-en]",
    "[confirmation-en] [question-ah] [question-oh] [question-ei] [question-yi] [surprise-oh]",
    "[surprise-wa] [surprise-yo] [dissatisfaction-hnn] okay then, fine.",
    "male, female, child, teenager, young adult, middle-aged, elderly, whisper",
    "very low pitch, low pitch, moderate pitch, high pitch, very high pitch",
    "american accent, british accent, australian accent, indian accent, canadian accent",
    "Café, naïve, façade, résumé, jalapeño, Zürich, São Paulo, Ångström, Øresund, Łódź.",
    "Der schnelle braune Fuchs springt über den faulen Hund. Schöne Grüße aus München!",
    "El veloz murciélago hindú comía feliz cardillo y kiwi. ¿Dónde está la estación?",
    "Le cœur a ses raisons que la raison ne connaît point. Où est la bibliothèque ?",
    "Привет, как дела? Быстрая коричневая лиса прыгает через ленивую собаку.",
    "Γειά σου κόσμε! Η γρήγορη καφέ αλεπού πηδάει πάνω από τον τεμπέλη σκύλο.",
    "你好，世界！今天天气很好，我们一起去公园散步吧。欢迎使用语音合成模型。",
    "这是一个测试句子，用来检查中文分词是否正确。北京、上海、广州和深圳都是大城市。",
    "男，女，儿童，少年，青年，中年，老年，极低音调，低音调，中音调，高音调，极高音调，耳语",
    "河南话，陕西话，四川话，贵州话，云南话，桂林话，济南话，石家庄话，甘肃话，宁夏话，青岛话，东北话",
    "こんにちは、世界！今日はいい天気ですね。音声合成のテストをしています。",
    "カタカナとひらがなと漢字が混ざった文章です。東京タワーへ行きましょう。",
    "안녕하세요, 세계! 오늘 날씨가 정말 좋네요. 음성 합성 모델을 시험합니다.",
    "مرحبا بالعالم! كيف حالك اليوم؟ هذا اختبار لتحويل النص إلى كلام.",
    "नमस्ते दुनिया! आज मौसम बहुत अच्छा है। यह एक परीक्षण वाक्य है।",
    "สวัสดีชาวโลก วันนี้อากาศดีมาก นี่คือประโยคทดสอบ",
    "Xin chào thế giới! Hôm nay trời đẹp quá. Đây là câu kiểm tra tiếng Việt.",
    "Emoji: 😀 😂 🎉 👍 ❤️ 🚀 🌍 🐍 🤖 🎵 ✨ 🙏🏽 👩‍💻 🇯🇵",
    "Tabs\tand  double  spaces,\nnew lines\r\nand trailing spaces   \n",
    "Punctuation: ... !!! ??? --- (brackets) [square] {curly} <angle> \"quotes\" 'single' `back`",
    "Mathematics: x^2 + y^2 = z^2, a*b/c, 5 > 3 < 7, 10 % 3 == 1, ∑ ∫ √ ∞ ≈ ≠ ≤ ≥ π",
]


def corpus_text() -> list[str]:
    """Returns the BPE training corpus.

    Besides ``CORPUS_LINES`` it takes the language names of the pinned upstream
    package (``omnivoice.utils.lang_map``), which give many distinct words.
    """
    from omnivoice.utils.lang_map import LANG_NAMES

    names = sorted(LANG_NAMES)
    lines = list(CORPUS_LINES)
    for i in range(0, len(names), 8):
        lines.append(", ".join(names[i : i + 8]) + ".")
    return lines


def build_text_tokenizer(out_dir: Path) -> int:
    """Trains a Qwen2-style byte-level BPE and saves it for AutoTokenizer.

    Returns:
        The number of ids (BPE vocab plus added tokens).
    """
    tok = Tokenizer(models.BPE(unk_token=None, continuing_subword_prefix="", end_of_word_suffix="", fuse_unk=False))
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(QWEN_SPLIT_REGEX), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)
    trainer = trainers.BpeTrainer(
        vocab_size=BYTE_ALPHABET_SIZE + BPE_MERGES,
        min_frequency=1,
        show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        special_tokens=[],
    )
    tok.train_from_iterator(corpus_text(), trainer=trainer)

    from tokenizers import AddedToken

    added = [AddedToken(t, special=s, normalized=False) for t, s in QWEN_ADDED_TOKENS]
    added += [AddedToken(t, special=True, normalized=False) for t in OMNIVOICE_ADDED_TOKENS]
    for a in added:
        tok.add_tokens([a]) if not a.special else tok.add_special_tokens([a])
    out_dir.mkdir(parents=True, exist_ok=True)
    tok.save(str(out_dir / "tokenizer.json"))

    vocab = tok.get_vocab(with_added_tokens=True)
    added_decoder = {
        str(vocab[a.content]): {
            "content": a.content,
            "lstrip": False,
            "normalized": False,
            "rstrip": False,
            "single_word": False,
            "special": a.special,
        }
        for a in added
    }
    tokenizer_config = {
        "add_bos_token": False,
        "add_prefix_space": False,
        "added_tokens_decoder": added_decoder,
        "additional_special_tokens": OMNIVOICE_ADDED_TOKENS,
        "bos_token": None,
        "clean_up_tokenization_spaces": False,
        "eos_token": "<|im_end|>",
        "errors": "replace",
        "model_max_length": 131072,
        "pad_token": "<|endoftext|>",
        "split_special_tokens": False,
        "tokenizer_class": "Qwen2Tokenizer",
        "unk_token": None,
    }
    with open(out_dir / "tokenizer_config.json", "w", encoding="utf-8") as f:
        json.dump(tokenizer_config, f, indent=2, ensure_ascii=False)
    n_ids = tok.get_vocab_size(with_added_tokens=True)
    logger.info("text tokenizer: %d BPE ids + %d added = %d", n_ids - len(added), len(added), n_ids)
    return n_ids


def qwen3_config(size: str, n_text_ids: int, bos_id: int, eos_id: int) -> Qwen3Config:
    """Returns the Qwen3 backbone config for ``size``.

    ``bos_id``/``eos_id`` are the tokenizer's ``<|endoftext|>``/``<|im_end|>``
    (151643/151645 in the real model; unused by OmniVoice).
    """
    if size == "full":
        dims: dict[str, Any] = dict(
            vocab_size=151676,
            hidden_size=1024,
            intermediate_size=3072,
            num_hidden_layers=28,
            num_attention_heads=16,
            num_key_value_heads=8,
            head_dim=128,
            max_position_embeddings=40960,
        )
    else:
        # Upstream embeds text row 0 at audio positions before masking, and
        # the mask id 1024 is looked up as a text id too: keep vocab >= 1025.
        vocab = max(1025, n_text_ids)
        dims = dict(
            vocab_size=int(math.ceil(vocab / 64) * 64),
            hidden_size=64,
            intermediate_size=128,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            head_dim=16,
            max_position_embeddings=40960,
        )
    if dims["vocab_size"] < n_text_ids:
        raise ValueError(f"LM vocab {dims['vocab_size']} < tokenizer size {n_text_ids}")
    return Qwen3Config(
        **dims,
        hidden_act="silu",
        rms_norm_eps=1e-6,
        rope_parameters={"rope_type": "default", "rope_theta": 1000000.0},
        tie_word_embeddings=True,
        attention_bias=False,
        use_sliding_window=False,
        bos_token_id=bos_id,
        eos_token_id=eos_id,
        architectures=["Qwen3ForCausalLM"],
    )


def codec_config(size: str) -> HiggsAudioV2TokenizerConfig:
    """Returns the Higgs Audio v2 tokenizer config for ``size``.

    Both sizes share the format-defining values: sample rates, DAC ratios
    [8, 5, 4, 2, 3] (hop 960, 25 frames/s), 8 quantizers of 1024 codes,
    semantic downsample 2, HuBERT conv stack and 128-tap positional conv.
    """
    ratios = [8, 5, 4, 2, 3]
    hubert_common: dict[str, Any] = dict(
        hidden_act="gelu",
        feat_extract_norm="group",
        feat_extract_activation="gelu",
        conv_kernel=[10, 3, 3, 3, 3, 2, 2],
        conv_stride=[5, 2, 2, 2, 2, 2, 2],
        conv_bias=False,
        num_conv_pos_embeddings=128,
        num_conv_pos_embedding_groups=16,
        do_stable_layer_norm=False,
        feat_proj_layer_norm=True,
        layer_norm_eps=1e-5,
        mask_time_prob=0.0,
        apply_spec_augment=False,
    )
    if size == "full":
        hubert = dict(
            hubert_common,
            hidden_size=768,
            num_hidden_layers=12,
            num_attention_heads=12,
            intermediate_size=3072,
            conv_dim=[512] * 7,
        )
        dac = dict(encoder_hidden_size=64, decoder_hidden_size=1024, hidden_size=256)
        codebook_dim = 64
    else:
        hubert = dict(
            hubert_common,
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=4,
            intermediate_size=64,
            conv_dim=[32] * 7,
        )
        dac = dict(encoder_hidden_size=4, decoder_hidden_size=64, hidden_size=16)
        codebook_dim = 8
    return HiggsAudioV2TokenizerConfig(
        target_bandwidths=[0.5, 1, 1.5, 2],
        sample_rate=24000,
        semantic_sample_rate=16000,
        downsample_factor=320,
        codebook_size=1024,
        codebook_dim=codebook_dim,
        kernel_size=3,
        unit_kernel_size=3,
        strides=[1, 1],
        channel_ratios=[1, 1],
        block_dilations=[1, 1],
        acoustic_model_config=dict(
            dac,
            downsampling_ratios=ratios,
            upsampling_ratios=ratios,
            sampling_rate=24000,
            codebook_size=1024,
            codebook_dim=8,
        ),
        semantic_model_config=hubert,
    )


@torch.no_grad()
def randomise_lm(model: OmniVoice, gen: torch.Generator) -> None:
    """Redraws the LM weights so that a random model still has structure.

    The upstream init (N(0, 0.02), norms at 1) gives near-flat logits that
    hardly depend on position, so greedy decoding fills every frame with the
    same code and ties decide the unmasking order. Instead:

    - linear weights N(0, 1/fan_in): attention scores and logits are O(1), and
      RoPE makes positions distinguishable;
    - embeddings N(0, 1);
    - RMSNorm gains U(0.5, 1.5), so a missing or misplaced norm weight shows.
    """
    for name, p in model.named_parameters():
        if name.endswith("norm.weight"):
            p.copy_(torch.empty_like(p).uniform_(0.5, 1.5, generator=gen))
        elif name.endswith(("embed_tokens.weight", "audio_embeddings.weight")):
            p.copy_(torch.randn(p.shape, generator=gen))
        elif p.dim() == 2:
            p.copy_(torch.randn(p.shape, generator=gen) / math.sqrt(p.shape[1]))


@torch.no_grad()
def randomise_codec(codec: HiggsAudioV2TokenizerModel, gen: torch.Generator) -> None:
    """Randomises the codec weights that the upstream init leaves degenerate.

    - RVQ codebooks (``embed``) are zeros: draw N(0, 1).
    - Snake ``alpha`` is 1: draw U(0.5, 2).
    - Acoustic convs use N(0, 0.02) with zero bias, which all but silences a
      deep stack: rescale to about unit gain (std gain/sqrt(fan_in)) and give
      biases small values, so intermediate and output magnitudes are O(0.1..1).
    - Norm gains/biases are 1/0: draw U(0.5, 1.5) and N(0, 0.1).
    - HuBERT pos-conv weight-norm gain g is the norm of v: scale it by U(0.5, 2).
    """

    def normal(t: torch.Tensor, std: float) -> torch.Tensor:
        return torch.randn(t.shape, generator=gen, dtype=t.dtype) * std

    def uniform(t: torch.Tensor, lo: float, hi: float) -> torch.Tensor:
        return torch.empty_like(t).uniform_(lo, hi, generator=gen)

    for name, buf in codec.named_buffers():
        if name.endswith("codebook.embed"):
            buf.copy_(normal(buf, 1.0))
            codec.get_buffer(name[: -len("embed")] + "embed_avg").copy_(buf)
        elif name.endswith("codebook.cluster_size"):
            buf.fill_(1.0)
    for module_name, module in codec.named_modules():
        if module_name.startswith(("acoustic_encoder", "acoustic_decoder")):
            if isinstance(module, (torch.nn.Conv1d, torch.nn.ConvTranspose1d)):
                w = module.weight
                if isinstance(module, torch.nn.Conv1d):
                    fan_in = w.shape[1] * w.shape[2]
                else:
                    # ConvTranspose weight is (in, out, k); each output sees in*k/stride taps
                    fan_in = w.shape[0] * w.shape[2] / module.stride[0]
                gain = 1.0
                if ".res_unit" in module_name and module_name.endswith("conv2"):
                    gain = RESIDUAL_BRANCH_GAIN
                elif module_name == "acoustic_decoder.conv2":
                    gain = DECODER_OUTPUT_GAIN
                w.copy_(normal(w, gain / math.sqrt(fan_in)))
                if module.bias is not None:
                    module.bias.copy_(normal(module.bias, 0.05))
    for name, p in codec.named_parameters():
        if name.endswith(".alpha"):
            p.copy_(uniform(p, 0.5, 2.0))
        elif "parametrizations.weight.original0" in name:
            p.mul_(uniform(p, 0.5, 2.0))
        elif ("layer_norm" in name or "norm" in name.split(".")[-2]) and name.endswith(".weight"):
            p.copy_(uniform(p, 0.5, 1.5))
        elif ("layer_norm" in name or "norm" in name.split(".")[-2]) and name.endswith(".bias"):
            p.copy_(normal(p, 0.1))


def build(out: Path, size: str, seed: int) -> None:
    """Builds, randomises, saves and re-loads one checkpoint."""
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    tmp = out.with_name(out.name + ".partial")
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)

    n_text_ids = build_text_tokenizer(tmp)
    hf_tok = AutoTokenizer.from_pretrained(tmp)
    raw_tok = Tokenizer.from_file(str(tmp / "tokenizer.json"))
    for line in CORPUS_LINES + ["<|text_start|>hi<|text_end|>", "<|lang_start|>en<|lang_end|>"]:
        a = hf_tok(line).input_ids
        b = raw_tok.encode(line).ids
        if a != b:
            raise RuntimeError(f"AutoTokenizer and tokenizers disagree on {line!r}: {a} vs {b}")
    if len(hf_tok) != n_text_ids:
        raise RuntimeError(f"AutoTokenizer has {len(hf_tok)} ids, tokenizers {n_text_ids}")

    llm_config = qwen3_config(
        size, n_text_ids, hf_tok.convert_tokens_to_ids("<|endoftext|>"), hf_tok.convert_tokens_to_ids("<|im_end|>")
    )
    config = OmniVoiceConfig(
        audio_vocab_size=1025,
        audio_mask_id=1024,
        num_audio_codebook=8,
        audio_codebook_weights=[8, 8, 6, 6, 4, 4, 2, 2],
        llm_config=llm_config,
        architectures=["OmniVoice"],
    )
    model = OmniVoice(config).float().eval()
    randomise_lm(model, gen)
    model.save_pretrained(tmp, safe_serialization=True)
    n_lm = sum(p.numel() for p in model.parameters())
    logger.info("LM: %d params", n_lm)
    del model

    codec_dir = tmp / "audio_tokenizer"
    codec = HiggsAudioV2TokenizerModel(codec_config(size)).float().eval()
    init_state = {k: v.clone() for k, v in codec.state_dict().items()}
    randomise_codec(codec, gen)
    changed = [k for k, v in codec.state_dict().items() if not torch.equal(v, init_state[k])]
    for must in ("codebook.embed", ".alpha", "parametrizations.weight.original0"):
        if not any(must in k for k in changed):
            raise RuntimeError(f"randomisation left every {must} tensor at its init value")
    codec.save_pretrained(codec_dir, safe_serialization=True)
    DacFeatureExtractor(feature_size=1, sampling_rate=24000, hop_length=960, padding_value=0.0).save_pretrained(
        codec_dir
    )
    logger.info("codec: %d params", sum(p.numel() for p in codec.parameters()))
    del codec, init_state

    # Round trip through the upstream loader, offline.
    os.environ["HF_HUB_OFFLINE"] = "1"
    loaded = OmniVoice.from_pretrained(str(tmp))
    if loaded.sampling_rate != 24000 or loaded.audio_tokenizer.config.frame_rate != 25:
        raise RuntimeError("loaded checkpoint has the wrong sampling or frame rate")
    if loaded.audio_tokenizer.quantizer.quantizers[0].codebook.embed.abs().sum() == 0:
        raise RuntimeError("codebook came back zeroed: load did not keep the saved buffers")
    del loaded

    if out.exists():
        shutil.rmtree(out)
    tmp.rename(out)
    (out / "READY").touch()
    logger.info("wrote %s", out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True, help="output directory (replaced)")
    parser.add_argument("--size", choices=["tiny", "full"], required=True)
    parser.add_argument("--seed", type=int, default=1234)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(name)s: %(message)s")
    build(args.out, args.size, args.seed)


if __name__ == "__main__":
    main()
