"""Which pages of a page store must exist, and how long each is: the page manifest.

The journals learned it first (``store.file.integrity``): a file that is simply gone leaves no
trace in the files that remain, so a store has to *write down* what must exist. A page store
keeps one small manifest per address, beside ``address.txt``: ``pages.txt`` in the address's
folder (file store) or the ``pages.txt`` row of the address's table (database store).

Format (ASCII, one item per line; the last line is the CRC-32 of every byte before it)::

    pages 1                  version
    page 3 10485757          a page that must exist, exactly this many bytes long
    current 4 18034          the page being written: at least this many bytes are durable
    crc 8c1e0f3a

When it is written, and so what it proves:

- **file store**: after the first batch written to a page is synced (a roll, or the first page
  of a store), the manifest is replaced atomically (``pages.txt.tmp``, fdatasync, rename, fsync
  of the folder) with every earlier page at its final length and the new page as ``current``
  at its synced length; the batch is acknowledged only after that. ``delete_page`` rewrites it
  without the page *before* unlinking the page file. So at any crash point a listed page was
  durable with at least its listed bytes; a page numbered above ``current`` is a roll the
  crash interrupted (kept, it becomes the current page); a page below ``current`` that is not
  listed was being deleted (its deletion is finished at open). The current page's tail after
  its listed length can still be torn and is cut back as before; never below it.
- **database store**: the row is updated in the same transaction as every insert of page rows
  and every page delete, with every page at its exact length (a commit is atomic: no page has
  a torn tail, so there is no ``current`` line).

A page listed but missing, or shorter than listed, is a :class:`~store.errors.LostDataError`
(records an address acknowledged are gone); a page longer than its listed final length is a
:class:`~store.errors.CorruptionError`. A store without a manifest (written before manifests
existed) is read as before, unchecked, until its first roll or write writes one.

Thread-safety: pure functions and an immutable value.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

from store.errors import CorruptionError, LostDataError
from store.speedups import crc32

__all__ = ["MANIFEST_NAME", "Manifest", "decode_manifest", "encode_manifest", "manifest_problems"]

#: The manifest's file name in a page folder, and its row's ``filename`` in a page table.
MANIFEST_NAME: Final = "pages.txt"
_VERSION: Final = 1
_HINT: Final = (
    "pages holding acknowledged messages are gone or shortened; restore them from a backup, "
    "or accept the loss with `store data repair --pages`"
)


@dataclass(frozen=True)
class Manifest:
    """``pages``: page number -> its length in bytes (exact, final); ``current``: the page being
    written and the bytes of it known durable (file store only), or None."""

    pages: Mapping[int, int] = field(default_factory=dict)
    current: tuple[int, int] | None = None

    def listed(self) -> set[int]:
        """Every page number the manifest names."""
        return {*self.pages, *((self.current[0],) if self.current else ())}

    def highest(self) -> int:
        """The highest page number named, or 0."""
        return max(self.listed(), default=0)

    def expected(self, page: int) -> tuple[int, bool] | None:
        """(length, exact) of ``page``, or None when it is not listed."""
        if page in self.pages:
            return self.pages[page], True
        if self.current is not None and self.current[0] == page:
            return self.current[1], False
        return None

    def without(self, page: int) -> Manifest:
        """The manifest after ``page`` is deleted."""
        current = self.current if self.current is None or self.current[0] != page else None
        return Manifest({p: n for p, n in self.pages.items() if p != page}, current)


def encode_manifest(manifest: Manifest) -> bytes:
    """The bytes of ``manifest`` (module docstring). Raises nothing."""
    lines = [f"pages {_VERSION}"]
    lines += [f"page {p} {n}" for p, n in sorted(manifest.pages.items())]
    if manifest.current is not None:
        lines.append(f"current {manifest.current[0]} {manifest.current[1]}")
    body = ("\n".join(lines) + "\n").encode("ascii")
    return body + f"crc {crc32(body):08x}\n".encode("ascii")


def decode_manifest(data: bytes, *, path: str) -> Manifest:
    """The manifest in ``data``; ``path`` names it in errors. Raises CorruptionError (with the
    offset of the bad line) for a damaged or unknown manifest."""
    end = data.rfind(b"crc ")
    if end < 0 or not data.endswith(b"\n"):
        raise CorruptionError(path, 0, "the page manifest has no checksum line (damaged)")
    body, tail = data[:end], data[end + 4 : -1]
    try:
        stated = int(tail.decode("ascii"), 16)
    except (UnicodeDecodeError, ValueError):
        raise CorruptionError(path, end, "the page manifest's checksum line is damaged") from None
    if stated != crc32(body):
        raise CorruptionError(path, end, "the page manifest fails its checksum")
    pages: dict[int, int] = {}
    current: tuple[int, int] | None = None
    offset = 0
    for number, line in enumerate(body.decode("ascii").splitlines()):
        words = line.split()
        try:
            if number == 0:
                if words != ["pages", str(_VERSION)]:
                    raise ValueError(f"unknown header {line!r}")
            elif len(words) == 3 and words[0] in ("page", "current"):
                page, length = int(words[1]), int(words[2])
                if page < 1 or length < 0 or page in pages or (current and current[0] == page):
                    raise ValueError(f"bad entry {line!r}")
                if words[0] == "page":
                    pages[page] = length
                elif current is None:
                    current = (page, length)
                else:
                    raise ValueError("two current pages")
            else:
                raise ValueError(f"bad line {line!r}")
        except ValueError as exc:
            raise CorruptionError(path, offset, f"the page manifest is damaged: {exc}") from None
        offset += len(line) + 1
    return Manifest(pages, current)


def manifest_problems(
    manifest: Manifest, lengths: Mapping[int, int], *, where: str, page_path: dict[int, str]
) -> list[CorruptionError]:
    """What ``manifest`` says is wrong with the pages present (``lengths``: page -> bytes);
    ``where`` names the manifest, ``page_path`` each page (a file or a table's page). Raises
    nothing. The current page's check here is against its raw length; a torn tail cut back
    below the listed length is checked again by the caller after scanning."""
    out: list[CorruptionError] = []
    for page in sorted(manifest.listed()):
        expected = manifest.expected(page)
        assert expected is not None
        length, exact = expected
        path = page_path.get(page) or f"page {page}"
        have = lengths.get(page)
        if have is None:
            out.append(
                LostDataError(
                    path,
                    0,
                    f"page {page} is missing; {where} lists it with {length} bytes",
                    hint=_HINT,
                )
            )
        elif have < length:
            out.append(
                LostDataError(
                    path,
                    have,
                    f"page {page} is {have} bytes; {where} lists {length} bytes written",
                    hint=_HINT,
                )
            )
        elif exact and have > length:
            out.append(
                CorruptionError(
                    path, length, f"page {page} is {have} bytes; {where} lists only {length}"
                )
            )
    return out
