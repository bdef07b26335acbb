"""The server refuses, with a 400 naming the family, the modes the loaded family lacks: checked on a
clone-only family (OmniVoice's checks with its capabilities cut down; check_request needs no weights)."""

from __future__ import annotations

import dataclasses

import pytest

pytest.importorskip("fastapi")

from omnivoice import OmniVoice  # noqa: E402
from omnivoice.server.app import SpeechRequest, _SpeechService  # noqa: E402
from omnivoice.server.errors import APIError  # noqa: E402
from omnivoice.server.metrics import Metrics  # noqa: E402
from omnivoice.server.settings import ServerSettings  # noqa: E402
from omnivoice.server.voices import VoiceStore  # noqa: E402
from omnivoice.server.worker import Engine  # noqa: E402


class CloneOnly(OmniVoice):
    family = "clonetest"
    capabilities = dataclasses.replace(OmniVoice.capabilities, family="clonetest", modes=("clone",), instruct=None)


def _service(model: type) -> _SpeechService:
    engine = Engine(lambda: model, max_queue=2, max_batch=1, batch_window=0.0)
    engine.model = model  # not started: only the checks before queueing run
    return _SpeechService(engine, VoiceStore(None), ServerSettings(), Metrics(lambda: 0))


@pytest.mark.parametrize("body, param", [
    ({"input": "Hello.", "voice": "auto"}, "voice"),
    ({"input": "Hello.", "voice": "alloy"}, "voice"),
    ({"input": "Hello.", "voice": "auto", "instructions": "female"}, "instructions"),
])
def test_modes_the_family_lacks_are_a_400_naming_it(body: dict, param: str) -> None:
    with pytest.raises(APIError) as err:
        _service(CloneOnly)._job(SpeechRequest(**body))
    assert err.value.status == 400 and err.value.param == param
    assert "clonetest" in err.value.message and "clone" in err.value.message


def test_unknown_language_and_bad_instruct_keep_their_codes() -> None:
    service = _service(OmniVoice)
    with pytest.raises(APIError) as err:
        service._job(SpeechRequest(input="Hello.", language="no-such-language"))
    assert (err.value.status, err.value.param, err.value.code) == (400, "language", "invalid_language")
    with pytest.raises(APIError) as err:
        service._job(SpeechRequest(input="Hello.", instructions="purple dragon"))
    assert (err.value.status, err.value.param, err.value.code) == (400, "instructions", "invalid_instructions")
