"""`store data print|verify|repair|compact|recover` through the real entry point, on real
journal directories written by the real store."""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from store import StoreConfig, open_store
from store.cli.main import build_parser, main
from store.errors import CorruptionError
from store.file import survey
from store.journal.api import RecordInfo
from tests.support.cli import run_store, run_store_here

SIZE = 4096


def _config_file(tmp_path: Path, *, retention: bool = False) -> Path:
    text = (
        f'journal-directory = "{tmp_path / "journal"}"\n'
        f'bindings-directory = "{tmp_path / "bindings"}"\n'
        f"journal-file-size = {SIZE}\n"
        'journal-type = "NIO"\n'
        "journal-compact-min-files = 0\n"
    )
    if retention:
        text += f'[journal-retention]\ndirectory = "{tmp_path / "history"}"\n'
    path = tmp_path / "store.toml"
    path.write_text(text)
    return path


@pytest.fixture
def store_dir(tmp_path: Path) -> Path:
    """A store with bindings, messages across several files, deletes and a prepared tx."""
    config = _config_file(tmp_path, retention=True)
    with open_store(_load(config)) as s:
        s.bindings.load()
        s.messages.load()
        s.bindings.append_add(1, 21, b"queue:orders")
        for i in range(80):
            s.messages.append_add(i, 45, f"message-{i}".encode() * 4, sync=True)
        for i in range(0, 80, 4):
            s.messages.append_delete(i)
        s.messages.append_add_tx(7, 500, 45, b"in a prepared tx")
        s.messages.append_prepare(7, b"xid-7")
    return tmp_path


def _load(path: Path) -> StoreConfig:
    from store import load_config

    return load_config(path)


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """``store ARGV`` through its entry point in this process (``store.cli.main.main``):
    (exit status, stdout, stderr)."""
    del capsys  # the helper captures the command's output itself
    done = run_store_here(*argv)
    return done.returncode, done.stdout, done.stderr


def _run_process(*argv: str) -> tuple[int, str, str]:
    """``store ARGV`` as another process (a subprocess): for what this process's own lock on
    the store must refuse. (exit status, stdout, stderr)."""
    done = run_store(*argv, timeout=120)
    return done.returncode, done.stdout, done.stderr


def _data_scans(directory: Path) -> list[survey.FileScan]:
    scan = survey.scan_journal(str(directory), keep_records=True)
    return [s for s in scan.scans if s.count]


def _flip(path: str, offset: int) -> None:
    with open(path, "r+b") as f:
        f.seek(offset)
        byte = f.read(1)
        f.seek(offset)
        f.write(bytes([byte[0] ^ 0xFF]))


# -- print -------------------------------------------------------------------------------------


def test_print_lists_files_and_records(store_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _err = _run(capsys, "data", "print", "--config", str(store_dir / "store.toml"))
    assert code == 0
    assert f"bindings journal {store_dir / 'bindings'}" in out
    assert f"messages journal {store_dir / 'journal'}" in out
    assert "file data-00000000000000065536.jrn id 65536 size 4096 header ok records" in out
    assert "ADD       id=1 user_type=21 tx=0 lsn=1 size=72 body=71756575653a6f7264657273" in out
    assert "ADD_TX    id=500 user_type=45 tx=7" in out
    assert "PREPARE   id=0 user_type=0 tx=7" in out and "tx_count=1" in out
    assert "DELETE    id=0 user_type=0 tx=0" in out
    assert "a load returns 60 records, 1 prepared and 0 failed transactions" in out
    assert "(ADD 80, ADD_TX 1, DELETE 20, PREPARE 1)" in out


def test_print_safe_hides_bodies_and_max_records_limits(
    store_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _err = _run(
        capsys,
        "data",
        "print",
        "--journal",
        str(store_dir / "journal"),
        "--skip-bindings",
        "--safe",
        "--max-records",
        "5",
    )
    assert code == 0
    assert "bindings journal" not in out
    records = [line for line in out.splitlines() if line.startswith("    @")]
    assert len(records) == 5
    assert all(line.endswith("B") and "body=" in line for line in records)
    assert "6d657373616765" not in out  # "message" in hex never appears
    assert "97 more records not printed" in out  # 80 adds + 20 deletes + tx + prepare - 5


def test_print_refuses_a_store_in_use(store_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = _config_file(store_dir)
    with open_store(_load(config)):
        code, _out, err = _run_process("data", "print", "--config", str(config))
        assert code == 3
        assert "open for writing by another process" in err and "--force" in err
        code, out, _err = _run_process("data", "print", "--config", str(config), "--force")
        assert code == 0 and "summary" in out


def test_print_agrees_with_the_load_on_a_damaged_journal(
    store_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 6 item 4: on a journal the load refuses, print exits 5 with the load's error
    instead of exiting 0 with counts and what "a load returns"."""
    first = _data_scans(store_dir / "journal")[0]  # not the last file: damage is corruption
    _flip(first.file.path, first.records[1].offset + 60)
    config = _load(store_dir / "store.toml")
    with open_store(config) as s, pytest.raises(CorruptionError) as refused:
        s.messages.load()
    code, out, _err = _run(capsys, "data", "print", "--config", str(store_dir / "store.toml"))
    assert code == 5
    assert f"DAMAGED: checksum: {refused.value}" in out
    assert "a load refuses this journal" in out
    assert "a load returns 60 records" not in out
    assert "a load returns 1 records" in out  # the bindings journal is fine


# -- verify ------------------------------------------------------------------------------------


def test_verify_a_clean_store(store_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _err = _run(capsys, "data", "verify", "--config", str(store_dir / "store.toml"))
    assert code == 0
    assert "bindings: ok: " in out and "files, 0 errors, 0 warnings" in out
    assert "data-00000000000000065536.jrn" in out
    assert "messages: ok:" in out


def test_verify_a_torn_tail_exits_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = _config_file(tmp_path)
    with open_store(_load(config)) as s:
        s.messages.load()
        s.bindings.load()
        for i in range(10):
            s.messages.append_add(i, 45, b"synced", sync=True)
        for i in range(10, 14):
            s.messages.append_add(i, 45, b"batch")  # one write, at close
    last = _data_scans(tmp_path / "journal")[-1]
    batch = [r for r in last.records if r.id >= 10]
    _flip(last.file.path, batch[0].offset + 60)
    code, out, _err = _run(capsys, "data", "verify", "--config", str(config))
    assert code == 1
    assert "torn-tail" in out and f"torn at {batch[0].offset}" in out
    assert "messages: ok: " in out and "1 warning\n" in out


def test_verify_a_checksum_failure_exits_5(
    store_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    first = _data_scans(store_dir / "journal")[0]  # not the last file: damage is corruption
    victim = first.records[1]
    _flip(first.file.path, victim.offset + 60)
    code, out, _err = _run(capsys, "data", "verify", "--config", str(store_dir / "store.toml"))
    assert code == 5
    assert "checksum" in out and f"CORRUPT at {victim.offset}" in out
    assert "messages: DAMAGED" in out


# -- repair ------------------------------------------------------------------------------------


def test_repair_refuses_corruption_then_force_cuts_it(
    store_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = str(store_dir / "store.toml")
    first = _data_scans(store_dir / "journal")[0]
    victim = first.records[1]
    _flip(first.file.path, victim.offset + 60)
    code, _out, err = _run(capsys, "data", "repair", "--config", config)
    assert code == 5
    assert f"at offset {victim.offset}" in err and "store: hint:" in err and "--force" in err
    code, repaired, _err = _run(capsys, "data", "repair", "--config", config, "--force")
    assert code == 0
    assert "bindings: nothing to repair" in repaired
    assert "messages: checksum: zeroed" in repaired and ".broken" in repaired
    assert f"from offset {victim.offset}" in repaired
    assert "moved" in repaired and "repair-" in repaired  # the later files went aside
    code, out, _err = _run(capsys, "data", "verify", "--config", config)
    assert code == 0 and "backup" in out
    with open_store(_load(Path(config))) as s:
        survivors = {r.id for r in s.messages.load().records}
    assert first.records[0].id in survivors and victim.id not in survivors
    code, out, _err = _run(capsys, "data", "repair", "--config", config)
    assert code == 0 and "messages: nothing to repair" in out


# -- compact -----------------------------------------------------------------------------------


def test_compact_both_journals(store_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = store_dir / "store.toml"
    with open_store(_load(config)) as s:
        before = s.messages.load()
        s.bindings.load()
        for i in range(80):
            if i % 4 and i % 5:
                s.messages.append_delete(i)
    code, out, _err = _run(capsys, "data", "compact", "--config", str(config))
    assert code == 0
    assert "bindings" in out and "messages" in out and "live bytes" in out
    with open_store(_load(config)) as s:
        records = s.messages.load().records
    kept = [r for r in before.records if not (r.id % 4 and r.id % 5)]
    assert records == kept


# -- recover -----------------------------------------------------------------------------------


def test_recover_into_a_new_directory(store_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = store_dir / "store.toml"
    target = store_dir / "recovered"
    code, out, _err = _run(
        capsys, "data", "recover", "--config", str(config), "--target", str(target), "--undelete"
    )
    assert code == 0
    assert "wrote 60 records, 1 prepared transactions, 20 deleted records and 0 events" in out
    code, out, _err = _run(capsys, "data", "verify", "--journal", str(target), "--skip-bindings")
    assert code == 0
    with open_store(
        StoreConfig.from_mapping(
            {
                "journal-directory": str(target),
                "bindings-directory": str(store_dir / "b2"),
                "journal-file-size": SIZE,
                "journal-type": "NIO",
            }
        )
    ) as s:
        result = s.messages.load()
    assert len(result.records) == 80
    assert RecordInfo(0, 45, b"message-0" * 4, False) in result.records
    assert [p.xid for p in result.prepared] == [b"xid-7"]


def test_recover_needs_a_history_and_an_empty_target(
    store_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _out, err = _run(
        capsys,
        "data",
        "recover",
        "--journal",
        str(store_dir / "journal"),
        "--target",
        str(store_dir / "t"),
    )
    assert code == 2 and "--history" in err
    code, _out, err = _run(
        capsys,
        "data",
        "recover",
        "--config",
        str(store_dir / "store.toml"),
        "--target",
        str(store_dir / "journal"),
    )
    assert code == 2 and "not empty" in err


# -- configuration -----------------------------------------------------------------------------


def test_database_configuration_is_refused_for_file_tools(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # verify, repair and compact work on both stores; recover reads a retention history,
    # which only the file store keeps.
    config = tmp_path / "db.toml"
    config.write_text(f'[database-store]\njdbc-connection-url = "jdbc:sqlite:{tmp_path}/x.db"\n')
    code, _out, err = _run(
        capsys, "data", "recover", "--config", str(config), "--target", str(tmp_path / "t")
    )
    assert code == 2 and "keeps no retention history" in err
    assert not (tmp_path / "t").exists() and not (tmp_path / "x.db").exists()


def test_data_needs_a_subcommand(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["data"])
    assert info.value.code == 2


# -- read-only -----------------------------------------------------------------------------------


@contextlib.contextmanager
def _read_only_mount(source: Path, target: Path) -> Iterator[Path]:
    """``source`` bind-mounted read-only at ``target`` (root only; skips where it cannot)."""
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("a read-only bind mount needs root and mount(8)")
    target.mkdir()
    done = subprocess.run(["mount", "--bind", str(source), str(target)], capture_output=True)
    if done.returncode:
        pytest.skip(f"cannot bind-mount here: {done.stderr.decode().strip()}")
    try:
        done = subprocess.run(["mount", "-o", "remount,ro,bind", str(target)], capture_output=True)
        if done.returncode:
            pytest.skip(f"cannot remount read-only here: {done.stderr.decode().strip()}")
        yield target
    finally:
        subprocess.run(["umount", str(target)], check=False)


def test_print_and_verify_work_on_a_read_only_file_system(
    store_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The store's directories on a read-only bind mount (a snapshot, a backup, an NFS export):
    the offline readers open files read-only and take no lock.

    Fails while they open journal files read-write: both exited 4 with "Read-only file
    system"."""
    with _read_only_mount(store_dir, store_dir.parent / "ro") as ro:
        dirs = ["--journal", str(ro / "journal"), "--bindings", str(ro / "bindings")]
        code, out, err = _run(capsys, "data", "verify", *dirs)
        assert (code, err) == (0, ""), err
        assert "messages: ok:" in out and "bindings: ok:" in out
        code, out, err = _run(capsys, "data", "print", *dirs, "--safe")
        assert (code, err) == (0, ""), err
        assert "a load returns 60 records, 1 prepared and 0 failed transactions" in out


# -- a path without a journal -----------------------------------------------------------------


def _tree(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


@pytest.mark.parametrize(
    "command",
    [
        pytest.param(["print"], id="print"),
        pytest.param(["verify"], id="verify"),
        pytest.param(["repair"], id="repair"),
        pytest.param(["repair", "--force"], id="repair-force"),
        pytest.param(["repair", "--salvage"], id="repair-salvage"),
        pytest.param(["compact"], id="compact"),
    ],
)
@pytest.mark.parametrize("exists", [False, True], ids=["missing", "empty"])
def test_a_path_without_a_journal_is_an_error_and_nothing_is_created(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    command: list[str],
    exists: bool,
) -> None:
    """Issue 7 item 3: `store data compact --journal /nonexistent/j` created both directories
    and 34 MB of files and exited 0; print and repair reported 0 files and exited 0; verify
    warned. Now each refuses with one line naming the path (exit 2) and creates nothing."""
    monkeypatch.chdir(tmp_path)  # Artemis's default data/bindings would land here
    journal, bindings = tmp_path / "j", tmp_path / "b"
    if exists:
        journal.mkdir()
        bindings.mkdir()
    before = _tree(tmp_path)
    code, out, err = _run(
        capsys, "data", *command, "--journal", str(journal), "--bindings", str(bindings)
    )
    assert (code, out) == (2, "")
    assert err.count("\n") == 1 and "Traceback" not in err, err
    what = "it holds no data-*.jrn files" if exists else "the directory does not exist"
    assert err == f"store: error: no journal in {journal}: {what}\n"
    assert _tree(tmp_path) == before


@pytest.mark.parametrize("command", ["print", "verify", "repair"])
def test_one_journal_without_a_journal_stops_the_command_before_it_acts(
    store_dir: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    before = _tree(store_dir)
    code, out, err = _run(
        capsys,
        "data",
        command,
        "--journal",
        str(store_dir / "nothing"),
        "--bindings",
        str(store_dir / "bindings"),
    )
    assert (code, out) == (2, "")
    missing = store_dir / "nothing"
    assert err == f"store: error: no journal in {missing}: the directory does not exist\n"
    assert _tree(store_dir) == before


def test_compact_with_a_journal_but_no_bindings_creates_nothing(
    store_dir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(store_dir)
    before = _tree(store_dir)
    code, _out, err = _run(capsys, "data", "compact", "--journal", str(store_dir / "journal"))
    assert code == 2 and "no journal in data/bindings: the directory does not exist" in err
    assert _tree(store_dir) == before


def test_recover_from_a_history_folder_that_does_not_exist_creates_nothing(
    store_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = _tree(store_dir)
    code, _out, err = _run(
        capsys,
        "data",
        "recover",
        "--journal",
        str(store_dir / "journal"),
        "--history",
        str(store_dir / "nothing"),
        "--target",
        str(store_dir / "t"),
    )
    assert code == 2 and err.count("\n") == 1
    assert f"no retention history in {store_dir / 'nothing'}" in err
    assert _tree(store_dir) == before


# -- help ----------------------------------------------------------------------------------------


def test_every_data_command_has_a_description_and_a_one_line_help() -> None:
    """Issue 7 item 5: print, verify, repair and compact had no description in --help."""
    parser = build_parser()
    data = _subcommands(parser)["data"]
    assert data.description
    helps = {a.dest: a.help for a in _subparsers_action(data)._choices_actions}
    for name, sub in _subcommands(data).items():
        assert sub.description and len(sub.description) > 40, name
        assert helps[name] and "\n" not in helps[name], name
    assert set(_subcommands(data)) >= {"print", "verify", "repair", "compact", "recover"}


def _subparsers_action(parser: argparse.ArgumentParser) -> argparse._SubParsersAction:
    return next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    return dict(_subparsers_action(parser).choices)
