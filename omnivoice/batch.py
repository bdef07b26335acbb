"""Batch requests: the JSONL schema of ``omnivoice-tts --batch``, one request made into one audio
file, and the manifest row saying how it went. Shared by the command line and the Ray job
(:mod:`omnivoice.distributed`), so both write the same samples for the same requests and seeds.

One request per non-blank line, a JSON object: ``text`` (required), ``output`` (file name, relative
to the output directory; default ``NNNN.wav`` from the request's 1-based number) and any of
``lang`` (or ``language``), ``instruct``, ``duration``, ``speed``, ``ref_wav``, ``ref_text``,
``voice`` (a saved voice prompt ``.npz``), ``seed``.

A job is checked whole before anything runs (:func:`check_job`): every bad line is reported at
once, with its line number and the reason, and the job is refused unless the caller asks to run
the good lines anyway (``--skip-bad-lines``); the plain and the Ray job do the same.
"""

from __future__ import annotations

import json
import os
import time
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Optional, Union

# key -> JSON type accepted
_FIELDS = {
    "text": "a string", "output": "a string", "lang": "a string", "instruct": "a string",
    "duration": "a number", "speed": "a number", "ref_wav": "a string", "ref_text": "a string",
    "voice": "a string", "seed": "an integer",
}
_TYPES = {"a string": (str,), "a number": (int, float), "an integer": (int,)}
_ALIASES = {"language": "lang"}
_PATH_FIELDS = ("ref_wav", "voice")


@dataclass(frozen=True)
class BatchRequest:
    """One validated request. ``output`` is absolute; ``id`` is its 1-based number in the job."""

    id: int
    text: str
    output: str
    lang: Optional[str] = None
    instruct: Optional[str] = None
    duration: Optional[float] = None
    speed: Optional[float] = None
    ref_wav: Optional[str] = None
    ref_text: Optional[str] = None
    voice: Optional[str] = None
    seed: Optional[int] = None

    @property
    def voice_key(self) -> Optional[tuple[str, ...]]:
        """What identifies this request's encoded voice prompt; ``None`` without one."""
        if self.voice:
            return ("voice", self.voice)
        if self.ref_wav:
            return ("ref", self.ref_wav, self.ref_text or "")
        return None


@dataclass(frozen=True)
class RequestError:
    """A request that could not be parsed or validated. ``line``: its line in the file (blank
    lines counted), or its 1-based position among request objects."""

    id: int
    output: Optional[str]
    message: str
    line: int = 0


def _check(key: str, value: Any) -> None:
    if value is None:
        if key == "text":
            raise ValueError("needs a non-empty 'text'")
        return
    kind = _FIELDS[key]
    if isinstance(value, bool) or not isinstance(value, _TYPES[kind]):
        raise ValueError(f"'{key}' must be {kind}, got {json.dumps(value)}")
    if key == "text" and not value.strip():
        raise ValueError("needs a non-empty 'text'")
    if key in ("duration", "speed") and not 0 < value < float("inf"):
        raise ValueError(f"'{key}' must be a positive number, got {value}")


def parse_request(obj: Any, id: int, output_dir: Union[str, os.PathLike],
                  defaults: Optional[dict[str, Any]] = None) -> BatchRequest:
    """Validates one request object.

    Args:
        obj: The decoded JSON object of one line.
        id: Its 1-based number in the job (names the default output ``NNNN.wav``).
        output_dir: Directory that relative ``output`` names are under.
        defaults: Values for keys the line does not give (the command line's flags).

    Raises:
        ValueError: Not an object, an unknown key, a value of the wrong type, no text, a reference
            or voice file that does not exist, or ``ref_wav`` and ``ref_text`` not given together.
    """
    if not isinstance(obj, dict):
        raise ValueError(f"a request must be a JSON object, got {type(obj).__name__}")
    line = {_ALIASES.get(k, k): v for k, v in obj.items()}
    if len(line) != len(obj):
        raise ValueError("give 'lang' or 'language', not both")
    unknown = sorted(set(line) - set(_FIELDS))
    if unknown:
        raise ValueError(f"unknown key(s) {', '.join(map(repr, unknown))}; allowed: "
                         f"{', '.join(sorted([*_FIELDS, *_ALIASES]))}")
    req = {k: v for k, v in (defaults or {}).items() if v is not None}
    req.update(line)
    for key in _FIELDS:
        _check(key, req.get(key))
    for key in _PATH_FIELDS:
        if req.get(key):  # absolute: actors may run in another working directory
            req[key] = os.path.abspath(os.path.expanduser(req[key]))
            if not os.path.isfile(req[key]):
                raise ValueError(f"'{key}' {req[key]} does not exist")
    if req.get("ref_wav") and not req.get("voice") and not req.get("ref_text"):
        raise ValueError("'ref_wav' needs 'ref_text' (its transcript): there is no ASR model here")
    if req.get("ref_text") and not req.get("ref_wav") and not req.get("voice"):
        raise ValueError("'ref_text' given without 'ref_wav'")
    output = Path(output_dir) / req.pop("output", f"{id:04d}.wav")
    return BatchRequest(id=id, output=os.path.abspath(output), **req)


def read_requests(path: Union[str, os.PathLike], output_dir: Union[str, os.PathLike],
                  defaults: Optional[dict[str, Any]] = None) -> list[Union[BatchRequest, RequestError]]:
    """Reads a JSONL job: one :class:`BatchRequest`, or a :class:`RequestError`, per non-blank line.

    A line whose output another line already writes is an error too (parallel workers would race
    on the file).
    """
    numbered = [(n, ln) for n, ln in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1)
                if ln.strip()]
    return validate_requests((_decode(ln) for _, ln in numbered), output_dir, defaults,
                             lines=[n for n, _ in numbered])


def _decode(line: str) -> Any:
    try:
        return json.loads(line)
    except json.JSONDecodeError as e:
        return RequestError(0, None, f"not valid JSON ({e.msg})")


def validate_requests(objs: Iterable[Any], output_dir: Union[str, os.PathLike],
                      defaults: Optional[dict[str, Any]] = None,
                      lines: Optional[list[int]] = None) -> list[Union[BatchRequest, RequestError]]:
    """:func:`parse_request` over decoded objects numbered from 1, outputs checked for clashes.
    ``lines``: each object's line in its file, for the errors (default: its number)."""
    out: list[Union[BatchRequest, RequestError]] = []
    writers: dict[str, int] = {}
    for n, obj in enumerate(objs, 1):
        line = lines[n - 1] if lines else n
        if isinstance(obj, RequestError):
            out.append(RequestError(n, None, obj.message, line))
            continue
        try:
            req = parse_request(obj, n, output_dir, defaults)
        except ValueError as e:
            out.append(RequestError(n, None, str(e), line))
            continue
        if req.output in writers:
            out.append(RequestError(n, req.output, f"output {req.output} is also written by line "
                                                   f"{writers[req.output]}", line))
            continue
        writers[req.output] = line
        out.append(req)
    return out


def check_job(parsed: list[Union[BatchRequest, RequestError]], source: str, skip_bad_lines: bool = False,
              report: Optional[Any] = None) -> list[BatchRequest]:
    """The good requests of a job, after every bad line was reported.

    Args:
        parsed: What :func:`read_requests` or :func:`validate_requests` returned.
        source: The job's name in messages (its file name).
        skip_bad_lines: Run the good requests when some lines are bad, instead of refusing.
        report: Called with one line (``source:LINE: reason``) per bad line; default: none.

    Raises:
        ValueError: Some lines are bad and ``skip_bad_lines`` is false (nothing should run).
    """
    bad = [r for r in parsed if isinstance(r, RequestError)]
    for err in bad:
        if report is not None:
            report(f"{source}:{err.line}: {err.message}")
    good = [r for r in parsed if isinstance(r, BatchRequest)]
    if bad and not skip_bad_lines:
        lines = ", ".join(str(e.line) for e in bad[:10]) + (", ..." if len(bad) > 10 else "")
        raise ValueError(f"{len(bad)} of {len(parsed)} lines of {source} are bad (line {lines}); nothing was "
                         f"run: fix them, or skip them to run the other {len(good)} (--skip-bad-lines)")
    return good


class BatchRunner:
    """Makes requests into audio files with one loaded model, one request at a time.

    Each request is one ``generate`` call with its own seed, as ``omnivoice-tts --batch`` does,
    so outputs do not depend on how requests are grouped. Encoded voice prompts are kept (the
    last ``voice_cache`` of them) for requests that share a reference or a saved voice.

    Args:
        model: A loaded model of any family (:class:`omnivoice.protocol.SpeechModel`).
        fmt: WAV format: ``wav16``, ``wav24`` or ``wav32``.
        sample_rate: Rate of the files (resampled with soxr); ``None`` keeps the model's 24 kHz.
        voice_cache: How many encoded voice prompts to keep.
        **generate_kwargs: Settings for every request (``num_step``, ``guidance_scale``,
            ``denoise``, ``preprocess_prompt``, ...: the family's options), checked at once.
    """

    def __init__(self, model: Any, fmt: str = "wav16", sample_rate: Optional[int] = None, voice_cache: int = 64,
                 **generate_kwargs: Any) -> None:
        from .audio import _check_format, _check_rate

        _check_format(fmt)
        if sample_rate is not None:
            _check_rate(sample_rate)
        model.check_request(**generate_kwargs)
        self.model = model
        self.fmt = fmt
        self.sample_rate = sample_rate
        self.generate_kwargs = generate_kwargs
        self.voice_cache = voice_cache
        self._voices: OrderedDict[tuple[str, ...], Any] = OrderedDict()
        self.voices_encoded = 0  # how many prompts were made (the rest came from the cache)

    def voice_prompt(self, req: BatchRequest) -> Any:
        """The request's voice (from the cache when seen before), or ``None``."""
        key = req.voice_key
        if key is None:
            return None
        if key in self._voices:
            self._voices.move_to_end(key)
            return self._voices[key]
        self.model.capabilities.check_mode(req.voice, req.ref_wav)
        if req.voice:
            prompt = self.model.load_voice(req.voice)
        elif not req.ref_text and self.model.capabilities.clone_needs_transcript:
            raise ValueError("'ref_wav' needs 'ref_text' (its transcript): there is no ASR model here")
        else:
            prompt = self.model.create_voice(req.ref_wav, req.ref_text, **self.generate_kwargs)
        self.voices_encoded += 1
        self._voices[key] = prompt
        while len(self._voices) > self.voice_cache:
            self._voices.popitem(last=False)
        return prompt

    def generate(self, req: BatchRequest, progress: Any = None) -> Any:
        """The request's audio (float32 at ``model.sampling_rate``)."""
        return self.model.generate(
            req.text, language=req.lang, instruct=req.instruct, duration=req.duration, speed=req.speed,
            voice=self.voice_prompt(req), seed=req.seed, progress=progress,
            **self.generate_kwargs)[0]

    def run(self, req: BatchRequest, progress: Any = None) -> dict[str, Any]:
        """Generates one request and writes its file; returns its manifest row.

        The file is written under a temporary name and renamed, so an interrupted job never
        leaves a partial file that a re-run would take as done.

        Raises:
            Whatever generating or writing raised; :meth:`run_or_report` reports it instead.
        """
        start = time.perf_counter()
        encoded = self.voices_encoded
        audio = self.generate(req, progress)
        out = Path(req.output)
        out.parent.mkdir(parents=True, exist_ok=True)
        partial = out.with_name(f".{out.name}.{os.getpid()}.partial")
        try:
            write_audio_file(partial, audio, self.model.sampling_rate, self.sample_rate, self.fmt)
            os.replace(partial, out)
        finally:
            partial.unlink(missing_ok=True)
        row = {"id": req.id, "output": req.output, "status": "ok",
               "duration": round(audio.size / self.model.sampling_rate, 4),
               "seconds": round(time.perf_counter() - start, 4)}
        if req.voice_key:
            row["voice_encoded"] = self.voices_encoded > encoded  # False: the cached prompt
        return row

    def run_or_report(self, req: BatchRequest) -> dict[str, Any]:
        """:meth:`run`, with a failure reported in the row (``status: failed``, ``error``)."""
        start = time.perf_counter()
        try:
            return self.run(req)
        except Exception as e:  # a bad request fails alone, whatever it raised
            return failed_row(req.id, req.output, f"{type(e).__name__}: {e}",
                              seconds=round(time.perf_counter() - start, 4))


def failed_row(id: int, output: Optional[str], error: str, **extra: Any) -> dict[str, Any]:
    """The manifest row of a request that failed."""
    return {"id": id, "output": output, "status": "failed", "error": error, **extra}


def write_audio_file(path: Union[str, os.PathLike], audio: Any, model_rate: int, rate: Optional[int],
                     fmt: str) -> None:
    """Writes a WAV at ``rate`` (resampled from ``model_rate`` with soxr; ``None``: as it is)."""
    from .audio import write_wav

    if rate is not None and rate != model_rate:
        import numpy as np
        import soxr

        audio = soxr.resample(audio, model_rate, rate).astype(np.float32)
    write_wav(path, audio, rate or model_rate, fmt)
