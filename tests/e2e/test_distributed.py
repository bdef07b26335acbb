"""omnivoice.distributed on the tiny model, on one local Ray started for this module: the batch job
through ``omnivoice-tts --batch --ray`` (2 actors write, sample for sample, what the plain
``--batch`` writes; a bad line refuses the job in both modes alike, or is skipped in both with
``--skip-bad-lines``; a re-run skips what exists) and the server app as 2 Ray Serve replicas
(answering as the app does in-process)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections import Counter
from pathlib import Path
from typing import Callable, Iterator

import numpy as np
import pytest
import soundfile as sf

from omnivoice.cli import main

ray = pytest.importorskip("ray")

# Ray and Ray Data warn about their own deprecated settings on import and start-up. Slow: Ray's
# start-up and the actors' take tens of seconds on 2 busy cores.
pytestmark = [pytest.mark.filterwarnings(r"ignore:::(ray|pyarrow|pandas)(\..*)?"), pytest.mark.slow]

FIXTURES = Path(__file__).parents[1] / "data" / "fixtures"
FAST = ["--steps", "2", "--duration", "0.6", "--threads", "1", "--format", "wav32", "-q"]
BAD = 6  # the request whose reference file is missing
JOB_TIMEOUT_S = 300  # Ray start-up is slow on a busy 2-core machine, but never this slow


@contextlib.contextmanager
def _deadline(seconds: int) -> Iterator[None]:
    """Raises TimeoutError in the test if the block runs longer than ``seconds``."""
    def fail(*_: object) -> None:
        raise TimeoutError(f"Ray job still running after {seconds} s")

    old = signal.signal(signal.SIGALRM, fail)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


@pytest.fixture(scope="module")
def local_ray(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    # Ray puts the driver's working directory first on its workers' sys.path: from the repository
    # root they would import the source tree's omnivoice/ (no built _core), not the installed one.
    cwd = os.getcwd()
    os.chdir(tmp_path_factory.mktemp("ray_cwd"))
    try:
        with _deadline(JOB_TIMEOUT_S):
            ray.init(num_cpus=2, include_dashboard=False, object_store_memory=100 * 2**20,
                     logging_level="WARNING")
        yield
        ray.shutdown()
    finally:
        os.chdir(cwd)


@pytest.fixture(scope="module")
def jobs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, list[dict]]:
    """12 requests mixing auto voice, design, one shared reference and one missing reference (a bad
    line); the same 11 good ones again without the bad line."""
    d = tmp_path_factory.mktemp("jobs")
    ref = d / "ref.wav"
    sf.write(ref, np.load(FIXTURES / "codec_encode.npz")["audio_24k"], 24000, subtype="FLOAT")
    reqs = []
    for i in range(1, 13):
        req = {"text": f"Request number {i}.", "seed": 100 + i, "output": f"r{i:02d}.wav"}
        if i % 3 == 1:
            req.update(ref_wav=str(ref), ref_text="Nice to meet you.")
        elif i % 3 == 2:
            req["instruct"] = "female, low pitch"
        if i == 3:
            req.update(lang="en", speed=1.3)
        reqs.append(req)
    reqs[BAD - 1] = {**reqs[BAD - 1], "ref_wav": str(d / "missing.wav"), "ref_text": "Gone."}
    all_jobs, good_jobs = d / "all.jsonl", d / "good.jsonl"
    all_jobs.write_text("".join(json.dumps(r) + "\n" for r in reqs), encoding="utf-8")
    good_jobs.write_text("".join(json.dumps(r) + "\n" for i, r in enumerate(reqs, 1) if i != BAD),
                         encoding="utf-8")
    return all_jobs, good_jobs, reqs


def _manifest(outdir: Path) -> dict[int, dict]:
    rows = [json.loads(ln) for ln in (outdir / "manifest.jsonl").read_text(encoding="utf-8").splitlines()]
    assert len(rows) == 12 and len({r["id"] for r in rows}) == 12
    return {r["id"]: r for r in rows}


def test_plain_and_ray_batch_treat_a_bad_line_alike_and_ray_resumes(
        local_ray: None, jobs: tuple[Path, Path, list[dict]], tiny_model_dir: Path, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    all_jobs, _, reqs = jobs
    model = ["--model", str(tiny_model_dir)]
    plain, on_ray = tmp_path / "plain", tmp_path / "ray"
    # By default a job with a bad line is refused, in both modes alike: the bad line is named,
    # nothing is written (the Ray job fails before any actor starts).
    reports = []
    for out, ray_flags in ((plain, []), (on_ray, ["--ray", "--actors", "2"])):
        assert main(["--batch", str(all_jobs), "-o", str(out), *ray_flags, *model, *FAST]) == 1
        reports.append(capsys.readouterr().err.splitlines())
        assert not list(out.glob("*.wav")) and not (out / "manifest.jsonl").exists()
    assert reports[0] == reports[1]
    assert reports[0][0] == f"omnivoice-tts: {all_jobs}:{BAD}: 'ref_wav' {all_jobs.parent / 'missing.wav'} does not exist"
    assert reports[0][1] == (f"omnivoice-tts: error: 1 of 12 lines of {all_jobs} are bad (line {BAD}); nothing was "
                             "run: fix them, or skip them to run the other 11 (--skip-bad-lines)")

    # --skip-bad-lines runs the good ones, in both modes alike, sample for sample.
    assert main(["--batch", str(all_jobs), "-o", str(plain), "--skip-bad-lines", *model, *FAST]) == 0
    with _deadline(JOB_TIMEOUT_S):
        assert main(["--batch", str(all_jobs), "-o", str(on_ray), "--skip-bad-lines", "--ray", "--actors", "2",
                     *model, *FAST]) == 0
    rows = _manifest(on_ray)
    assert rows[BAD]["status"] == "invalid" and rows[BAD]["line"] == BAD and "missing.wav" in rows[BAD]["error"]
    assert not (on_ray / reqs[BAD - 1]["output"]).exists() and not (plain / reqs[BAD - 1]["output"]).exists()
    for i, req in enumerate(reqs, 1):
        if i == BAD:
            continue
        assert rows[i]["status"] == "ok" and rows[i]["output"] == str(on_ray / req["output"])
        ours, sr = sf.read(on_ray / req["output"], dtype="float32")
        theirs, _ = sf.read(plain / req["output"], dtype="float32")
        assert sr == 24000 and abs(rows[i]["duration"] - ours.size / sr) < 1e-3
        np.testing.assert_array_equal(ours, theirs, err_msg=f"request {i}")
    # The shared reference was encoded at most once per actor that met it, and reused after.
    shared = [i for i in range(1, 13) if i % 3 == 1]
    encodes = Counter(rows[i]["worker"] for i in shared if rows[i]["voice_encoded"])
    assert set(encodes.values()) == {1}
    assert sum(encodes.values()) < len(shared)
    assert len({r["worker"] for i, r in rows.items() if i != BAD}) == 2  # both actors worked

    mtimes = {p.name: p.stat().st_mtime_ns for p in on_ray.glob("*.wav")}
    with _deadline(JOB_TIMEOUT_S):
        assert main(["--batch", str(all_jobs), "-o", str(on_ray), "--skip-bad-lines", "--ray", "--actors", "2",
                     *model, *FAST]) == 0
    rows = _manifest(on_ray)
    assert Counter(r["status"] for r in rows.values()) == {"skipped": 11, "invalid": 1}
    assert {p.name: p.stat().st_mtime_ns for p in on_ray.glob("*.wav")} == mtimes
    assert not list(on_ray.glob(".*.partial"))


def test_ray_job_prints_only_its_own_lines(local_ray: None, jobs: tuple[Path, Path, list[dict]],
                                           tiny_model_dir: Path, tmp_path: Path) -> None:
    # A driver of its own (the CLI in a subprocess, joining this module's Ray): no Ray deprecation
    # notices or worker lines on its stderr, only the job's summary.
    tts = Path(sys.executable).with_name("omnivoice-tts")
    with _deadline(JOB_TIMEOUT_S):
        done = subprocess.run(
            [str(tts), "--batch", str(jobs[1]), "-o", str(tmp_path / "out"), "--model", str(tiny_model_dir),
             "--ray", ray.get_runtime_context().gcs_address, *[f for f in FAST if f != "-q"]],
            capture_output=True, text=True, cwd=tmp_path, timeout=JOB_TIMEOUT_S)
    assert done.returncode == 0, done.stderr
    # Ray's C++ core in the driver still logs one line per actor pool (that an actor restart may
    # fail: its constructor arguments live in the object store); it goes only with actor restarts,
    # which Ray Data lets us turn off only through a deprecated argument. Everything else is ours.
    lines = [ln for ln in done.stderr.splitlines() if "core_worker.cc" not in ln]
    assert len(lines) == 1 and lines[0].startswith("11 written, 0 skipped, 0 failed; "), done.stderr


def test_more_cpus_than_the_cluster_is_refused_at_once(local_ray: None, jobs: tuple[Path, Path, list[dict]],
                                                       tiny_model_dir: Path, tmp_path: Path) -> None:
    from omnivoice.distributed import run_batch

    with pytest.raises(ValueError, match="--actors 3 x --threads 1 needs 3 CPUs.* has 2 CPUs"):
        run_batch(jobs[1], tmp_path, tiny_model_dir, actors=3, threads_per_actor=1)
    with pytest.raises(ValueError, match="--actors 1 x --threads 4 needs 4 CPUs"):
        run_batch(jobs[1], tmp_path, tiny_model_dir, actors=1, threads_per_actor=4)


def _post_when_ready(url: str, body: dict) -> tuple[int, bytes]:
    """POSTs ``body``, again while the replica that answers is still loading its model (503)."""
    req = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
    for _ in range(240):
        try:
            with urllib.request.urlopen(req, timeout=120) as r:
                return r.status, r.read()
        except urllib.error.HTTPError as e:
            if e.code != 503:
                return e.code, e.read()
        time.sleep(0.5)
    raise TimeoutError(f"{url} still answers 503")


def test_serve_replicas_answer_as_the_server_does(local_ray: None, tiny_model_dir: Path,
                                                  free_port: Callable[[], int]) -> None:
    serve = pytest.importorskip("ray.serve")
    from fastapi.testclient import TestClient

    from omnivoice.distributed import serve_app
    from omnivoice.server import ServerSettings, create_app

    settings = ServerSettings(warmup=False, threads=1)
    speech = {"input": "Hello from a replica. And a second sentence.", "response_format": "pcm", "seed": 7,
              "num_step": 2, "duration": 1.0}
    sse = {**speech, "stream_format": "sse"}
    bad = {**speech, "voice": "nobody"}
    expected = {}
    with TestClient(create_app(str(tiny_model_dir), settings)) as client:
        for _ in range(100):  # the model loads on the engine thread
            if client.get("/health").status_code == 200:
                break
            time.sleep(0.1)
        for name, body in (("pcm", speech), ("sse", sse), ("bad", bad)):
            r = client.post("/v1/audio/speech", json=body)
            expected[name] = (r.status_code, r.content)
    assert expected["pcm"][0] == 200 and len(expected["pcm"][1]) >= 2 * 24000  # 1 s of s16le
    assert expected["sse"][0] == 200 and expected["sse"][1].count(b"speech.audio.delta") >= 1
    assert expected["bad"][0] == 400

    port = free_port()
    url = f"http://127.0.0.1:{port}/v1/audio/speech"
    with _deadline(JOB_TIMEOUT_S):
        serve.start(http_options={"host": "127.0.0.1", "port": port})
        try:
            serve.run(serve_app(tiny_model_dir, settings, replicas=2, threads=1), name="omnivoice")
            status = serve.status().applications["omnivoice"].deployments["omnivoice"]
            assert status.replica_states.get("RUNNING") == 2
            # several requests: Serve's proxy picks a replica for each
            for _ in range(3):
                assert _post_when_ready(url, speech) == expected["pcm"]
            assert _post_when_ready(url, sse) == expected["sse"]
            assert _post_when_ready(url, bad) == expected["bad"]
        finally:
            serve.shutdown()


def test_server_cli_ray_serve_deploys_and_stops_on_ctrl_c_with_both_cores_busy(
        local_ray: None, tiny_model_dir: Path, tmp_path: Path, free_port: Callable[[], int]) -> None:
    from omnivoice.distributed import SERVE_EXIT_S

    # joins this module's Ray, as `omnivoice-server --ray-serve ADDRESS` joins a cluster
    port = free_port()
    health = f"http://127.0.0.1:{port}/health"
    log = tmp_path / "server.log"  # a file, not a pipe: Serve logs plenty, and a full pipe would block it
    busy: list[subprocess.Popen] = []
    with open(log, "wb") as err, subprocess.Popen(
            [sys.executable, "-P", "-m", "omnivoice.server", "--model", str(tiny_model_dir), "--port", str(port),
             "--ray-serve", ray.get_runtime_context().gcs_address, "--replicas", "1", "--threads", "1",
             "--no-warmup", "--log-level", "warning"], stdout=subprocess.DEVNULL, stderr=err) as proc:
        try:
            deadline = time.monotonic() + JOB_TIMEOUT_S
            while True:
                assert proc.poll() is None, log.read_text(errors="replace")
                try:
                    with urllib.request.urlopen(health, timeout=10) as r:
                        if r.status == 200:
                            break
                except (urllib.error.URLError, ConnectionError):
                    pass
                assert time.monotonic() < deadline, "omnivoice-server --ray-serve never became healthy"
                time.sleep(0.5)
            # Ctrl-C under load: both cores spinning and a long generation in flight.
            speech = urllib.request.Request(
                f"http://127.0.0.1:{port}/v1/audio/speech", json.dumps({
                    "input": "A long answer keeps the replica busy. " * 40, "response_format": "pcm",
                    "num_step": 64}).encode(), {"Content-Type": "application/json"})
            in_flight = urllib.request.urlopen(speech, timeout=JOB_TIMEOUT_S)
            in_flight.read(100)
            busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
            proc.send_signal(signal.SIGINT)
            # SERVE_EXIT_S: the bound the process enforces on itself (15 s more for the signal to
            # arrive and the exit to be seen on spinning cores).
            assert proc.wait(timeout=SERVE_EXIT_S + 15) == 0, log.read_text(errors="replace")
            in_flight.close()
        finally:
            for p in busy:
                p.kill()
                p.wait()
            if proc.poll() is None:
                proc.kill()
    with pytest.raises((urllib.error.URLError, ConnectionError)):  # the deployment went with it
        urllib.request.urlopen(health, timeout=10)


def test_server_cli_ray_serve_refuses_wyoming(capsys: pytest.CaptureFixture[str]) -> None:
    from omnivoice.server.__main__ import main

    assert main(["--model", "m", "--ray-serve", "--wyoming", "tcp://127.0.0.1:1"]) == 2
    assert "wyoming is not served through Ray Serve" in capsys.readouterr().err


def test_serve_run_builder_checks_its_args(tiny_model_dir: Path) -> None:
    pytest.importorskip("ray.serve")
    from omnivoice.distributed import build_serve_app

    app = build_serve_app({"model": str(tiny_model_dir), "replicas": "2", "threads": "1"})
    assert type(app).__name__ == "Application"
    with pytest.raises(ValueError, match="model \\(required\\)"):
        build_serve_app({"replicas": "2"})
    with pytest.raises(ValueError, match="replicas must be a positive integer, got 0"):
        build_serve_app({"model": str(tiny_model_dir), "replicas": "0"})
