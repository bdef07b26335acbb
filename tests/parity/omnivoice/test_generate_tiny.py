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
from omnivoice.models.omnivoice.duration import resolve_target_lengths
from omnivoice.models.omnivoice.maskgit import MaskGITConfig, generate, guided_log_probs, pack_prompts
from omnivoice.models.omnivoice.prompt import build_prompt
from omnivoice.models.omnivoice.tokenizer import TextTokenizer


DATA = Path(__file__).parents[2] / "data"
FRAME_RATE = 25


@pytest.fixture(scope="module", params=[False, True], ids=["custom-ops", "stock-ops"])
def lm(tiny_lm_gguf: Path, request: pytest.FixtureRequest) -> object:
    # One thread: the tiny model gains nothing from more, and threads that wait on each
    # other are slow when the cores are shared with other jobs. Our CPU ops, then the stock
    # ggml ops a GPU backend takes.
    return _core.LM(str(tiny_lm_gguf), _core.Backend(1, stock_ops=request.param))


@pytest.fixture(scope="module")
def runs() -> list[dict]:
    with open(DATA / "fixtures" / "python_generate.json", encoding="utf-8") as f:
        return json.load(f)["runs"]


@pytest.mark.parametrize("scored", [False, True], ids=["logits", "graph-scores"])
def test_greedy_generation_equals_upstream(lm: object, runs: list[dict], scored: bool) -> None:
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
        config = MaskGITConfig(num_step=run["num_step"], position_temperature=0.0, class_temperature=0.0)
        session = lm.session(batch.segments, guidance_scale=config.guidance_scale if scored else None)
        tokens = generate(session.forward, batch, config, np.random.default_rng(0), mask_id=lm.audio_mask_id,
                          score=session.score if scored else None)
        for got, expected in zip(tokens, run["tokens"]):
            np.testing.assert_array_equal(got, np.array(expected), err_msg=str(run["texts"]))


def _random_step(lm: object, segments: list, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Ids and audio mask of a packed step: a few text tokens, then audio ids, some masked."""
    rng = np.random.default_rng(seed)
    n = sum(s[0] for s in segments)
    ids = rng.integers(0, lm.audio_vocab_size, (lm.num_audio_codebook, n)).astype(np.int32)
    mask = np.ones(n, dtype=bool)
    mask[:5] = False
    ids[0, :5] = rng.integers(0, lm.vocab_size, 5)
    return ids, mask


@pytest.mark.parametrize("guidance", [2.0, 0.0])
def test_graph_scores_match_numpy(lm: object, guidance: float) -> None:
    # The graph's log-softmax, guidance and max against guided_log_probs on the same logits:
    # float32 rounding apart (exp, log and sums in another order), the same values and tokens.
    segments = [(40, 10, 30), (30, 0, 30), (25, 5, 20), (20, 0, 20)]
    if guidance == 0:
        segments = segments[::2]
    session = lm.session(segments, guidance_scale=guidance)
    ids, mask = _random_step(lm, segments, 0)
    logits = session.forward(ids, mask)
    scores, best = session.score(ids, mask)
    starts = np.cumsum([0] + [s[2] for s in segments])
    per_item = 2 if guidance else 1
    want = [
        guided_log_probs(logits[starts[i] : starts[i + 1]], logits[starts[i + 1] : starts[i + 2]] if guidance else None,
                         guidance, lm.audio_mask_id)
        for i in range(0, len(segments), per_item)
    ]
    want = np.concatenate(want)  # [cells, V]
    assert scores.shape == best.shape == want.shape[:2] and best.dtype == np.int32
    np.testing.assert_allclose(scores, want.max(axis=-1), rtol=0, atol=1e-5)
    top2 = np.sort(want, axis=-1)[..., -2:]
    clear = top2[..., 1] - top2[..., 0] > 1e-5  # ties within rounding may go either way
    np.testing.assert_array_equal(best[clear], want.argmax(axis=-1)[clear])
    assert clear.mean() > 0.99


def test_graph_scores_sample_as_logits(lm: object, runs: list[dict]) -> None:
    # Seeded position sampling through the graph's scores picks what the logits path picks.
    run = runs[0]
    tokenizer = TextTokenizer.from_metadata(lm.metadata)
    lengths, _ = resolve_target_lengths(run["texts"], [None] * len(run["texts"]), [None] * len(run["texts"]),
                                        FRAME_RATE, speed=run["speed"], duration=run["duration"])
    prompts = [build_prompt(tokenizer, text, t_len, lang=lang, instruct=ins, num_codebooks=lm.num_audio_codebook,
                            mask_id=lm.audio_mask_id)
               for text, t_len, lang, ins in zip(run["texts"], lengths, run["langs"], run["instructs"])]
    batch = pack_prompts(prompts)
    config = MaskGITConfig(num_step=8, position_temperature=5.0)
    session = lm.session(batch.segments, guidance_scale=config.guidance_scale)
    via_logits = generate(session.forward, batch, config, np.random.default_rng(5), mask_id=lm.audio_mask_id)
    via_scores = generate(session.forward, batch, config, np.random.default_rng(5), mask_id=lm.audio_mask_id,
                          score=session.score)
    for x, y in zip(via_logits, via_scores):
        np.testing.assert_array_equal(x, y)


def test_scoring_session_errors(lm: object) -> None:
    with pytest.raises(ValueError, match="pairs"):
        lm.session([(10, 0, 5)], guidance_scale=2.0)
    with pytest.raises(ValueError, match="target length"):
        lm.session([(10, 0, 5), (4, 0, 4)], guidance_scale=2.0)
    plain = lm.session([(10, 0, 5), (5, 0, 5)])
    assert not plain.scores_cells
    with pytest.raises(ValueError, match="guidance_scale"):
        plain.score(*_random_step(lm, [(10, 0, 5), (5, 0, 5)], 1))
