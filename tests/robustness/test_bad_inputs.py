"""Every bad input is refused by name, before any work: the API (ValueError / TypeError naming the
argument and what is allowed), voice files, and both CLIs (one line; exit 2 for a bad flag value)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from omnivoice import OmniVoice, VoiceClonePrompt
from omnivoice.cli import main as tts_cli
from omnivoice.codec_cli import main as codec_cli

WAVE = (0.3 * np.sin(np.arange(24000, dtype=np.float32) / 9)).astype(np.float32)
FAST = dict(num_step=1, duration=0.4)


@pytest.fixture(scope="module")
def model(tiny_model_dir: Path) -> OmniVoice:
    return OmniVoice.from_pretrained(tiny_model_dir, n_threads=1)


@pytest.mark.parametrize(("kwargs", "error", "match"), [
    (dict(text=None), TypeError, "text must be a str"),
    (dict(text=42), TypeError, "text must be a str"),
    (dict(text=["ok", 3]), TypeError, r"text\[1\] must be a str"),
    (dict(text="hi \ud800"), ValueError, "lone surrogate"),
    (dict(text="hi", ref_text=3, ref_audio=(WAVE, 24000)), TypeError, "ref_text must be a str"),
    (dict(text="hi", language=5), TypeError, "language must be a str"),
    (dict(text="hi", voice_clone_prompt="me.npz"), TypeError, r"VoiceClonePrompt.load\('me.npz'\)"),
    (dict(text="hi", ref_text="Hello.", ref_audio=(WAVE, None)), TypeError, "ref_audio sample rate"),
    (dict(text="hi", ref_text="Hello.", ref_audio=(WAVE, 22050.9)), ValueError, "whole number"),
    (dict(text="hi", ref_text="Hello.", ref_audio=(WAVE, 7)), ValueError, "7 Hz is outside"),
    (dict(text="hi", ref_text="Hello.", ref_audio=(np.stack([WAVE, WAVE], 1), 24000)), ValueError, "channels-last"),
    (dict(text="hi", duration="2"), TypeError, "duration must be a number"),
    (dict(text="hi", speed="2"), TypeError, "speed must be a number"),
    (dict(text="hi", speed=1e-9), ValueError, "speed=1e-09 .* positions"),
    (dict(text="hi", duration=1e6), ValueError, "duration=1000000.0 s .* positions"),
    (dict(text="hi", audio_chunk_threshold=float("nan")), ValueError, "audio_chunk_threshold"),
    (dict(text="hi", seed=-1), ValueError, "seed must be in"),
    (dict(text="hi", seed="1"), TypeError, "seed must be an int"),
])
def test_generate_refuses_by_name(model: OmniVoice, kwargs: dict, error: type, match: str) -> None:
    with pytest.raises(error, match=match):
        model.generate(**kwargs)


def test_per_item_arguments_share_one_rule(model: OmniVoice) -> None:
    # A one-entry list is broadcast like a scalar, for duration and speed as for language.
    out = model.generate(["a", "b"], language=["en"], duration=[0.4], speed=[1.0], num_step=1)
    assert len(out) == 2 and out[0].size == out[1].size
    with pytest.raises(ValueError, match="duration has 2 entries for 3 texts"):
        model.generate(["a", "b", "c"], duration=[0.4, 0.4], num_step=1)


def test_thread_count_string_is_refused(model: OmniVoice) -> None:
    with pytest.raises(TypeError, match="n_threads"):
        OmniVoice.from_pretrained("unused", n_threads="2")  # type: ignore[arg-type]


@pytest.mark.parametrize(("change", "match"), [
    (dict(ref_rms=np.float64("nan")), "ref_rms must be a positive finite number"),
    (dict(ref_rms=np.float64(-0.5)), "ref_rms must be a positive finite number"),
    (dict(ref_rms=np.float64(0.0)), "silent reference"),
    (dict(ref_text=np.array("")), "ref_text is empty"),
    (dict(ref_text=np.array("ok \ud800")), "lone surrogate"),
    (dict(ref_audio_tokens=np.full((8, 3), -1, np.int32)), "negative ids"),
])
def test_voice_files_are_validated_at_load(tmp_path: Path, change: dict, match: str) -> None:
    fields = dict(ref_audio_tokens=np.zeros((8, 3), np.int32), ref_text=np.array("Hi."), ref_rms=np.float64(0.1),
                  format=np.array("omnivoice-voice-1"))
    path = tmp_path / "v.npz"
    np.savez(path, **{**fields, **change})
    with pytest.raises(ValueError, match=match):
        VoiceClonePrompt.load(path)


@pytest.mark.parametrize("preprocess", [True, False])
def test_silent_reference_is_refused_with_or_without_preprocessing(model: OmniVoice, preprocess: bool) -> None:
    with pytest.raises(ValueError, match=r"ref_audio is silent \(every sample is 0\)"):
        model.create_voice_clone_prompt((np.zeros(24000, np.float32), 24000), "Hello.", preprocess_prompt=preprocess)
    with pytest.raises(ValueError, match="ref_audio is silent"):
        model.generate("Hi.", ref_audio=(np.zeros(24000, np.int16), 16000), ref_text="Hello.",
                       preprocess_prompt=preprocess, **FAST)


def test_a_silent_prompt_in_memory_is_refused(model: OmniVoice) -> None:
    # VoiceClonePrompt.load refuses ref_rms 0 (above); one built in memory is refused at generation.
    prompt = VoiceClonePrompt(np.zeros((8, 10), np.int32), "Hello.", 0.0)
    with pytest.raises(ValueError, match="voice_clone_prompt.ref_rms is 0.0: a silent"):
        model.generate("Hi.", voice_clone_prompt=prompt, **FAST)


def test_cli_refuses_a_silent_reference(tiny_model_dir: Path, tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    import soundfile as sf

    ref = tmp_path / "silent.wav"
    sf.write(ref, np.zeros(24000, np.float32), 24000)
    args = ["Hi.", "-o", str(tmp_path / "x.wav"), "--model", str(tiny_model_dir), "--ref-wav", str(ref),
            "--ref-text", "Hello.", "--no-preprocess", "--steps", "1", "-q"]
    assert tts_cli(args) == 1
    assert _one_line(capsys) == ("omnivoice-tts: error: ref_audio is silent (every sample is 0): give a recording "
                                 "of the voice to clone")
    assert not (tmp_path / "x.wav").exists()


def test_generate_stream_names_a_text_that_is_not_text(model: OmniVoice) -> None:
    for text in (None, 42, b"bytes"):
        with pytest.raises(TypeError, match="text must be a str or an iterable of str fragments, got"):
            next(model.generate_stream(text, **FAST))


def _one_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    return err


@pytest.mark.parametrize(("flags", "allowed"), [
    (["--seed", "-1"], "an integer >= 0"), (["--chunk-threshold", "nan"], "a number >= 0"),
    (["--guidance", "inf"], "a finite number"), (["--threads", "x"], "a positive integer"),
    (["--sample-rate", "22050.9"], "a positive integer"), (["--speed", "fast"], "a positive number")])
def test_cli_bad_flag_values_exit_2(flags: list[str], allowed: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        tts_cli(["Hi.", "-o", "x.wav", *flags])
    assert e.value.code == 2
    assert f"error: argument {flags[0]}: must be {allowed}, got {flags[1]}" in capsys.readouterr().err


@pytest.mark.parametrize(("line", "message"), [
    ('["Hi."]', ":1: a request must be a JSON object"),
    ("3", ":1: a request must be a JSON object"),
    ('{"text": "Hi.", "seed": "abc"}', ":1: 'seed' must be an integer"),
    ('{"text": "Hi.", "duration": "two"}', ":1: 'duration' must be a number"),
])
def test_cli_batch_lines_name_line_and_key(tiny_model_dir: Path, tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str], line: str, message: str) -> None:
    jobs = tmp_path / "jobs.jsonl"
    jobs.write_text(line + "\n")
    args = ["--batch", str(jobs), "-o", str(tmp_path / "out"), "--model", str(tiny_model_dir), "--steps", "1", "-q"]
    assert tts_cli(args) == 1
    # one line per bad line, then the one error line
    report, error = capsys.readouterr().err.strip().splitlines()
    assert message in report and "1 of 1 lines" in error and "nothing was run" in error


@pytest.mark.parametrize(("output", "message"), [("missing-dir/x.wav", "does not exist"), (".", "is a directory")])
def test_cli_output_path_checked_first(tiny_model_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                       output: str, message: str) -> None:
    # The model path is wrong too: the output is checked before the model is even loaded.
    assert tts_cli(["Hi.", "-o", str(tmp_path / output), "--model", str(tmp_path / "no-model")]) == 1
    assert message in _one_line(capsys)


def test_cli_non_utf8_stdin(tiny_model_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                            monkeypatch: pytest.MonkeyPatch) -> None:
    import io
    import sys

    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"caf\xe9 au lait")))
    assert tts_cli(["-o", str(tmp_path / "x.wav"), "--model", str(tiny_model_dir), "-q"]) == 1
    assert "stdin is not UTF-8 text (byte 0xe9 at offset 3)" in _one_line(capsys)


def test_cli_unknown_language_warns_in_one_line(tiny_model_dir: Path, tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    args = ["Hi.", "-o", str(tmp_path / "x.wav"), "--model", str(tiny_model_dir), "--lang", "Klingonese",
            "--steps", "1", "--duration", "0.4", "-q"]
    assert tts_cli(args) == 0
    err = _one_line(capsys)
    assert err.startswith("omnivoice-tts: warning:") and "Klingonese" in err


def test_codec_cli_same_input_and_output(tiny_model_dir: Path, tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    from omnivoice import save_codes

    codes = tmp_path / "x.ovrq"
    save_codes(codes, np.zeros((8, 2), np.int32))
    args = ["--model", str(tiny_model_dir / "omnivoice-tokenizer-F32.gguf"), "-i", str(codes), "-o", str(codes)]
    assert codec_cli(args) == 1
    assert "overwrite the input; give -o another file" in _one_line(capsys)


def test_converter_checks_inputs_and_writes_nothing_on_failure(tmp_path: Path) -> None:
    import shutil

    from omnivoice.convert import convert_model

    snapshot = tmp_path / "snap"
    shutil.copytree(Path(__file__).parent.parent / "data" / "tiny_hf", snapshot)
    shutil.rmtree(snapshot / "audio_tokenizer")
    with pytest.raises(FileNotFoundError, match="audio_tokenizer"):
        convert_model(snapshot, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_a_too_long_reference_says_so_and_how_long_it_may_be(model: OmniVoice, tmp_path: Path) -> None:
    # A voice file with more frames of codes than the LM has positions (40960, 27 min): the
    # reference, not the speech asked for, is what does not fit.
    frames = model.lm.context_length + 100
    path = tmp_path / "long.npz"
    VoiceClonePrompt(np.zeros((8, frames), np.int32), "A very long reference recording.", 0.1).save(path)
    seconds = frames / model.frame_rate
    with pytest.raises(ValueError, match=rf"the reference is too long: {seconds:.0f} s \({frames} frames\), .* "
                                         r"for this text the reference may be at most about \d+ s \(3-10 s"):
        model.generate("Hi.", voice_clone_prompt=VoiceClonePrompt.load(path), num_step=1)


@pytest.mark.parametrize("error", [RuntimeError("1 of 6 requests failed: see out/manifest.jsonl"),
                                   KeyError("no such thing"), RuntimeError()])
def test_cli_error_lines_carry_no_exception_class_names(error: Exception, capsys: pytest.CaptureFixture[str]) -> None:
    from omnivoice._cli import run_command

    def fail() -> None:
        raise error

    assert run_command("omnivoice-tts", fail) == 1
    line = _one_line(capsys)
    assert line.startswith("omnivoice-tts: error: ") and type(error).__name__ not in line, line
