"""Input sequences of the OmniVoice LM, as upstream ``_prepare_inference_inputs`` builds them.

A conditional prompt is, along the sequence axis (every text token repeated on all codebook
rows)::

    [<|denoise|>] <|lang_start|>LANG<|lang_end|> <|instruct_start|>INSTRUCT<|instruct_end|>
    <|text_start|>REF_TEXT TEXT<|text_end|>  [reference codes]  [target: all mask ids]

``<|denoise|>`` appears only with a reference; a missing language or instruct is written
as the word ``None``. ``audio_mask`` is true on the reference codes and the target. The
unconditional prompt of classifier-free guidance is the target window alone.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from ...chunking import HAN
from .tokenizer import TextTokenizer

__all__ = ["Prompt", "build_prompt", "combine_text"]

_LINE_BREAKS = re.compile(r"[\r\n]+")
_SPACE_RUNS = re.compile(r"[ \t]+")
# Whitespace after or before a CJK unified ideograph.
_SPACE_BY_HAN = re.compile(rf"(?<=[{HAN}])\s+|\s+(?=[{HAN}])")


def combine_text(text: str, ref_text: str | None = None) -> str:
    """Joins reference and target text and tidies whitespace as upstream ``_combine_text``.

    Line breaks are dropped, full-width parentheses become ASCII ones, runs of spaces and
    tabs collapse to one space and whitespace next to Chinese characters is removed.
    """
    joined = f"{ref_text.strip()} {text.strip()}" if ref_text else text.strip()
    joined = _LINE_BREAKS.sub("", joined)
    joined = joined.replace("\uff08", "(").replace("\uff09", ")")
    joined = _SPACE_RUNS.sub(" ", joined)
    return _SPACE_BY_HAN.sub("", joined)


@dataclass(frozen=True)
class Prompt:
    """One item's conditional LM input.

    Attributes:
        input_ids: int32 ``[num_codebooks, S]``: text ids on every row, then audio codes.
        audio_mask: bool ``[S]``: true where the column holds audio codes (or mask ids).
        target_len: Number of frames to generate; they are the last columns.
    """

    input_ids: np.ndarray
    audio_mask: np.ndarray
    target_len: int

    def __post_init__(self) -> None:
        ids, mask = self.input_ids, self.audio_mask
        if ids.ndim != 2 or mask.shape != (ids.shape[1],):
            raise ValueError(
                f"input_ids must be [C, S] and audio_mask [S], got {list(ids.shape)} and {list(mask.shape)}"
            )
        if not 1 <= self.target_len <= ids.shape[1]:
            raise ValueError(f"target_len {self.target_len} outside [1, {ids.shape[1]}]")
        if not mask[ids.shape[1] - self.target_len :].all():
            raise ValueError("audio_mask must be true on the target frames")

    @property
    def length(self) -> int:
        """Length S of the conditional sequence."""
        return self.input_ids.shape[1]

    @property
    def target_start(self) -> int:
        """Column of the first target frame."""
        return self.length - self.target_len

    def uncond(self) -> tuple[np.ndarray, np.ndarray]:
        """The unconditional sequence: the target window alone, ``(input_ids, audio_mask)``."""
        return self.input_ids[:, self.target_start :], self.audio_mask[self.target_start :]


def build_prompt(
    tokenizer: TextTokenizer,
    text: str,
    num_target_tokens: int,
    *,
    ref_text: str | None = None,
    ref_codes: np.ndarray | None = None,
    lang: str | None = None,
    instruct: str | None = None,
    denoise: bool = True,
    num_codebooks: int,
    mask_id: int,
) -> Prompt:
    """Builds the conditional input of one item.

    Args:
        tokenizer: Text tokenizer of the LM, with the prompt tokens' ids.
        text: Target text.
        num_target_tokens: Number of frames to generate.
        ref_text: Transcript of the reference audio (voice cloning).
        ref_codes: Reference audio codes ``[num_codebooks, T_ref]``, values in
            ``[0, mask_id)``.
        lang: Language id (e.g. ``"en"``), or ``None`` for language-agnostic.
        instruct: Voice-design instruction, already normalised, or ``None``.
        denoise: Prepend ``<|denoise|>`` when there is a reference.
        num_codebooks: Number of codebook rows (the LM's ``num_audio_codebook``).
        mask_id: Id of the mask token, one past the last audio code (the LM's ``audio_mask_id``).

    Returns:
        The prompt; its last ``num_target_tokens`` columns are mask ids.

    Raises:
        ValueError: On a non-positive target length or malformed reference codes.
    """
    if isinstance(num_target_tokens, bool) or int(num_target_tokens) != num_target_tokens or num_target_tokens < 1:
        raise ValueError(f"num_target_tokens must be a positive integer, got {num_target_tokens!r}")
    num_target_tokens = int(num_target_tokens)
    if ref_codes is not None:
        ref_codes = _check_codes(ref_codes, num_codebooks, mask_id)

    tok = tokenizer.special_id
    # Added tokens split the text before BPE, so each field encodes alone between its markers.
    text_ids = [tok("denoise")] if denoise and ref_codes is not None else []
    text_ids += [tok("lang_start"), *tokenizer.encode(lang or "None"), tok("lang_end")]
    text_ids += [tok("instruct_start"), *tokenizer.encode(instruct or "None"), tok("instruct_end")]
    text_ids += [tok("text_start"), *tokenizer.encode_with_nonverbal_tags(combine_text(text, ref_text)),
                 tok("text_end")]

    n_ref = 0 if ref_codes is None else ref_codes.shape[1]
    n_text = len(text_ids)
    length = n_text + n_ref + num_target_tokens
    input_ids = np.full((num_codebooks, length), mask_id, dtype=np.int32)
    input_ids[:, :n_text] = np.asarray(text_ids, dtype=np.int32)
    if ref_codes is not None:
        input_ids[:, n_text : n_text + n_ref] = ref_codes
    audio_mask = np.zeros(length, dtype=bool)
    audio_mask[n_text:] = True
    return Prompt(input_ids=input_ids, audio_mask=audio_mask, target_len=num_target_tokens)


def _check_codes(codes: np.ndarray, num_codebooks: int, mask_id: int) -> np.ndarray:
    """Validates reference codes and returns them as int32."""
    codes = np.asarray(codes)
    if codes.ndim != 2 or codes.shape[0] != num_codebooks or codes.shape[1] == 0:
        raise ValueError(f"ref_codes must have shape [{num_codebooks}, T] with T > 0, got {list(codes.shape)}")
    if not np.issubdtype(codes.dtype, np.integer):
        raise ValueError(f"ref_codes must hold integers, got dtype {codes.dtype}")
    if codes.min() < 0 or codes.max() >= mask_id:
        raise ValueError(f"ref_codes values must lie in [0, {mask_id}), got [{codes.min()}, {codes.max()}]")
    return codes.astype(np.int32)
