"""``omnivoice-server``: serves the model over HTTP (and Wyoming with ``--wyoming``)."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

from .._cli import add_device_argument, positive_float, positive_int

if TYPE_CHECKING:
    from .settings import ServerSettings


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="omnivoice-server",
                                description="OpenAI-compatible text-to-speech server for OmniVoice on ggml.")
    p.add_argument("--model", required=True, help="LM GGUF, a directory of GGUFs, a snapshot directory or a Hub id")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default: %(default)s)")
    p.add_argument("--port", type=int, default=8000, help="port (default: %(default)s)")
    p.add_argument("--voices-dir", type=Path, help="directory of saved voices (default: kept in memory only)")
    p.add_argument("--api-key", default=os.environ.get("OMNIVOICE_API_KEY"),
                   help="require 'Authorization: Bearer KEY' (default: $OMNIVOICE_API_KEY, else none)")
    p.add_argument("--max-queue", type=int, default=16, help="requests that may wait; more get 429 (default: %(default)s)")
    p.add_argument("--max-batch", type=positive_int, default=4, help="requests generated as one batch (default: %(default)s)")
    p.add_argument("--max-input-chars", type=positive_int, default=4096, help="longest input (default: %(default)s)")
    p.add_argument("--max-upload-mb", type=positive_float, default=10.0, help="largest reference audio (default: %(default)s)")
    p.add_argument("--timeout", type=positive_float, default=600.0, help="seconds per request (default: %(default)s)")
    p.add_argument("--cors-origin", action="append", default=[], help="allow this origin (repeatable; * for any)")
    p.add_argument("--threads", type=positive_int, help="CPU threads (default: all cores)")
    add_device_argument(p)
    p.add_argument("--no-warmup", action="store_true", help="report ready without a warm-up generation")
    p.add_argument("--wyoming", help="also serve Wyoming (Home Assistant) at tcp://HOST:PORT")
    p.add_argument("--log-level", default="info", choices=("debug", "info", "warning", "error"))
    p.add_argument("--ray-serve", nargs="?", const="", metavar="ADDRESS",
                   help="serve --replicas copies behind Ray Serve's proxy at --host/--port (pip install "
                        "'omnivoice-ggml[ray]'): no ADDRESS starts a local Ray, 'auto' joins the running cluster")
    p.add_argument("--replicas", type=positive_int, default=1,
                   help="with --ray-serve: replicas, each with its own model and --threads CPUs (default: %(default)s)")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``omnivoice-server``; returns the exit status."""
    args = build_parser().parse_args(argv)
    try:
        import uvicorn

        from . import ServerSettings, create_app
    except ImportError as e:
        print(f"omnivoice-server: error: {e.name} is missing; install the server extra: "
              "pip install 'omnivoice-ggml[server]'", file=sys.stderr)
        return 1
    logging.basicConfig(level=args.log_level.upper(), format="omnivoice-server: %(message)s")
    settings = ServerSettings(
        voices_dir=args.voices_dir, api_key=args.api_key or None, max_queue=args.max_queue,
        max_batch=args.max_batch, max_input_chars=args.max_input_chars,
        max_upload_bytes=int(args.max_upload_mb * 1024 * 1024), request_timeout=args.timeout,
        cors_origins=tuple(args.cors_origin), threads=args.threads, device=args.device, warmup=not args.no_warmup,
        wyoming=args.wyoming)
    if args.ray_serve is not None:
        return _ray_serve(args, settings)
    try:
        app = create_app(args.model, settings)
    except ValueError as e:
        print(f"omnivoice-server: error: {e}", file=sys.stderr)
        return 2
    uvicorn.run(app, host=args.host, port=args.port, log_level=args.log_level)
    return 0


def _ray_serve(args: argparse.Namespace, settings: "ServerSettings") -> int:
    from ..distributed import run_serve

    try:
        run_serve(args.model, settings, args.replicas, args.threads, args.host, args.port, args.ray_serve or None)
    except ImportError as e:
        print(f"omnivoice-server: error: {e.name} is missing; --ray-serve needs the ray extra: "
              "pip install 'omnivoice-ggml[ray]'", file=sys.stderr)
        return 1
    except ValueError as e:
        print(f"omnivoice-server: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
