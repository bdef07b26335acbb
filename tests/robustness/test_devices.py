"""Bad device input: an unknown name, and RPC servers that are down, silent, busy, of another
protocol or gone mid-call, each a clear error naming the device within seconds (never a hang or
an abort); and omnivoice-rpc-server serving the next client after its serving process died.

Fake servers are plain sockets on 127.0.0.1 in a thread of the test; real ones are started by
``start_rpc_server`` (tests/conftest.py). Clients that could abort run in a child Python so that
an abort fails the test instead of killing the run.
"""

from __future__ import annotations

import os
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from omnivoice import AudioTokenizer, Backend, DeviceError, OmniVoice, _core, save_codes
from omnivoice.codec_cli import main as codec_cli

CHILD_TIMEOUT_S = 120
HELLO_REQUEST_BYTES = 1 + 8 + 24  # cmd, size, connection caps (ggml-rpc protocol 5)

needs_rpc = pytest.mark.skipif(not Backend.has_rpc, reason="this build has no RPC backend")


def test_unknown_device_names_the_available_ones(tiny_model_dir: Path, tiny_codec_gguf: Path) -> None:
    with pytest.raises(ValueError, match=r"device 'tpu0' is not available; available: CPU"):
        Backend(1, device="tpu0")
    with pytest.raises(ValueError, match="device 'nope' is not available"):
        OmniVoice.from_pretrained(tiny_model_dir, n_threads=1, device="nope")
    with pytest.raises(ValueError, match="device 'nope' is not available"):
        AudioTokenizer.from_file(tiny_codec_gguf, n_threads=1, device="nope")
    assert Backend(1, device="cpu").device == "CPU" and Backend(1, device="CPU").is_cpu
    assert "CPU" in Backend.devices()


@needs_rpc
@pytest.mark.parametrize("device", ["rpc://127.0.0.1", "rpc://127.0.0.1:0", "rpc://127.0.0.1:99999",
                                    "rpc://:50052", "rpc://127.0.0.1:5x"])
def test_malformed_rpc_device(device: str) -> None:
    with pytest.raises(ValueError, match=r"must be rpc://HOST:PORT"):
        Backend(1, device=device)


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@needs_rpc
def test_server_down(tiny_codec_gguf: Path, capsys: pytest.CaptureFixture[str]) -> None:
    device = f"rpc://127.0.0.1:{closed_port()}"
    with pytest.raises(DeviceError, match=f"RPC device {device}: connection refused"):
        Backend(1, device=device)
    assert codec_cli(["--model", str(tiny_codec_gguf), "-i", str(tiny_codec_gguf), "-o", "x.wav",
                      "--device", device]) == 1
    err = capsys.readouterr().err
    assert f"RPC device {device}: connection refused" in err and err.count("\n") == 1


@contextmanager
def fake_server(answer: Callable[[socket.socket], None]) -> Iterator[str]:
    """A listener on 127.0.0.1 whose first client gets ``answer(conn)``; yields its device name."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(30)

    def serve() -> None:
        try:
            conn, _ = listener.accept()
        except OSError:
            return
        with conn:
            answer(conn)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"rpc://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        listener.close()
        thread.join(35)


def read_hello(conn: socket.socket) -> bytes:
    got = b""
    while len(got) < HELLO_REQUEST_BYTES:
        chunk = conn.recv(HELLO_REQUEST_BYTES - len(got))
        if not chunk:
            break
        got += chunk
    return got


@needs_rpc
def test_protocol_version_mismatch() -> None:
    def old_server(conn: socket.socket) -> None:
        hello = read_hello(conn)
        assert hello[0] == 14 and struct.unpack("<Q", hello[1:9])[0] == 24
        conn.sendall(struct.pack("<Q", 28) + bytes([4, 1, 0, 0]) + bytes(24))

    with fake_server(old_server) as device:
        with pytest.raises(DeviceError, match=rf"RPC device {device}: the server speaks RPC protocol 4\.1\.0, "
                                              r"this build speaks 5\.0\.0"):
            Backend(1, device=device)


@needs_rpc
def test_server_hangs_up_during_handshake() -> None:
    # What a ggml server of protocol 3 does with our hello: it expects an empty one.
    with fake_server(lambda conn: read_hello(conn)) as device:
        with pytest.raises(DeviceError, match=f"RPC device {device}: the server closed the connection during "
                                              "the handshake"):
            Backend(1, device=device)


@needs_rpc
def test_silent_server_times_out() -> None:
    release = threading.Event()
    with fake_server(lambda conn: release.wait(30)) as device:
        start = time.monotonic()
        with pytest.raises(DeviceError, match=f"RPC device {device}: no answer to the RPC handshake within 5 s"):
            Backend(1, device=device)
        waited = time.monotonic() - start
        release.set()
    assert waited < 30, waited  # the probe's deadline, not the fake server's give-up


def run_child(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=CHILD_TIMEOUT_S)


@needs_rpc
def test_busy_server_is_an_error_not_a_wait(start_rpc_server, tiny_codec_gguf: Path) -> None:
    server = start_rpc_server()
    held = Backend(1, device=server.device)  # ggml's server serves this connection only
    try:
        r = run_child(f"import omnivoice\ntry:\n    omnivoice.Backend(1, device={server.device!r})\n"
                      "except omnivoice.DeviceError as e:\n    print(e)\n")
        assert r.returncode == 0, r.stderr
        assert f"RPC device {server.device}: no answer" in r.stdout and "busy with another client" in r.stdout
        # A second backend of this process shares the held connection instead of probing it.
        codes = AudioTokenizer(_codec(tiny_codec_gguf, Backend(1, device=server.device))).encode(
            np.zeros(24000, np.float32), 24000)
        assert codes.shape == (8, 25)
    finally:
        del held
        server.stop()


def _codec(path: Path, backend: Backend) -> _core.Codec:
    return _core.Codec(str(path), backend)


def serving_child(server_pid: int) -> int:
    """The pid of omnivoice-rpc-server's serving process."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        children = Path(f"/proc/{server_pid}/task/{server_pid}/children").read_text().split()
        if children:
            return int(children[-1])
        time.sleep(0.1)
    raise AssertionError("omnivoice-rpc-server has no serving process")


@needs_rpc
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_server_dying_mid_call_is_an_error_and_the_server_serves_on(start_rpc_server, tiny_codec_gguf: Path) -> None:
    server = start_rpc_server()
    # Decodes in a loop on the server while the parent kills the serving process (as a device
    # failure aborting it would): the call in flight must raise DeviceError naming the device.
    code = f"""
import sys, numpy as np, omnivoice
from omnivoice import _core
codec = _core.Codec({str(tiny_codec_gguf)!r}, omnivoice.Backend(1, device={server.device!r}))
codes = np.zeros((8, 50), np.int32)
codec.decode(codes)
print("ready", flush=True)
for _ in range(100000):
    try:
        codec.decode(codes)
    except omnivoice.DeviceError as e:
        print("error:", e, flush=True)
        break
del codec  # freeing buffers of a lost device must not abort either
print("done", flush=True)
"""
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "ready", child.stderr.read()
        os.kill(serving_child(server.proc.pid), signal.SIGKILL)
        out, err = child.communicate(timeout=CHILD_TIMEOUT_S)
    finally:
        child.kill()
    assert child.returncode == 0, err
    assert f"error: RPC device {server.device} stopped answering" in out and out.endswith("done\n"), out

    # The command restarted its serving process: the next client is served.
    deadline = time.monotonic() + 60
    while True:
        try:
            backend = Backend(1, device=server.device)
            break
        except DeviceError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
    codes = np.zeros((8, 25), np.int32)
    np.testing.assert_array_equal(_codec(tiny_codec_gguf, backend).decode(codes),
                                  _codec(tiny_codec_gguf, Backend(1, device="cpu", stock_ops=True)).decode(codes))
    assert server.proc.poll() is None
    server.stop()


@needs_rpc
def test_rpc_server_cli_errors(capsys: pytest.CaptureFixture[str]) -> None:
    from omnivoice.rpc_server import main as rpc_cli

    assert rpc_cli(["--host", "localhost"]) == 1
    assert "--host must be an IPv4 address" in capsys.readouterr().err
    with socket.create_server(("127.0.0.1", 0)) as taken:
        assert rpc_cli(["--port", str(taken.getsockname()[1])]) == 1
    assert "cannot listen on 127.0.0.1:" in capsys.readouterr().err


@needs_rpc
def test_device_through_the_api_and_the_codec_cli(rpc_device: str, tiny_model_dir: Path, tiny_codec_gguf: Path,
                                                 tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # generate() end to end on the RPC device: the same arithmetic as the CPU's stock-op path.
    kwargs = dict(language="English", duration=1.0, num_step=4, seed=0)
    remote = OmniVoice.from_pretrained(tiny_model_dir, n_threads=1, device=rpc_device)
    assert remote.backend.device == rpc_device and remote.backend.stock_ops
    monkeypatch.setenv("OMNIVOICE_STOCK_OPS", "1")
    local = OmniVoice.from_pretrained(tiny_model_dir, n_threads=1, device="cpu")
    np.testing.assert_array_equal(remote.generate("Hello there.", **kwargs)[0], local.generate("Hello there.", **kwargs)[0])

    codes = np.random.default_rng(0).integers(0, 1024, (8, 20)).astype(np.int32)
    save_codes(tmp_path / "c.ovrq", codes)
    for device, out in (("cpu", "cpu.wav"), (rpc_device, "rpc.wav")):
        assert codec_cli(["--model", str(tiny_codec_gguf), "-i", str(tmp_path / "c.ovrq"), "-o", str(tmp_path / out),
                          "--format", "wav32", "--device", device]) == 0
    np.testing.assert_allclose(sf.read(tmp_path / "rpc.wav")[0], sf.read(tmp_path / "cpu.wav")[0], rtol=0, atol=1e-4)
