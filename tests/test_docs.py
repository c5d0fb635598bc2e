"""Every Python example of the README and the guide runs as it stands."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ("README.md", "docs/guide.md")
BLOCK = re.compile(r"^```python\n(.*?)^```", re.DOTALL | re.MULTILINE)


def blocks(doc: str) -> list[str]:
    return BLOCK.findall((ROOT / doc).read_text())


@pytest.mark.parametrize("doc", DOCS)
def test_every_python_block_runs(doc, monkeypatch):
    """The blocks of one document run in order in one namespace, from the repository root."""
    monkeypatch.chdir(ROOT)
    found = blocks(doc)
    assert found, f"{doc} has no Python example"
    namespace: dict = {"__name__": "__main__"}
    for i, code in enumerate(found):
        exec(compile(code, f"{doc} block {i + 1}", "exec"), namespace)
