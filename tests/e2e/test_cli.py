"""The omnivoice-tts command on the tiny model: each mode writes a valid WAV, -o - streams one,
--batch writes a file per line, and bad values exit non-zero with one line."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from omnivoice.cli import main

FIXTURES = Path(__file__).parents[1] / "data" / "fixtures"
FAST = ["--steps", "2", "--duration", "0.6", "--threads", "1", "-q"]


@pytest.fixture(scope="module")
def ref_wav(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("ref") / "ref.wav"
    sf.write(path, np.load(FIXTURES / "codec_encode.npz")["audio_24k"], 24000, subtype="FLOAT")
    return path


def _read(path: Path) -> tuple[np.ndarray, int, str]:
    info = sf.info(path)
    audio, sr = sf.read(path, dtype="float32")
    return audio, sr, info.subtype


@pytest.mark.parametrize("mode", ["auto", "design", "clone"])
def test_each_mode_writes_a_wav(tiny_model_dir: Path, ref_wav: Path, tmp_path: Path, mode: str) -> None:
    out = tmp_path / f"{mode}.wav"
    extra = {"auto": [], "design": ["--instruct", "male, high pitch"],
             "clone": ["--ref-wav", str(ref_wav), "--ref-text", "Nice to meet you."]}[mode]
    assert main(["Hello there.", "-o", str(out), "--model", str(tiny_model_dir), *FAST, *extra]) == 0
    audio, sr, subtype = _read(out)
    assert sr == 24000 and subtype == "PCM_16"
    assert audio.size > 0.6 * 24000 and np.abs(audio).max() > 0


def test_formats_and_saved_voice(tiny_model_dir: Path, ref_wav: Path, tmp_path: Path) -> None:
    voice = tmp_path / "voice.npz"
    common = ["--model", str(tiny_model_dir), *FAST, "--seed", "5"]
    assert main(["Hi.", "-o", str(tmp_path / "a.wav"), "--format", "wav32", "--ref-wav", str(ref_wav),
                 "--ref-text", "Nice to meet you.", "--save-voice", str(voice), *common]) == 0
    assert main(["Hi.", "-o", str(tmp_path / "b.wav"), "--format", "wav32", "--voice", str(voice), *common]) == 0
    a, _, subtype = _read(tmp_path / "a.wav")
    b, _, _ = _read(tmp_path / "b.wav")
    assert subtype == "FLOAT"
    np.testing.assert_array_equal(a, b)


@pytest.mark.slow
def test_stdout_stream_is_a_playable_wav(tiny_model_dir: Path) -> None:
    # A real process: stdout must carry nothing but the WAV stream.
    proc = subprocess.run(
        [sys.executable, "-P", "-m", "omnivoice", "-o", "-", "--model", str(tiny_model_dir), *FAST,
         "--format", "wav24", "--chunk-threshold", "0.2", "--chunk-duration", "0.3", "--seed", "1"],
        input="One sentence here. And a second sentence there.".encode(), capture_output=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr.decode()
    assert proc.stdout[:4] == b"RIFF" and proc.stdout[8:12] == b"WAVE"
    audio, sr = sf.read(io.BytesIO(proc.stdout), dtype="float32")
    assert sr == 24000 and audio.size > 24000 * 0.5


def test_batch_writes_one_file_per_line(tiny_model_dir: Path, tmp_path: Path) -> None:
    jobs = tmp_path / "jobs.jsonl"
    jobs.write_text("\n".join(json.dumps(j) for j in [
        {"text": "First line."},
        {"text": "Second line.", "instruct": "female", "output": "second.wav"},
        {"text": "Third line.", "lang": "en", "speed": 1.2},
    ]) + "\n", encoding="utf-8")
    outdir = tmp_path / "out"
    assert main(["--batch", str(jobs), "-o", str(outdir), "--model", str(tiny_model_dir), *FAST]) == 0
    assert sorted(p.name for p in outdir.iterdir()) == ["0001.wav", "0003.wav", "second.wav"]


@pytest.mark.parametrize("args, message", [
    (["Hi.", "--instruct", "purple voice"], "purple voice"),
    (["Hi.", "--ref-text", "no audio"], "--ref-text given without --ref-wav"),
    (["Hi.", "--ref-wav", "missing.wav", "--ref-text", "x"], "missing.wav"),
    ([""], "no text"),
])
def test_errors_are_one_line(tiny_model_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                             args: list[str], message: str) -> None:
    code = main([*args, "-o", str(tmp_path / "x.wav"), "--model", str(tiny_model_dir), *FAST])
    err = capsys.readouterr().err.strip()
    assert code != 0
    assert len(err.splitlines()) == 1 and err.startswith("omnivoice-tts: error:") and message in err


@pytest.mark.parametrize("args", [["--steps", "0"], ["--duration", "-2"], ["--format", "mp3"]])
def test_bad_flag_values_exit_2(args: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        main(["Hi.", "-o", "x.wav", *args])
    assert e.value.code == 2
    assert "error:" in capsys.readouterr().err


def test_missing_model_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["Hi.", "-o", str(tmp_path / "x.wav"), "--model", str(tmp_path / "nothing-here")]) != 0
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "model not found" in err


@pytest.mark.slow
def test_stdin_is_spoken_as_it_arrives(tiny_model_dir: Path) -> None:
    # A real process whose stdin stays open: the first sentence's audio must come out before the
    # rest of the text is even written.
    import os
    import select
    import time

    with subprocess.Popen(
        [sys.executable, "-P", "-m", "omnivoice", "-o", "-", "--model", str(tiny_model_dir), "--steps", "2",
         "--threads", "1", "-q", "--seed", "1", "--sample-rate", "16000"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    ) as proc:
        proc.stdin.write(b"The first sentence is spoken right away, before the rest.\n")
        proc.stdin.flush()
        got, deadline = b"", time.monotonic() + 120
        while len(got) <= 44 and time.monotonic() < deadline and proc.poll() is None:
            if select.select([proc.stdout], [], [], 1.0)[0]:
                got += os.read(proc.stdout.fileno(), 1 << 16)
        assert len(got) > 44 and proc.poll() is None  # header and audio, stdin still open
        try:
            out, err = proc.communicate("And a second one, later. 你好。\n".encode(), timeout=120)
        finally:
            proc.kill()
    assert proc.returncode == 0, err.decode()
    audio, sr = sf.read(io.BytesIO(got + out), dtype="float32")
    assert sr == 16000 and audio.size > 16000 * 2 and np.isfinite(audio).all()


def test_stream_by_line_writes_a_wav_per_line(tiny_model_dir: Path, tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str],
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    from omnivoice import OmniVoice

    prompts = []
    inner = OmniVoice.create_voice_clone_prompt
    monkeypatch.setattr(OmniVoice, "create_voice_clone_prompt",
                        lambda self, *a, **k: prompts.append(a[1]) or inner(self, *a, **k))
    outdir = tmp_path / "lines"
    assert main(["First line.\n\nSecond line, longer.\n", "--stream-by-line", "-o", str(outdir),
                 "--model", str(tiny_model_dir), "--sample-rate", "16000", *FAST]) == 0
    printed = capsys.readouterr().out.split()
    assert printed == [str(outdir / "0001.wav"), str(outdir / "0002.wav")]
    assert prompts == ["First line."]  # the first line's speech is the voice of the next
    for path in printed:
        audio, sr, _ = _read(Path(path))
        assert sr == 16000 and audio.size > 0.6 * 16000


SRT = """1
00:00:00,200 --> 00:00:01,000
<i>First cue.</i>

2
00:00:01,500 --> 00:00:03,000
Second cue runs past the next one.

3
00:00:02,500 --> 00:00:03,200
Third.
"""


@pytest.mark.parametrize("mode", ["auto", "design", "clone"])
def test_srt_dub_is_one_timeline(tiny_model_dir: Path, ref_wav: Path, tmp_path: Path, mode: str) -> None:
    srt = tmp_path / "subs.srt"
    srt.write_text(SRT, encoding="utf-8")
    extra = {"auto": [], "design": ["--instruct", "male, high pitch"],
             "clone": ["--ref-wav", str(ref_wav), "--ref-text", "Nice to meet you."]}[mode]
    rate = 24000 if mode == "auto" else 16000
    out = tmp_path / "dub.wav"
    assert main(["--srt", str(srt), "-o", str(out), "--model", str(tiny_model_dir), "--steps", "2",
                 "--threads", "1", "-q", "--sample-rate", str(rate), *extra]) == 0
    audio, sr, _ = _read(out)
    assert sr == rate and abs(audio.size - 3.2 * rate) <= 2
    sound = np.abs(audio) > 1e-4
    at = lambda t: int(t * rate)  # noqa: E731
    # Silence outside the cues (soxr's filter rings for a few ms around each edge).
    assert not sound[: at(0.19)].any() and not sound[at(1.01): at(1.49)].any()
    for start, end in [(0.2, 1.0), (1.5, 2.5), (2.5, 3.2)]:  # cue 2 clipped at cue 3's start
        assert sound[at(start) + at(0.02): at(end) - at(0.02)].mean() > 0.5


@pytest.mark.parametrize("args, message", [
    (["--srt", "MISSING.srt", "-o", "x.wav"], "MISSING.srt"),
    (["--srt", "BAD.srt", "-o", "x.wav"], "BAD.srt:2: malformed timing"),
    (["--srt", "BAD.srt", "-o", "-"], "give -o a file"),
    (["--srt", "BAD.srt", "-o", "x.wav", "--duration", "2"], "--duration does not apply to --srt"),
    (["Hi.", "--stream-by-line", "-o", "-"], "give -o a directory"),
])
def test_dub_and_line_errors(tiny_model_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                             monkeypatch: pytest.MonkeyPatch, args: list[str], message: str) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "BAD.srt").write_text("1\n00:00:01,000 --> soon\nHi.\n", encoding="utf-8")
    assert main([*args, "--model", str(tiny_model_dir), "-q"]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and message in err
