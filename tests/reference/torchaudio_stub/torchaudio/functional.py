"""``torchaudio.functional.resample``: torchaudio 2.11.1's own code, loaded from its wheel.

No torchaudio wheel matches the reference venv's torch build (its compiled extension would not
load), but the resampler is plain torch. This module reads ``torchaudio/functional/functional.py``
out of the downloaded wheel and compiles just the three functions that make up ``resample``
(``_get_sinc_resample_kernel``, ``_apply_sinc_resample_kernel``, ``resample``), so the fixtures
hold exactly what upstream's resampling gives. The wheel is found at ``$TORCHAUDIO_WHEEL`` or in
``<venv>/wheels/`` (``setup_venv.sh`` downloads it there with ``pip download --no-deps
torchaudio==2.11.1``). Without it the import fails: there is no silent stand-in.
"""

import ast
import math
import os
import sys
import warnings
import zipfile
from pathlib import Path
from typing import List, Optional, Tuple, Union

import torch
from torch import Tensor

_VERSION = "2.11.1"
_SOURCE = "torchaudio/functional/functional.py"
_NAMES = ("_get_sinc_resample_kernel", "_apply_sinc_resample_kernel", "resample")


def _wheel() -> Path:
    """The torchaudio wheel: ``$TORCHAUDIO_WHEEL``, else the one in ``<venv>/wheels/``."""
    if os.environ.get("TORCHAUDIO_WHEEL"):
        return Path(os.environ["TORCHAUDIO_WHEEL"])
    found = sorted((Path(sys.prefix) / "wheels").glob(f"torchaudio-{_VERSION}-*.whl"))
    if not found:
        raise ImportError(
            f"torchaudio {_VERSION} wheel not found in {Path(sys.prefix) / 'wheels'}: run "
            f"'pip download --no-deps torchaudio=={_VERSION} -d {Path(sys.prefix) / 'wheels'}' "
            "or set TORCHAUDIO_WHEEL"
        )
    return found[-1]


def _load() -> dict:
    """Compiles the resample functions from the wheel's source into a namespace."""
    path = _wheel()
    with zipfile.ZipFile(path) as whl:
        source = whl.read(_SOURCE).decode("utf-8")
    tree = ast.parse(source, filename=f"{path}!{_SOURCE}")
    funcs = [node for node in tree.body if isinstance(node, ast.FunctionDef) and node.name in _NAMES]
    if sorted(f.name for f in funcs) != sorted(_NAMES):
        raise ImportError(f"{path}: {_SOURCE} does not define {', '.join(_NAMES)}")
    namespace = {
        "math": math, "warnings": warnings, "torch": torch, "Tensor": Tensor, "Optional": Optional,
        "List": List, "Tuple": Tuple, "Union": Union, "_CPU": torch.device("cpu"),
    }
    exec(compile(ast.Module(body=funcs, type_ignores=[]), f"{path}!{_SOURCE}", "exec"), namespace)
    return namespace


resample = _load()["resample"]
