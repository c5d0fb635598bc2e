"""The documentation: every Python example of the README and the guide runs as it stands; the
README stays a short front door whose first bash block is the two set-up commands; no page
but the changelog, and no Python source, names this repository's commits or its issue
tracker's numbers."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ("README.md", "docs/guide.md")
BLOCK = re.compile(r"^```python\n(.*?)^```", re.DOTALL | re.MULTILINE)
BASH = re.compile(r"^```bash\n(.*?)^```", re.DOTALL | re.MULTILINE)
README_MAX_LINES = 200
# Pages that may name commits: the changelog (history) is left out by not being listed; the
# hardware sources cite pinned commits of other projects' repositories.
NOT_CHECKED = {"docs/hardware_sources.md"}
HEX_WORD = re.compile(r"\b[0-9a-f]{7,40}\b")
ISSUE = re.compile(r"\bissues? #?\d+", re.IGNORECASE)


def blocks(doc: str) -> list[str]:
    return BLOCK.findall((ROOT / doc).read_text())


def pages() -> list[str]:
    """README.md and every docs/*.md page but the hardware sources."""
    found = ["README.md"] + sorted(
        str(path.relative_to(ROOT)) for path in (ROOT / "docs").glob("*.md")
    )
    return [page for page in found if page not in NOT_CHECKED]


@pytest.mark.parametrize("doc", DOCS)
@pytest.mark.slow
def test_every_python_block_runs(doc, monkeypatch):
    """The blocks of one document run in order in one namespace, from the repository root."""
    monkeypatch.chdir(ROOT)
    found = blocks(doc)
    assert found, f"{doc} has no Python example"
    namespace: dict = {"__name__": "__main__"}
    for i, code in enumerate(found):
        exec(compile(code, f"{doc} block {i + 1}", "exec"), namespace)


def commands(block: str) -> list[str]:
    """The commands of a bash block: lines joined where they end in a backslash, blank lines
    and comments left out."""
    joined = re.sub(r"\\\n", " ", block)
    return [line.strip() for line in joined.splitlines() if line.strip() and not
            line.strip().startswith("#")]  # fmt: skip


def test_readme_is_a_short_front_door():
    """At most 200 lines; its first bash block holds exactly the two set-up commands, the
    main job (`wafersim run`) first and the tests (`pytest`) second. CI and tests/test_cli.py
    read them there: test_cli takes the first README line naming `wafersim ` as the main job."""
    text = (ROOT / "README.md").read_text()
    lines = text.splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines"
    first = BASH.search(text)
    assert first, "README.md has no bash block"
    found = commands(first.group(1))
    assert len(found) == 2, found
    assert "wafersim run" in found[0]
    assert "pytest" in found[1]
    named = next(line for line in lines if "wafersim " in line)
    assert named.strip() == found[0]
    assert shlex.split(named.split("&& wafersim ", 1)[1])[0] == "run"


def own_commits() -> set[str]:
    """Every commit of this repository, by full hash; skips the test where git or the
    repository's .git is absent."""
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    if not (ROOT / ".git").exists():
        pytest.skip(f"{ROOT} has no .git (not a git checkout)")
    done = subprocess.run(
        ["git", "rev-list", "--all"], cwd=ROOT, capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        pytest.skip(f"git rev-list --all failed: {done.stderr.strip()}")
    return set(done.stdout.split())


def commit_prefixes(commits: set[str]) -> set[str]:
    return {full[:n] for full in commits for n in range(7, len(full) + 1)}


@pytest.mark.parametrize("page", pages())
@pytest.mark.slow
def test_pages_name_no_commit_of_this_repository(page):
    """History, with commit hashes, belongs in CHANGELOG.md; the pages keep the current
    state. External citations (other projects' pinned commits) are not hashes of ours."""
    prefixes = commit_prefixes(own_commits())
    text = (ROOT / page).read_text()
    named = sorted({word for word in HEX_WORD.findall(text) if word in prefixes})
    assert not named, f"{page} names commits of this repository: {', '.join(named)}"


@pytest.mark.parametrize("page", pages())
def test_pages_name_no_issue_numbers(page):
    """An issue number means nothing to a reader without the tracker: say what it was."""
    text = (ROOT / page).read_text()
    found = sorted({match.group(0) for match in ISSUE.finditer(text)})
    assert not found, f"{page} refers to issues by number: {', '.join(found)}"


SOURCE_FOLDERS = ("wafer", "fabric", "kernels", "compiler", "memoryx", "wafersim", "benchmarks",
                  "tests", "examples")  # fmt: skip
SOURCE_HEX_WORD = re.compile(r"\b[0-9a-f]{7,40}\b", re.IGNORECASE)


def source_files() -> list[Path]:
    """Every .py file under :data:`SOURCE_FOLDERS`."""
    return sorted(path for folder in SOURCE_FOLDERS for path in (ROOT / folder).rglob("*.py"))


@pytest.mark.slow
def test_no_issue_numbers_or_commit_hashes_in_the_source():
    """Docstrings and comments give the reason in a sentence: an issue number or a commit
    hash means nothing to a reader without the tracker or the history (measured figures and
    history belong in docs/benchmarks.md and CHANGELOG.md)."""
    texts = {p.relative_to(ROOT).as_posix(): p.read_text(encoding="utf-8") for p in source_files()}
    assert texts, "no source files found"
    issues = [f"{name}: {', '.join(sorted({m.group(0) for m in ISSUE.finditer(text)}))}"
              for name, text in texts.items() if ISSUE.search(text)]  # fmt: skip
    assert not issues, "refer to issues by number: " + "; ".join(issues)
    prefixes = commit_prefixes(own_commits())
    hashes = []
    for name, text in texts.items():
        named = sorted({w for w in SOURCE_HEX_WORD.findall(text) if w.lower() in prefixes})
        if named:
            hashes.append(f"{name}: {', '.join(named)}")
    assert not hashes, "name commits of this repository: " + "; ".join(hashes)


def test_the_api_reference_documents_every_public_name():
    """docs/api.md renders each name ``import wafersim`` exports, from its own module."""
    import wafersim

    page = (ROOT / "docs" / "api.md").read_text()
    missing = [n for n, m in wafersim.EXPORTS.items() if f"::: {m}.{n}\n" not in page]
    assert missing == []
