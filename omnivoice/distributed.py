"""Batch synthesis on a Ray cluster (``pip install omnivoice-ggml[ray]``).

:func:`run_batch` takes the requests of an ``omnivoice-tts --batch`` job (see
:mod:`omnivoice.batch`), turns them into a Ray Data dataset and maps it over a pool of actors,
each holding one loaded model (one model's memory per actor). Every request becomes one file under
the output directory, written by whichever actor took it, so the directory must be one that all
Ray workers share (local for a single machine; a network file system on a cluster). A manifest
(JSONL, one row per request) says what happened to each: ``ok`` with the audio duration and the
seconds it took, ``skipped`` when its output already existed (a re-run resumes after a crash),
``failed`` with the error (the job goes on), or ``invalid`` for a bad line that was skipped. The
job is checked whole first, as the plain ``--batch`` checks it (:func:`omnivoice.batch.check_job`):
bad lines refuse the job unless ``skip_bad_lines``.

Requests are ordered by voice before they are handed out, and each actor keeps the voice prompts
it encoded, so requests sharing a reference encode it once per actor.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import socket
import sys
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Optional, Union

from .batch import BatchRequest, BatchRunner, RequestError, check_job, read_requests, validate_requests

MANIFEST_NAME = "manifest.jsonl"
# Ctrl-C of run_serve: Serve's graceful shutdown gets SERVE_GRACE_S, then its actors are killed;
# the process is gone SERVE_EXIT_S after the interrupt whatever happens (a loaded machine or a
# stuck controller included).
SERVE_GRACE_S = 30
SERVE_EXIT_S = 60
# A replica's in-flight requests get this long to finish when it stops (Serve's default: 20 s).
REPLICA_GRACE_S = 5


@dataclass(frozen=True)
class BatchSummary:
    """What a job did. ``audio_seconds`` counts the audio written in this run; ``invalid`` the bad
    lines skipped (``skip_bad_lines``)."""

    total: int
    ok: int
    failed: int
    skipped: int
    invalid: int
    audio_seconds: float
    wall_seconds: float
    manifest: Path


class _Synthesizer:
    """A Ray Data actor: loads the model once, then makes each request of a batch into a file."""

    def __init__(self, files: dict[str, str], n_threads: int, fmt: str, sample_rate: Optional[int],
                 generate_kwargs: dict[str, Any]) -> None:
        from .registry import load

        self.runner = BatchRunner(load(**files, n_threads=n_threads), fmt, sample_rate, **generate_kwargs)
        self.worker = f"{socket.gethostname()}:{os.getpid()}"

    def __call__(self, batch: dict[str, Any]) -> dict[str, list[str]]:
        rows = [{**self.runner.run_or_report(BatchRequest(**json.loads(r))), "worker": self.worker,
                 "finished": round(time.time(), 3)} for r in batch["request"]]
        return {"row": [json.dumps(r) for r in rows]}


def init(address: Optional[str] = None, **kwargs: Any) -> None:
    """Starts a local Ray (``address=None``) or joins a cluster (``"auto"`` or ``"ray://host:10001"``
    / ``"host:6379"``), quietly: no dashboard, warnings only, no lines from the workers. ``kwargs``
    go to ``ray.init``."""
    import ray
    import ray.data

    if not ray.is_initialized():
        kwargs.setdefault("include_dashboard", False)
        kwargs.setdefault("logging_level", logging.WARNING)
        # The actors' own stdout and stderr (Ray's deprecation notices, worker start-up lines) stay
        # in Ray's session logs: nothing there a user can act on; a request's error goes to the
        # manifest.
        kwargs.setdefault("log_to_driver", False)
        # A local Ray announces at WARNING that it enabled token authentication (its default);
        # that one line goes, the module's other warnings (auth disabled, no token) stay.
        auth = logging.getLogger("ray._private.authentication.authentication_token_setup")
        quiet = _DropMessage("Token authentication is enabled for this Ray cluster")
        auth.addFilter(quiet)
        try:
            ray.init(address=address, **kwargs)
        finally:
            auth.removeFilter(quiet)
    with warnings.catch_warnings():
        # Ray Data warns about its own deprecated settings when it builds its default context.
        warnings.filterwarnings("ignore", category=DeprecationWarning, module=r"ray\.data\.")
        ray.data.DataContext.get_current()
    logging.getLogger("ray.data").setLevel(logging.WARNING)  # no per-job execution plans on stderr
    # ... nor the warning that we turned Ray Data's bars off (the job shows its own)
    logging.getLogger("ray.data._internal.progress").setLevel(logging.ERROR)


class _DropMessage(logging.Filter):
    """Drops the log records whose message starts with ``prefix``."""

    def __init__(self, prefix: str) -> None:
        super().__init__()
        self.prefix = prefix

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith(self.prefix)


def _threads_per_actor(actors: int, threads: Optional[int]) -> int:
    """``threads``, or the cluster's CPUs shared out among the actors; checked to fit."""
    import ray

    nodes = [n["Resources"].get("CPU", 0) for n in ray.nodes() if n.get("Alive")]
    total, biggest = int(sum(nodes)), int(max(nodes, default=0))
    n = threads or max(1, min(biggest, total // actors))
    # Actors that cannot be placed would only fail after actor_start_timeout: refuse at once.
    if n > biggest or n * actors > total:
        raise ValueError(f"--actors {actors} x --threads {n} needs {n * actors} CPUs, one actor {n} on "
                         f"one node; the Ray cluster has {total} CPUs, at most {biggest} on one node")
    return n


class _BarProgress:
    """One status line on stderr (only when it is a terminal): done/failed, audio s per wall s."""

    def __init__(self, total: int) -> None:
        self.total = total
        self.enabled = sys.stderr.isatty()
        self.start = time.monotonic()

    def __call__(self, done: int, failed: int, audio_seconds: float) -> None:
        if not self.enabled:
            return
        elapsed = time.monotonic() - self.start
        width = 30
        filled = int(width * (done + failed) / max(self.total, 1))
        sys.stderr.write(f"\rrequests [{'#' * filled}{'.' * (width - filled)}] {done + failed}/{self.total} "
                         f"({failed} failed) {audio_seconds / max(elapsed, 1e-9):5.2f} audio s/s {elapsed:6.1f}s")
        if done + failed >= self.total:
            sys.stderr.write("\n")
        sys.stderr.flush()


def run_batch(
    requests: Union[str, os.PathLike, Iterable[dict[str, Any]]],
    output_dir: Union[str, os.PathLike],
    model: Union[str, os.PathLike],
    *,
    codec: Union[str, os.PathLike, None] = None,
    actors: int = 1,
    threads_per_actor: Optional[int] = None,
    fmt: str = "wav16",
    sample_rate: Optional[int] = None,
    defaults: Optional[dict[str, Any]] = None,
    manifest: Union[str, os.PathLike, None] = None,
    batch_size: int = 1,
    actor_start_timeout: int = 600,
    progress: Union[bool, Callable[[int, int, float], None]] = False,
    skip_bad_lines: bool = False,
    **generate_kwargs: Any,
) -> BatchSummary:
    """Runs a batch job on Ray: one audio file per request, and a JSONL manifest.

    Starts a local Ray when none is connected (call :func:`init` first to join a cluster).

    Args:
        requests: A JSONL file in the ``omnivoice-tts --batch`` schema, or the request objects.
        output_dir: Directory for the files (relative ``output`` names) and the manifest; it must
            be shared by all Ray workers.
        model: As for :func:`omnivoice.load`; resolved here, once (a snapshot or Hub id is
            converted on this machine), and the GGUF paths are handed to the actors.
        codec: The codec GGUF, when it is not beside the LM.
        actors: How many actors, each with its own model.
        threads_per_actor: CPU threads (and Ray CPUs) per actor; default: the cluster's CPUs
            divided among the actors.
        fmt: WAV format: ``wav16``, ``wav24`` or ``wav32``.
        sample_rate: Rate of the files (resampled with soxr); ``None`` keeps the model's 24 kHz.
        defaults: Values for keys a request does not give (``lang``, ``instruct``, ``seed``, ...).
        manifest: Where to write the manifest; default ``output_dir/manifest.jsonl``.
        batch_size: Requests handed to an actor at a time (each is still generated alone).
        actor_start_timeout: Seconds to wait for all actors to start and load the model before
            any request is handed out; past it the job fails.
        progress: ``True`` for a status line on stderr (when it is a terminal), or a callable
            ``progress(done, failed, audio_seconds)`` called as results come in.
        skip_bad_lines: Run the good requests of a job that has bad lines (each gets an
            ``invalid`` row); by default such a job is refused before Ray starts.
        **generate_kwargs: Settings for every request (``num_step``, ``guidance_scale``, ...).

    Returns:
        The counts of the run; the manifest has the details.

    Raises:
        ValueError: ``actors``, ``threads_per_actor``, ``batch_size`` or ``actor_start_timeout``
            below 1, more CPUs than the cluster holds, a bad ``fmt`` or setting, or bad lines
            in the job (all of them named) without ``skip_bad_lines``.
        FileNotFoundError: The model or the requests file does not exist.
    """
    from .audio import _check_format, _check_rate
    from .registry import model_class

    for name, value in (("actors", actors), ("threads_per_actor", threads_per_actor or 1),
                        ("batch_size", batch_size), ("actor_start_timeout", actor_start_timeout)):
        if not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
    _check_format(fmt)
    if sample_rate is not None:
        _check_rate(sample_rate)
    family = model_class(model)
    family.check_request(**generate_kwargs)
    files = family.resolve_files(model, **({"codec": codec} if codec else {}))
    start = time.monotonic()
    out_dir = Path(output_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    if isinstance(requests, (str, os.PathLike)):
        parsed = read_requests(requests, out_dir, defaults)
    else:
        parsed = validate_requests(requests, out_dir, defaults)
    check_job(parsed, str(requests) if isinstance(requests, (str, os.PathLike)) else "the requests", skip_bad_lines)

    manifest_path = Path(manifest) if manifest else out_dir / MANIFEST_NAME
    todo: list[BatchRequest] = []
    counts = {"ok": 0, "failed": 0, "skipped": 0, "invalid": 0}
    audio_seconds = 0.0
    bar = _BarProgress(len(parsed)) if progress is True else progress or None
    with open(manifest_path, "w", encoding="utf-8") as mf:

        def record(row: dict[str, Any]) -> None:
            nonlocal audio_seconds
            counts[row["status"]] += 1
            if row["status"] == "ok":
                audio_seconds += row["duration"]
            mf.write(json.dumps(row) + "\n")
            mf.flush()  # the manifest so far survives a crash
            if bar:
                bar(counts["ok"] + counts["skipped"], counts["failed"] + counts["invalid"], audio_seconds)

        for req in parsed:
            if isinstance(req, RequestError):
                record({"id": req.id, "output": req.output, "status": "invalid", "line": req.line,
                        "error": req.message})
            elif os.path.exists(req.output):
                record({"id": req.id, "output": req.output, "status": "skipped"})
            else:
                todo.append(req)
        if todo:
            writer = dict(fmt=fmt, sample_rate=sample_rate)
            for row in _map_on_ray(todo, files, actors, threads_per_actor, writer, batch_size,
                                   actor_start_timeout, generate_kwargs):
                record(row)
    return BatchSummary(total=len(parsed), ok=counts["ok"], failed=counts["failed"], skipped=counts["skipped"],
                        invalid=counts["invalid"], audio_seconds=audio_seconds, wall_seconds=time.monotonic() - start,
                        manifest=manifest_path)


def _map_on_ray(todo: list[BatchRequest], files: dict[str, str], actors: int, threads: Optional[int],
                writer: dict[str, Any], batch_size: int, actor_start_timeout: int, generate_kwargs: dict[str, Any]
                ) -> Iterable[dict[str, Any]]:
    """The rows of the requests in ``todo`` as the actors finish them (any order)."""
    import ray
    import ray.data

    init()
    threads = _threads_per_actor(min(actors, len(todo)), threads)
    # Neighbours share voices, and an actor takes neighbouring batches: a voice is encoded once
    # per actor that meets it. Requests are JSON strings, so Arrow sees one string column.
    ordered = sorted(todo, key=lambda r: r.voice_key or ())
    # One block per batch: a block is what an actor takes at a time, so this spreads the work.
    ds = ray.data.from_items([{"request": json.dumps(r.__dict__)} for r in ordered],
                             override_num_blocks=-(-len(ordered) // batch_size))
    ds = ds.map_batches(
        _Synthesizer, batch_size=batch_size, batch_format="numpy",
        compute=ray.data.ActorPoolStrategy(size=min(actors, len(todo))), num_cpus=threads,
        fn_constructor_kwargs=dict(files=files, n_threads=threads, generate_kwargs=generate_kwargs,
                                   **writer),
    )
    ds.context.enable_progress_bars = False  # ours instead
    # All actors load their model before work is handed out (else the first one up takes it all
    # while the others load), and an actor that cannot start is an error, not a wait forever.
    ds.context.wait_for_min_actors_s = actor_start_timeout
    for row in ds.iter_rows():
        yield json.loads(row["row"])


# ---------------------------------------------------------------------------------- Ray Serve


class _ServerReplica:
    """The class Serve instantiates per replica; its HTTP surface is the app ``serve.ingress`` builds."""


def serve_app(model: Union[str, os.PathLike], settings: Any = None, replicas: int = 1,
              threads: Optional[int] = None) -> Any:
    """The ``omnivoice-server`` app as a Ray Serve application of ``replicas`` replicas.

    Each replica builds the same FastAPI app (``omnivoice.server.create_app``) and loads its own
    model (one model's memory per replica); Serve's proxy spreads requests over them, streaming
    responses included. Deploy it with ``ray.serve.run(serve_app(...))``.

    Args:
        model: GGUF paths or directory as :func:`omnivoice.load` takes; every node running a
            replica must see it at this path.
        settings: ``omnivoice.server.ServerSettings``; ``voices_dir`` should be a directory all
            replicas share (saved voices are files there). ``wyoming`` is not served through Serve.
        replicas: How many replicas.
        threads: CPU threads (and Ray CPUs) per replica; default 1.

    Raises:
        ValueError: ``replicas`` or ``threads`` below 1, or a Wyoming address in ``settings``.
    """
    from ray import serve

    from .server import ServerSettings, create_app

    settings = settings or ServerSettings()
    for name, value in (("replicas", replicas), ("threads", threads or 1)):
        if not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
    if settings.wyoming:
        raise ValueError("wyoming is not served through Ray Serve: run omnivoice-server --wyoming without --ray-serve")
    settings = dataclasses.replace(settings, threads=threads or 1)
    settings.validate()
    model = str(model)

    def build() -> Any:  # run on each replica: every one builds its own app and loads its own model
        return create_app(model, settings)

    ingress = serve.ingress(build)(_ServerReplica)
    deployment = serve.deployment(ingress, name="omnivoice", num_replicas=replicas,
                                  ray_actor_options={"num_cpus": settings.threads},
                                  graceful_shutdown_timeout_s=REPLICA_GRACE_S, graceful_shutdown_wait_loop_s=0.5)
    return deployment.bind()


def build_serve_app(args: dict[str, str]) -> Any:
    """Builder for ``serve run omnivoice.distributed:build_serve_app model=DIR replicas=2 threads=1``
    (also the ``import_path`` of a Serve config file, with ``args``)."""
    unknown = sorted(set(args) - {"model", "replicas", "threads", "voices_dir", "api_key"})
    if unknown or "model" not in args:
        raise ValueError(f"serve args: model (required), replicas, threads, voices_dir, api_key; got {sorted(args)}")
    from .server import ServerSettings

    settings = ServerSettings(voices_dir=Path(args["voices_dir"]) if args.get("voices_dir") else None,
                              api_key=args.get("api_key"))
    return serve_app(args["model"], settings, int(args.get("replicas", 1)), int(args.get("threads", 1)))


def run_serve(model: Union[str, os.PathLike], settings: Any = None, replicas: int = 1, threads: Optional[int] = None,
              host: str = "127.0.0.1", port: int = 8000, address: Optional[str] = None) -> None:
    """Deploys :func:`serve_app` with Serve's HTTP proxy on ``host:port`` and serves until
    interrupted (``omnivoice-server --ray-serve``); then takes the deployment down, within a bound:
    Serve's graceful shutdown gets :data:`SERVE_GRACE_S` seconds, then Serve's actors are killed,
    and the process exits at most :data:`SERVE_EXIT_S` seconds after the interrupt.

    Args:
        address: Ray cluster to join, as for :func:`init`; ``None`` starts a local Ray.
    """
    from ray import serve

    app = serve_app(model, settings, replicas, threads)  # bad arguments fail before Ray starts
    init(address)
    serve.start(http_options={"host": host, "port": port})
    try:
        serve.run(app, name="omnivoice")
        print(f"omnivoice-server: {replicas} replica(s) behind Ray Serve on http://{host}:{port}", file=sys.stderr)
        while True:
            time.sleep(3600)
    finally:
        _bounded_serve_shutdown()


def _bounded_serve_shutdown() -> None:
    """``serve.shutdown()``, bounded: see :func:`run_serve`."""
    import threading

    import ray
    from ray import serve

    # The last resort: nothing below may keep the process past SERVE_EXIT_S (exit status 1).
    watchdog = threading.Timer(SERVE_EXIT_S, lambda: os._exit(1))
    watchdog.daemon = True
    watchdog.start()
    graceful = threading.Thread(target=serve.shutdown, name="serve-shutdown", daemon=True)
    graceful.start()
    try:
        graceful.join(SERVE_GRACE_S)
    except KeyboardInterrupt:  # a second Ctrl-C: no more waiting
        pass
    if graceful.is_alive():
        print(f"omnivoice-server: Ray Serve did not shut down within {SERVE_GRACE_S} s; killing its actors",
              file=sys.stderr)
        for actor in ray.util.list_named_actors(all_namespaces=True):
            if actor["namespace"] == "serve":
                with contextlib.suppress(Exception):  # gone meanwhile
                    ray.kill(ray.get_actor(actor["name"], namespace="serve"), no_restart=True)
