"""omnivoice-server end to end: the real server in a subprocess on 127.0.0.1 with the tiny model,
talked to by real clients (the openai SDK, raw HTTP, the wyoming client, headless Chromium)."""

from __future__ import annotations

import asyncio
import base64
import http.client
import io
import json
import re
import shutil
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any, Callable, Iterator, Optional

import av
import numpy as np
import pytest
import soundfile as sf

KEY = "test-key"
RATE = 24000
# Few MaskGIT steps keep each tiny generation well under a second.
FAST = {"num_step": 4}


class Server:
    """``python -m omnivoice.server`` in a subprocess; stopped by :meth:`stop`."""

    def __init__(self, model: Path, log: Path, *args: str, port: int, wait: bool = True) -> None:
        self.port = port
        self.url = f"http://127.0.0.1:{self.port}"
        self._log = open(log, "ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "omnivoice.server", "--model", str(model), "--port", str(self.port),
             "--threads", "1", "--log-level", "warning", *args],
            stdout=self._log, stderr=subprocess.STDOUT)
        if wait:
            try:
                self.wait_health(200)
            except BaseException:
                self.stop()
                raise

    def wait_health(self, status: int, timeout: float = 120) -> dict:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            assert self.proc.poll() is None, "server exited"
            try:
                code, body = request("GET", self.url + "/health")
                if code == status:
                    return json.loads(body)
            except OSError:
                pass
            time.sleep(0.2)
        raise TimeoutError(f"/health never answered {status}")

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._log.close()


def request(method: str, url: str, body: Any = None, key: Optional[str] = KEY,
            headers: Optional[dict] = None) -> tuple[int, bytes]:
    """One HTTP request; returns (status, body) for any status."""
    data = json.dumps(body).encode() if isinstance(body, dict) else body
    h = {"Content-Type": "application/json"} if isinstance(body, dict) else {}
    if key:
        h["Authorization"] = f"Bearer {key}"
    h.update(headers or {})
    req = urllib.request.Request(url, data=data, method=method, headers=h)
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def multipart(fields: dict[str, Any]) -> tuple[bytes, str]:
    """A multipart/form-data body; values of type bytes are sent as files."""
    boundary = "omnivoiceboundary7d1"
    out = io.BytesIO()
    for name, value in fields.items():
        out.write(f"--{boundary}\r\n".encode())
        if isinstance(value, bytes):
            out.write(f'Content-Disposition: form-data; name="{name}"; filename="{name}.bin"\r\n'
                      "Content-Type: application/octet-stream\r\n\r\n".encode() + value + b"\r\n")
        else:
            out.write(f'Content-Disposition: form-data; name="{name}"\r\n\r\n{value}\r\n'.encode())
    out.write(f"--{boundary}--\r\n".encode())
    return out.getvalue(), f"multipart/form-data; boundary={boundary}"


def decode(data: bytes) -> tuple[np.ndarray, int]:
    """A lossy response format to (mono float samples, rate), with PyAV (its decoders give floats)."""
    with av.open(io.BytesIO(data)) as c:
        frames = [f.to_ndarray().reshape(-1) for f in c.decode(audio=0)]
        rate = c.streams.audio[0].rate
    samples = np.concatenate(frames)
    assert samples.dtype == np.float32
    return samples, rate


def metric(server: Server, name: str) -> float:
    _, text = request("GET", server.url + "/metrics")
    found = re.search(rf"^{re.escape(name)} ([0-9.e+-]+)$", text.decode(), re.M)
    assert found, name
    return float(found.group(1))


@pytest.fixture(scope="module")
def server(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory,
           free_port: Callable[[], int]) -> Iterator[Server]:
    tmp = tmp_path_factory.mktemp("server")
    wyoming_port = free_port()
    srv = Server(tiny_model_dir, tmp / "log.txt", "--voices-dir", str(tmp / "voices"), "--api-key", KEY,
                 "--max-queue", "2", "--wyoming", f"tcp://127.0.0.1:{wyoming_port}",
                 "--cors-origin", "http://app.example", port=free_port())
    srv.wyoming_port = wyoming_port
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def client(server: Server):
    from openai import OpenAI

    with OpenAI(base_url=server.url + "/v1", api_key=KEY, max_retries=0, timeout=120) as c:
        yield c


# ---------------------------------------------------------------------------- OpenAI SDK


@pytest.mark.slow
def test_every_format_with_the_openai_sdk(client) -> None:
    text = "Hello there. This is a test of every format."
    args = dict(model="tts-1", voice="alloy", input=text, extra_body={**FAST, "seed": 7})
    pcm = client.audio.speech.create(response_format="pcm", **args).content
    reference = np.frombuffer(pcm, "<i2").astype(np.float32) / 32768
    assert reference.size > RATE // 2 and np.sqrt(np.mean(reference**2)) > 1e-3  # half a second, not silence

    wav = client.audio.speech.create(response_format="wav", **args).content
    samples, rate = sf.read(io.BytesIO(wav), dtype="float32")
    assert rate == RATE and np.array_equal(samples, reference)  # same seed, same audio, lossless

    flac = client.audio.speech.create(response_format="flac", **args).content
    with av.open(io.BytesIO(flac)) as c:  # streamed FLAC has no total length: soundfile cannot read it
        ints = np.concatenate([f.to_ndarray().reshape(-1) for f in c.decode(audio=0)])
    assert np.array_equal(ints, np.frombuffer(pcm, "<i2"))

    mp3 = client.audio.speech.create(**args).content  # mp3 is the default
    assert mp3[:3] == b"ID3"
    for fmt, data in (("mp3", mp3), ("aac", client.audio.speech.create(response_format="aac", **args).content),
                      ("opus", client.audio.speech.create(response_format="opus", **args).content)):
        samples, rate = decode(data)
        # Lossy codecs pad their first and last frames (mp3 1152, aac 1024 samples; opus decodes at 48 kHz).
        seconds = samples.size / rate
        assert abs(seconds - reference.size / RATE) < 0.15, (fmt, seconds, reference.size / RATE)
        assert np.sqrt(np.mean(samples**2)) > 1e-3, fmt


@pytest.mark.slow
def test_streaming_response_arrives_in_pieces(client) -> None:
    text = "First sentence here. " * 40  # long enough to be generated in several pieces
    pieces = []
    with client.audio.speech.with_streaming_response.create(
            model="tts-1", voice="auto", input=text, response_format="pcm", extra_body={**FAST, "seed": 1}) as r:
        assert r.headers["content-type"] == "audio/pcm"
        assert r.headers["x-audio-sample-rate"] == str(RATE)
        for piece in r.iter_bytes():
            pieces.append(piece)
    audio = np.frombuffer(b"".join(pieces), "<i2")
    assert audio.size > 20 * RATE  # the whole text, not the first piece only
    assert len(pieces) > 1


def test_sse_events_over_raw_http(server: Server) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=120)
    body = {"model": "tts-1", "input": "Hello over server-sent events.", "voice": "auto",
            "response_format": "pcm", "stream_format": "sse", **FAST}
    conn.request("POST", "/v1/audio/speech", json.dumps(body),
                 {"Content-Type": "application/json", "Authorization": f"Bearer {KEY}"})
    r = conn.getresponse()
    assert r.status == 200 and r.getheader("Content-Type").startswith("text/event-stream")
    events = [json.loads(line[6:]) for line in r.read().decode().split("\n") if line.startswith("data: ")]
    conn.close()
    assert [e["type"] for e in events[:-1]] == ["speech.audio.delta"] * (len(events) - 1)
    done = events[-1]
    assert done["type"] == "speech.audio.done" and set(done["usage"]) == {"input_tokens", "output_tokens", "total_tokens"}
    audio = np.frombuffer(b"".join(base64.b64decode(e["audio"]) for e in events[:-1]), "<i2")
    assert audio.size > RATE // 2
    assert done["usage"]["output_tokens"] == round(audio.size / 960)  # 25 codec frames a second


# ---------------------------------------------------------------------------- errors


def _speech(server: Server, **fields: Any) -> tuple[int, dict]:
    body = {"model": "tts-1", "input": "Hello.", "voice": "auto", **FAST, **fields}
    body = {k: v for k, v in body.items() if v is not None}
    status, data = request("POST", server.url + "/v1/audio/speech", body)
    return status, (json.loads(data) if status != 200 else {})


@pytest.mark.parametrize("fields, param", [
    ({"input": None}, "input"),
    ({"input": "   "}, "input"),
    ({"input": "a" * 4097}, "input"),
    ({"voice": "nobody"}, "voice"),
    ({"voice": {"id": "../etc/passwd"}}, "voice"),
    ({"response_format": "ogg"}, "response_format"),
    ({"speed": 0}, "speed"),
    ({"speed": 10}, "speed"),
    ({"ref_audio": "not base64!", "ref_text": "Hi."}, "ref_audio"),
    ({"ref_audio": base64.b64encode(b"plain text, not audio").decode(), "ref_text": "Hi."}, "ref_audio"),
    ({"language": "Klingonese"}, "language"),
    ({"instructions": "femail"}, "instructions"),
    ({"model": "whisper-1"}, "model"),
    ({"colour": "blue"}, "colour"),
])
def test_bad_speech_requests_get_400_naming_the_field(server: Server, fields: dict, param: str) -> None:
    status, body = _speech(server, **fields)
    assert status == 400, body
    assert body["error"]["param"] == param and body["error"]["type"] == "invalid_request_error"
    assert body["error"]["message"]
    assert _speech(server)[0] == 200  # still serving


def test_api_key_is_required_except_on_health(server: Server) -> None:
    for key in (None, "wrong"):
        status, data = request("GET", server.url + "/v1/models", key=key)
        assert status == 401 and json.loads(data)["error"]["code"] == "invalid_api_key"
    assert request("GET", server.url + "/health", key=None)[0] == 200
    status, data = request("GET", server.url + "/v1/models")
    assert status == 200 and "tts-1" in [m["id"] for m in json.loads(data)["data"]]


def test_cors_preflight_and_metrics(server: Server) -> None:
    status, _ = request("OPTIONS", server.url + "/v1/audio/speech", key=None,
                        headers={"Origin": "http://app.example", "Access-Control-Request-Method": "POST",
                                 "Access-Control-Request-Headers": "authorization,content-type"})
    assert status == 200
    req = urllib.request.Request(server.url + "/v1/models", headers={"Origin": "http://app.example",
                                                                     "Authorization": f"Bearer {KEY}"})
    with urllib.request.urlopen(req, timeout=30) as r:
        assert r.headers["access-control-allow-origin"] == "http://app.example"
    assert _speech(server)[0] == 200
    assert metric(server, "omnivoice_time_to_first_audio_seconds_count") >= 1
    assert metric(server, "omnivoice_audio_seconds_total") > 0
    assert metric(server, 'omnivoice_requests_total{path="/v1/audio/speech",status="200"}') >= 1


def test_bad_voice_uploads(server: Server) -> None:
    url = server.url + "/v1/audio/voices"
    cases = [({"name": "../escape", "instructions": "female"}, 400, "name"),
             ({"name": "alloy", "instructions": "female"}, 400, "name"),
             ({"name": "textfile", "file": b"this is not audio at all", "transcript": "Hi."}, 400, "file"),
             ({"name": "notranscript", "file": b"RIFF...."}, 400, "transcript"),
             ({"name": "huge", "file": b"\0" * (10 * 1024 * 1024 + 1), "transcript": "Hi."}, 413, "file")]
    for fields, status, param in cases:
        body, ctype = multipart(fields)
        got, data = request("POST", url, body, headers={"Content-Type": ctype})
        assert got == status and json.loads(data)["error"]["param"] == param, (fields.get("name"), data)
    status, data = request("DELETE", url + "/..%2F..%2Fetc")
    assert status in (400, 404) and "error" in json.loads(data)
    assert _speech(server)[0] == 200


def test_full_queue_429_batching_and_cancel_on_disconnect(server: Server) -> None:
    # A long request holds the engine; two short ones wait (max-queue 2); a fourth is refused.
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=120)
    long_body = {"model": "tts-1", "input": "This sentence keeps the engine busy for a while. " * 60,
                 "voice": "auto", "response_format": "pcm", "num_step": 32}
    conn.request("POST", "/v1/audio/speech", json.dumps(long_body),
                 {"Content-Type": "application/json", "Authorization": f"Bearer {KEY}"})
    long_response = conn.getresponse()
    assert long_response.status == 200
    long_response.read(100)  # it is streaming
    batches_before = metric(server, "omnivoice_batch_size_count")

    results: list[tuple[int, dict]] = []
    waiting = [threading.Thread(target=lambda: results.append(_speech(server, input="Waiting in line."))) for _ in range(2)]
    for t in waiting:
        t.start()
    end = time.monotonic() + 30
    while metric(server, "omnivoice_queue_depth") < 2 and time.monotonic() < end:
        time.sleep(0.05)
    assert metric(server, "omnivoice_queue_depth") == 2

    status, data = request("POST", server.url + "/v1/audio/speech",
                           {"model": "tts-1", "input": "One too many.", "voice": "auto"}, headers={})
    assert status == 429 and json.loads(data)["error"]["type"] == "rate_limit_error"

    conn.close()  # the client goes away: its generation stops, the waiting two run as one batch
    for t in waiting:
        t.join(timeout=60)
    assert [r[0] for r in results] == [200, 200]
    assert metric(server, "omnivoice_batch_size_count") == batches_before + 1
    assert metric(server, 'omnivoice_batch_size_bucket{le="2.0"}') - metric(server, 'omnivoice_batch_size_bucket{le="1.0"}') >= 1
    assert _speech(server)[0] == 200


# ---------------------------------------------------------------------------- voices


@pytest.mark.slow
def test_voices_survive_a_restart(tiny_model_dir: Path, tmp_path: Path, free_port: Callable[[], int]) -> None:
    voices = tmp_path / "voices"
    srv = Server(tiny_model_dir, tmp_path / "log.txt", "--voices-dir", str(voices), port=free_port())
    try:
        status, pcm = request("POST", srv.url + "/v1/audio/speech",
                              {"model": "tts-1", "input": "A reference recording for cloning.", "voice": "auto",
                               "response_format": "wav", "seed": 3, **FAST}, key=None)
        assert status == 200
        body, ctype = multipart({"name": "narrator", "file": pcm, "transcript": "A reference recording for cloning."})
        status, data = request("POST", srv.url + "/v1/audio/voices", body, key=None, headers={"Content-Type": ctype})
        assert status == 201 and json.loads(data)["id"] == "narrator", data
        body, ctype = multipart({"name": "designer", "instructions": "male, low pitch"})
        status, data = request("POST", srv.url + "/v1/audio/voices", body, key=None, headers={"Content-Type": ctype})
        assert status == 201 and json.loads(data)["type"] == "design", data
        status, _ = request("POST", srv.url + "/v1/audio/voices", body, key=None, headers={"Content-Type": ctype})
        assert status == 409
    finally:
        srv.stop()
    assert sorted(p.name for p in voices.glob("*.npz")) == ["designer.npz", "narrator.npz"]

    srv = Server(tiny_model_dir, tmp_path / "log.txt", "--voices-dir", str(voices), port=free_port())
    try:
        status, data = request("GET", srv.url + "/v1/audio/voices", key=None)
        listed = {v["id"]: v for v in json.loads(data)["voices"]}
        assert listed["narrator"]["type"] == "clone" and listed["designer"]["type"] == "design"
        assert {"alloy", "auto"} <= set(listed)
        for voice in ("narrator", {"id": "designer"}):
            status, audio = request("POST", srv.url + "/v1/audio/speech",
                                    {"model": "tts-1", "input": "Speaking in a saved voice.", "voice": voice,
                                     "response_format": "pcm", **FAST}, key=None)
            assert status == 200 and len(audio) > RATE
        assert request("DELETE", srv.url + "/v1/audio/voices/narrator", key=None)[0] == 200
        assert request("DELETE", srv.url + "/v1/audio/voices/narrator", key=None)[0] == 404
        status, data = request("POST", srv.url + "/v1/audio/speech",
                               {"model": "tts-1", "input": "Gone.", "voice": "narrator"}, key=None)
        assert status == 400 and json.loads(data)["error"]["code"] == "voice_not_found"
    finally:
        srv.stop()
    assert sorted(p.name for p in voices.glob("*.npz")) == ["designer.npz"]


@pytest.mark.slow
def test_health_is_503_when_the_model_cannot_load(tmp_path: Path, free_port: Callable[[], int]) -> None:
    srv = Server(tmp_path / "no-such-model.gguf", tmp_path / "log.txt", port=free_port(), wait=False)
    try:
        assert srv.wait_health(503, timeout=60)["status"] in ("loading", "failed")
        status, data = request("POST", srv.url + "/v1/audio/speech", {"input": "Hi.", "voice": "auto"}, key=None)
        assert status == 503 and json.loads(data)["error"]["code"] == "model_not_ready"
    finally:
        srv.stop()


@pytest.mark.slow
def test_timeout_gives_504_and_the_server_keeps_serving(tiny_model_dir: Path, tmp_path: Path,
                                                         free_port: Callable[[], int]) -> None:
    srv = Server(tiny_model_dir, tmp_path / "log.txt", "--timeout", "1", port=free_port())
    try:
        # One piece of 60 s at 64 steps takes far longer than 1 s on the tiny model.
        status, data = request("POST", srv.url + "/v1/audio/speech",
                               {"input": "Long.", "duration": 60, "num_step": 64}, key=None)
        assert status == 504 and json.loads(data)["error"]["type"] == "timeout_error"
        assert request("GET", srv.url + "/health", key=None)[0] == 200
    finally:
        srv.stop()


# ---------------------------------------------------------------------------- Wyoming


# wyoming's audio module imports the standard library's audioop, deprecated in Python 3.11.
@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:'audioop' is deprecated:DeprecationWarning")
def test_wyoming_describe_synthesize_and_streaming(server: Server) -> None:
    from wyoming.audio import AudioChunk
    from wyoming.client import AsyncTcpClient
    from wyoming.info import Describe, Info
    from wyoming.tts import Synthesize, SynthesizeChunk, SynthesizeStart, SynthesizeStop, SynthesizeVoice

    async def audio_until(client: AsyncTcpClient, last: str) -> tuple[int, list[str]]:
        samples, types = 0, []
        while True:
            event = await client.read_event()
            types.append(event.type)
            if AudioChunk.is_type(event.type):
                chunk = AudioChunk.from_event(event)
                assert (chunk.rate, chunk.width, chunk.channels) == (RATE, 2, 1)
                samples += len(chunk.audio) // 2
            if event.type == last:
                return samples, types

    async def talk() -> None:
        async with AsyncTcpClient("127.0.0.1", server.wyoming_port, read_timeout=120) as client:
            await client.write_event(Describe().event())
            info = Info.from_event(await client.read_event())
            program = info.tts[0]
            assert program.supports_synthesize_streaming
            assert {"alloy", "auto"} <= {v.name for v in program.voices}
            assert "en" in program.voices[0].languages

            await client.write_event(Synthesize(text="Hello from Home Assistant.", voice=SynthesizeVoice(name="alloy")).event())
            samples, types = await audio_until(client, "audio-stop")
            assert types[0] == "audio-start" and samples > RATE // 2

            await client.write_event(SynthesizeStart(voice=SynthesizeVoice(name="auto")).event())
            for piece in ("The first sentence is long enough ", "to be spoken on its own right away. ", "And the"):
                await client.write_event(SynthesizeChunk(text=piece).event())
            # Speech starts before the text is complete: the first sentence is spoken on its own.
            event = await client.read_event()
            assert event.type == "audio-start"
            event = await client.read_event()
            assert event.type == "audio-chunk"
            first = len(AudioChunk.from_event(event).audio) // 2
            await client.write_event(SynthesizeChunk(text=" second one ends here.").event())
            # Home Assistant repeats the whole text for servers without streaming: ignored here.
            await client.write_event(Synthesize(text="The first sentence ... the second one ends here.").event())
            await client.write_event(SynthesizeStop().event())
            samples, types = await audio_until(client, "synthesize-stopped")
            assert "audio-start" not in types and types[-2:] == ["audio-stop", "synthesize-stopped"]
            assert first + samples > 2 * RATE

    asyncio.run(asyncio.wait_for(talk(), 300))


# ---------------------------------------------------------------------------- web page


@pytest.mark.slow
def test_web_page_speaks_in_headless_chromium(server: Server, tmp_path: Path) -> None:
    chromium = shutil.which("chromium")
    assert chromium, "Debian's chromium is needed (scripts/install.sh installs it when run as root with apt; else apt-get install chromium)"
    url = f"{server.url}/?text=Hello%20from%20the%20browser.&speak=1#key={KEY}"
    out = subprocess.run(
        [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
         "--autoplay-policy=no-user-gesture-required", f"--user-data-dir={tmp_path / 'profile'}",
         "--virtual-time-budget=60000", "--dump-dom", url],
        capture_output=True, text=True, timeout=180)
    found = re.search(r'<body[^>]*data-samples="(\d+)"', out.stdout)
    assert found, out.stdout[-2000:] + out.stderr[-2000:]
    assert int(found.group(1)) > RATE // 2
    assert 'id="download"' in out.stdout and "blob:" in out.stdout
