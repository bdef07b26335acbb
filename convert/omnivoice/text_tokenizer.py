"""The text tokenizer of the snapshot (``tokenizer.json``) as GGUF vocabulary arrays."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from gguf import TokenType

from ..checkpoint import read_json

__all__ = ["TextVocab", "read_text_vocab"]


@dataclass(frozen=True)
class TextVocab:
    """Byte-level BPE vocabulary: ``tokens[i]`` is the string of id ``i``."""

    tokens: list[str]
    token_types: list[int]
    merges: list[str]
    ids: dict[str, int]
    eos_id: int | None
    pad_id: int | None


def _special_name(value: object, key: str, path: Path) -> str | None:
    # tokenizer_config.json writes a special token as a string or as {"content": ...}.
    if value is None:
        return None
    if isinstance(value, dict):
        value = value.get("content")
    if not isinstance(value, str):
        raise ValueError(f"{path}: field {key!r} is not a token string")
    return value


def read_text_vocab(model_dir: Path) -> TextVocab:
    """Reads ``tokenizer.json`` and ``tokenizer_config.json`` from ``model_dir``.

    Tokens of ``added_tokens`` get type CONTROL when special, USER_DEFINED otherwise; every
    other token is NORMAL. ``eos_token``/``pad_token`` of the config are optional.

    Raises:
        FileNotFoundError: a file is missing.
        ValueError: the tokenizer is not a BPE model, its ids have gaps, or a field is missing.
    """
    tok_path = model_dir / "tokenizer.json"
    cfg_path = model_dir / "tokenizer_config.json"
    tok = read_json(tok_path)
    cfg = read_json(cfg_path)

    model = tok.get("model")
    if not isinstance(model, dict):
        raise ValueError(f"{tok_path}: missing field 'model'")
    if model.get("type") != "BPE":
        raise ValueError(f"{tok_path}: model type is {model.get('type')!r}, expected 'BPE'")
    for key in ("vocab", "merges"):
        if key not in model:
            raise ValueError(f"{tok_path}: missing field 'model.{key}'")

    ids: dict[str, int] = dict(model["vocab"])
    types = {i: int(TokenType.NORMAL) for i in ids.values()}
    for added in tok.get("added_tokens", []):
        ids[added["content"]] = added["id"]
        types[added["id"]] = int(TokenType.CONTROL if added.get("special") else TokenType.USER_DEFINED)

    n = max(ids.values()) + 1
    by_id: dict[int, str] = {i: s for s, i in ids.items()}
    missing = [i for i in range(n) if i not in by_id]
    if missing:
        raise ValueError(f"{tok_path}: token ids are not contiguous (no token for id {missing[0]})")

    merges: list[str] = []
    for m in model["merges"]:
        # Newer tokenizers files store each merge as a pair, older ones as "left right".
        if isinstance(m, list):
            if len(m) != 2 or any(" " in part for part in m):
                raise ValueError(f"{tok_path}: merge {m!r} cannot be written as 'left right'")
            m = f"{m[0]} {m[1]}"
        merges.append(m)

    special: dict[str, int | None] = {}
    for key in ("eos_token", "pad_token"):
        name = _special_name(cfg.get(key), key, cfg_path)
        if name is not None and name not in ids:
            raise ValueError(f"{cfg_path}: {key} {name!r} is not in the vocabulary")
        special[key] = None if name is None else ids[name]

    return TextVocab(
        tokens=[by_id[i] for i in range(n)],
        token_types=[types[i] for i in range(n)],
        merges=merges,
        ids=ids,
        eos_id=special["eos_token"],
        pad_id=special["pad_token"],
    )
