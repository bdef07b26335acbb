"""The compute paths every parity test of every family runs on (``device_backend``).

Paths: our CPU ops ("custom-ops"), the stock ggml ops forced on the CPU ("stock-ops"), every GPU
ggml sees (by its name, "CUDA0"), OMNIVOICE_TEST_DEVICE when set (bench/gpu.sh: a remote
rpc://HOST:PORT, say), and ggml's RPC backend ("rpc") through an omnivoice-rpc-server that the
session starts on 127.0.0.1: a device with buffers of its own that no custom op can reach, so the
weights are copied there, the graphs take the stock-op path and the results are read back, as on
a GPU.
"""

from __future__ import annotations

import os

import pytest

from omnivoice import _core


def device_paths() -> list[str]:
    gpus = [d for d in _core.Backend.devices() if d != "CPU" and not d.startswith("rpc://")]
    extra = os.environ.get("OMNIVOICE_TEST_DEVICE", "")
    paths = ["custom-ops", "stock-ops", *gpus, *(["rpc"] if _core.Backend.has_rpc else [])]
    return paths + ([extra] if extra and extra not in gpus and extra.lower() != "cpu" else [])


@pytest.fixture(scope="session", params=device_paths())
def device_backend(request: pytest.FixtureRequest) -> _core.Backend:
    """A backend of each compute path. One thread: the tiny models gain nothing from more, and
    threads that wait on each other are slow when the cores are shared with other jobs."""
    if request.param in ("custom-ops", "stock-ops"):
        return _core.Backend(1, device="cpu", stock_ops=request.param == "stock-ops")
    if request.param == "rpc":
        return _core.Backend(1, device=request.getfixturevalue("rpc_device"))
    return _core.Backend(1, device=request.param)
