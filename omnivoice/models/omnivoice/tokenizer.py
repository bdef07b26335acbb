"""Text tokenizer of the OmniVoice LM, rebuilt from the vocabulary stored in its GGUF.

OmniVoice uses Qwen3's byte-level BPE plus a few added tokens (``<|denoise|>``,
``<|lang_start|>``, ...). The LM GGUF stores every id's token string, its type and the BPE
merges (llama.cpp's ``tokenizer.ggml.*`` keys); from those this module rebuilds a
``tokenizers.Tokenizer`` that behaves as Hugging Face's Qwen2 tokenizer: NFC normalisation,
Qwen2's split regex, byte-level mapping without a prefix space, added tokens matched first.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from typing import Any

import gguf
from tokenizers import AddedToken, Regex, Tokenizer, decoders, normalizers, pre_tokenizers
from tokenizers.models import BPE

from ..._core import ModelFormatError

__all__ = ["NONVERBAL_TAGS", "TextTokenizer"]

# Qwen2's pre-tokenizer split pattern (contractions, letter runs, single digits, symbol
# runs, newlines, whitespace).
_QWEN2_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)

# llama.cpp token types (gguf-py ``TokenType``).
_TYPE_NORMAL = 1
_TYPE_UNKNOWN = 2
_TYPE_CONTROL = 3
_TYPE_USER_DEFINED = 4
_TYPE_UNUSED = 5
_TYPE_BYTE = 6

_KEY_MODEL = "tokenizer.ggml.model"
_KEY_PRE = "tokenizer.ggml.pre"
_KEY_TOKENS = "tokenizer.ggml.tokens"
_KEY_TYPES = "tokenizer.ggml.token_type"
_KEY_MERGES = "tokenizer.ggml.merges"
# Ids of the prompt's added tokens (``<|lang_start|>`` ...), keyed by name (``lang_start``).
_KEY_SPECIAL = "omnivoice.special."

# Non-verbal tags the model was trained on (``[laughter]`` ...). Upstream tokenises each tag
# on its own so its ids never depend on the neighbouring text.
NONVERBAL_TAGS: tuple[str, ...] = (
    "laughter",
    "sigh",
    "confirmation-en",
    "question-en",
    "question-ah",
    "question-oh",
    "question-ei",
    "question-yi",
    "surprise-ah",
    "surprise-oh",
    "surprise-wa",
    "surprise-yo",
    "dissatisfaction-hnn",
)
_NONVERBAL_RE = re.compile(r"\[(?:" + "|".join(re.escape(t) for t in NONVERBAL_TAGS) + r")\]")


def _derive_token_types(tokens: Sequence[str], merges: Sequence[str]) -> list[int]:
    """Token types for a GGUF without ``tokenizer.ggml.token_type`` (omnivoice.cpp's LM files).

    In byte-level BPE every vocabulary token is one of the 256 byte symbols or the result of a
    merge; any other token is an added one (Qwen's ``<|endoftext|>`` ..., OmniVoice's
    ``<|denoise|>`` ...). Added tokens are marked control: encoding matches them whole either way
    (ours are never normalised), so ids are those of the typed file.
    """
    normal = set(pre_tokenizers.ByteLevel.alphabet())
    normal.update(m.replace(" ", "", 1) for m in merges)
    return [_TYPE_NORMAL if t in normal else _TYPE_CONTROL for t in tokens]


class TextTokenizer:
    """Byte-level BPE tokenizer of the OmniVoice LM.

    Args:
        tokens: Token string of every id (byte-level alphabet, added tokens included).
        token_types: llama.cpp type of every id: 1 normal, 3 control (added, special),
            4 user-defined (added, not special), 5 unused (skipped).
        merges: BPE merges as ``"left right"`` strings, highest priority first.
        special_ids: Ids of the prompt's added tokens by name (``denoise``, ``lang_start``,
            ``lang_end``, ``instruct_start``, ``instruct_end``, ``text_start``, ``text_end``),
            as the GGUF's ``omnivoice.special.*`` keys give them.

    Raises:
        ValueError: If the arrays disagree in length or hold an unknown token type.
    """

    def __init__(self, tokens: Sequence[str], token_types: Sequence[int], merges: Sequence[str],
                 special_ids: Mapping[str, int] | None = None) -> None:
        self.special_ids: dict[str, int] = dict(special_ids or {})
        if len(tokens) != len(token_types):
            raise ValueError(f"tokenizer has {len(tokens)} tokens but {len(token_types)} token types")
        vocab: dict[str, int] = {}
        added: list[tuple[int, AddedToken]] = []
        for idx, (text, kind) in enumerate(zip(tokens, token_types)):
            kind = int(kind)
            if kind in (_TYPE_NORMAL, _TYPE_UNKNOWN, _TYPE_BYTE):
                vocab[text] = idx
            elif kind in (_TYPE_CONTROL, _TYPE_USER_DEFINED):
                added.append((idx, AddedToken(text, special=kind == _TYPE_CONTROL, normalized=False)))
            elif kind != _TYPE_UNUSED:
                raise ValueError(f"token {idx} ({text!r}) has unknown token type {kind}")
        pairs = []
        for merge in merges:
            left, sep, right = merge.partition(" ")
            if not sep or not left or not right:
                raise ValueError(f"malformed BPE merge {merge!r}: expected 'left right'")
            pairs.append((left, right))

        try:
            model = BPE(vocab=vocab, merges=pairs, fuse_unk=False, byte_fallback=False)
        except Exception as err:  # tokenizers raises a bare Exception for a merge of unknown tokens
            raise ValueError(f"invalid tokenizer in the GGUF metadata: {err}") from None
        tok = Tokenizer(model)
        tok.normalizer = normalizers.NFC()
        tok.pre_tokenizer = pre_tokenizers.Sequence(
            [
                pre_tokenizers.Split(Regex(_QWEN2_SPLIT), behavior="isolated", invert=False),
                pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
            ]
        )
        tok.decoder = decoders.ByteLevel()
        # tokenizers assigns added tokens the next free ids, so add them in id order and
        # check that each lands on the id the GGUF gives it.
        for idx, token in added:
            if token.special:
                tok.add_special_tokens([token])
            else:
                tok.add_tokens([token])
            got = tok.token_to_id(token.content)
            if got != idx:
                raise ValueError(f"added token {token.content!r} got id {got}, expected {idx}")
        self._tokenizer = tok
        self.vocab_size = len(tokens)

    @classmethod
    def from_metadata(cls, metadata: Mapping[str, Any]) -> TextTokenizer:
        """Builds the tokenizer from GGUF metadata values keyed by their GGUF keys.

        Raises:
            ValueError: If a key is missing or the tokenizer is not Qwen2 byte-level BPE.
        """
        missing = [k for k in (_KEY_TOKENS, _KEY_MERGES) if k not in metadata]
        if missing:
            raise ValueError(f"GGUF metadata lacks the tokenizer keys {missing}")
        model = metadata.get(_KEY_MODEL, "gpt2")
        pre = metadata.get(_KEY_PRE, "qwen2")
        if model != "gpt2" or pre != "qwen2":
            raise ValueError(
                f"unsupported tokenizer {_KEY_MODEL}={model!r} {_KEY_PRE}={pre!r}; expected 'gpt2' and 'qwen2'"
            )
        special = {k[len(_KEY_SPECIAL):]: int(v) for k, v in metadata.items() if k.startswith(_KEY_SPECIAL)}
        tokens, merges = metadata[_KEY_TOKENS], metadata[_KEY_MERGES]
        types = metadata.get(_KEY_TYPES) or _derive_token_types(tokens, merges)
        return cls(tokens, types, merges, special)

    @classmethod
    def from_gguf(cls, path: str | os.PathLike[str]) -> TextTokenizer:
        """Builds the tokenizer from the metadata of an OmniVoice LM GGUF file.

        Raises:
            FileNotFoundError: If ``path`` does not exist.
            ModelFormatError: If the file is not a GGUF.
            ValueError: If it lacks the tokenizer keys.
        """
        try:
            fields = gguf.GGUFReader(path).fields
        except ValueError as err:
            raise ModelFormatError(f"{path} is not a GGUF file: {err}") from None
        return cls.from_metadata({name: field.contents() for name, field in fields.items()})

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text``; added tokens written in the text map to their ids."""
        return self._tokenizer.encode(text, add_special_tokens=False).ids

    def encode_with_nonverbal_tags(self, text: str) -> list[int]:
        """Token ids of ``text`` with every non-verbal tag (``[laughter]`` ...) tokenised alone.

        The text between tags and each tag are encoded separately and concatenated, so BPE
        merges never cross a tag boundary.
        """
        pieces: list[str] = []
        pos = 0
        for match in _NONVERBAL_RE.finditer(text):
            pieces.append(text[pos : match.start()])
            pieces.append(match.group())
            pos = match.end()
        pieces.append(text[pos:])
        return [i for piece in pieces if piece for i in self.encode(piece)]

    def token_to_id(self, token: str) -> int:
        """Id of one token string (e.g. ``"<|text_start|>"``).

        Raises:
            ValueError: If the vocabulary has no such token.
        """
        idx = self._tokenizer.token_to_id(token)
        if idx is None:
            raise ValueError(f"token {token!r} is not in the vocabulary")
        return idx

    def special_id(self, name: str) -> int:
        """Id of the prompt token ``name`` (``"lang_start"`` ...), from the GGUF.

        Raises:
            ValueError: If the tokenizer was built without that id.
        """
        if name not in self.special_ids:
            raise ValueError(f"the LM GGUF lacks {_KEY_SPECIAL}{name}")
        return self.special_ids[name]

    def decode(self, ids: Sequence[int]) -> str:
        """Text of token ids, added tokens included."""
        return self._tokenizer.decode(list(ids), skip_special_tokens=False)
