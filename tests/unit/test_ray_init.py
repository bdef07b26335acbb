"""omnivoice.distributed.init starts a local Ray without Ray's start-up chatter on stderr, keeping
its real warnings (Ray itself is replaced: starting one takes tens of seconds)."""

from __future__ import annotations

import logging

import pytest

ray = pytest.importorskip("ray")
import ray.data  # noqa: E402

from omnivoice import distributed  # noqa: E402


def test_local_ray_starts_quietly(monkeypatch: pytest.MonkeyPatch) -> None:
    auth = logging.getLogger("ray._private.authentication.authentication_token_setup")
    seen: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: seen.append(record.getMessage())  # type: ignore[method-assign]

    def fake_init(address: object = None, **kwargs: object) -> None:
        assert kwargs["include_dashboard"] is False and kwargs["logging_level"] == logging.WARNING
        assert kwargs["log_to_driver"] is False  # the workers' lines stay in Ray's logs
        auth.warning("Token authentication is enabled for this Ray cluster. Set RAY_AUTH_MODE=disabled to opt out.")
        auth.warning("Token authentication is disabled for this Ray cluster. Anyone with network access ...")

    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr(ray, "init", fake_init)
    # Ray Data builds its default context again, which warns about its deprecated settings: under
    # the suite's filterwarnings=error, any such warning that got out fails this test.
    monkeypatch.setattr(ray.data.context, "_default_context", None)
    auth.addHandler(handler)
    try:
        distributed.init()
    finally:
        auth.removeHandler(handler)
    assert seen == ["Token authentication is disabled for this Ray cluster. Anyone with network access ..."]
    assert not auth.filters
