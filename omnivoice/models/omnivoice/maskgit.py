"""Iterative masked decoding (MaskGIT) of OmniVoice, in numpy.

This mirrors upstream ``OmniVoice._generate_iterative``: every target frame starts as the
mask id on all codebooks; each of ``num_step`` steps runs the LM once on the conditional
and unconditional sequences of every item, combines their log-probabilities with
classifier-free guidance, and commits the most confident still-masked (codebook, frame)
cells. How many cells a step commits follows a shifted time schedule; earlier codebooks
are favoured by a per-layer penalty, and Gumbel noise can randomise the choice of cells
(``position_temperature``) and of tokens (``class_temperature``).

The LM is reached through a callable ``forward(input_ids, audio_mask) -> logits``
(``input_ids`` int32 ``[C, L]``, ``audio_mask`` bool ``[L]``, logits float32
``[sum of target lengths, C, V]``) over the packed segments of :class:`PackedBatch`; a
session of the C++ LM opened with ``PackedBatch.segments`` provides it. Such a session opened
with a guidance scale also scores the cells in its graph (``score(input_ids, audio_mask) ->
(confidence, token)``, see :data:`Score`): greedy token choice then needs two numbers per cell
instead of the logits.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from .prompt import Prompt

__all__ = [
    "MaskGITConfig",
    "Score",
    "PackedBatch",
    "filter_top_k",
    "generate",
    "guided_log_probs",
    "gumbel_sample",
    "pack_prompts",
    "sample_tokens",
    "time_steps",
    "unmask_schedule",
]

Forward = Callable[[np.ndarray, np.ndarray], np.ndarray]
# score(input_ids, audio_mask) -> (confidence float32, token int) ``[sum of the items' target
# lengths, C]``, items in order: per target frame and codebook the max and the argmax of
# guided_log_probs over the item's cond (and uncond) logits.
Score = Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]

# Share of the vocabulary kept when sampling a token with a class temperature.
_TOP_K_RATIO = 0.1
# Keeps the logs of the Gumbel noise finite.
_GUMBEL_EPS = 1e-10


@dataclass
class MaskGITConfig:
    """Decoding options, with upstream ``OmniVoiceGenerationConfig``'s defaults.

    Attributes:
        num_step: Number of LM passes.
        guidance_scale: Classifier-free guidance scale; 0 disables guidance.
        t_shift: Time-step shift; below 1 commits few cells early and many late.
        layer_penalty_factor: Score penalty per codebook index (earlier codebooks first).
        position_temperature: Gumbel temperature of the choice of cells; 0 is greedy.
        class_temperature: Gumbel temperature of the token choice; 0 is greedy.
    """

    num_step: int = 32
    guidance_scale: float = 2.0
    t_shift: float = 0.1
    layer_penalty_factor: float = 5.0
    position_temperature: float = 5.0
    class_temperature: float = 0.0

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        """Raises ValueError for an out-of-range option: at construction, and again where a
        request starts (``OmniVoice.generate``), after any change to the fields."""
        if isinstance(self.num_step, bool) or not isinstance(self.num_step, (int, np.integer)) or self.num_step < 1:
            raise ValueError(f"num_step must be a positive integer, got {self.num_step!r}")
        for name in ("guidance_scale", "layer_penalty_factor"):
            if not math.isfinite(getattr(self, name)):
                raise ValueError(f"{name} must be finite, got {getattr(self, name)!r}")
        if not (math.isfinite(self.t_shift) and self.t_shift > 0):
            raise ValueError(f"t_shift must be a positive finite number, got {self.t_shift!r}")
        for name in ("position_temperature", "class_temperature"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value >= 0):
                raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")


def time_steps(num_step: int, t_shift: float) -> np.ndarray:
    """The ``num_step + 1`` shifted times from 0 to 1 (upstream ``_get_time_steps``).

    Computed in float32 exactly as PyTorch does on the CPU, because the unmask counts
    round up products of these values: ``linspace`` rounds ``start + step * i`` (first
    half) and ``end - step * (n - 1 - i)`` (second half) once, as a fused multiply-add,
    then ``t' = s t / (1 + (s - 1) t)``.
    """
    n = num_step + 1
    step = np.float64(np.float32(1.0) / np.float32(num_step))
    i = np.arange(n, dtype=np.float64)
    # float32 * small integer is exact in float64, so one rounding to float32 = the FMA.
    t = np.where(i < n // 2, step * i, 1.0 - step * (n - 1 - i)).astype(np.float32)
    shift = np.float32(t_shift)
    return (shift * t) / (np.float32(1.0) + np.float32(t_shift - 1.0) * t)


def unmask_schedule(target_len: int, num_codebooks: int, times: np.ndarray) -> list[int]:
    """Cells committed at each step: ``ceil(total * dt)``, the remainder at the last step."""
    total = target_len * num_codebooks
    left = total
    counts = []
    bounds = [float(t) for t in times]
    for step in range(len(bounds) - 1):
        if step == len(bounds) - 2:
            count = left
        else:
            count = min(math.ceil(total * (bounds[step + 1] - bounds[step])), left)
        counts.append(count)
        left -= count
    return counts


def _log_softmax(x: np.ndarray) -> np.ndarray:
    """log_softmax over the last axis, float32."""
    shifted = x - x.max(axis=-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


def filter_top_k(logits: np.ndarray, ratio: float = _TOP_K_RATIO) -> np.ndarray:
    """Keeps the ``ceil(ratio * V)`` largest values of each row; the rest become -inf."""
    k = math.ceil(ratio * logits.shape[-1])
    kept = np.argpartition(logits, logits.shape[-1] - k, axis=-1)[..., -k:]
    out = np.full_like(logits, -np.inf)
    np.put_along_axis(out, kept, np.take_along_axis(logits, kept, axis=-1), axis=-1)
    return out


def gumbel_sample(logits: np.ndarray, temperature: float, rng: np.random.Generator) -> np.ndarray:
    """``logits / temperature`` plus standard Gumbel noise (argmax of it samples softmax)."""
    u = rng.random(logits.shape, dtype=np.float32)
    noise = -np.log(-np.log(u + np.float32(_GUMBEL_EPS)) + np.float32(_GUMBEL_EPS))
    return logits / np.float32(temperature) + noise


def guided_log_probs(
    c_logits: np.ndarray, u_logits: np.ndarray | None, guidance_scale: float, mask_id: int
) -> np.ndarray:
    """Log-probabilities of each row after classifier-free guidance, mask id excluded.

    With :func:`sample_tokens` this is upstream ``_predict_tokens_with_scoring``; the
    confidence of a row is its largest log-probability, whatever token is sampled.

    With guidance they are ``log_softmax(c + g * (c - u))`` of the log-softmaxed
    conditional ``c`` and unconditional ``u`` logits, computed in float32 in upstream's
    order; without, ``log_softmax(c)``.
    """
    log_probs = _log_softmax(np.asarray(c_logits, dtype=np.float32))
    if guidance_scale != 0:
        u_log_probs = _log_softmax(np.asarray(u_logits, dtype=np.float32))
        log_probs = _log_softmax(log_probs + np.float32(guidance_scale) * (log_probs - u_log_probs))
    log_probs[..., mask_id] = -np.inf
    return log_probs


def sample_tokens(log_probs: np.ndarray, class_temperature: float, rng: np.random.Generator | None) -> np.ndarray:
    """Token of each row: the argmax, or with a temperature a Gumbel sample among the top 10%.

    Raises:
        ValueError: If ``class_temperature`` > 0 and ``rng`` is ``None``.
    """
    if class_temperature <= 0:
        return log_probs.argmax(axis=-1)
    if rng is None:
        raise ValueError("class_temperature > 0 needs a random generator")
    return gumbel_sample(filter_top_k(log_probs), class_temperature, rng).argmax(axis=-1)


@dataclass(frozen=True)
class PackedBatch:
    """Conditional and unconditional sequences of a batch, packed along one axis.

    Attributes:
        input_ids: int32 ``[C, L]``, the segments one after another.
        audio_mask: bool ``[L]``.
        segments: ``(length, target_start, target_len)`` of each segment, ``target_start``
            relative to the segment: per item its conditional segment, then (with guidance)
            its unconditional one.
        target_lens: Target length of each item.
        guided: Whether unconditional segments are present.
    """

    input_ids: np.ndarray
    audio_mask: np.ndarray
    segments: list[tuple[int, int, int]]
    target_lens: list[int]
    guided: bool


def pack_prompts(prompts: Sequence[Prompt], guided: bool = True) -> PackedBatch:
    """Packs the prompts of a batch, each followed by its unconditional segment if ``guided``.

    Upstream pads the items to a common length instead; as padded positions attend only
    to themselves and positions restart per row, the packed logits are the same.

    Raises:
        ValueError: If ``prompts`` is empty or the prompts differ in codebook count.
    """
    if not prompts:
        raise ValueError("no prompts to pack")
    num_codebooks = prompts[0].input_ids.shape[0]
    ids, masks, segments = [], [], []
    for p in prompts:
        if p.input_ids.shape[0] != num_codebooks:
            raise ValueError(f"prompts have {num_codebooks} and {p.input_ids.shape[0]} codebook rows")
        ids.append(p.input_ids)
        masks.append(p.audio_mask)
        segments.append((p.length, p.target_start, p.target_len))
        if guided:
            u_ids, u_mask = p.uncond()
            ids.append(u_ids)
            masks.append(u_mask)
            segments.append((p.target_len, 0, p.target_len))
    return PackedBatch(
        input_ids=np.concatenate(ids, axis=1).astype(np.int32),
        audio_mask=np.concatenate(masks),
        segments=segments,
        target_lens=[p.target_len for p in prompts],
        guided=guided,
    )


def generate(
    forward: Forward,
    batch: PackedBatch,
    config: MaskGITConfig,
    rng: np.random.Generator,
    *,
    mask_id: int,
    score: Score | None = None,
) -> list[np.ndarray]:
    """Decodes the target frames of every item of ``batch``.

    Args:
        forward: LM over ``batch.segments``: ``(input_ids [C, L], audio_mask [L])`` to
            float32 logits ``[sum of target lengths, C, V]`` in segment order.
        batch: Packed prompts; must be ``guided`` unless ``config.guidance_scale`` is 0.
        config: Decoding options.
        rng: Source of all randomness; greedy decoding (both temperatures 0) uses none.
        mask_id: Vocabulary index of the mask token (the LM's ``audio_mask_id``).
        score: The same LM scoring cells itself (:data:`Score`, with ``config.guidance_scale``);
            called instead of ``forward`` when ``class_temperature`` is 0, the only case where
            a cell needs no more than its confidence and best token. The cells chosen and the
            random draws are the same as through ``forward``.

    Returns:
        int32 codes ``[C, target_len]`` of each item.

    Raises:
        ValueError: If the batch does not fit the config or ``forward`` returns logits of
            the wrong shape or non-finite values.
    """
    if not isinstance(rng, np.random.Generator):
        raise ValueError(f"rng must be a numpy.random.Generator, got {type(rng).__name__}")
    if config.guidance_scale != 0 and not batch.guided:
        raise ValueError("guidance_scale != 0 needs a batch packed with guided=True")
    num_codebooks = batch.input_ids.shape[0]
    input_ids = batch.input_ids.copy()
    seg_starts = np.cumsum([0] + [s[0] for s in batch.segments])
    logit_starts = np.cumsum([0] + [s[2] for s in batch.segments])
    # Per item: first target column in the packed input and first logits row, of the
    # conditional segment and (with guidance) of the unconditional one.
    per_item = 2 if batch.guided else 1
    windows = []
    for c in range(0, len(batch.segments), per_item):
        cond = (int(seg_starts[c]) + batch.segments[c][1], int(logit_starts[c]))
        uncond = (int(seg_starts[c + 1]), int(logit_starts[c + 1])) if batch.guided else (None, None)
        windows.append(cond + uncond)

    times = time_steps(config.num_step, config.t_shift)
    schedules = [unmask_schedule(t, num_codebooks, times) for t in batch.target_lens]
    tokens = [np.full((num_codebooks, t), mask_id, dtype=np.int32) for t in batch.target_lens]
    layer_penalty = np.arange(num_codebooks, dtype=np.float32) * np.float32(config.layer_penalty_factor)
    expected_rows = int(logit_starts[-1])
    scored = score is not None and config.class_temperature <= 0
    score_starts = np.cumsum([0] + list(batch.target_lens))  # first row of each item in score()'s output

    for step in range(config.num_step):
        if not any(s[step] for s in schedules):
            continue  # nothing to commit: the LM pass would change nothing
        if scored:
            confidence, best = score(input_ids, batch.audio_mask)
            if confidence.shape != (score_starts[-1], num_codebooks) or best.shape != confidence.shape:
                raise ValueError(
                    f"score returned shapes {list(confidence.shape)} and {list(best.shape)}, expected "
                    f"[{score_starts[-1]}, {num_codebooks}]"
                )
            # A NaN or +inf logit makes its cell's log-probabilities, hence its max, NaN.
            if not np.isfinite(confidence).all():
                raise ValueError(f"score returned non-finite confidences at step {step}")
        else:
            logits = np.asarray(forward(input_ids, batch.audio_mask))
            if logits.ndim != 3 or logits.shape[:2] != (expected_rows, num_codebooks) or logits.shape[2] <= mask_id:
                raise ValueError(
                    f"forward returned logits of shape {list(logits.shape)}, expected "
                    f"[{expected_rows}, {num_codebooks}, V > {mask_id}]"
                )
            if not np.isfinite(logits).all():
                raise ValueError(f"forward returned non-finite logits at step {step}")

        for i, t_len in enumerate(batch.target_lens):
            k = schedules[i][step]
            if k == 0:
                continue
            col, c_row, u_col, u_row = windows[i]
            item = tokens[i]
            masked = item == mask_id  # [C, T]
            cb, frame = np.nonzero(masked)
            # Logits rows are [T, C, V]; only still-masked cells can be committed.
            if scored:
                rows = score_starts[i] + frame
                scores = confidence[rows, cb] - layer_penalty[cb]
            else:
                log_probs = guided_log_probs(
                    logits[c_row + frame, cb],
                    None if u_row is None else logits[u_row + frame, cb],
                    config.guidance_scale,
                    mask_id,
                )
                scores = log_probs.max(axis=-1) - layer_penalty[cb]
            if config.position_temperature > 0:
                scores = gumbel_sample(scores, config.position_temperature, rng)
            # Cells are listed in upstream's [C, T] order; exact ties go to the lower index.
            chosen = np.argsort(-scores, kind="stable")[:k]
            if scored:
                item[cb[chosen], frame[chosen]] = best[rows[chosen], cb[chosen]]
            else:
                item[cb[chosen], frame[chosen]] = sample_tokens(log_probs[chosen], config.class_temperature, rng)
            input_ids[:, col : col + t_len] = item
            if u_col is not None:
                input_ids[:, u_col : u_col + t_len] = item
    return tokens
