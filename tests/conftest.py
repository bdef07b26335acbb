"""Session-wide fixtures: the tiny random checkpoint in tests/data converted by our converter once
per variant for the whole run, and a GGUF rewriter for the tests of malformed files.

The suite is grouped by what a test exercises: unit/ (Python modules, the converter and the
GGUF loader), ops/ (our ggml ops against numpy), parity/ (the models against upstream's
fixtures), e2e/ (generate and the command-line tools) and robustness/ (bad inputs refused by
name, fuzzed files). ``pytest -m "not slow"`` skips the
longest end-to-end cases.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Callable, Optional

import gguf
import numpy as np
import pytest

from omnivoice import _core
from omnivoice.convert import convert_codec, convert_lm, convert_model

# Child Pythons (CLIs, servers, Ray workers) started from the repository root would otherwise import
# the source tree's omnivoice/, which has no built _core, instead of the installed package.
os.environ["PYTHONSAFEPATH"] = "1"

DATA = Path(__file__).parent / "data"
TINY_HF = DATA / "tiny_hf"


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Both tiny GGUFs (LM and codec with its encoder, F32) in one directory."""
    out = tmp_path_factory.mktemp("tiny_model")
    convert_model(TINY_HF, out)
    return out


@pytest.fixture(scope="session")
def tiny_codec_gguf(tiny_model_dir: Path) -> Path:
    """The tiny audio tokenizer (encoder and decoder), F32."""
    return tiny_model_dir / "omnivoice-tokenizer-F32.gguf"


@pytest.fixture(scope="session")
def tiny_lm_gguf(tiny_model_dir: Path) -> Path:
    """The tiny LM, F32."""
    return tiny_model_dir / "omnivoice-base-F32.gguf"


@pytest.fixture(scope="session")
def tiny_gguf(tmp_path_factory: pytest.TempPathFactory, tiny_model_dir: Path) -> Callable[..., Path]:
    """The other variants, each converted on first use: ``tiny_gguf("lm", "Q8_0")``,
    ``tiny_gguf("codec", "F16")``, ``tiny_gguf("codec", "F32", encoder=False)``."""
    out = tmp_path_factory.mktemp("tiny_variants")
    made: dict[tuple[str, str, bool], Path] = {
        ("lm", "F32", True): tiny_model_dir / "omnivoice-base-F32.gguf",
        ("codec", "F32", True): tiny_model_dir / "omnivoice-tokenizer-F32.gguf",
    }

    def get(part: str, outtype: str, encoder: bool = True) -> Path:
        key = (part, outtype, encoder)
        if key not in made:
            if part == "lm":
                path = out / f"omnivoice-base-{outtype}.gguf"
                convert_lm(TINY_HF, path, outtype)
            else:
                path = out / f"omnivoice-tokenizer-{outtype}{'' if encoder else '-decoder'}.gguf"
                convert_codec(TINY_HF / "audio_tokenizer", path, codec_type=outtype, encoder=encoder)
            made[key] = path
        return made[key]

    return get


def _rewrite_gguf(
    src: Path,
    dst: Path,
    *,
    overrides: Optional[dict[str, object]] = None,
    drop: str = "",
    to_f16: str = "",
    extra: str = "",
) -> Path:
    """Copies the GGUF ``src`` to ``dst`` with gguf-py: metadata ``overrides`` (same types),
    tensor ``drop`` left out, tensor ``to_f16`` stored as F16 and an unknown F32 tensor ``extra``
    added."""
    reader = gguf.GGUFReader(src)
    writer = gguf.GGUFWriter(dst, reader.fields["general.architecture"].contents())
    writer.data_alignment = reader.alignment  # general.alignment is copied below
    for key, field in reader.fields.items():
        if key.startswith("GGUF.") or key == "general.architecture":
            continue
        sub_type = field.types[-1] if field.types[0] == gguf.GGUFValueType.ARRAY else None
        writer.add_key_value(key, (overrides or {}).get(key, field.contents()), field.types[0], sub_type=sub_type)
    for t in reader.tensors:
        if t.name == to_f16:
            writer.add_tensor(t.name, np.asarray(t.data).astype(np.float16))
        elif t.name != drop:
            writer.add_tensor(t.name, np.asarray(t.data), raw_dtype=t.tensor_type)
    if extra:
        writer.add_tensor(extra, np.zeros(4, dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return dst


@pytest.fixture(scope="session")
def rewrite_gguf() -> Callable[..., Path]:
    """``rewrite_gguf(src, dst, overrides=..., drop=..., to_f16=..., extra=...)``: see _rewrite_gguf."""
    return _rewrite_gguf


def simd_builds() -> list[str]:
    """Our kernels' instruction-set builds this CPU can run, narrowest first."""
    order = ["base", "avx2", "avx512"]
    previous = _core.testing.set_simd_cap("avx512")
    widest = _core.testing.simd()
    _core.testing.set_simd_cap(previous)
    return order[: order.index(widest) + 1]


@pytest.fixture(params=simd_builds())
def simd_build(request: pytest.FixtureRequest) -> Iterator[str]:
    """Runs the test with our hand-dispatched CPU kernels forced to one build, then restores the cap."""
    previous = _core.testing.set_simd_cap(request.param)
    assert _core.testing.simd() == request.param
    yield request.param
    _core.testing.set_simd_cap(previous)


class RpcServer:
    """An ``omnivoice-rpc-server`` on 127.0.0.1 started by a test (see ``start_rpc_server``)."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.device = f"rpc://127.0.0.1:{port}"
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "omnivoice.rpc_server", "--host", "127.0.0.1", "--port", str(port),
             "--threads", "1"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 60
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"omnivoice-rpc-server exited: {self.proc.stderr.read().decode()}")
            try:
                # ggml's server takes this as a client that hangs up at once.
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                return
            except OSError:
                if time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError("omnivoice-rpc-server did not listen within 60 s") from None
                time.sleep(0.1)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()  # the command stops its serving child
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc.stderr.close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def start_rpc_server() -> Iterator[Callable[[], RpcServer]]:
    """``start_rpc_server()``: a new server on a free port, stopped at the end of the session
    (or earlier by its ``stop()``)."""
    if not _core.Backend.has_rpc:
        pytest.skip("this build has no RPC backend (scripts/install.sh builds ggml with GGML_RPC=ON)")
    servers: list[RpcServer] = []

    def start() -> RpcServer:
        servers.append(RpcServer(free_port()))
        return servers[-1]

    yield start
    for s in servers:
        s.stop()


@pytest.fixture(scope="session")
def rpc_device(start_rpc_server: Callable[[], RpcServer]) -> str:
    """``rpc://127.0.0.1:PORT`` of one server shared by the session's tests."""
    return start_rpc_server().device
