"""Record upstream OmniVoice's text and audio helpers on fixed inputs, for our tests.

Run with the reference environment (upstream ``omnivoice==0.2.1``, torch, pydub),
from any directory other than the repository root so that upstream's package is
imported, with the torchaudio stand-in first on the path::

    PYTHONPATH=<repo>/tests/reference/torchaudio_stub \
        /work/refvenv/bin/python <repo>/tests/reference/dump_text_fixtures.py

Writes, under ``tests/data/fixtures/``:

* ``text_languages.json``: ``_resolve_language`` on names and codes, and whether it warned.
* ``text_instruct.json``: ``_resolve_instruct`` results or exact ValueError texts.
* ``text_chunking.json``: ``chunk_text_punctuation``, ``add_punctuation`` and the
  chunk texts ``OmniVoice._generate_chunked`` generates from.
* ``audio_postprocess.npz``: ``remove_silence``, ``trim_long_audio``,
  ``fade_and_pad_audio``, ``cross_fade_chunks``, and the reference preprocessing
  of ``create_voice_clone_prompt`` and output post-processing of ``generate``
  (called through the real methods with stand-ins for the model parts they do not
  touch) on deterministic test signals, and pydub's silence detection ranges. Case descriptions are the JSON string
  under the key ``cases``; arrays are keyed by case name.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pydub.silence
import torch
from omnivoice.models import omnivoice as ov_model
from omnivoice.utils import audio as ov_audio
from omnivoice.utils import text as ov_text

OUT_DIR = Path(__file__).resolve().parents[1] / "data" / "fixtures"

LANGUAGES = [
    "en", "English", "english", "ENGLISH", "EN", "zh", "Chinese", "yue", "ja", "Japanese", "de",
    "German", "fr", "French", "None", "none", None, "", " english", "klingon", "Norwegian Bokmål",
    "NORWEGIAN BOKMÅL", "vai", "Vai", "luo", "cen", "Santiago del Estero Quichua", "ab", "Abkhazian",
    "zh-CN", "ömie", "Ömie", "fe'fe'",
]

INSTRUCTS = [
    None, "", "   ", "male", "Female", "MALE", "male, british accent", "Male, British Accent",
    "female, young adult, high pitch", "男，青年，四川话", "男,青年", "female，elderly",
    ", male, child,", "whisper", "耳语", "very low pitch, elderly, male",
    "female, whisper, indian accent", "女，东北话", "男, 河南话", "女，少年", "  male ,  low pitch  ",
    "MALE,ELDERLY", "very high pitch, whisper, female, middle-aged, canadian accent",
    "chinese accent, 男", "女，老年，极低音调，耳语", "male，，female",
    # Errors: typos (with suggestions), unknown items, conflicts, dialect + accent.
    "mael", "femal, yung adult", "male, british acent", "男，四川", "robot voice", "happy",
    "male; female", "male, female", "child, elderly, male", "低音调, 高音调", "male, 男",
    "四川话, british accent", "american accent, british accent", "河南话，东北话",
    "Male, Britsh Accent, Elderly", "midle-aged, whisperr",
]

CHUNK_TEXTS = [
    "Hello world. This is a test.",
    "Mr. Smith went to Washington. He met Dr. Jones at 5 p.m. on Jan. 3rd, e.g. a Monday. "
    "They talked about No. 5 St. James Ave. and other things, i.e. real estate.",
    "The value of pi is 3.14159, roughly. One million is written 1,000,000! Is that right? Yes: it is.",
    "今天天气很好。我们去公园散步吧！你觉得怎么样？好的，我们走吧；记得带伞：可能会下雨。",
    "我叫李明，来自北京。I work at Google Inc. in Mountain View. 我喜欢编程，也喜欢音乐。",
    'He said, "Hello." Then she replied, "Goodbye!" And they left (quickly). [Note: end.]',
    "“你好。”他说。“再见！”她回答。《红楼梦》是一本书。",
    "...Leading dots. And trailing dots...",
    ". , ; starts with punctuation.",
    "No punctuation at all in this rather long sentence that just keeps going and going",
    "Short. A. B. C. Longer sentence here that has more characters in it. D.",
    "Line one.\nLine two!\r\nLine three?   Spaces   inside.  ",
    "",
    "   ",
    "!!!",
    "Wait... what?! Really?? Yes!!!",
    "Prices rose 2.5% in Q3; analysts (e.g. at Co. Ltd.) expected 3% vs. 2%.",
    "第一句。第二句很长很长很长很长很长很长很长很长很长很长很长很长。第三。第四句！",
]
CHUNK_PARAMS = [(10, None), (30, 3), (50, 3), (100, None), (5, 3), (200, 3), (1, None), (20, 10)]

PUNCTUATION_TEXTS = [
    "Hello", "Hello.", "你好", "你好。", "  spaced  ", "", "   ", "ends with )", "quote'",
    "mixed 中文 text", "……", "ok…", "end、", "ends with }", "question?", "中文，", "trailing space. ",
    "tab\t", "Ｆｕｌｌ", "數字123",
]

# (text, target_tokens, audio_chunk_duration in s, frame_rate)
GENERATION_CHUNKING = [
    (" ".join(CHUNK_TEXTS[1:3]) * 3, 900, 15.0, 25),
    (CHUNK_TEXTS[3] * 6, 1000, 15.0, 25),
    (CHUNK_TEXTS[4] * 4, 700, 5.0, 25),
    (CHUNK_TEXTS[10] * 5, 400, 2.0, 25),
]


def dump_languages() -> list[dict]:
    """Resolve each language string, noting whether upstream logged a warning."""
    records = []
    logger = logging.getLogger(ov_model.__name__)
    for lang in LANGUAGES:
        warned = []
        handler = logging.Handler()
        handler.emit = warned.append  # type: ignore[method-assign]
        logger.addHandler(handler)
        try:
            result = ov_model._resolve_language(lang)
        finally:
            logger.removeHandler(handler)
        records.append({"language": lang, "result": result, "warned": bool(warned)})
    return records


def dump_instructs() -> list[dict]:
    """Resolve each instruct for Chinese and non-Chinese text; keep results or error texts."""
    records = []
    for instruct in INSTRUCTS:
        for use_zh in (False, True):
            record: dict = {"instruct": instruct, "use_zh": use_zh}
            try:
                record["result"] = ov_model._resolve_instruct(instruct, use_zh=use_zh)
            except ValueError as err:
                record["error"] = str(err)
            records.append(record)
    return records


def dump_generation_chunks() -> list[dict]:
    """Chunk texts as ``_generate_chunked`` does, recorded from the texts it generates."""
    records = []
    for text, target, duration, frame_rate in GENERATION_CHUNKING:
        generated: list[str] = []

        def fake_generate(sub_task, gen_config, generated=generated):
            generated.extend(sub_task.texts)
            return [torch.zeros(8, 1, dtype=torch.long) for _ in sub_task.texts]

        fake_self = SimpleNamespace(
            audio_tokenizer=SimpleNamespace(config=SimpleNamespace(frame_rate=frame_rate)),
            _estimate_target_tokens=lambda *args, **kwargs: 1,
            _generate_iterative=fake_generate,
        )
        task = ov_model.GenerationTask(
            batch_size=1, texts=[text], target_lens=[target], langs=[None], instructs=[None],
            ref_texts=[None], ref_audio_tokens=[None], ref_rms=[None],
        )
        config = ov_model.OmniVoiceGenerationConfig(audio_chunk_duration=duration)
        ov_model.OmniVoice._generate_chunked(fake_self, task, config)
        records.append(
            {"text": text, "target_tokens": target, "chunk_duration": duration,
             "frame_rate": frame_rate, "chunks": generated}
        )
    return records


def make_signal(segments: list[tuple[int, str, float]], rate: int, extra: int, seed: int, channels: int = 1) -> np.ndarray:
    """Build a float32 (C, T) test signal on the int16 grid.

    Each segment is ``(ms, kind, level_dbfs)`` with kind ``zero`` (digital
    silence), ``noise`` (Gaussian noise of that RMS) or ``tone`` (sine of that
    RMS). ``extra`` samples of silence are appended to make the length a
    fractional number of milliseconds. The noise repeats a 1009-sample pattern
    and the tone has a whole period in samples, so that the fixtures compress
    well; 10 ms windows still see different noise.
    """
    rng = np.random.default_rng(seed)
    pattern = rng.standard_normal((channels, 1009))
    parts = []
    for ms, kind, level in segments:
        n = ms * rate // 1000
        rms = 10 ** (level / 20)
        if kind == "zero":
            part = np.zeros((channels, n))
        elif kind == "noise":
            part = np.resize(pattern, (channels, n)) * rms
        else:
            phase = np.arange(n) % 30 / 30
            part = np.tile(np.sin(2 * np.pi * phase) * rms * np.sqrt(2), (channels, 1))
        parts.append(part)
    parts.append(np.zeros((channels, extra)))
    pcm = np.clip(np.round(np.concatenate(parts, axis=1) * 32768), -32768, 32767)
    return (pcm / 32768).astype(np.float32)


SPEECHY = [
    (120, "zero", 0), (400, "noise", -20), (350, "noise", -60), (300, "tone", -25), (180, "zero", 0),
    (250, "noise", -30), (620, "noise", -56), (200, "noise", -48), (90, "zero", 0), (400, "tone", -12),
    (510, "zero", 0),
]
NEAR_THRESHOLD = [
    (60, "noise", -52), (300, "noise", -49), (400, "noise", -51), (300, "tone", -50.5),
    (320, "noise", -10), (700, "noise", -53), (150, "tone", -49.5), (280, "zero", 0),
]
LONG_PAUSES = [
    (300, "noise", -20), (150, "zero", 0), (500, "noise", -25), (400, "noise", -45), (600, "tone", -20),
    (120, "noise", -41), (700, "noise", -22), (1000, "zero", 0), (400, "noise", -20),
]


def signals() -> dict[str, tuple[np.ndarray, int]]:
    """The test signals: name -> (waveform, sample rate)."""
    return {
        "speechy12k": (make_signal(SPEECHY, 12000, 7, seed=1), 12000),
        "speechy22k": (make_signal(SPEECHY[:7], 22050, 13, seed=2), 22050),
        "near24k": (make_signal(NEAR_THRESHOLD, 24000, 11, seed=3), 24000),
        "stereo12k": (make_signal(SPEECHY[:6], 12000, 3, seed=4, channels=2), 12000),
        "silent12k": (make_signal([(800, "noise", -70)], 12000, 0, seed=5), 12000),
        "loud12k": (make_signal([(700, "noise", -6)], 12000, 5, seed=6), 12000),
        "pauses12k": (make_signal(LONG_PAUSES, 12000, 9, seed=7), 12000),
    }


def as_stored(wave: np.ndarray) -> np.ndarray:
    """Store a float32 waveform on the int16 grid as int16 (x 32768, exact), others as they are."""
    scaled = wave.astype(np.float64) * 32768
    on_grid = np.array_equal(scaled, np.round(scaled)) and np.all((scaled >= -32768) & (scaled <= 32767))
    return scaled.astype(np.int16) if wave.dtype == np.float32 and on_grid else wave


def dump_audio() -> tuple[dict[str, np.ndarray], list[dict]]:
    """Run the audio helpers; return arrays to save and the case list."""
    arrays: dict[str, np.ndarray] = {}
    cases: list[dict] = []
    sigs = signals()
    for name, (wave, rate) in sigs.items():
        arrays[f"signal/{name}"] = as_stored(wave)

    def add(case: dict, output: np.ndarray) -> None:
        stored = as_stored(output)
        # Outputs equal to an input or an earlier output (e.g. audio too short to trim) share its array.
        key = next(
            (k for k, v in arrays.items() if v.dtype == stored.dtype and np.array_equal(v, stored)),
            f"out/{len(cases)}",
        )
        arrays[key] = stored
        cases.append({**case, "output": key})

    silence_params = [(300, 100, 300), (200, 100, 200), (500, 100, 100), (0, 100, 300), (300, 0, 0), (50, 20, 30)]
    for name in sigs:
        for mid, lead, trail in silence_params:
            wave, rate = sigs[name]
            out = ov_audio.remove_silence(wave, rate, mid_sil=mid, lead_sil=lead, trail_sil=trail)
            add({"op": "remove_silence", "signal": name, "mid_sil": mid, "lead_sil": lead, "trail_sil": trail}, out)

    # pydub's primitives directly, on upstream's 16-bit conversion of each signal.
    for name in sigs:
        wave, rate = sigs[name]
        segment = ov_audio.numpy_to_audiosegment(wave, rate)
        for min_len, thresh, step in [(300, -50, 10), (100, -40, 10), (55, -50, 7), (1000, -16, 1)]:
            cases.append({
                "op": "pydub_silence", "signal": name, "min_silence_len": min_len, "silence_thresh": thresh,
                "seek_step": step,
                "silent": pydub.silence.detect_silence(segment, min_len, thresh, step),
                "nonsilent": pydub.silence.detect_nonsilent(segment, min_len, thresh, step),
            })
        for thresh, chunk in [(-50, 10), (-40, 10), (-45, 3)]:
            cases.append({
                "op": "pydub_leading_silence", "signal": name, "silence_thresh": thresh, "chunk_size": chunk,
                "leading": pydub.silence.detect_leading_silence(segment, thresh, chunk),
                "trailing": pydub.silence.detect_leading_silence(segment.reverse(), thresh, chunk),
                "length_ms": len(segment),
            })

    trim_params = [(1.5, 0.5, 1.0), (2.0, 1.0, 1.0), (1.0, 0.9, 1.0), (3.0, 1.0, 2.0), (15.0, 3.0, 20.0), (0.6, 0.1, 0.5)]
    for name in ("speechy12k", "speechy22k", "pauses12k", "silent12k", "stereo12k"):
        for max_d, min_d, threshold in trim_params:
            wave, rate = sigs[name]
            out = ov_audio.trim_long_audio(wave, rate, max_duration=max_d, min_duration=min_d, trim_threshold=threshold)
            add({"op": "trim_long_audio", "signal": name, "max_duration": max_d, "min_duration": min_d,
                 "trim_threshold": threshold}, out)

    rng = np.random.default_rng(11)
    short = rng.standard_normal((1, 301)).astype(np.float32) * 0.3
    arrays["signal/short"] = as_stored(short)
    for pad, fade, rate in [(0.1, 0.1, 1000), (0.0, 0.05, 1000), (0.02, 0.0, 1000), (0.01, 1.0, 1000), (0.0, 0.0, 1000)]:
        add({"op": "fade_and_pad_audio", "signal": "short", "pad_duration": pad, "fade_duration": fade,
             "sample_rate": rate}, ov_audio.fade_and_pad_audio(short, pad, fade, rate))

    chunk_set = [rng.standard_normal((1, n)).astype(np.float32) * 0.2 for n in (200, 50, 3, 120)]
    for i, chunk in enumerate(chunk_set):
        arrays[f"signal/chunk{i}"] = as_stored(chunk)
    for names, silence, rate in [([0, 1], 0.3, 1000), ([0, 1, 2, 3], 0.3, 1000), ([0], 0.3, 1000),
                                 ([3, 0, 1], 0.1, 500), ([0, 3], 0.002, 1000)]:
        out = ov_audio.cross_fade_chunks([chunk_set[i] for i in names], rate, silence_duration=silence)
        add({"op": "cross_fade_chunks", "chunks": [f"chunk{i}" for i in names], "silence_duration": silence,
             "sample_rate": rate}, out)

    # create_voice_clone_prompt's preprocessing: everything up to the tokenizer input.
    for name, gain, ref_text in [("speechy12k", 1.0, "given"), ("speechy12k", 0.1, "given"),
                                 ("near24k", 30.0, "given"), ("pauses12k", 0.5, None)]:
        wave, rate = sigs[name]
        captured = {}

        def encode(tensor, captured=captured):
            captured["wav"] = tensor.numpy()[0]
            return SimpleNamespace(audio_codes=torch.zeros(1, 8, 1, dtype=torch.long))

        fake_self = SimpleNamespace(
            audio_tokenizer=SimpleNamespace(encode=encode, device="cpu", config=SimpleNamespace(hop_length=160)),
            sampling_rate=rate,
            _asr_pipe=object(),
            transcribe=lambda audio: "transcript",
        )
        prompt = ov_model.OmniVoice.create_voice_clone_prompt(
            fake_self, ref_audio=(torch.from_numpy(wave * np.float32(gain)), rate), ref_text=ref_text
        )
        add({"op": "preprocess_reference", "signal": name, "gain": gain, "ref_text_given": ref_text is not None,
             "hop_length": 160, "ref_rms": prompt.ref_rms}, captured["wav"])

    # generate()'s post-processing: cross-fade of chunk audio, silence removal, volume, fade and pad.
    for tokens, ref_rms, postprocess in [([0], None, True), ([0], 0.05, True), ([0], 0.3, True),
                                         ([0], None, False), ([1, 2], None, True), ([1, 2, 0], 0.02, True)]:
        wave, rate = sigs["speechy12k"]
        pieces = [wave * 0.2, wave[:, :6000] * 1.5, wave[:, 5000:]]

        def decode(token, pieces=pieces):
            return SimpleNamespace(audio_values=torch.from_numpy(pieces[int(token[0, 0, 0])])[None])

        fake_self = SimpleNamespace(
            audio_tokenizer=SimpleNamespace(decode=decode, device="cpu"), sampling_rate=rate,
        )
        fake_self._post_process_audio = lambda audio, ref_rms, gen_config, s=fake_self: (
            ov_model.OmniVoice._post_process_audio(s, audio, ref_rms, gen_config)
        )
        token_tensors = [torch.full((8, 1), t) for t in tokens]
        config = ov_model.OmniVoiceGenerationConfig(postprocess_output=postprocess)
        out = ov_model.OmniVoice._decode_and_post_process(
            fake_self, token_tensors if len(tokens) > 1 else token_tensors[0], ref_rms, config
        )
        add({"op": "post_process", "pieces": tokens, "ref_rms": ref_rms, "postprocess_output": postprocess,
             "sample_rate": rate}, out)
    return arrays, cases


def main() -> None:
    """Write all fixtures."""
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    text_fixtures = {
        "text_languages.json": {"cases": dump_languages()},
        "text_instruct.json": {"cases": dump_instructs()},
        "text_chunking.json": {
            "chunk_text_punctuation": [
                {"text": text, "chunk_len": n, "min_chunk_len": m,
                 "chunks": ov_text.chunk_text_punctuation(text, n, m)}
                for text in CHUNK_TEXTS for n, m in CHUNK_PARAMS
            ],
            "add_punctuation": [{"text": t, "result": ov_text.add_punctuation(t)} for t in PUNCTUATION_TEXTS],
            "generation_chunks": dump_generation_chunks(),
        },
    }
    for name, content in text_fixtures.items():
        with (OUT_DIR / name).open("w", encoding="utf-8") as f:
            json.dump({"source": "omnivoice==0.2.1", **content}, f, ensure_ascii=False, indent=0)
            f.write("\n")
    arrays, cases = dump_audio()
    np.savez_compressed(OUT_DIR / "audio_postprocess.npz", cases=np.array(json.dumps(cases)), **arrays)
    for path in sorted(OUT_DIR.glob("*")):
        print(f"{path.name}: {path.stat().st_size} bytes")


if __name__ == "__main__":
    main()
