"""omnivoice/_core.pyi names exactly what the built _core module has."""

from __future__ import annotations

import ast
from pathlib import Path

import omnivoice
from omnivoice import _core

STUB = Path(omnivoice.__file__).with_name("_core.pyi")


def _stub_classes() -> dict[str, set[str]]:
    """{class name: names it declares} of the stub's top-level classes."""
    out = {}
    for node in ast.parse(STUB.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.ClassDef):
            names = set()
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name != "__init__":
                    names.add(item.name)
                elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                    names.add(item.target.id)
            out[node.name] = names
    return out


def _stub_functions() -> set[str]:
    """Names of the stub's top-level functions."""
    return {node.name for node in ast.parse(STUB.read_text(encoding="utf-8")).body if isinstance(node, ast.FunctionDef)}


def test_stub_matches_core() -> None:
    stub = _stub_classes()
    assert set(stub) | _stub_functions() == {name for name in dir(_core) if not name.startswith("_")}
    for name, declared in stub.items():
        obj = getattr(_core, name)
        if isinstance(obj, type) and issubclass(obj, Exception):
            continue  # its members are Exception's
        assert declared == {m for m in dir(obj) if not m.startswith("_")}, name
