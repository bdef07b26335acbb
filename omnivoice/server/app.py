"""The FastAPI app: OpenAI's ``/v1/audio/speech``, saved voices, models, health, metrics, a web page.

``create_app(model, settings)`` builds it around a model of any family (or a path the engine
thread loads it from with :func:`omnivoice.load`, so that ``/health`` answers 503 while it loads). Every endpoint and
field is described in docs/server.md.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hmac
import json
import logging
import os
import time
from contextlib import asynccontextmanager
from importlib import resources
from typing import Any, AsyncIterator, Callable, Literal, Optional, Union

from fastapi import FastAPI, Request
from fastapi.middleware.cors import CORSMiddleware
from fastapi.responses import HTMLResponse, JSONResponse, Response, StreamingResponse
from pydantic import BaseModel, ConfigDict, Field

from ..protocol import OptionError, SpeechModel, Voice, WrongFamily
from ..registry import load as load_model
from ..streaming import Cancelled
from .encoders import StreamEncoder, decode_audio
from .errors import APIError, error_response, install_error_handlers
from .metrics import CONTENT_TYPE_LATEST, Metrics
from .settings import ServerSettings
from .voices import AUTO, OPENAI_PRESETS, PRESET_TEXT, DesignFailed, VoiceStore, check_name, design_prompt
from .worker import EMPTY_AUDIO, Engine, Job, QueueFull, warm_up

logger = logging.getLogger(__name__)

# Model ids accepted in requests: ours and OpenAI's TTS names (clients are often fixed to those).
MODEL_ALIASES = ("tts-1", "tts-1-hd", "gpt-4o-mini-tts")
# How often a waiting request checks that its client is still there (seconds).
_POLL = 0.1


class VoiceId(BaseModel):
    """OpenAI's object form of ``voice``."""

    model_config = ConfigDict(extra="forbid")
    id: str


class SpeechRequest(BaseModel):
    """The body of ``POST /v1/audio/speech``: OpenAI's fields, then our extensions."""

    model_config = ConfigDict(extra="forbid")
    model: Optional[str] = None
    input: str
    voice: Union[str, VoiceId] = AUTO
    instructions: Optional[str] = None
    response_format: Literal["mp3", "opus", "aac", "flac", "wav", "pcm"] = "mp3"
    speed: float = Field(1.0, ge=0.25, le=4.0)
    stream_format: Literal["audio", "sse"] = "audio"
    language: Optional[str] = None
    num_step: Optional[int] = Field(None, ge=1)
    guidance_scale: Optional[float] = Field(None, ge=0.0, le=20.0)
    seed: Optional[int] = Field(None, ge=0, lt=2**63)
    duration: Optional[float] = Field(None, gt=0)
    ref_audio: Optional[str] = None
    ref_text: Optional[str] = None


class _Gate:
    """ASGI middleware: the Bearer key, the body-size limit, and requests counted by status."""

    def __init__(self, app: Any, settings: ServerSettings, metrics: Metrics) -> None:
        self.app, self.settings, self.metrics = app, settings, metrics
        # A base64 reference is 4/3 of its bytes; the rest of a body is small.
        self.max_body = settings.max_upload_bytes * 4 // 3 + 1024 * 1024

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        status = [500]

        async def send_counted(message: dict) -> None:
            if message["type"] == "http.response.start":
                status[0] = message["status"]
            await send(message)

        try:
            refusal = self._refuse(scope)
            if refusal is not None:
                await refusal(scope, receive, send_counted)
            else:
                await self.app(scope, receive, send_counted)
        finally:
            self.metrics.requests.labels(_path_label(scope["path"]), str(status[0])).inc()

    def _refuse(self, scope: dict) -> Optional[Response]:
        headers = dict(scope["headers"])
        key = self.settings.api_key
        if key and scope["path"] not in ("/", "/health") and scope["method"] != "OPTIONS":
            given = headers.get(b"authorization", b"").decode("latin-1")
            if not hmac.compare_digest(given.encode(), f"Bearer {key}".encode()):
                what = "no API key given" if not given else "wrong API key"
                return error_response(401, f"{what}: send 'Authorization: Bearer <key>'", None, "invalid_api_key")
        length = headers.get(b"content-length")
        if length is not None and length.isdigit() and int(length) > self.max_body:
            return error_response(413, f"the body is {int(length)} bytes; the limit is {self.max_body}",
                                  None, "body_too_large")
        return None


def _path_label(path: str) -> str:
    """Metrics label of a path (voice ids folded, so that labels stay few)."""
    if path.startswith("/v1/audio/voices/"):
        return "/v1/audio/voices/{id}"
    known = ("/", "/health", "/metrics", "/v1/models", "/v1/audio/speech", "/v1/audio/voices")
    return path if path in known else "other"


def create_app(model: Union[SpeechModel, str, os.PathLike], settings: Optional[ServerSettings] = None) -> FastAPI:
    """Builds the server app.

    Args:
        model: A loaded model, or what :func:`omnivoice.load` takes (then loaded on the
            engine thread at startup, ``/health`` answering 503 until it is loaded and warmed up).
        settings: Server settings; defaults when ``None``.

    Returns:
        The FastAPI app; serve it with uvicorn (``omnivoice-server`` does).
    """
    settings = settings or ServerSettings()
    settings.validate()
    if isinstance(model, (str, os.PathLike)):
        load: Callable[[], SpeechModel] = lambda: load_model(model, n_threads=settings.threads,  # noqa: E731
                                                               device=settings.device)
    else:
        load = lambda: model  # noqa: E731
    metrics = Metrics(lambda: engine.queue_depth)
    engine = Engine(load, settings.max_queue, settings.max_batch, settings.batch_window,
                    warm_up if settings.warmup else None, metrics.batch_size.observe)
    store = VoiceStore(settings.voices_dir)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        engine.start()
        wyoming = None
        if settings.wyoming:
            from .wyoming_server import start_wyoming

            wyoming = await start_wyoming(settings.wyoming, engine, store, settings)
        try:
            yield
        finally:
            if wyoming is not None:
                await wyoming.stop()
            await asyncio.to_thread(engine.stop)

    app = FastAPI(title="omnivoice-server", lifespan=lifespan, docs_url=None, redoc_url=None)
    app.state.engine, app.state.store, app.state.metrics = engine, store, metrics
    install_error_handlers(app)
    app.add_middleware(_Gate, settings=settings, metrics=metrics)
    if settings.cors_origins:
        app.add_middleware(CORSMiddleware, allow_origins=list(settings.cors_origins), allow_methods=["*"],
                           allow_headers=["*"], expose_headers=["X-Audio-Sample-Rate"])
    speech = _SpeechService(engine, store, settings, metrics)

    @app.get("/", include_in_schema=False)
    async def index() -> HTMLResponse:
        page = resources.files("omnivoice.server").joinpath("static/index.html").read_text(encoding="utf-8")
        return HTMLResponse(page)

    @app.get("/health")
    async def health() -> JSONResponse:
        if engine.ready.is_set():
            return JSONResponse({"status": "ok"})
        state = "failed" if engine.load_error is not None else "loading"
        return JSONResponse({"status": state}, status_code=503, headers={"Retry-After": "5"})

    @app.get("/metrics", include_in_schema=False)
    async def prometheus() -> Response:
        return Response(metrics.render(), media_type=CONTENT_TYPE_LATEST)

    @app.get("/v1/models")
    async def models() -> dict:
        # What the family can do, once it is loaded (the web page reads it to offer only those modes).
        extra = {"capabilities": engine.model.capabilities.as_json()} if engine.ready.is_set() else {}
        return {"object": "list", "data": [{"id": m, "object": "model", "created": 0, "owned_by": "omnivoice",
                                            **extra} for m in (settings.model_name, *MODEL_ALIASES)]}

    @app.post("/v1/audio/speech")
    async def create_speech(body: SpeechRequest, request: Request) -> Response:
        return await speech.handle(body, request)

    @app.get("/v1/audio/voices")
    async def list_voices() -> dict:
        return {"object": "list", "voices": [v.as_json() for v in store.list()]}

    @app.post("/v1/audio/voices", status_code=201)
    async def create_voice(request: Request) -> JSONResponse:
        _check_ready(engine)
        info = await _create_voice(request, engine, store, settings)
        return JSONResponse(info.as_json(), status_code=201)

    @app.delete("/v1/audio/voices/{voice_id}")
    async def delete_voice(voice_id: str) -> dict:
        try:
            check_name(voice_id)
        except ValueError as e:
            raise APIError(400, str(e), "voice_id", "invalid_voice_name") from None
        if not store.delete(voice_id):
            raise APIError(404, f"no saved voice named {voice_id!r}", "voice_id", "voice_not_found")
        return {"id": voice_id, "object": "voice", "deleted": True}

    return app


def _check_ready(engine: Engine) -> None:
    if not engine.ready.is_set():
        failed = engine.load_error is not None
        raise APIError(503, "the model failed to load" if failed else "the model is loading; retry shortly",
                       None, "model_not_ready", {"Retry-After": "5"})


def _queue_full(engine: Engine) -> APIError:
    return APIError(429, f"the server is busy: {engine.max_queue} requests are already waiting", None,
                    "queue_full", {"Retry-After": str(engine.retry_after())})


# A refused option's argument -> the request field that gave it and the error code.
_FIELDS = {"instruct": ("instructions", "invalid_instructions"), "language": ("language", "invalid_language"),
           "voice": ("voice", "unsupported_voice"), "ref_audio": ("ref_audio", "unsupported_voice")}


def _checked(model: SpeechModel, **request: Any) -> dict[str, Any]:
    """The family's check of a request; a refusal is a 400 naming the field (a mode the family
    lacks says which family it is and what it does)."""
    try:
        return model.check_request(**request)
    except OptionError as e:
        param, code = _FIELDS.get(e.argument, (e.argument, "invalid_value"))
        raise APIError(400, str(e), param, code) from None
    except WrongFamily as e:
        raise APIError(400, str(e), "voice", "wrong_family") from None
    except (TypeError, ValueError) as e:
        raise APIError(400, str(e), None, "invalid_value") from None


class _PendingVoice:
    """Stands, in checks, for a voice the engine thread makes later (from a reference, a preset)."""

    def __init__(self, family: str) -> None:
        self.family = family


class _ClientGone(Exception):
    pass


class _SpeechService:
    """``POST /v1/audio/speech``: checks the request, queues it, streams the encoded pieces."""

    def __init__(self, engine: Engine, store: VoiceStore, settings: ServerSettings, metrics: Metrics) -> None:
        self.engine, self.store, self.settings, self.metrics = engine, store, settings, metrics

    async def handle(self, body: SpeechRequest, request: Request) -> Response:
        _check_ready(self.engine)
        job = self._job(body)
        try:
            self.engine.submit(job)
        except QueueFull:
            raise _queue_full(self.engine) from None
        deadline = job.created + self.settings.request_timeout
        try:
            first = await self._next(job, request, deadline)
        except asyncio.TimeoutError:
            job.cancel.set()
            raise APIError(504, f"no audio within the request timeout ({self.settings.request_timeout:g} s)",
                           None, "timeout") from None
        except _ClientGone:
            job.cancel.set()
            return Response(status_code=499)
        if first[0] == "error":
            raise _generation_error(first[1])
        if first[0] == "done":  # not one sample: the server's outcome, not the request's fault
            raise APIError(500, EMPTY_AUDIO, None, "empty_audio")
        encoder = StreamEncoder(body.response_format, self.engine.model.sampling_rate)
        headers = {"X-Audio-Sample-Rate": str(self.engine.model.sampling_rate)}
        stream = self._stream(job, first, encoder, request, deadline, body)
        media = "text/event-stream" if body.stream_format == "sse" else encoder.content_type
        return StreamingResponse(stream, media_type=media, headers=headers)

    def _job(self, body: SpeechRequest) -> Job:
        s = self.settings
        text = body.input
        if not text.strip():
            raise APIError(400, "'input' is empty", "input", "empty_input")
        if len(text) > s.max_input_chars:
            raise APIError(400, f"'input' is {len(text)} characters; the limit is {s.max_input_chars}",
                           "input", "input_too_long")
        if body.model is not None and body.model not in (s.model_name, *MODEL_ALIASES):
            raise APIError(400, f"unknown model {body.model!r}; this server serves "
                                f"{', '.join((s.model_name, *MODEL_ALIASES))}", "model", "model_not_found")
        if body.num_step is not None and body.num_step > s.max_num_step:
            raise APIError(400, f"'num_step' must be at most {s.max_num_step}", "num_step", "invalid_value")
        if body.duration is not None and body.duration > s.max_duration:
            raise APIError(400, f"'duration' must be at most {s.max_duration:g} s", "duration", "invalid_value")
        model = self.engine.model
        prompt, prepare = self._voice(body)
        # A voice made on the engine thread later (a reference, a preset) is checked as a clone now.
        voice = prompt if prepare is None else _PendingVoice(model.family)
        # num_step and guidance_scale are OmniVoice's MaskGIT settings: passed only when given.
        extensions = {k: v for k, v in (("num_step", body.num_step), ("guidance_scale", body.guidance_scale))
                      if v is not None}
        checked = _checked(model, text=text, language=body.language, instruct=body.instructions, voice=voice,
                           speed=None if body.speed == 1.0 else body.speed, duration=body.duration, **extensions)
        options: dict[str, Any] = {k: checked[k] for k in ("language", "instruct", "speed", "duration", *extensions)}
        options["seed"] = body.seed
        if prompt is not None:
            options["voice"] = prompt
        key = model.batch_key({**options, "voice": voice})
        return Job(text, options, asyncio.get_running_loop(), prepare=prepare, batch_key=key)

    def _voice(self, body: SpeechRequest) -> tuple[Optional[Voice], Optional[Callable[[], dict]]]:
        """The voice's clone prompt, or a function computing it on the engine thread."""
        name = body.voice if isinstance(body.voice, str) else body.voice.id
        engine, store = self.engine, self.store
        if body.ref_audio is not None:
            if name != AUTO:
                raise APIError(400, "give either 'voice' or 'ref_audio' (one-shot cloning), not both",
                               "voice", "invalid_value")
            if not body.ref_text or not body.ref_text.strip():
                raise APIError(400, "'ref_text' (the transcript of 'ref_audio') is required with 'ref_audio'",
                               "ref_text", "missing_ref_text")
            wave, rate = _decode_reference(body.ref_audio, self.settings.max_upload_bytes)
            ref_text = body.ref_text
            return None, lambda: {"voice": engine.model.create_voice((wave, rate), ref_text)}
        if body.ref_text is not None:
            raise APIError(400, "'ref_text' was given without 'ref_audio'", "ref_text", "invalid_value")
        caps = engine.model.capabilities
        if name in OPENAI_PRESETS and "design" not in caps.modes:
            raise APIError(400, f"voice {name!r} is one of OpenAI's presets, designed from a description: "
                                f"{caps.family} has no design mode (it does {caps.describe()}); use a saved voice",
                           "voice", "unsupported_voice")
        try:
            return store.resolve(name, lambda: engine.model)
        except LookupError:
            pass
        raise APIError(400, f"unknown voice {name!r}: use 'auto', one of OpenAI's names "
                            f"({', '.join(OPENAI_PRESETS)}), or a saved voice (GET /v1/audio/voices)",
                       "voice", "voice_not_found")

    async def _next(self, job: Job, request: Request, deadline: float) -> tuple[str, Any]:
        """The job's next event; raises TimeoutError past ``deadline``, _ClientGone on disconnect."""
        getter = asyncio.ensure_future(job.out.get())
        try:
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise asyncio.TimeoutError
                done, _ = await asyncio.wait({getter}, timeout=min(_POLL, left))
                if done:
                    return getter.result()
                if await request.is_disconnected():
                    raise _ClientGone
        finally:
            if not getter.done():
                getter.cancel()

    async def _stream(self, job: Job, event: tuple[str, Any], encoder: StreamEncoder, request: Request,
                      deadline: float, body: SpeechRequest) -> AsyncIterator[bytes]:
        sse = body.stream_format == "sse"
        rate = self.engine.model.sampling_rate
        samples = 0
        try:
            while True:
                kind, payload = event
                if kind == "error":
                    # Headers are gone: dropping the connection tells the client the body is cut short.
                    raise RuntimeError(f"generation failed mid-stream: {payload}")
                if kind == "done":
                    yield _sse_delta(encoder.finish()) if sse else encoder.finish()
                    break
                if samples == 0:
                    self.metrics.first_audio.observe(time.monotonic() - job.created)
                samples += payload.size
                data = encoder.encode(payload)
                if data:
                    yield _sse_delta(data) if sse else data
                try:
                    event = await self._next(job, request, deadline)
                except (asyncio.TimeoutError, _ClientGone):
                    logger.info("request cancelled: client gone or past the timeout")
                    return
            seconds = samples / rate
            self.metrics.audio_seconds.inc(seconds)
            if seconds > 0 and job.started is not None:
                self.metrics.rtf.observe((time.monotonic() - job.started) / seconds)
            if sse:
                tokens, frames = self.engine.model.token_usage(body.input, seconds)
                usage = {"input_tokens": tokens, "output_tokens": frames, "total_tokens": tokens + frames}
                yield f"data: {json.dumps({'type': 'speech.audio.done', 'usage': usage})}\n\n".encode()
        finally:
            job.cancel.set()  # no-op after "done"; stops the generation otherwise
            encoder.close()


def _sse_delta(data: bytes) -> bytes:
    if not data:
        return b""
    event = {"type": "speech.audio.delta", "audio": base64.b64encode(data).decode("ascii")}
    return f"data: {json.dumps(event)}\n\n".encode()


def _generation_error(exc: BaseException) -> APIError:
    """An error from the engine before any audio: bad input is 400, anything else 500."""
    if isinstance(exc, Cancelled):  # only after the client left or timed out: nobody reads this
        return APIError(504, "the request was cancelled", None, "cancelled")
    if isinstance(exc, (ValueError, TypeError, FileNotFoundError)):
        return APIError(400, str(exc), None, "invalid_value")
    logger.error("generation failed: %r", exc)
    return APIError(500, f"generation failed: {exc}", None, "generation_failed")


def _decode_reference(data: str, limit: int) -> tuple[Any, int]:
    """``ref_audio`` (base64, or a ``data:`` URI) to samples; 400 naming ``ref_audio`` if it is not audio."""
    if data.startswith("data:"):
        header, _, data = data.partition(",")
        if not header.endswith(";base64"):
            raise APIError(400, "'ref_audio' data URI must be base64 (data:audio/...;base64,...)", "ref_audio",
                           "invalid_base64")
    try:
        raw = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        raise APIError(400, "'ref_audio' is not valid base64", "ref_audio", "invalid_base64") from None
    if len(raw) > limit:
        raise APIError(413, f"'ref_audio' is {len(raw)} bytes; the limit is {limit}", "ref_audio", "file_too_large")
    try:
        return decode_audio(raw)
    except ValueError as e:
        raise APIError(400, f"'ref_audio': {e}", "ref_audio", "invalid_audio") from None


async def _create_voice(request: Request, engine: Engine, store: VoiceStore, settings: ServerSettings) -> Any:
    """``POST /v1/audio/voices``: multipart ``name`` + (``file`` + ``transcript``) or ``instructions``."""
    limit = settings.max_upload_bytes
    try:
        form = await request.form(max_files=1, max_fields=8)
    except Exception as e:  # malformed multipart, or not multipart at all
        raise APIError(400, f"expected a multipart/form-data body ({e})", None, "invalid_body") from None
    name = form.get("name")
    try:
        check_name(name)
    except ValueError as e:
        raise APIError(400, str(e), "name", "invalid_voice_name") from None
    if store.exists(name):
        raise APIError(409, f"a voice named {name!r} already exists; delete it first", "name", "voice_exists")
    upload = form.get("file") or form.get("audio_sample")
    transcript = form.get("transcript")
    instructions = form.get("instructions")
    model = engine.model
    if upload is not None and not isinstance(upload, str):
        data = await upload.read(limit + 1)
        if len(data) > limit:
            raise APIError(413, f"the audio file is over the limit of {limit} bytes", "file", "file_too_large")
        if not isinstance(transcript, str) or not transcript.strip():
            raise APIError(400, "'transcript' (what the audio file says) is required to clone a voice",
                           "transcript", "missing_transcript")
        try:
            wave, rate = decode_audio(data)
        except ValueError as e:
            raise APIError(400, f"'file': {e}", "file", "invalid_audio") from None
        _checked(model, ref_audio=(wave, rate), ref_text=transcript)
        make, kind = (lambda: model.create_voice((wave, rate), transcript)), "clone"
    elif isinstance(instructions, str) and instructions.strip():
        instruct = _checked(model, text=PRESET_TEXT, instruct=instructions)["instruct"]
        make, kind = (lambda: design_prompt(model, instruct, None)), "design"
    else:
        raise APIError(400, "give an audio 'file' with its 'transcript' (cloning), or 'instructions' "
                            "(voice design)", "file", "missing_voice_source")
    try:
        prompt = await engine.run(make)
    except QueueFull:
        raise _queue_full(engine) from None
    except DesignFailed as e:
        raise _generation_error(e) from None
    except ValueError as e:
        raise APIError(400, str(e), "file" if kind == "clone" else "instructions", "invalid_value") from None
    try:
        return store.save(name, prompt, kind, instructions if kind == "design" else None)
    except FileExistsError as e:
        raise APIError(409, str(e), "name", "voice_exists") from None
