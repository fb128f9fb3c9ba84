"""Fixtures of the file-store tests: hand-built damaged journals (``tests.file.handbuilt``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.file.handbuilt import Builder, flip, two_files

# Three shapes of damage, all built by hand. File A: lsn 1..5; file B: lsn 6, 7 synced, then a
# batch 8..10 appended after lsn 7 was durable (durable_lsn 7).


@pytest.fixture
def torn(tmp_path: Path) -> tuple[Path, Builder]:
    """The last write (lsn 8..10) torn: lsn 8 damaged, 9 and 10 intact, none proven durable."""
    b = two_files()
    paths = b.write(tmp_path / "j")
    flip(paths[1], b.offset(1, 2) + 60)
    return tmp_path / "j", b


@pytest.fixture
def corrupt_last(tmp_path: Path) -> tuple[Path, Builder]:
    """lsn 7 damaged, but lsn 8..10 were written after it was durable: corruption."""
    b = two_files()
    paths = b.write(tmp_path / "j")
    flip(paths[1], b.offset(1, 1) + 60)
    return tmp_path / "j", b


@pytest.fixture
def corrupt_middle(tmp_path: Path) -> tuple[Path, Builder]:
    """lsn 3 damaged in file A, which is not the last file: corruption."""
    b = two_files()
    paths = b.write(tmp_path / "j")
    flip(paths[0], b.offset(0, 2) + 60)
    return tmp_path / "j", b
