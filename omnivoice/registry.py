"""One way in for every family: ``omnivoice.load(path_or_id)``.

The family comes from a key inside the file, the GGUF's ``general.architecture``, read from the
header alone; never from trying families in some order. :data:`FAMILIES` maps each family's main
architecture (the file that names it: OmniVoice's LM, not its codec) to where its model class
lives, imported only when a file of that family is loaded.
"""

from __future__ import annotations

import importlib
import os
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, Optional, Union

__all__ = ["FAMILIES", "Family", "check_family", "family_of", "load", "load_voice", "model_class", "read_architecture"]


@dataclass(frozen=True)
class Family:
    """A family's entry: its name, its model class as ``"module:Class"`` (imported lazily), and
    the architectures of the files that ride along with the main one (OmniVoice's codec)."""

    name: str
    model: str
    companions: tuple[str, ...] = ()


# Main GGUF architecture -> family. A new family is one line here.
FAMILIES: dict[str, Family] = {
    "omnivoice-lm": Family("omnivoice", "omnivoice.models.omnivoice.model:OmniVoice", ("omnivoice-tokenizer",)),
}
# What is neither a GGUF nor a directory of them (a Hugging Face snapshot, a Hub id) goes through
# this family's own file resolution, as ``OmniVoice.from_pretrained`` did before there were families.
DEFAULT_ARCHITECTURE = "omnivoice-lm"

_GGUF_MAGIC = b"GGUF"
_STRING, _ARRAY = 8, 9
# GGUF value type -> bytes of one value (the scalar types).
_SCALAR_SIZE = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
# Keys read before giving up: general.architecture comes first in every writer's files.
# Read by hand, not by gguf.GGUFReader, which parses every key and tensor entry first: on the
# full-size BF16 LM (151k vocabulary strings) 0.18 s against 0.2 ms for this walk to the first key.
_MAX_KEYS = 4096


def _error(message: str) -> Exception:
    from ._core import ModelFormatError

    return ModelFormatError(message)


def _read(f: BinaryIO, n: int, path: Path) -> bytes:
    data = f.read(n)
    if len(data) != n:
        raise _error(f"{path}: truncated GGUF header")
    return data


def _skip_value(f: BinaryIO, kind: int, path: Path) -> None:
    if kind == _STRING:
        (n,) = struct.unpack("<Q", _read(f, 8, path))
        f.seek(n, os.SEEK_CUR)
    elif kind == _ARRAY:
        elem, count = struct.unpack("<IQ", _read(f, 12, path))
        if elem in _SCALAR_SIZE:
            f.seek(_SCALAR_SIZE[elem] * count, os.SEEK_CUR)
        else:  # strings or nested arrays: one at a time
            for _ in range(count):
                _skip_value(f, elem, path)
    elif kind in _SCALAR_SIZE:
        f.seek(_SCALAR_SIZE[kind], os.SEEK_CUR)
    else:
        raise _error(f"{path}: not a readable GGUF (metadata value type {kind})")


def read_architecture(path: Union[str, os.PathLike]) -> str:
    """``general.architecture`` of a GGUF, from its header (no tensor is read).

    Raises:
        FileNotFoundError: No such file.
        ModelFormatError: Not a GGUF, or one without the key.
    """
    path = Path(path)
    with open(path, "rb") as f:
        if f.read(4) != _GGUF_MAGIC:
            raise _error(f"{path}: not a readable GGUF (no GGUF magic)")
        _version, _n_tensors, n_kv = struct.unpack("<IQQ", _read(f, 20, path))
        for _ in range(min(n_kv, _MAX_KEYS)):
            (n,) = struct.unpack("<Q", _read(f, 8, path))
            key = _read(f, n, path)
            (kind,) = struct.unpack("<I", _read(f, 4, path))
            if key == b"general.architecture" and kind == _STRING:
                (n,) = struct.unpack("<Q", _read(f, 8, path))
                return _read(f, n, path).decode("utf-8", "replace")
            _skip_value(f, kind, path)
    raise _error(f"{path}: no general.architecture in the GGUF header")


def _known() -> str:
    return ", ".join(f"{arch!r} ({fam.name})" for arch, fam in FAMILIES.items())


def _gguf_architectures(directory: Path) -> dict[str, Path]:
    """Architecture -> first GGUF (by name) of each architecture in ``directory``; unreadable files skipped."""
    found: dict[str, Path] = {}
    for gguf in sorted(directory.glob("*.gguf")):
        try:
            found.setdefault(read_architecture(gguf), gguf)
        except (OSError, ValueError):
            continue
    return found


def _family_of_arch(arch: str) -> Optional[Family]:
    """The family of a main or companion architecture, or None."""
    return FAMILIES.get(arch) or next((f for f in FAMILIES.values() if arch in f.companions), None)


def family_of(model: Union[str, os.PathLike]) -> Family:
    """The family of what ``model`` names.

    A GGUF file: its architecture's (a companion file's too: the family's loader then says what
    it wanted). A directory of GGUFs: the family whose files are there (two families in one
    directory is an error). Anything else (a snapshot, a Hub id): the default family, whose own
    resolution then finds or fails to find the files.

    Raises:
        ModelFormatError: An architecture no family has, naming the known ones.
    """
    path = Path(model)
    if path.is_file():
        arch = read_architecture(path)
        family = _family_of_arch(arch)
        if family is None:
            raise _error(f"{path}: GGUF architecture {arch!r} is not a model this package runs; "
                         f"known: {_known()}")
        return family
    if path.is_dir():
        found = _gguf_architectures(path)
        if found:
            families = {f.name: f for f in map(_family_of_arch, found) if f is not None}
            if len(families) > 1:
                raise _error(f"{path} holds models of several families ({', '.join(sorted(families))}): "
                             "pass the model's GGUF file instead")
            if not families:
                raise _error(f"{path}: no GGUF here is a model this package runs (architectures "
                             f"{', '.join(sorted(found))}); known: {_known()}")
            return next(iter(families.values()))
    return FAMILIES[DEFAULT_ARCHITECTURE]


def _import(family: Family) -> Any:
    module, _, name = family.model.partition(":")
    return getattr(importlib.import_module(module), name)


def model_class(model: Union[str, os.PathLike]) -> Any:
    """The model class of ``model``'s family (imported now), without loading anything."""
    return _import(family_of(model))


def load_voice(path: Union[str, os.PathLike]) -> Any:
    """A saved voice file, read by the family it names (files without a family are OmniVoice's).

    Raises:
        FileNotFoundError: No such file.
        ValueError: Not a voice file, or one of a family not registered here.
    """
    from .protocol import voice_file_family

    name = voice_file_family(path)
    family = next((f for f in FAMILIES.values() if f.name == name), None)
    if family is None:
        raise ValueError(f"{path} is a voice of the {name} family, which this package does not run")
    return _import(family).load_voice(path)


def load(model: Union[str, os.PathLike], **kwargs: Any) -> Any:
    """Loads any family's model: ``omnivoice.load("model.gguf")``, a directory, or a Hub id.

    Args:
        model: A GGUF file, a directory of GGUFs, a Hugging Face snapshot or Hub id.
        **kwargs: The family's ``from_pretrained`` arguments (``n_threads``; OmniVoice's ``codec``).

    Returns:
        The family's model, a :class:`omnivoice.protocol.SpeechModel`.

    Raises:
        ModelFormatError: A GGUF of an architecture no family has.
        FileNotFoundError: Nothing at ``model``.
    """
    return model_class(model).from_pretrained(model, **kwargs)


def check_family(model: Union[str, os.PathLike], family: str, caller: str) -> None:
    """Raises ModelFormatError when ``model`` is a known family's GGUF (or directory) other than
    ``family``; files of no known family are left to ``caller``'s own loader to refuse."""
    try:
        found = family_of(model)
    except ValueError:
        return
    if found.name != family:
        raise _error(f"{model} is a {found.name} model, not {family}: load it with omnivoice.load(), "
                     f"not {caller}")

