"""Greedy generation on the tiny checkpoint: our Python side driving the C++ LM vs upstream.

Text tokenizer from the converted GGUF, target lengths, prompts, packing and the MaskGIT
loop must reproduce upstream's tokens exactly. Expected values:
tests/data/fixtures/python_generate.json (upstream, default SDPA attention, identical in
float64), written by tests/reference/dump_python_fixtures.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from omnivoice import _core
from omnivoice.duration import resolve_target_lengths
from omnivoice.maskgit import MaskGITConfig, generate, pack_prompts
from omnivoice.prompt import build_prompt
from omnivoice.tokenizer import TextTokenizer


DATA = Path(__file__).parents[1] / "data"
FRAME_RATE = 25


@pytest.fixture(scope="module")
def lm(tiny_lm_gguf: Path) -> object:
    # One thread: the tiny model gains nothing from more, and threads that wait on each
    # other are slow when the cores are shared with other jobs.
    return _core.LM(str(tiny_lm_gguf), _core.Backend(1))


@pytest.fixture(scope="module")
def runs() -> list[dict]:
    with open(DATA / "fixtures" / "python_generate.json", encoding="utf-8") as f:
        return json.load(f)["runs"]


def test_greedy_generation_equals_upstream(lm: object, runs: list[dict]) -> None:
    tokenizer = TextTokenizer.from_metadata(lm.metadata)
    for run in runs:
        n = len(run["texts"])
        ref_codes = None if run["ref_codes"] is None else np.array(run["ref_codes"], dtype=np.int32)
        ref_len = None if ref_codes is None else ref_codes.shape[1]
        lengths, _ = resolve_target_lengths(
            run["texts"], [run["ref_text"]] * n, [ref_len] * n, FRAME_RATE, speed=run["speed"], duration=run["duration"]
        )
        assert lengths == run["target_lens"]
        prompts = [
            build_prompt(tokenizer, text, t_len, ref_text=run["ref_text"], ref_codes=ref_codes, lang=lang, instruct=ins,
                         num_codebooks=lm.num_audio_codebook, mask_id=lm.audio_mask_id)
            for text, t_len, lang, ins in zip(run["texts"], lengths, run["langs"], run["instructs"])
        ]
        batch = pack_prompts(prompts)
        session = lm.session(batch.segments)
        config = MaskGITConfig(num_step=run["num_step"], position_temperature=0.0, class_temperature=0.0)
        tokens = generate(session.forward, batch, config, np.random.default_rng(0), mask_id=lm.audio_mask_id)
        for got, expected in zip(tokens, run["tokens"]):
            np.testing.assert_array_equal(got, np.array(expected), err_msg=str(run["texts"]))
