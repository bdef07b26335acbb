"""``omnivoice-rpc-server``: this machine's CPU as a compute device for another machine.

A client takes it with ``--device rpc://HOST:PORT`` (or ``device=`` in the Python API): the
weights and every graph then live here, and the client sends inputs and reads results. It is
ggml's RPC server, so llama.cpp's ``rpc-server`` of the same ggml version serves as well (its
GPU, for instance). ggml's server takes one client at a time; a second one waits until the first
hangs up (our client gives up after a few seconds with an error saying so).

ggml aborts the serving process on a graph its device fails to compute, so the server runs in a
child process that this command restarts: a failed request costs its client the connection (the
client sees ``omnivoice.DeviceError``), and the next client is served. The protocol has no
authentication and no encryption: bind an address only trusted machines reach.
"""

from __future__ import annotations

import argparse
import logging
import multiprocessing
import signal
import socket
import sys
import time
from typing import Optional, Sequence

from ._cli import positive_int, run_command

__all__ = ["serve"]

logger = logging.getLogger(__name__)

RESTART_DELAY_S = 0.5


def _check_listen(host: str, port: int) -> None:
    """ValueError when host:port cannot be listened on (ggml's server would only print it)."""
    try:
        socket.inet_aton(host)
    except OSError:
        raise ValueError(f"--host must be an IPv4 address (ggml's RPC server binds IPv4 only), got {host!r}") from None
    if not 1 <= port <= 65535:
        raise ValueError(f"--port must be in [1, 65535], got {port}")
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as ggml's server does
        try:
            s.bind((host, port))
        except OSError as e:
            raise ValueError(f"cannot listen on {host}:{port}: {e.strerror}") from None


def _child(host: str, port: int, n_threads: int, cache_dir: str) -> None:
    if sys.platform.startswith("linux"):
        import ctypes

        # PR_SET_PDEATHSIG: the server goes when this command is killed, even by SIGKILL.
        ctypes.CDLL(None).prctl(1, signal.SIGKILL)
    from . import _core

    _core.serve_rpc(host, port, n_threads, cache_dir)


def serve(host: str = "127.0.0.1", port: int = 50052, n_threads: Optional[int] = None,
          cache_dir: Optional[str] = None) -> None:
    """Serves the CPU backend on host:port until interrupted; restarts the serving process when
    its device fails a request (the process aborts or crashes).

    Args:
        host: IPv4 address to bind.
        port: TCP port.
        n_threads: CPU threads of the served backend; None: every usable core.
        cache_dir: Directory where the server keeps large tensors it received, so that a client
            loading the same weights again sends only their hashes.

    Raises:
        ValueError: host:port cannot be listened on.
    """
    from .threads import usable_cores

    _check_listen(host, port)
    threads = n_threads or usable_cores()
    ctx = multiprocessing.get_context("spawn")
    # SIGTERM ends the command as Ctrl-C does, so that the child is stopped by the finally below.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    print(f"omnivoice-rpc-server: serving the CPU ({threads} threads) as rpc://{host}:{port}", file=sys.stderr)
    while True:
        proc = ctx.Process(target=_child, args=(host, port, threads, cache_dir or ""), daemon=True)
        proc.start()
        try:
            proc.join()
        finally:
            if proc.is_alive():
                proc.kill()
                proc.join()
        if proc.exitcode is not None and proc.exitcode >= 0:
            # A Python error in the child (it could not listen): restarting would repeat it.
            raise RuntimeError(f"the RPC server process on {host}:{port} stopped (exit status {proc.exitcode})")
        logger.warning("the RPC server process died (signal %d) while serving a request; restarting it",
                       -proc.exitcode)
        time.sleep(RESTART_DELAY_S)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="omnivoice-rpc-server", description=__doc__.split("\n\n")[0])
    p.add_argument("--host", default="127.0.0.1",
                   help="IPv4 address to bind (default: %(default)s; the protocol has no authentication)")
    p.add_argument("--port", type=positive_int, default=50052, help="TCP port (default: %(default)s)")
    p.add_argument("--threads", type=positive_int, help="CPU threads (default: every usable core)")
    p.add_argument("--cache", help="directory keeping received weights, so reloading them sends hashes only")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``omnivoice-rpc-server``; returns the exit status."""
    args = build_parser().parse_args(argv)
    return run_command("omnivoice-rpc-server", lambda: serve(args.host, args.port, args.threads, args.cache))


if __name__ == "__main__":
    sys.exit(main())
