"""CI runs what the README tells a new user to run: the test command of the README's first bash
block is the only command of ``.ci/run``, so a set-up step the README lacks fails CI too."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _commands(script: str) -> list[str]:
    """The command lines of a shell script: no comments, blank lines or shell options."""
    lines = [ln.strip() for ln in script.splitlines()]
    return [ln for ln in lines if ln and not ln.startswith("#") and not ln.startswith("set ")
            and not ln.startswith('cd "$(dirname "$0")')]


def test_ci_runs_exactly_the_readme_test_command() -> None:
    block = re.search(r"```bash\n(.*?)```", (ROOT / "README.md").read_text(encoding="utf-8"), re.S)
    assert block, "README.md has no bash block"
    readme = _commands(block.group(1))
    tests = [ln for ln in readme if "pytest" in ln]
    assert len(tests) == 1, readme
    assert _commands((ROOT / ".ci" / "run").read_text(encoding="utf-8")) == tests

