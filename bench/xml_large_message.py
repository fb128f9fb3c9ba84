"""How much memory ``store data exp`` / ``store data imp`` need for one large message.

Builds a file store holding one message with a body of ``--size`` MiB (default 1024), then
runs ``store data exp`` and ``store data imp`` in subprocesses through the real entry point and
prints each one's peak RSS, the peak RSS of the same command on a store holding one small
message, the difference (the growth a large body causes: it must stay under 64 MiB, DESIGN
§7.1's bounded memory), and the time taken.

    PYTHONPATH=. python bench/xml_large_message.py [--size MiB] [--dir DIR]

Recorded figures: bench/RESULTS.md ("XML export and import of a large message").
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import BinaryIO

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

_MEASURE = (
    "import resource, sys\n"
    "from store.cli.main import main\n"
    "code = main(sys.argv[1:])\n"
    "print('MAXRSS', resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr)\n"
    "sys.exit(code)\n"
)


class Pattern:
    """A readable stream of ``size`` bytes of a repeating pattern, never held whole."""

    def __init__(self, size: int) -> None:
        self.left = size
        self.block = bytes(range(256)) * 4096

    def read(self, n: int = -1) -> bytes:
        n = self.left if n < 0 else min(n, self.left)
        n = min(n, len(self.block))
        self.left -= n
        return self.block[:n]


def write_config(directory: Path) -> Path:
    path = directory / "store.toml"
    path.write_text(
        "".join(
            f'{key} = "{directory / sub}"\n'
            for key, sub in (
                ("journal-directory", "journal"),
                ("bindings-directory", "bindings"),
                ("large-messages-directory", "large"),
                ("paging-directory", "paging"),
            )
        )
        + 'journal-file-size = "1M"\n'
    )
    return path


def make_store(directory: Path, size: int) -> Path:
    from store import load_config, open_store
    from store.messaging import Message, StorageManager

    config = write_config(directory)
    with StorageManager(open_store(load_config(config))) as sm:
        sm.load()
        sm.create_address("big")
        sm.create_queue("big.q", address="big")
        body: BinaryIO | bytes = Pattern(size) if size else b"small"  # type: ignore[assignment]
        sm.send(Message("big", body))
    return config


def measured(*argv: str) -> tuple[int, float]:
    """Peak RSS (KiB) and seconds of ``store <argv>``. Raises CalledProcessError."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", _MEASURE, *argv], capture_output=True, env=env, check=False
    )
    seconds = time.perf_counter() - started
    if done.returncode:
        raise subprocess.CalledProcessError(done.returncode, argv, done.stdout, done.stderr)
    line = [x for x in done.stderr.decode().splitlines() if x.startswith("MAXRSS")][-1]
    return int(line.split()[1]), seconds


def exp_imp(directory: Path, config: Path) -> tuple[tuple[int, float], tuple[int, float]]:
    """(exp, imp) peak RSS in KiB and seconds for the store of ``config``."""
    xml = directory / "export.xml"
    exp = measured("data", "exp", "-q", "--config", str(config), "--output", str(xml))
    target = directory / "target"
    target.mkdir()
    imp = measured("data", "imp", "-q", "--config", str(write_config(target)), "--input", str(xml))
    return exp, imp


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=1024, help="body size in MiB")
    parser.add_argument("--dir", help="work directory (default: a temporary one)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        base = Path(tmp)
        (base / "small").mkdir()
        (base / "large").mkdir()
        small = exp_imp(base / "small", make_store(base / "small", 0))
        started = time.perf_counter()
        config = make_store(base / "large", args.size << 20)
        print(
            f"store with one {args.size} MiB message built in {time.perf_counter() - started:.1f} s"
        )
        large = exp_imp(base / "large", config)
        for name, (base_, big) in zip(("exp", "imp"), zip(small, large, strict=True), strict=True):
            growth = (big[0] - base_[0]) / 1024
            print(
                f"{name}: peak RSS {big[0] / 1024:.1f} MiB "
                f"(small store {base_[0] / 1024:.1f} MiB), "
                f"growth {growth:.1f} MiB, {big[1]:.1f} s"
            )


if __name__ == "__main__":
    main()
