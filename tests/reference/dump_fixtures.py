"""Dump reference fixtures from the upstream PyTorch OmniVoice for fixed inputs.

Everything runs in float32 on CPU with fixed seeds. The LM keeps upstream's default
(SDPA) attention: transformers' eager path adds a boolean 4-D mask instead of masking with it,
so padded rows would attend to their padding; HuBERT (no mask) runs eager. The
outputs (``.npz`` plus ``.json`` for strings and arguments) are described in
``tests/data/README.md``. Run with the reference venv, stub first on the path::

    PYTHONPATH=tests/reference/torchaudio_stub /work/refvenv/bin/python -P \
        tests/reference/dump_fixtures.py --ckpt tests/data/tiny_hf --out tests/data/fixtures
"""

import argparse
import json
import logging
import os
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from omnivoice.models import omnivoice as ov_module  # noqa: E402
from omnivoice.models.omnivoice import OmniVoice  # noqa: E402

logger = logging.getLogger("dump_fixtures")

SEED = 0
SAMPLE_RATE = 24000
SIGNAL_SECONDS = 1.0
# Zeros upstream puts on each side of the 16 kHz signal before HuBERT.
HUBERT_PAD = 160

# Strings whose raw text-tokenizer ids are dumped (tokenizer(s).input_ids).
TOKENIZER_CORPUS = [
    "Hello world!",
    "Hello world, this is a test.",
    " leading space and trailing space ",
    "I'm sure you'll like it; we've tried, they'd agree. IT'S DONE, isn't it?",
    "Numbers 0123456789, 3.14159, 2026-11-29, $19.99 and 1,000,000.",
    "Café naïve façade résumé jalapeño Zürich Ångström Łódź",
    "e\u0301 versus \u00e9 (NFC folds the combining accent)",
    "你好，世界！今天天气很好。",
    "这是一个测试句子，北京和上海。",
    "こんにちは、世界！カタカナと漢字。",
    "안녕하세요 세계",
    "Привет, мир! Γειά σου κόσμε!",
    "مرحبا بالعالم",
    "Emoji 😀🎉👍 ❤️ 👩‍💻 🇯🇵 and an unseen one 🦜",
    "Tabs\tand  double  spaces\nnew line\r\nend   \n\n",
    "<|text_start|>Hello<|text_end|>",
    "<|denoise|><|lang_start|>en<|lang_end|><|instruct_start|>female, low pitch<|instruct_end|>",
    "<|lang_start|>None<|lang_end|><|instruct_start|>None<|instruct_end|>",
    "<|endoftext|><|im_start|>user<|im_end|>",
    "[laughter] [sigh] [question-en] [surprise-wa] [dissatisfaction-hnn]",
    "Well [laughter] that was funny [sigh].",
    "女，低音调，四川话",
    "",
]

# Texts for which the rule-based duration estimate (target frames) is dumped.
DURATION_CASES = [
    {"text": "Hello world.", "ref_text": None, "num_ref_audio_tokens": None, "speed": 1.0},
    {"text": "The quick brown fox jumps over the lazy dog.", "ref_text": None, "num_ref_audio_tokens": None, "speed": 1.0},
    {"text": "你好，世界！今天天气很好。", "ref_text": None, "num_ref_audio_tokens": None, "speed": 1.0},
    {"text": "こんにちは、世界！", "ref_text": None, "num_ref_audio_tokens": None, "speed": 1.0},
    {"text": "Numbers 12345 and 3.14.", "ref_text": None, "num_ref_audio_tokens": None, "speed": 1.0},
    {"text": "Hello world.", "ref_text": None, "num_ref_audio_tokens": None, "speed": 1.5},
    {"text": "Hello world.", "ref_text": None, "num_ref_audio_tokens": None, "speed": 0.8},
    {"text": "This is the text to speak.", "ref_text": "Nice to meet you.", "num_ref_audio_tokens": 40, "speed": 1.0},
    {"text": "Well [laughter] that was funny.", "ref_text": "你好。", "num_ref_audio_tokens": 30, "speed": 1.0},
]


def reference_signal_24k(rate: int = SAMPLE_RATE) -> np.ndarray:
    """Returns the deterministic 1 s test signal (float32), 24 kHz unless ``rate`` is given.

    Two tones, a rising chirp and white noise with a slow amplitude envelope;
    RMS is about 0.08 (below 0.1, so the cloning path rescales it). At other
    rates the noise fills that rate's whole band, so resampling has work to do.
    """
    rng = np.random.default_rng(SEED)
    n = int(SIGNAL_SECONDS * rate)
    t = np.arange(n) / rate
    chirp = np.sin(2 * np.pi * (150.0 * t + 400.0 * t**2))
    x = 0.5 * np.sin(2 * np.pi * 220.0 * t) + 0.3 * np.sin(2 * np.pi * 660.0 * t + 0.5) + 0.3 * chirp
    x += 0.2 * rng.standard_normal(n)
    x *= 0.6 + 0.4 * np.sin(2 * np.pi * 1.5 * t)
    x *= 0.08 / np.sqrt(np.mean(x**2))
    return x.astype(np.float32)


def load_model(ckpt: Path) -> OmniVoice:
    """Loads the upstream model in float32: LM with its default SDPA attention, HuBERT eager."""
    model = OmniVoice.from_pretrained(str(ckpt), dtype=torch.float32)
    model.audio_tokenizer.semantic_model.set_attn_implementation("eager")
    model.eval()
    model.audio_tokenizer.eval()
    return model


def save_npz(path: Path, arrays: dict[str, Any]) -> None:
    """Saves arrays (torch or numpy) into a compressed npz, logging shapes."""
    out = {}
    for k, v in arrays.items():
        if isinstance(v, torch.Tensor):
            v = v.detach().cpu().numpy()
        out[k] = np.asarray(v)
    np.savez_compressed(path, **out)
    logger.info("%s: %s", path.name, ", ".join(f"{k}{list(v.shape)}" for k, v in out.items()))


def save_json(path: Path, obj: Any) -> None:
    """Saves ``obj`` as UTF-8 JSON."""
    with open(path, "w", encoding="utf-8") as f:
        json.dump(obj, f, indent=2, ensure_ascii=False)
        f.write("\n")


class Capture:
    """Records module inputs/outputs through forward hooks."""

    def __init__(self) -> None:
        self.values: dict[str, Any] = {}
        self._handles: list[Any] = []
        self._wrapped: list[tuple[Any, str]] = []

    def output(self, module: torch.nn.Module, name: str, fn: Callable[[Any], Any] = lambda o: o) -> None:
        """Stores ``fn(output)`` of ``module`` under ``name`` (first call only)."""

        def hook(_m: torch.nn.Module, _inp: Any, out: Any) -> None:
            self.values.setdefault(name, fn(out))

        self._handles.append(module.register_forward_hook(hook))

    def input(self, module: torch.nn.Module, name: str) -> None:
        """Stores the first positional input of ``module`` under ``name``."""

        def hook(_m: torch.nn.Module, inp: Any) -> None:
            self.values.setdefault(name, inp[0].detach().clone())

        self._handles.append(module.register_forward_pre_hook(hook))

    def method(self, obj: Any, attr: str, name: str) -> None:
        """Stores the first result of the plain method ``obj.attr`` under ``name``."""
        inner = getattr(obj, attr)

        def wrapped(*args: Any, **kwargs: Any) -> Any:
            res = inner(*args, **kwargs)
            self.values.setdefault(name, res.detach().clone())
            return res

        setattr(obj, attr, wrapped)
        self._wrapped.append((obj, attr))

    def close(self) -> None:
        for h in self._handles:
            h.remove()
        for obj, attr in self._wrapped:
            delattr(obj, attr)


# ---------------------------------------------------------------------------
# prompts.npz
# ---------------------------------------------------------------------------


def dump_prompts(model: OmniVoice, out: Path) -> None:
    """Prompt token grids from ``_prepare_inference_inputs``, tokenizer ids, duration estimates."""
    gen = torch.Generator().manual_seed(SEED)
    ref_codes = torch.randint(0, 1024, (8, 15), generator=gen)
    cases = [
        dict(name="auto", text="Hello world, this is a test.", lang=None, instruct=None),
        dict(name="lang", text="Hello world, this is a test.", lang="English", instruct=None),
        dict(name="design_en", text="Hello world, this is a test.", lang="en", instruct="Female, Low Pitch"),
        dict(name="design_zh", text="你好，世界！今天天气很好。", lang="zh", instruct="female, low pitch"),
        dict(name="design_dialect", text="你好，世界！", lang=None, instruct="男，四川话"),
        dict(name="clone", text="This is the text to speak.", lang="en", ref_text="Nice to meet you.", ref=True),
        dict(
            name="clone_nodenoise",
            text="This is the text to speak.",
            lang=None,
            ref_text="Nice to meet you.",
            ref=True,
            denoise=False,
        ),
        dict(name="nonverbal", text="Well [laughter] that was funny [sigh], right? [question-en]", lang=None),
        dict(name="combine_text", text="你好 world （test）\nline  two\t and 中文 字", lang=None),
        dict(name="denoise_no_ref", text="Hello.", lang=None, denoise=True),
        dict(name="denoise_off_no_ref", text="Hello.", lang=None, denoise=False),
    ]
    arrays: dict[str, Any] = {"ref_codes": ref_codes}
    meta: dict[str, Any] = {"cases": []}
    for i, c in enumerate(cases):
        num_target = 10 + i
        lang = ov_module._resolve_language(c.get("lang"))
        use_zh = bool(ov_module._ZH_RE.search(c["text"]))
        instruct = ov_module._resolve_instruct(c.get("instruct"), use_zh=use_zh)
        ref = ref_codes if c.get("ref") else None
        denoise = c.get("denoise", True)
        inp = model._prepare_inference_inputs(
            c["text"], num_target, c.get("ref_text"), ref, lang, instruct, denoise
        )
        arrays[f"{c['name']}__input_ids"] = inp["input_ids"][0].to(torch.int32)
        arrays[f"{c['name']}__audio_mask"] = inp["audio_mask"][0]
        meta["cases"].append(
            {
                "name": c["name"],
                "text": c["text"],
                "language_arg": c.get("lang"),
                "lang_resolved": lang,
                "instruct_arg": c.get("instruct"),
                "instruct_resolved": instruct,
                "ref_text": c.get("ref_text"),
                "uses_ref_codes": ref is not None,
                "denoise": denoise,
                "num_target_tokens": num_target,
                "combined_text": ov_module._combine_text(c["text"], ref_text=c.get("ref_text")),
            }
        )

    tok = model.text_tokenizer
    ids = [tok(s).input_ids for s in TOKENIZER_CORPUS]
    arrays["tokenizer_ids"] = np.array([t for row in ids for t in row], dtype=np.int32)
    arrays["tokenizer_offsets"] = np.cumsum([0] + [len(r) for r in ids]).astype(np.int64)
    meta["tokenizer_corpus"] = TOKENIZER_CORPUS
    meta["tokenizer_decoded"] = [tok.decode(r) for r in ids]
    meta["duration_cases"] = [
        dict(c, target_tokens=model._estimate_target_tokens(c["text"], c["ref_text"], c["num_ref_audio_tokens"], c["speed"]))
        for c in DURATION_CASES
    ]
    save_npz(out / "prompts.npz", arrays)
    save_json(out / "prompts.json", meta)


# ---------------------------------------------------------------------------
# lm_logits.npz
# ---------------------------------------------------------------------------


def capture_forward_calls(model: OmniVoice, max_calls: int) -> list[dict[str, torch.Tensor]]:
    """Wraps ``model.forward`` to record the first ``max_calls`` calls (inputs and logits)."""
    calls: list[dict[str, torch.Tensor]] = []
    inner = model.forward

    def wrapped(*args: Any, **kwargs: Any) -> Any:
        result = inner(*args, **kwargs)
        if len(calls) < max_calls:
            rec = {k: v.detach().clone() for k, v in kwargs.items() if isinstance(v, torch.Tensor)}
            rec["logits"] = result.logits.detach().clone()
            calls.append(rec)
        return result

    model.forward = wrapped  # type: ignore[method-assign]
    return calls


def dump_lm_logits(model: OmniVoice, out: Path) -> None:
    """The first batched cond+uncond forward of ``_generate_iterative`` and its logits.

    A voice-design case run through ``generate`` with one step; the call is
    captured as ``generate`` made it, so the input layout is upstream's own.
    A second, batch-of-2 generate (different prompt and target lengths) is
    captured without logits, for the uncond-row padding layout.
    """
    args = dict(
        text="Hi there.",
        language="en",
        instruct="female, low pitch",
        duration=0.2,
        num_step=1,
        position_temperature=0.0,
        class_temperature=0.0,
        postprocess_output=False,
    )
    calls = capture_forward_calls(model, 1)
    cap = Capture()
    cap.method(model, "_prepare_embed_inputs", "inputs_embeds")
    for i, layer in enumerate(model.llm.layers):
        cap.output(layer, f"layer{i}_out", lambda o: (o[0] if isinstance(o, tuple) else o).detach().clone())
    cap.output(model.llm.norm, "norm_out", lambda o: o.detach().clone())
    try:
        try:
            model.generate(**args)
        finally:
            cap.close()
        batch2_args = dict(
            text=["Hi.", "A much longer second sentence, to pad the batch."],
            language=[None, "en"],
            duration=[0.2, 0.32],
            num_step=1,
            position_temperature=0.0,
            class_temperature=0.0,
            postprocess_output=False,
        )
        calls_b2 = capture_forward_calls(model, 1)
        model.generate(**batch2_args)
    finally:
        del model.forward
    c = calls[0]
    if "position_ids" in c:
        raise RuntimeError("generate passed position_ids; store them")
    save_npz(
        out / "lm_logits.npz",
        {
            "input_ids": c["input_ids"].to(torch.int32),
            "audio_mask": c["audio_mask"],
            "attention_mask": c["attention_mask"][:, 0],
            "logits": c["logits"].float(),
            "inputs_embeds": cap.values["inputs_embeds"],
            **{f"layer{i}_out": cap.values[f"layer{i}_out"] for i in range(len(model.llm.layers))},
            "norm_out": cap.values["norm_out"],
            "batch2_input_ids": calls_b2[0]["input_ids"].to(torch.int32),
            "batch2_audio_mask": calls_b2[0]["audio_mask"],
            "batch2_attention_mask": calls_b2[0]["attention_mask"][:, 0],
        },
    )
    save_json(out / "lm_logits.json", {"generate_args": args, "batch2_generate_args": batch2_args})


# ---------------------------------------------------------------------------
# codec_decode.npz / codec_encode.npz
# ---------------------------------------------------------------------------


@torch.no_grad()
def dump_codec_decode(model: OmniVoice, out: Path) -> None:
    """``HiggsAudioV2TokenizerModel.decode`` of random codes with intermediates."""
    codec = model.audio_tokenizer
    gen = torch.Generator().manual_seed(SEED + 1)
    codes = torch.randint(0, 1024, (8, 12), generator=gen)
    cap = Capture()
    cap.method(codec.quantizer, "decode", "rvq_sum")
    cap.output(codec.fc2, "fc2_out")
    dec = codec.acoustic_decoder
    cap.output(dec.conv1, "dec_conv1_out")
    for i, block in enumerate(dec.block):
        cap.output(block, f"dec_block{i}_out")
    try:
        audio = codec.decode(codes.unsqueeze(0)).audio_values
    finally:
        cap.close()
    v = cap.values
    save_npz(
        out / "codec_decode.npz",
        {
            "codes": codes.to(torch.int32),
            "rvq_sum": v["rvq_sum"][0],
            "fc2_out": v["fc2_out"][0],
            "dec_conv1_out": v["dec_conv1_out"][0],
            **{f"dec_block{i}_out": v[f"dec_block{i}_out"][0] for i in range(len(dec.block))},
            "audio": audio[0, 0],
        },
    )


@torch.no_grad()
def dump_codec_encode(model: OmniVoice, out: Path) -> None:
    """``HiggsAudioV2TokenizerModel.encode`` of the test signal with intermediates."""
    codec = model.audio_tokenizer
    x24 = reference_signal_24k()
    cap = Capture()
    cap.input(codec.semantic_model, "hubert_input")
    cap.output(codec.semantic_model.feature_extractor, "hubert_conv_out")
    cap.output(codec.semantic_model, "hubert_hidden_states", lambda o: torch.stack(o.hidden_states, dim=1))
    cap.output(codec.encoder_semantic, "semantic_encoder_out")
    cap.input(codec.acoustic_encoder, "acoustic_encoder_input")
    cap.output(codec.acoustic_encoder, "acoustic_encoder_out")
    cap.output(codec.fc, "fc_out")
    cap.method(codec, "_extract_semantic_features", "semantic_features")
    try:
        codes = codec.encode(torch.from_numpy(x24)[None, None]).audio_codes
    finally:
        cap.close()
    v = cap.values
    hidden = v["hubert_hidden_states"][0]
    hubert_in = v["hubert_input"][0]
    # Stored once: HuBERT got audio_16k with HUBERT_PAD zeros each side, and
    # the acoustic encoder got audio_24k as it is (no hop/2 padding, since its
    # conv output length already matches the semantic frames).
    if hubert_in[:HUBERT_PAD].any() or hubert_in[-HUBERT_PAD:].any():
        raise RuntimeError("HuBERT input is not zero-padded by HUBERT_PAD")
    if not torch.equal(v["acoustic_encoder_input"][0, 0], torch.from_numpy(x24)):
        raise RuntimeError("acoustic encoder input differs from the signal: store it")
    save_npz(
        out / "codec_encode.npz",
        {
            "audio_24k": x24,
            "audio_16k": hubert_in[HUBERT_PAD:-HUBERT_PAD],
            "hubert_conv_out": v["hubert_conv_out"][0],
            "hubert_hidden_states": hidden,
            "hubert_mean": hidden.mean(dim=0),
            "semantic_features": v["semantic_features"][0],
            "semantic_encoder_out": v["semantic_encoder_out"][0],
            "acoustic_encoder_out": v["acoustic_encoder_out"][0],
            "fc_out": v["fc_out"][0],
            "codes": codes[0].to(torch.int32),
        },
    )


# ---------------------------------------------------------------------------
# resample.npz
# ---------------------------------------------------------------------------

# Reference rates other than the codec's 24 kHz (16 kHz: upstream resamples it to 24 kHz too).
RESAMPLE_RATES = [8000, 16000, 22050, 44100, 48000]


@torch.no_grad()
def dump_resample(model: OmniVoice, out: Path) -> None:
    """Upstream's resampling of references at other rates, and what it makes of them.

    For each rate: the test signal at that rate, torchaudio's resample of it to 24 kHz (the step
    upstream's ``create_voice_clone_prompt`` and ``load_audio`` take), the codec's codes of that
    24 kHz signal (as ``encode`` of audio at that rate), and the voice-clone prompt upstream makes
    from ``(signal, rate)``.
    """
    import torchaudio

    arrays: dict[str, Any] = {}
    meta: dict[str, Any] = {"rates": RESAMPLE_RATES, "ref_text": "Nice to meet you.", "prompt_ref_rms": {}}
    for rate in RESAMPLE_RATES:
        wave = torch.from_numpy(reference_signal_24k(rate))[None]
        wave24 = torchaudio.functional.resample(wave, rate, SAMPLE_RATE)
        prompt = model.create_voice_clone_prompt(ref_audio=(wave, rate), ref_text=meta["ref_text"])
        arrays[f"wave_{rate}"] = wave[0]
        arrays[f"to24k_{rate}"] = wave24[0]
        arrays[f"codes_{rate}"] = model.audio_tokenizer.encode(wave24[None]).audio_codes[0].to(torch.int32)
        arrays[f"prompt_codes_{rate}"] = prompt.ref_audio_tokens.to(torch.int32)
        meta["prompt_ref_rms"][str(rate)] = prompt.ref_rms
    save_npz(out / "resample.npz", arrays)
    save_json(out / "resample.json", meta)


# ---------------------------------------------------------------------------
# generate_*.npz
# ---------------------------------------------------------------------------


def dump_generate(model: OmniVoice, out: Path) -> None:
    """Greedy ``generate`` for auto voice, voice design and cloning."""
    common = dict(duration=1.0, num_step=8, position_temperature=0.0, class_temperature=0.0)
    x24 = reference_signal_24k()
    runs = {
        "auto": dict(text="Hello world, this is a test.", **common),
        "design": dict(text="Hello world, this is a test.", language="en", instruct="female, low pitch", **common),
        "clone": dict(text="This is the text to speak.", ref_text="Nice to meet you.", **common),
    }
    for name, kwargs in runs.items():
        torch.manual_seed(SEED)
        grids: list[torch.Tensor] = []
        prompts: list[Any] = []
        inner_iter = model._generate_iterative
        inner_prompt = model.create_voice_clone_prompt

        def iterative(task: Any, cfg: Any) -> list[torch.Tensor]:
            res = inner_iter(task, cfg)
            grids.extend(r.detach().clone() for r in res)
            return res

        def make_prompt(*a: Any, **k: Any) -> Any:
            p = inner_prompt(*a, **k)
            prompts.append(p)
            return p

        model._generate_iterative = iterative  # type: ignore[method-assign]
        model.create_voice_clone_prompt = make_prompt  # type: ignore[method-assign]
        calls = capture_forward_calls(model, kwargs["num_step"])
        try:
            call_kwargs = dict(kwargs)
            if name == "clone":
                call_kwargs["ref_audio"] = (torch.from_numpy(x24)[None], SAMPLE_RATE)
            audio = model.generate(**call_kwargs)[0]
        finally:
            del model._generate_iterative
            del model.create_voice_clone_prompt
            del model.forward
        tokens = grids[0]
        n_frames = tokens.shape[-1]
        # Batch of one: the cond row ends with the target frames.
        step_tokens = torch.stack([c["input_ids"][0, :, -n_frames:] for c in calls])
        with torch.no_grad():
            raw = model.audio_tokenizer.decode(tokens.unsqueeze(0)).audio_values[0, 0]
        arrays: dict[str, Any] = {
            "tokens": tokens.to(torch.int32),
            "step_tokens": step_tokens.to(torch.int32),
            "audio_raw": raw,
            "audio": audio,
        }
        meta: dict[str, Any] = {"generate_args": kwargs, "sampling_rate": model.sampling_rate}
        if name == "clone":
            p = prompts[0]
            arrays["ref_audio_tokens"] = p.ref_audio_tokens.to(torch.int32)
            meta["ref_audio"] = "(codec_encode.npz audio_24k, 24000), passed as a (1, N) float32 tensor"
            meta["prompt_ref_text"] = p.ref_text
            meta["prompt_ref_rms"] = p.ref_rms
        save_npz(out / f"generate_{name}.npz", arrays)
        save_json(out / f"generate_{name}.json", meta)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ckpt", type=Path, required=True, help="checkpoint dir (HF layout)")
    parser.add_argument("--out", type=Path, required=True, help="output dir for the fixtures")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(name)s: %(message)s")
    torch.manual_seed(SEED)
    torch.set_num_threads(1)
    args.out.mkdir(parents=True, exist_ok=True)
    model = load_model(args.ckpt)
    dump_prompts(model, args.out)
    dump_lm_logits(model, args.out)
    dump_codec_decode(model, args.out)
    dump_codec_encode(model, args.out)
    dump_resample(model, args.out)
    dump_generate(model, args.out)


if __name__ == "__main__":
    main()
