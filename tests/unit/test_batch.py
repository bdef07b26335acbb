"""The --batch request schema (omnivoice.batch): what a line may hold and the error it gets."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from omnivoice.batch import BatchRequest, RequestError, parse_request, read_requests


def test_defaults_alias_and_absolute_paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "ref.wav").touch()  # checked to exist, not read
    (tmp_path / "v.npz").touch()
    req = parse_request({"text": "Hi.", "language": "de", "ref_wav": "ref.wav", "ref_text": "x"}, 7, "out",
                        defaults={"seed": 3, "lang": "en", "instruct": None})
    assert req == BatchRequest(id=7, text="Hi.", output=str(tmp_path / "out" / "0007.wav"), lang="de",
                               ref_wav=str(tmp_path / "ref.wav"), ref_text="x", seed=3)
    assert req.voice_key == ("ref", str(tmp_path / "ref.wav"), "x")
    assert parse_request({"text": "Hi.", "voice": "v.npz"}, 1, "/o").voice_key == ("voice", str(tmp_path / "v.npz"))
    assert parse_request({"text": "Hi.", "output": "/abs/x.wav"}, 1, "/o").output == "/abs/x.wav"


@pytest.mark.parametrize("obj, message", [
    (["text"], "must be a JSON object"),
    ({"text": "  "}, "non-empty 'text'"),
    ({"instruct": "female"}, "non-empty 'text'"),
    ({"text": "a", "intruct": "female"}, "unknown key(s) 'intruct'; allowed: duration, instruct"),
    ({"text": "a", "lang": "en", "language": "en"}, "'lang' or 'language'"),
    ({"text": "a", "seed": 1.5}, "'seed' must be an integer, got 1.5"),
    ({"text": "a", "seed": True}, "'seed' must be an integer"),
    ({"text": "a", "speed": "fast"}, "'speed' must be a number"),
    ({"text": "a", "duration": 0}, "'duration' must be a positive number"),
    ({"text": 5}, "'text' must be a string"),
    ({"text": "a", "ref_wav": "/no/such.wav", "ref_text": "x"}, "'ref_wav' /no/such.wav does not exist"),
    ({"text": "a", "voice": "/no/such.npz"}, "'voice' /no/such.npz does not exist"),
    ({"text": "a", "ref_text": "x"}, "'ref_text' given without 'ref_wav'"),
])
def test_bad_requests_name_the_key(obj: object, message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse_request(obj, 1, "/o")


def test_read_requests_numbers_lines_and_reports_each_bad_one(tmp_path: Path) -> None:
    jobs = tmp_path / "jobs.jsonl"
    jobs.write_text('{"text": "one"}\n\n{"text": "two", "output": "0001.wav"}\n{oops\n{"text": "four"}\n',
                    encoding="utf-8")
    reqs = read_requests(jobs, tmp_path)
    assert [type(r).__name__ for r in reqs] == ["BatchRequest", "RequestError", "RequestError", "BatchRequest"]
    # id: the request's number (names NNNN.wav); line: its line in the file, blank lines counted
    assert reqs[1] == RequestError(2, os.path.join(tmp_path, "0001.wav"),
                                   f"output {tmp_path / '0001.wav'} is also written by line 1", line=3)
    assert reqs[2].id == 3 and reqs[2].line == 4 and reqs[2].message.startswith("not valid JSON")
    assert reqs[3].output == str(tmp_path / "0004.wav")


@pytest.mark.parametrize("flag", ["--ray", "--skip-bad-lines"])
def test_batch_flags_need_a_batch(tmp_path: Path, capsys: pytest.CaptureFixture[str], flag: str) -> None:
    from omnivoice.cli import main

    assert main(["Hi.", "-o", str(tmp_path / "x.wav"), flag]) == 1
    assert f"{flag} applies to a --batch job" in capsys.readouterr().err


def test_check_job_reports_every_bad_line_then_refuses_unless_told(tmp_path: Path) -> None:
    from omnivoice.batch import check_job

    jobs = tmp_path / "jobs.jsonl"
    jobs.write_text('{"text": "one"}\n{"txt": "two"}\n\n{"text": "three", "seed": -0.5}\n{"text": "four"}\n',
                    encoding="utf-8")
    parsed = read_requests(jobs, tmp_path)
    reported: list[str] = []
    with pytest.raises(ValueError, match=r"2 of 4 lines of jobs.jsonl are bad \(line 2, 4\); nothing was run.*"
                                         r"--skip-bad-lines"):
        check_job(parsed, "jobs.jsonl", report=reported.append)
    assert reported == ["jobs.jsonl:2: unknown key(s) 'txt'; allowed: duration, instruct, lang, language, output, "
                        "ref_text, ref_wav, seed, speed, text, voice",
                        "jobs.jsonl:4: 'seed' must be an integer, got -0.5"]
    good = check_job(parsed, "jobs.jsonl", skip_bad_lines=True)
    assert [r.text for r in good] == ["one", "four"]
    assert [r.id for r in good] == [1, 4]
