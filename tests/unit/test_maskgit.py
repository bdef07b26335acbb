"""numpy MaskGIT decoding against upstream ``_generate_iterative`` and its helpers.

Expected values: tests/data/fixtures/python_maskgit.json and python_scoring.npz, written by
tests/reference/dump_python_fixtures.py from upstream omnivoice 0.2.1; the decoding runs
use the deterministic fake LM of tests/unit/fake_lm.py on both sides.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

from omnivoice.models.omnivoice.maskgit import (
    MaskGITConfig,
    filter_top_k,
    generate,
    guided_log_probs,
    pack_prompts,
    sample_tokens,
    time_steps,
    unmask_schedule,
)
from omnivoice.models.omnivoice.prompt import Prompt

TESTS = Path(__file__).parent
FIXTURES = Path(__file__).parents[1] / "data" / "fixtures"
MASK_ID = 1024
VOCAB = 1025

_spec = importlib.util.spec_from_file_location("fake_lm", TESTS / "fake_lm.py")
fake_lm = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(fake_lm)


@pytest.fixture(scope="module")
def ref() -> dict:
    with open(FIXTURES / "python_maskgit.json", encoding="utf-8") as f:
        return json.load(f)


def greedy(**kwargs: float) -> MaskGITConfig:
    return MaskGITConfig(position_temperature=0.0, class_temperature=0.0, **kwargs)


def test_time_steps_bitwise(ref: dict) -> None:
    for key, expected in ref["time_steps"].items():
        shift, n = key.split("|")
        got = time_steps(int(n), float(shift))
        assert got.dtype == np.float32
        np.testing.assert_array_equal(got, np.array(expected, dtype=np.float32), err_msg=key)


def test_unmask_counts(ref: dict) -> None:
    for case in ref["schedules"]:
        times = time_steps(case["num_step"], case["t_shift"])
        for i, t_len in enumerate(case["target_lens"]):
            expected = [step[i] for step in case["counts"]]
            assert unmask_schedule(t_len, 8, times) == expected, (case["num_step"], case["t_shift"], t_len)


@pytest.mark.parametrize("guidance", [0.0, 2.0, 3.5])
def test_scoring_greedy(guidance: float) -> None:
    ref = np.load(FIXTURES / "python_scoring.npz")
    c = fake_lm.hashed_values((1, 8, 12, VOCAB), 1)
    u = fake_lm.hashed_values((1, 8, 12, VOCAB), 2)
    log_probs = guided_log_probs(c, u, guidance, MASK_ID)
    tokens, scores = sample_tokens(log_probs, 0.0, None), log_probs.max(axis=-1)
    np.testing.assert_array_equal(tokens, ref[f"tokens_g{guidance}"])
    np.testing.assert_allclose(scores, ref[f"scores_g{guidance}"], rtol=1e-5, atol=1e-5)


def test_filter_top_k() -> None:
    ref = np.load(FIXTURES / "python_scoring.npz")
    c = fake_lm.hashed_values((1, 8, 12, VOCAB), 1)
    kept = np.isfinite(filter_top_k(c))
    expected = np.unpackbits(ref["top_k_kept"], axis=-1, count=int(ref["top_k_shape"][-1])).astype(bool)
    np.testing.assert_array_equal(kept, expected)
    assert kept.sum(axis=-1).min() == 103  # ceil(0.1 * 1025)


def _prompts(run: dict) -> list[Prompt]:
    return [
        Prompt(np.array(it["prompt_ids"], dtype=np.int32), np.array(it["prompt_audio_mask"]), it["target_len"])
        for it in run["items"]
    ]


def numpy_score(forward, batch, guidance: float):
    """The cell scoring the LM's graph does (maskgit.Score), computed here from ``forward``'s logits."""
    per_item = 2 if batch.guided else 1
    starts = np.cumsum([0] + [s[2] for s in batch.segments])

    def score(ids: np.ndarray, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        logits = forward(ids, mask)
        out = []
        for c in range(0, len(batch.segments), per_item):
            u = logits[starts[c + 1] : starts[c + 2]] if batch.guided else None
            log_probs = guided_log_probs(logits[starts[c] : starts[c + 1]], u, guidance, MASK_ID)
            out.append((log_probs.max(axis=-1), log_probs.argmax(axis=-1)))
        return np.concatenate([o[0] for o in out]), np.concatenate([o[1] for o in out])

    return score


@pytest.mark.parametrize("scored", [False, True], ids=["logits", "scores"])
def test_greedy_runs_equal_upstream(ref: dict, scored: bool) -> None:
    for run in ref["runs"]:
        config = greedy(**run["config"])
        batch = pack_prompts(_prompts(run), guided=config.guidance_scale != 0)
        forward = fake_lm.packed_forward(batch.segments, VOCAB)
        score = numpy_score(forward, batch, config.guidance_scale) if scored else None
        tokens = generate(forward, batch, config, np.random.default_rng(0), mask_id=MASK_ID, score=score)
        for got, item in zip(tokens, run["items"]):
            np.testing.assert_array_equal(got, np.array(item["tokens"]), err_msg=item["text"])


def test_greedy_uses_no_randomness(ref: dict) -> None:
    run = ref["runs"][0]
    batch = pack_prompts(_prompts(run))
    forward = fake_lm.packed_forward(batch.segments, VOCAB)
    a = generate(forward, batch, greedy(**run["config"]), np.random.default_rng(1), mask_id=MASK_ID)
    b = generate(forward, batch, greedy(**run["config"]), np.random.default_rng(2), mask_id=MASK_ID)
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)


def test_guided_batch_with_zero_guidance_matches_unguided(ref: dict) -> None:
    run = ref["runs"][0]
    config = greedy(**{**run["config"], "guidance_scale": 0.0})
    outs = []
    for guided in (True, False):
        batch = pack_prompts(_prompts(run), guided=guided)
        outs.append(generate(fake_lm.packed_forward(batch.segments, VOCAB), batch, config, np.random.default_rng(0),
                             mask_id=MASK_ID))
    for x, y in zip(*outs):
        np.testing.assert_array_equal(x, y)


def test_batching_equals_one_by_one(ref: dict) -> None:
    # Sampling draws per item in order, so only greedy decoding is batch-invariant.
    run = ref["runs"][0]
    prompts = _prompts(run)
    config = greedy(**run["config"])
    batch = pack_prompts(prompts)
    together = generate(fake_lm.packed_forward(batch.segments, VOCAB), batch, config, np.random.default_rng(0),
                        mask_id=MASK_ID)
    for p, expected in zip(prompts, together):
        single = pack_prompts([p])
        alone = generate(fake_lm.packed_forward(single.segments, VOCAB), single, config, np.random.default_rng(0),
                         mask_id=MASK_ID)
        np.testing.assert_array_equal(alone[0], expected)


def test_sampling_is_seeded_and_complete(ref: dict) -> None:
    run = ref["runs"][0]
    batch = pack_prompts(_prompts(run))
    forward = fake_lm.packed_forward(batch.segments, VOCAB)
    config = MaskGITConfig(num_step=8, position_temperature=5.0, class_temperature=0.8)
    a = generate(forward, batch, config, np.random.default_rng(7), mask_id=MASK_ID)
    b = generate(forward, batch, config, np.random.default_rng(7), mask_id=MASK_ID)
    c = generate(forward, batch, config, np.random.default_rng(8), mask_id=MASK_ID)
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)
    assert any((x != z).any() for x, z in zip(a, c))
    for x, item in zip(a, run["items"]):
        assert x.shape == (8, item["target_len"]) and x.min() >= 0 and x.max() < MASK_ID


def test_scores_path_draws_as_logits_path(ref: dict) -> None:
    # Same cells, tokens and random draws whether MaskGIT gets logits or per-cell scores.
    run = ref["runs"][0]
    batch = pack_prompts(_prompts(run))
    forward = fake_lm.packed_forward(batch.segments, VOCAB)
    config = MaskGITConfig(num_step=8, position_temperature=5.0)
    via_logits = generate(forward, batch, config, np.random.default_rng(3), mask_id=MASK_ID)
    via_scores = generate(forward, batch, config, np.random.default_rng(3), mask_id=MASK_ID,
                          score=numpy_score(forward, batch, 2.0))
    for x, y in zip(via_logits, via_scores):
        np.testing.assert_array_equal(x, y)


def test_class_temperature_needs_logits(ref: dict) -> None:
    run = ref["runs"][0]
    batch = pack_prompts(_prompts(run))

    def score(ids: np.ndarray, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        raise AssertionError("a sampled token needs the whole distribution")

    config = MaskGITConfig(num_step=4, class_temperature=0.5)
    generate(fake_lm.packed_forward(batch.segments, VOCAB), batch, config, np.random.default_rng(0), mask_id=MASK_ID,
             score=score)


def test_class_temperature_samples_within_top_k() -> None:
    logits = fake_lm.hashed_values((400, VOCAB), 5)
    log_probs = guided_log_probs(logits, None, 0.0, MASK_ID)
    tokens = sample_tokens(log_probs, 1.0, np.random.default_rng(0))
    kept = np.isfinite(filter_top_k(log_probs))
    assert not kept[:, MASK_ID].any()
    assert kept[np.arange(400), tokens].all()
    assert (tokens != logits.argmax(-1)).any()  # it does sample


def _toy_batch() -> tuple:
    ids = np.full((8, 6), MASK_ID, np.int32)
    ids[:, :2] = 7
    mask = np.array([False, False, True, True, True, True])
    batch = pack_prompts([Prompt(ids, mask, 4)])
    return batch, sum(s[2] for s in batch.segments)


@pytest.mark.parametrize(
    ("extra_rows", "codebooks", "vocab", "fill", "match"),
    [
        (1, 8, VOCAB, 0.0, "shape"),
        (0, 7, VOCAB, 0.0, "shape"),
        (0, 8, MASK_ID, 0.0, "shape"),
        (0, 8, VOCAB, np.nan, "non-finite"),
    ],
)
def test_bad_forward_output(extra_rows: int, codebooks: int, vocab: int, fill: float, match: str) -> None:
    batch, rows = _toy_batch()

    def forward(ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        return np.full((rows + extra_rows, codebooks, vocab), fill, np.float32)

    with pytest.raises(ValueError, match=match):
        generate(forward, batch, MaskGITConfig(num_step=2), np.random.default_rng(0), mask_id=MASK_ID)


@pytest.mark.parametrize(("rows", "fill", "match"), [(3, 0.0, "shape"), (4, np.nan, "non-finite")])
def test_bad_score_output(rows: int, fill: float, match: str) -> None:
    batch, _ = _toy_batch()

    def score(ids: np.ndarray, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return np.full((rows, 8), fill, np.float32), np.zeros((rows, 8), np.int32)

    with pytest.raises(ValueError, match=match):
        generate(None, batch, MaskGITConfig(num_step=2), np.random.default_rng(0), mask_id=MASK_ID, score=score)


def test_bad_config_and_arguments() -> None:
    for kwargs in ({"num_step": 0}, {"t_shift": 0.0}, {"position_temperature": -1.0}, {"guidance_scale": float("nan")}):
        with pytest.raises(ValueError):
            MaskGITConfig(**kwargs)
    batch, _ = _toy_batch()
    forward = fake_lm.packed_forward(batch.segments, VOCAB)
    with pytest.raises(ValueError, match="numpy.random.Generator"):
        generate(forward, batch, MaskGITConfig(), 0, mask_id=MASK_ID)
    unguided = pack_prompts([Prompt(batch.input_ids[:, :6], batch.audio_mask[:6], 4)], guided=False)
    with pytest.raises(ValueError, match="guided=True"):
        generate(forward, unguided, MaskGITConfig(), np.random.default_rng(0), mask_id=MASK_ID)
    with pytest.raises(ValueError, match="no prompts"):
        pack_prompts([])


def test_packing_matches_upstream_batch() -> None:
    # Upstream's padded 2-item batch (rows 0..1 cond, 2..3 uncond), from the reference
    # helper's lm_logits.npz: our packed segments must hold the same rows, unpadded.
    ref = np.load(FIXTURES / "lm_logits.npz")
    ids, mask, attn = ref["batch2_input_ids"], ref["batch2_audio_mask"], ref["batch2_attention_mask"]
    n_items = ids.shape[0] // 2
    lengths = attn[:, 0].sum(axis=-1)  # row 0 of every segment is a real position
    prompts = [
        Prompt(ids[i, :, : lengths[i]], mask[i, : lengths[i]], int(lengths[n_items + i])) for i in range(n_items)
    ]
    batch = pack_prompts(prompts)
    start = 0
    for row, (length, target_start, target_len) in zip([0, 2, 1, 3], batch.segments):
        assert length == lengths[row]
        np.testing.assert_array_equal(batch.input_ids[:, start : start + length], ids[row, :, :length])
        np.testing.assert_array_equal(batch.audio_mask[start : start + length], mask[row, :length])
        assert target_start + target_len == length
        start += length
