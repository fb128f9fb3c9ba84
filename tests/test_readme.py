"""The README's code blocks, run as written, in order, in one fresh folder (issue 25).

A new user copies the README's snippets one after the other into one folder; so does this
test. Every fenced block says what it is by the HTML comment on the last non-blank line before
its fence (invisible when the README is rendered):

- ``<!-- file: etc/store.toml -->``: the block is that file. Every such file is written into
  the folder before anything runs (a user writes the configuration first), and a ``.toml`` or
  ``.xml`` one must load with :func:`store.load_config` (a misspelt key in the README fails here).
- ``<!-- run -->`` on an ``sh`` block: its lines run in ``bash -e`` with the checkout's
  ``store`` command first on ``PATH``.
- ``<!-- not run: REASON -->``: not run, for the reason given (it must say one).
- a ``python`` block needs no marker: it runs, in a fresh interpreter whose working directory
  is the folder and whose ``PYTHONPATH`` is the checkout.

Any other block without a marker fails the test: a new snippet is either run or explained.
Python and ``sh`` blocks run in the order they appear, each to completion, so one snippet's
leftovers are the next one's starting point, as they would be for the user. Then they all run a
second time in the same folder, as a user trying the examples again would (issue 44: the
storage manager example failed then, its address already made).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from store import load_config

ROOT = Path(__file__).resolve().parent.parent

#: The longest one block may take: the whole README runs in 10-25 s (the `store db` block is
#: most of it, a CLI start each); a block that waits, such as a backup waiting for a live node
#: that never comes, fails here instead of hanging.
BLOCK_TIMEOUT = 30.0

_FENCE = re.compile(r"^```([A-Za-z0-9_+-]*)\n(.*?)^```\n", re.M | re.S)
_MARKER = re.compile(r"<!--\s*(.*?)\s*-->")


@dataclass(frozen=True)
class Block:
    """One fenced block of the README: where it starts, its language, its marker, its text."""

    line: int
    lang: str
    marker: str | None
    text: str

    @property
    def where(self) -> str:
        return f"README.md:{self.line} ({self.lang or 'no language'})"


def readme_blocks(text: str) -> list[Block]:
    """Every fenced block of ``text`` with the marker on the last non-blank line before it."""
    blocks = []
    for match in _FENCE.finditer(text):
        before = [line for line in text[: match.start()].splitlines() if line.strip()]
        marker = _MARKER.fullmatch(before[-1].strip()) if before else None
        blocks.append(
            Block(
                line=text.count("\n", 0, match.start()) + 1,
                lang=match.group(1),
                marker=marker.group(1) if marker else None,
                text=match.group(2),
            )
        )
    return blocks


def _kind(block: Block) -> str:
    """``"file"``, ``"run"`` or ``"skip"``; fails the test on a block without a usable marker."""
    marker = block.marker
    if marker is not None and marker.startswith("file:"):
        assert marker[len("file:") :].strip(), f"{block.where}: `file:` names no path"
        return "file"
    if marker is not None and marker.startswith("not run:"):
        assert marker[len("not run:") :].strip(), f"{block.where}: `not run:` gives no reason"
        return "skip"
    if marker == "run" and block.lang in ("sh", "python"):
        return "run"
    if marker is None and block.lang == "python":
        return "run"
    raise AssertionError(
        f"{block.where} has no marker saying what it is: put `<!-- run -->` (sh), "
        "`<!-- file: PATH -->` or `<!-- not run: REASON -->` on the line before its fence"
    )


def _store_shim(bin_dir: Path) -> None:
    """A ``store`` command that runs this checkout's CLI with the test's interpreter."""
    bin_dir.mkdir()
    shim = bin_dir / "store"
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m store.cli.main "$@"\n')
    shim.chmod(0o755)


def _run(block: Block, folder: Path, env: dict[str, str]) -> None:
    """Run one python or sh block in ``folder``; fails the test with its output unless it
    exits 0 within :data:`BLOCK_TIMEOUT`."""
    if block.lang == "python":
        argv = [sys.executable, "-c", block.text]
    else:
        argv = ["bash", "-e", "-o", "pipefail", "-c", block.text]
    try:
        done = subprocess.run(
            argv, cwd=folder, env=env, capture_output=True, text=True, timeout=BLOCK_TIMEOUT
        )
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"{block.where} did not finish in {BLOCK_TIMEOUT:.0f} s: {exc.stderr!r}")
    if done.returncode != 0:
        pytest.fail(
            f"{block.where} exited {done.returncode}:\n{block.text}\n"
            f"--- stdout\n{done.stdout}\n--- stderr\n{done.stderr}"
        )


def test_every_readme_block_is_marked_and_the_runnable_ones_run_in_order(tmp_path: Path) -> None:
    blocks = readme_blocks((ROOT / "README.md").read_text(encoding="utf-8"))
    kinds = [(block, _kind(block)) for block in blocks]
    folder = tmp_path / "project"
    folder.mkdir()
    for block, kind in kinds:
        if kind != "file":
            continue
        assert block.marker is not None
        path = folder / block.marker[len("file:") :].strip()
        assert not path.exists(), f"{block.where}: a second block writes {path.name}"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(block.text, encoding="utf-8")
        if path.suffix in (".toml", ".xml"):
            load_config(path)
    _store_shim(tmp_path / "bin")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    env["PATH"] = os.pathsep.join([str(tmp_path / "bin"), env.get("PATH", "")])
    ran = 0
    for _ in range(2):  # a user runs the examples again in the same folder (issue 44)
        for block, kind in kinds:
            if kind == "run":
                _run(block, folder, env)
                ran += 1
    assert ran >= 8, f"only {ran // 2} README blocks ran"


_SAMPLE = """Intro.

```python
print("runs without a marker")
```

<!-- file: etc/store.toml -->
```toml
persistence-enabled = false
```

A paragraph
<!-- not run: needs a cluster -->

```sh
spark-submit job.py
```
"""


def test_blocks_are_read_with_the_marker_on_the_last_non_blank_line_before_the_fence() -> None:
    blocks = readme_blocks(_SAMPLE)
    assert [(b.line, b.lang, b.marker) for b in blocks] == [
        (3, "python", None),
        (8, "toml", "file: etc/store.toml"),
        (15, "sh", "not run: needs a cluster"),
    ]
    assert [_kind(b) for b in blocks] == ["run", "file", "skip"]


@pytest.mark.parametrize(
    "text",
    [
        "```sh\nstore --help\n```\n",
        "Some text.\n\n```toml\na = 1\n```\n",
        "<!-- not run: -->\n```text\nusage\n```\n",
        "<!-- file: -->\n```toml\na = 1\n```\n",
        "<!-- run -->\n```toml\na = 1\n```\n",
    ],
    ids=["unmarked-sh", "unmarked-toml", "not-run-without-reason", "file-without-path", "run-toml"],
)
def test_a_block_that_neither_runs_nor_says_why_fails_the_test(text: str) -> None:
    [block] = readme_blocks(text)
    with pytest.raises(AssertionError):
        _kind(block)


def test_etc_holds_exactly_the_files_the_readme_shows() -> None:
    """The README's ``<!-- file: etc/... -->`` blocks are the repository's ``etc/`` files,
    byte for byte, and ``etc/`` holds nothing else: a user running an example from a clone
    reads the configuration the README shows (issue 44)."""
    blocks = readme_blocks((ROOT / "README.md").read_text(encoding="utf-8"))
    shown = {
        block.marker[len("file:") :].strip(): block.text
        for block in blocks
        if block.marker is not None and block.marker.startswith("file:")
    }
    assert shown, "the README shows no configuration file"
    for name, text in shown.items():
        path = ROOT / name
        assert path.is_file(), f"{name} is in the README but not in the repository"
        assert path.read_bytes() == text.encode("utf-8"), f"{name} differs from the README's"
    present = {str(p.relative_to(ROOT)) for p in (ROOT / "etc").rglob("*") if p.is_file()}
    assert present == set(shown), f"etc/ files the README does not show: {present - set(shown)}"
