"""`store data recover` of every message ever sent, through the real command (a subprocess),
from the retention history of a file store the storage manager wrote: acked messages whose
journal files were reclaimed come back, and the recovered journal opens with the storage
manager and delivers them."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from store import StoreConfig, load_config, open_store
from store.file.journal import FileJournal
from store.messaging.manager import StorageManager
from store.messaging.values import Message
from tests.support.cli import run_store

SIZE = 4096  # small files: acks make the journal reclaim them, retention keeps copies


def _cli(*argv: str) -> subprocess.CompletedProcess[str]:
    return run_store(*argv, timeout=120)


def _config_file(tmp_path: Path) -> Path:
    path = tmp_path / "store.toml"
    path.write_text(
        f'journal-directory = "{tmp_path / "journal"}"\n'
        f'bindings-directory = "{tmp_path / "bindings"}"\n'
        f'large-messages-directory = "{tmp_path / "large"}"\n'
        f'paging-directory = "{tmp_path / "paging"}"\n'
        f"journal-file-size = {SIZE}\n"
        "journal-min-files = 2\n"
        'journal-type = "NIO"\n'
        "journal-compact-min-files = 0\n"
        "min-large-message-size = 2048\n"
        f'[journal-retention]\ndirectory = "{tmp_path / "history"}"\n'
    )
    return path


def _received(sm: StorageManager, queue: str) -> dict[str, tuple[bytes, dict[str, object]]]:
    out: dict[str, tuple[bytes, dict[str, object]]] = {}
    while batch := sm.receive(queue, 100):
        for d in batch:
            m = d.message
            body = m.open_body().read() if m.is_large else m.body
            assert isinstance(body, bytes)
            out[str(m.properties["key"])] = (body, dict(m.properties))
    return out


def test_recover_brings_back_every_message_ever_sent(tmp_path: Path) -> None:
    config_path = _config_file(tmp_path)
    config = load_config(config_path)
    sent: dict[str, dict[str, tuple[bytes, dict[str, object]]]] = {"orders": {}, "audit": {}}
    store = open_store(config)
    journal = store.messages
    assert isinstance(journal, FileJournal)
    with StorageManager(store) as sm:
        sm.load()
        sm.create_address("orders")
        sm.create_queue("orders", address="orders")
        sm.create_queue("audit", address="orders")
        for i in range(120):
            props: dict[str, object] = {"key": f"m{i}", "n": i, "even": i % 2 == 0}
            body = f"order-{i}:".encode() * 20
            sm.send(Message("orders", body, properties=dict(props)))  # type: ignore[arg-type]
            for q in sent:
                sent[q][f"m{i}"] = (body, props)
        # A large message that stays (its body file stays) and one that is acked (body gone).
        big = b"B" * 5000
        sm.send(Message("orders", big, properties={"key": "big-kept"}))
        gone_id = sm.send(Message("orders", b"G" * 5000, properties={"key": "big-gone"}))
        for q in sent:
            sent[q]["big-kept"] = (big, {"key": "big-kept"})
        # Sends of a transaction rolled back come back too (Artemis's recover does the same).
        tx = sm.begin()
        for i in range(3):
            tx.send(Message("orders", f"rolled-{i}".encode(), properties={"key": f"rb{i}"}))
            for q in sent:
                sent[q][f"rb{i}"] = (f"rolled-{i}".encode(), {"key": f"rb{i}"})
        tx.rollback()
        # Consume almost everything from both queues: the journal reclaims its files.
        for q in ("orders", "audit"):
            while batch := sm.receive(q, 50):
                for d in batch:
                    if d.message.properties["key"] not in ("m119", "big-kept"):
                        sm.ack(q, d.message.message_id or 0)
                    else:
                        sm.cancel(q, d.message.message_id or 0)
                # The maintenance thread reclaims on its own, but when the machine is busy it
                # may lag behind the acks: reclaim here, so later appends reuse the files.
                journal.reclaim()
                if all(d.message.properties["key"] in ("m119", "big-kept") for d in batch):
                    break
        assert sm.depth("orders") == 2 and sm.depth("audit") == 2
    # Files were reclaimed: the history holds copies of data files the journal no longer has
    # (a history copy is named data-<stamp>-<file id>.jrn, a journal file data-<file id>.jrn).
    journal_names = [n for n in os.listdir(tmp_path / "journal") if n.endswith(".jrn")]
    in_journal = {n.rsplit("-", 1)[1] for n in journal_names}
    in_history = {n.rsplit("-", 1)[1] for n in os.listdir(tmp_path / "history")}
    assert in_history - in_journal

    target = tmp_path / "recovered"
    done = _cli("data", "recover", "--config", str(config_path), "--target", str(target))
    assert done.returncode == 1, done.stdout + done.stderr  # 1: a large message was left out
    assert "wrote 124 messages (1 large), 248 queue references" in done.stdout
    assert "left out 1 large message(s) whose body is gone" in done.stdout
    assert str(gone_id) in done.stdout

    # The recovered journal, opened with the original bindings and large-message folder,
    # delivers every message ever sent on both queues, bodies and properties intact.
    recovered = config.replace(journal_directory=str(target), journal_retention=None)
    with StorageManager(open_store(recovered)) as sm:
        rec = sm.load()
        assert rec.messages == 124
        for q, expected in sent.items():
            assert _received(sm, q) == expected


def test_record_level_recovery_stays_available_with_records(tmp_path: Path) -> None:
    config_path = _config_file(tmp_path)
    with StorageManager(open_store(load_config(config_path))) as sm:
        sm.load()
        sm.create_address("a")
        sm.create_queue("a", address="a")
        for i in range(60):
            sm.send(Message("a", b"x" * 100, properties={"key": i}))
        while batch := sm.receive("a", 50):
            for d in batch:
                sm.ack("a", d.message.message_id or 0)
    target = tmp_path / "live"
    done = _cli(
        "data", "recover", "--records", "--config", str(config_path), "--target", str(target)
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "wrote 0 records" in done.stdout  # the live state: every message was acked
    with StorageManager(
        open_store(
            StoreConfig.from_mapping(
                {
                    "journal-directory": str(target),
                    "bindings-directory": str(tmp_path / "bindings"),
                    "journal-file-size": SIZE,
                    "journal-type": "NIO",
                }
            )
        )
    ) as sm:
        assert sm.load().messages == 0
