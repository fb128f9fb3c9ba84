"""The parser of the ``Offset | Size | Field`` tables that format modules keep in their
docstrings (docs/conventions.md#2), so a test can check each table against the code's structs."""

from __future__ import annotations

import re

__all__ = ["tables"]


def tables(doc: str) -> dict[str, list[tuple[str, str, str]]]:
    """Every ``Offset | Size | Field`` table of ``doc`` by its title: [(offset, size, field)]."""
    lines = doc.splitlines()
    tables: dict[str, list[tuple[str, str, str]]] = {}
    i = 0
    while i < len(lines):
        if lines[i].startswith("======") and i + 1 < len(lines) and "Offset" in lines[i + 1]:
            title = lines[i - 3] if lines[i - 2].startswith("===") else lines[i - 2]
            spans = [m.span() for m in re.finditer(r"=+", lines[i])]
            rows: list[tuple[str, str, str]] = []
            j = i + 3
            while not lines[j].startswith("======"):
                cells = [lines[j][a:b].strip() for a, b in spans[:3]]
                if cells[0]:  # continuation lines of a description leave the first cells empty
                    rows.append((cells[0], cells[1], cells[2]))
                j += 1
            tables[title.strip()] = rows
            i = j
        i += 1
    return tables
