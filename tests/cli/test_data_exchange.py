"""``store data exp`` / ``store data imp`` through the real entry point (``store.cli.main.main``
in this process; a subprocess where this process holds the store, a working folder matters or
the peak memory is measured), on the file store, PostgreSQL and SQLite.

"Identical XML" in these tests means: the same bytes, except (where the test says "modulo
ids") the values of ``id="…"`` attributes, which ``imp`` assigns anew. Byte identity is checked
where it holds: the same XML imported into two fresh stores of different back-ends exports to
the same bytes, ids included (both stores assign the same ids in the same order).
"""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import store
from store import load_config, open_store
from store.db.migrate import drop_schema
from store.messaging import Message, StorageManager
from tests.support.backends import unique_prefix
from tests.support.cli import run_store_here
from tests.support.db_backends import new_store_mapping

ROOT = Path(store.__file__).resolve().parent.parent
HANDWRITTEN = (
    Path(__file__).resolve().parent.parent / "testdata" / "xml" / "artemis-handwritten.xml"
)
_IDS = re.compile(rb' id="-?\d+"')

SETTINGS = (
    "min-large-message-size = 2048\n"
    '[address-settings."paged"]\n'
    "max-size-messages = 2\n"
    'page-size-bytes = "4K"\n'
    '[address-settings."full"]\n'
    "max-size-messages = 2\n"
    'address-full-policy = "FAIL"\n'
)


def run(
    *argv: str, timeout: float = 120, cwd: Path | None = None, process: bool = False
) -> subprocess.CompletedProcess[bytes]:
    """``store <argv>``: through ``store.cli.main.main`` in this process, or in a subprocess
    (in ``cwd``, with this checkout on PYTHONPATH) when ``process`` or ``cwd`` asks for one:
    where this process holds the store's lock, or a relative path must resolve elsewhere."""
    if not process and cwd is None:
        done = run_store_here(*argv, env={"COLUMNS": "100"})
        return subprocess.CompletedProcess(
            done.args, done.returncode, done.stdout.encode(), done.stderr.encode()
        )
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    return subprocess.run(
        [sys.executable, "-m", "store.cli.main", *argv],
        capture_output=True,
        env={**os.environ, "PYTHONPATH": path, "COLUMNS": "100"},
        timeout=timeout,
        check=False,
        cwd=cwd,
    )


def _toml_value(value: Any) -> str:
    return f'"{value}"' if isinstance(value, str) else str(value).lower()


class Backend:
    """One store for a test: its configuration file, and cleanup of what it made."""

    def __init__(self, kind: str, tmp_path: Path, name: str) -> None:
        self.kind = kind
        self.dir = tmp_path / name
        self.dir.mkdir()
        self.path = self.dir / "store.toml"
        if kind == "file":
            text = "".join(
                f'{key} = "{self.dir / "data" / sub}"\n'
                for key, sub in (
                    ("journal-directory", "journal"),
                    ("bindings-directory", "bindings"),
                    ("large-messages-directory", "large"),
                    ("paging-directory", "paging"),
                )
            )
            text += 'journal-file-size = "1M"\n' + SETTINGS
        else:
            mapping = new_store_mapping(self.dir, unique_prefix(), kind)["database-store"]
            text = (
                SETTINGS
                + "[database-store]\n"
                + "".join(f"{k} = {_toml_value(v)}\n" for k, v in mapping.items())
            )
        self.path.write_text(text)
        self.config = load_config(self.path)

    def exists(self) -> bool:
        """True when anything of the store was created."""
        if self.kind == "file":
            return (self.dir / "data").exists()
        if self.kind == "sqlite":
            return (self.dir / "store.db").exists()
        from store.db.migrate import current

        return current(self.config).current is not None

    def manager(self) -> StorageManager:
        sm = StorageManager(open_store(self.config))
        sm.load()
        return sm

    def cleanup(self) -> None:
        if self.kind not in ("file", "sqlite"):
            drop_schema(self.config)

    def exp(self, *extra: str, process: bool = False) -> subprocess.CompletedProcess[bytes]:
        return run("data", "exp", "--config", str(self.path), "-q", *extra, process=process)

    def imp(self, path: Path, *extra: str) -> subprocess.CompletedProcess[bytes]:
        return run("data", "imp", "--config", str(self.path), "--input", str(path), "-q", *extra)


@pytest.fixture
def stores(tmp_path: Path) -> Iterator[Any]:
    made: list[Backend] = []

    def make(kind: str) -> Backend:
        backend = Backend(kind, tmp_path, f"{kind}-{len(made)}")
        made.append(backend)
        return backend

    yield make
    for backend in made:
        backend.cleanup()


def _ok(done: subprocess.CompletedProcess[bytes]) -> bytes:
    assert done.returncode == 0, done.stderr.decode()
    return done.stdout


def populate(backend: Backend) -> dict[str, int]:
    """Addresses, queues and messages of every kind the export must carry: every property
    type, a partly acknowledged message, an acknowledged one, a delivered one, a scheduled
    one, a large one and paged ones. Returns the message ids by name."""
    with backend.manager() as sm:
        sm.create_address("orders", routing_types=("ANYCAST", "MULTICAST"))
        sm.create_queue("orders.eu", address="orders", routing_type="ANYCAST", filter="r='eu'")
        sm.create_queue("orders.all", address="orders", routing_type="MULTICAST")
        sm.create_address("paged", routing_types=("ANYCAST",))
        sm.create_queue("paged.q", address="paged")
        sm.create_address("empty", routing_types=("MULTICAST",))
        ids = {}
        props = {
            "n": None,
            "t": True,
            "f": False,
            "i": -(2**63),
            "x": 1.25,
            "inf": float("-inf"),
            "s": 'quote " amp & lt < nl \n tab \t é',
            "b": b"\x00\xfe\xff",
        }
        ids["all"] = sm.send(
            Message(
                "orders",
                b"body-1",
                priority=7,
                expiration=4102444800000,
                timestamp=1700000000000,
                properties=props,
            )
        )
        ids["acked"] = sm.send(Message("orders", b"acked"), queues=["orders.eu"])
        ids["partly"] = sm.send(Message("orders", b"partly"))
        ids["scheduled"] = sm.send(
            Message("orders", b"later", scheduled_delivery=4102444800000), queues=["orders.all"]
        )
        ids["large"] = sm.send(
            Message("orders", io.BytesIO(bytes(range(256)) * 40)), queues=["orders.eu"]
        )
        for i in range(5):
            ids[f"paged{i}"] = sm.send(
                Message("paged", f"paged-{i}".encode() * 20, properties={"i": i})
            )
        for d in sm.receive("orders.eu", max_messages=3):  # all, acked, partly
            if d.message.message_id in (ids["acked"], ids["partly"]):
                sm.ack("orders.eu", d.message.message_id)
        assert sm.depth("paged.q") == 5
    return ids


def _messages(xml: bytes) -> list[bytes]:
    return re.findall(rb"<message .*?</message>", xml, re.S)


# -- export ----------------------------------------------------------------------------------


def test_export_writes_every_binding_and_every_message_still_on_a_queue(stores: Any) -> None:
    source = stores("file")
    ids = populate(source)
    xml = _ok(source.exp())
    text = xml.decode()
    # Artemis's layout: no declaration, a newline before each line, none after the last
    assert text.startswith("\n<activemq-journal>\n   <bindings>\n")
    assert text.endswith("\n   </messages>\n</activemq-journal>")
    assert '<address-binding routing-types="ANYCAST,MULTICAST" name="orders" id="' in text
    assert '<address-binding routing-types="MULTICAST" name="empty" id="' in text
    assert re.search(
        r'<queue-binding address="orders" filter-string="r=\'eu\'" name="orders.eu" id="\d+" routing-type="ANYCAST"/>',  # noqa: E501
        text,
    )
    assert re.search(
        r'<queue-binding address="paged" filter-string="" name="paged.q" id="\d+" routing-type="ANYCAST"/>',  # noqa: E501
        text,
    )
    messages = _messages(xml)
    exported = [int(re.search(rb'<message id="(\d+)"', m).group(1)) for m in messages]  # type: ignore[union-attr]
    expected = sorted(v for k, v in ids.items() if k != "acked")
    assert exported == expected  # once each, ascending ids, paged ones included
    by_id = dict(zip(exported, messages, strict=True))
    first = by_id[ids["all"]].decode()
    assert (
        'priority="7" expiration="4102444800000" timestamp="1700000000000" type="default"' in first
    )
    for prop in (
        '<property name="n" value="_AMQ_NULL" type="bytes"/>',
        '<property name="t" value="true" type="boolean"/>',
        '<property name="i" value="-9223372036854775808" type="long"/>',
        '<property name="x" value="1.25" type="double"/>',
        '<property name="inf" value="-Infinity" type="double"/>',
        '<property name="s" value="quote &quot; amp &amp; lt &lt; nl &#10; tab &#9; é" type="string"/>',  # noqa: E501
        '<property name="b" value="AP7_" type="bytes"/>',
    ):
        assert prop in first
    assert '<queue name="orders.all"/>' in first and '<queue name="orders.eu"/>' in first
    assert "<![CDATA[Ym9keS0x]]>" in first
    partly = by_id[ids["partly"]].decode()
    assert '<queue name="orders.all"/>' in partly and "orders.eu" not in partly
    later = by_id[ids["scheduled"]].decode()
    assert '<property name="_AMQ_SCHED_DELIVERY" value="4102444800000" type="long"/>' in later
    large = by_id[ids["large"]].decode()
    sections = re.findall(r"^ +<!\[CDATA\[([^\]]*)\]\]>$", large, re.M)  # one a line
    assert '<body isLarge="true">' in large and len(sections) == 11  # 10240 bytes, 1000 a section
    import base64

    assert b"".join(base64.urlsafe_b64decode(s) for s in sections) == bytes(range(256)) * 40


def test_export_changes_nothing_a_user_would_notice(stores: Any) -> None:
    source = stores("file")
    ids = populate(source)
    first = _ok(source.exp())
    assert _ok(source.exp()) == first  # and again: nothing moved
    with source.manager() as sm:
        assert (
            sm.depth("orders.eu") == 2 and sm.depth("orders.all") == 3 and sm.depth("paged.q") == 5
        )
        deliveries = sm.receive("paged.q", max_messages=10) + sm.receive(
            "orders.eu", max_messages=10
        )
        assert all(d.delivery_count == 0 for d in deliveries if d.queue == "paged.q")
        # the message delivered before the exports was not delivered by them either
        counts = {d.message.message_id: d.delivery_count for d in deliveries}
        assert counts[ids["large"]] == 0 and counts[ids["all"]] == 0


def test_export_to_a_file_replaces_it_only_when_complete(stores: Any, tmp_path: Path) -> None:
    source = stores("file")
    populate(source)
    out = tmp_path / "export.xml"
    out.write_bytes(b"old")
    done = run("data", "exp", "--config", str(source.path), "--output", str(out))
    assert done.returncode == 0 and done.stdout == b""
    assert b"exported 3 addresses, 3 queues, 9 messages" in done.stderr  # progress and summary
    # one line, however long, at 100 columns too (issue 44: cut at the width, "in 0.0\ns to")
    [summary] = [line for line in done.stderr.splitlines() if line.startswith(b"exported")]
    assert summary.endswith(b" s to " + str(out).encode()), summary
    assert out.read_bytes() == _ok(source.exp())
    quiet = run("data", "exp", "--config", str(source.path), "--output", str(out), "--quiet")
    assert quiet.returncode == 0 and quiet.stderr == b""  # no progress, no summary
    with open_store(source.config):  # held by this process: the export is refused
        done = run("data", "exp", "--config", str(source.path), "--output", str(out))
    assert done.returncode == 3 and b"Traceback" not in done.stderr
    assert str(os.getpid()).encode() in done.stderr  # names the holder
    assert out.read_bytes() == _ok(source.exp())  # untouched by the failed export
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".export")) == []


@pytest.mark.parametrize("kind", ["file", "postgresql"])
def test_export_of_a_store_a_live_process_holds_is_refused(stores: Any, kind: str) -> None:
    source = stores(kind)
    populate(source)
    with source.manager():
        done = source.exp(process=True)
    assert done.returncode == 3, done.stderr
    assert re.search(rf"pid[ =]{os.getpid()}\b".encode(), done.stderr)  # names the holder
    assert done.stdout == b"" and len(done.stderr.strip().splitlines()) <= 2
    assert b"Traceback" not in done.stderr


def test_export_never_creates_a_store(stores: Any) -> None:
    for kind in ("file", "postgresql", "sqlite"):
        target = stores(kind)
        done = target.exp()
        assert done.returncode == 2 and b"no " in done.stderr, done.stderr
        assert not target.exists()


def test_export_to_an_unwritable_output_fails_before_the_store_is_opened(
    stores: Any, tmp_path: Path
) -> None:
    source = stores("file")
    populate(source)
    with source.manager():  # a locked store would fail with exit 3: the output fails first
        done = run(
            "data", "exp", "--config", str(source.path), "--output", str(tmp_path / "no" / "x.xml")
        )
    # exit 2, an input error: 4 ("unavailable") is what a script retries, for ever here
    assert done.returncode == 2
    assert (
        done.stderr.decode().strip()
        == f"store: error: cannot write {tmp_path / 'no' / 'x.xml'}: No such file or directory"
    )


# -- round trips -----------------------------------------------------------------------------


def test_round_trip_file_to_postgresql_gives_identical_xml(stores: Any, tmp_path: Path) -> None:
    source = stores("file")
    populate(source)
    first = tmp_path / "first.xml"
    _ok(source.exp("--output", str(first)))
    target = stores("postgresql")
    _ok(target.imp(first))
    second = _ok(target.exp())
    # modulo ids: imp assigns new ones
    assert _IDS.sub(b"", second) == _IDS.sub(b"", first.read_bytes())
    assert len(_messages(second)) == 9


def test_the_same_xml_into_fresh_stores_of_each_back_end_exports_byte_identical(
    stores: Any, tmp_path: Path
) -> None:
    source = stores("file")
    populate(source)
    first = tmp_path / "first.xml"
    first.write_bytes(_ok(source.exp()))
    exports = []
    for kind in ("file", "postgresql", "sqlite"):
        target = stores(kind)
        _ok(target.imp(first, "--commit-interval", "3"))
        exports.append(_ok(target.exp()))
    assert exports[0] == exports[1] == exports[2]  # ids included
    assert _IDS.sub(b"", exports[0]) == _IDS.sub(b"", first.read_bytes())


# -- import ----------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["file", "postgresql", "mariadb"])
def test_a_handwritten_artemis_export_imports_and_is_delivered(stores: Any, kind: str) -> None:
    target = stores(kind)
    done = run("data", "imp", "--config", str(target.path), "--input", str(HANDWRITTEN))
    assert done.returncode == 0, done.stderr
    assert (
        b"imported 4 messages (1 large, 106 body bytes); created 2 addresses and 3 queues"
        in done.stdout
    )
    with target.manager() as sm:
        assert {(a.name, a.routing_types) for a in sm.addresses()} == {
            ("orders", ("ANYCAST", "MULTICAST")),
            ("audit", ("ANYCAST",)),
        }
        queues = {q.name: (q.address, q.routing_type, q.filter) for q in sm.queues()}
        assert queues == {
            "orders.eu": ("orders", "ANYCAST", "region = 'eu'"),
            "orders.all": ("orders", "MULTICAST", None),
            "audit": ("audit", "ANYCAST", None),
        }
        (eu,) = sm.receive("orders.eu", max_messages=10)
        m = eu.message
        assert (m.priority, m.expiration, m.timestamp) == (7, 4102444800000, 1700000000000)
        assert m.body == b"hello world" and m.scheduled_delivery == 0
        assert m.properties == {
            "flag": True,
            "tiny": -128,
            "blob": b"\xfb\xff\xfe",
            "small": 32767,
            "medium": -(2**31),
            "big": 2**63 - 1,
            "ratio": 1.5,
            "precise": -0.1,
            "infinite": float("-inf"),
            "text": 'café <&> "q"',
            "simple": "simple value",
            "nothing": None,
            "nothing-string": None,
        }
        assert list(m.properties)[:3] == ["flag", "tiny", "blob"]  # the file's order
        # Artemis's headers as the file says, not widened
        assert (m.message_type, m.user_id) == ("bytes", "0b6a2e4c-1f0d-11ee-be56-0242ac120002")
        assert m.property_types == {
            "tiny": "byte",
            "small": "short",
            "medium": "integer",
            "ratio": "float",
            "simple": "simple-string",
            "nothing-string": "string",
        }
        all_ = sm.receive("orders.all", max_messages=10)
        assert [d.message.body for d in all_[:1]] == [b"hello world"]
        large = all_[1].message
        with large.open_body() as body:
            assert body.read() == bytes(range(25))
        audit = sm.receive("audit", max_messages=10)
        assert [d.message.body for d in audit] == [
            b"Plain text, as a text message may carry: <not markup> & more."
        ]
        assert audit[0].message.message_type == "text" and audit[0].message.user_id is None
        assert audit[0].message.properties == {"std-alphabet": b"\xfb\xff\xfe"}
        assert sm.depth("audit") == 2  # the scheduled one is held until its time
        held = [m for m, queues in sm.browse() if queues == ("audit",) and m.body == b"scheduled"]
        assert [(m.scheduled_delivery, m.properties) for m in held] == [
            (4102444800000, {"kind": "scheduled"})
        ]


# Artemis 1.5's export: <binding> elements with JMS prefixes, a topic's placeholder queue.
OLD_EXPORT = """<?xml version="1.0"?>
<activemq-journal>
   <bindings>
      <binding address="jms.queue.orders" filter-string="" queue-name="jms.queue.orders" id="2"/>
      <binding address="jms.topic.news" filter-string="__AMQX=-1" queue-name="jms.topic.news" id="3"/>
      <binding address="jms.topic.news" filter-string="kind = 'a'" queue-name="client.sub" id="4"/>
   </bindings>
   <messages>
      <message id="6" priority="4" expiration="0" timestamp="5" type="text">
         <properties/>
         <queues>
            <queue name="jms.queue.orders"/>
         </queues>
         <body>
            <![CDATA[b3JkZXI=]]>
         </body>
      </message>
      <message id="7" priority="4" expiration="0" timestamp="6" type="text">
         <properties/>
         <queues>
            <queue name="client.sub"/>
         </queues>
         <body>
            <![CDATA[bmV3cw==]]>
         </body>
      </message>
   </messages>
</activemq-journal>
"""  # noqa: E501


def test_an_artemis_1x_export_imports_as_artemis_imports_it(stores: Any, tmp_path: Path) -> None:
    target = stores("file")
    path = tmp_path / "artemis-1.5.xml"
    path.write_text(OLD_EXPORT)
    done = target.imp(path)
    assert done.returncode == 0, done.stderr.decode()
    with target.manager() as sm:
        assert {(a.name, a.routing_types) for a in sm.addresses()} == {
            ("orders", ("ANYCAST",)),
            ("news", ("MULTICAST",)),
        }
        assert {(q.name, q.address, q.routing_type, q.filter) for q in sm.queues()} == {
            ("orders", "orders", "ANYCAST", None),
            ("client.sub", "news", "MULTICAST", "kind = 'a'"),
        }
        assert [d.message.body for d in sm.receive("orders")] == [b"order"]
        assert [d.message.body for d in sm.receive("client.sub")] == [b"news"]


# -- failures --------------------------------------------------------------------------------


def _prefill_full_address(target: Backend) -> None:
    """Address ``full`` (FAIL policy, at most 2 messages in memory) already holding 2."""
    with target.manager() as sm:
        sm.create_address("full", routing_types=("ANYCAST",))
        sm.create_queue("full.q", address="full")
        for i in range(2):
            sm.send(Message("full", f"old-{i}".encode()))


def _failing_file(tmp_path: Path) -> Path:
    """Five messages for a new address, then one for the full address (refused: FAIL)."""
    messages = "".join(
        f'<message id="{i}" priority="4" expiration="0" timestamp="{i + 1}" type="default">'
        f'<properties/><queues><queue name="new.q"/></queues><body><![CDATA[bmV3]]></body></message>\n'  # noqa: E501
        for i in range(5)
    )
    messages += (
        '<message id="9" priority="4" expiration="0" timestamp="0" type="default"><properties/>'
        '<queues><queue name="full.q"/></queues><body><![CDATA[ZnVsbA==]]></body></message>\n'
    )
    path = tmp_path / "failing.xml"
    path.write_text(
        '<?xml version="1.0"?>\n<activemq-journal><bindings>\n'
        '<address-binding routing-types="ANYCAST" name="new" id="1"/>\n'
        '<address-binding routing-types="ANYCAST" name="full" id="2"/>\n'
        '<queue-binding address="new" filter-string="" name="new.q" id="3" routing-type="ANYCAST"/>\n'  # noqa: E501
        '<queue-binding address="full" filter-string="" name="full.q" id="4" routing-type="ANYCAST"/>\n'  # noqa: E501
        f"</bindings><messages>\n{messages}</messages></activemq-journal>\n"
    )
    return path


@pytest.mark.parametrize("kind", ["file", "postgresql"])
def test_a_failed_import_keeps_what_it_committed(stores: Any, tmp_path: Path, kind: str) -> None:
    target = stores(kind)
    _prefill_full_address(target)
    done = target.imp(_failing_file(tmp_path), "--commit-interval", "2")
    assert done.returncode == 6 and b"address 'full' is full" in done.stderr
    assert b"Traceback" not in done.stderr
    with target.manager() as sm:
        # batches [0, 1] and [2, 3] committed; [4, the refused one] rolled back
        assert sm.depth("new.q") == 4 and sm.depth("full.q") == 2
        # (timestamps from 1: a send stamps a timestamp of 0 with the send time)
        assert [d.message.timestamp for d in sm.receive("new.q", max_messages=10)] == [1, 2, 3, 4]


@pytest.mark.parametrize("kind", ["file", "postgresql"])
def test_a_failed_transactional_import_keeps_nothing(
    stores: Any, tmp_path: Path, kind: str
) -> None:
    target = stores(kind)
    _prefill_full_address(target)
    done = target.imp(_failing_file(tmp_path), "--transactional")
    assert done.returncode == 6 and b"address 'full' is full" in done.stderr
    with target.manager() as sm:
        # nothing imported, and the address and queue it created are gone again
        assert [q.name for q in sm.queues()] == ["full.q"]
        assert [a.name for a in sm.addresses()] == ["full"]
        assert sm.depth("full.q") == 2


def test_an_unreadable_input_fails_before_a_store_is_created(stores: Any, tmp_path: Path) -> None:
    target = stores("file")
    missing = tmp_path / "missing.xml"
    done = target.imp(missing)
    assert done.returncode == 2  # a usage error: the store is not unavailable
    assert (
        done.stderr.decode() == f"store: error: cannot read {missing}: No such file or directory\n"
    )
    assert not target.exists()


@pytest.mark.parametrize("kind", ["file", "postgresql"])
def test_a_malformed_file_imports_nothing_and_names_line_and_column(
    stores: Any, tmp_path: Path, kind: str
) -> None:
    target = stores(kind)
    good = HANDWRITTEN.read_text()
    broken = tmp_path / "broken.xml"
    # the fault is in the last message: a check pass must refuse the whole file
    last = good.rindex("</message>")
    broken.write_text(good[:last] + "</mesage>" + good[last + len("</message>") :])
    done = target.imp(broken, "--commit-interval", "1")
    line = good[:last].count("\n") + 1
    column = last - good.rindex("\n", 0, last) + 2  # 1-based, past the "</"
    assert done.returncode == 7  # bad input
    err = done.stderr.decode()
    assert err == f"store: error: {broken}: line {line}, column {column}: mismatched tag\n"
    assert not target.exists()


ATTACKS = {
    "external-entity": (
        '<?xml version="1.0"?>\n<!DOCTYPE x [<!ENTITY xxe SYSTEM "file:///etc/passwd">]>\n'
        "<activemq-journal><bindings>&xxe;</bindings></activemq-journal>\n"
    ),
    "parameter-entity": (
        '<?xml version="1.0"?>\n<!DOCTYPE x [<!ENTITY % p SYSTEM "http://127.0.0.1:9/x.dtd"> %p;]>\n'  # noqa: E501
        "<activemq-journal/>\n"
    ),
    "billion-laughs": (
        '<?xml version="1.0"?>\n<!DOCTYPE x [<!ENTITY a "aaaaaaaaaa">'
        + "".join(
            f'<!ENTITY {c} "{("&" + p + ";") * 10}">'
            for p, c in zip("abcdefgh", "bcdefghi", strict=True)
        )
        + ']>\n<activemq-journal><bindings><address-binding name="&i;"/></bindings></activemq-journal>\n'  # noqa: E501
    ),
    "quadratic-blowup": (
        '<?xml version="1.0"?>\n<!DOCTYPE x [<!ENTITY big "' + "B" * 100_000 + '">]>\n'
        '<activemq-journal><bindings><address-binding name="' + "&big;" * 20_000 + '"/></bindings>'
        "</activemq-journal>\n"
    ),
}


@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_xml_attacks_are_refused_and_nothing_is_imported(
    stores: Any, tmp_path: Path, attack: str
) -> None:
    target = stores("file")
    path = tmp_path / f"{attack}.xml"
    path.write_text(ATTACKS[attack])
    done = target.imp(path)
    assert done.returncode == 7  # bad input
    err = done.stderr.decode()
    assert err.startswith(f"store: error: {path}: line 2, column ") and "DOCTYPE" in err
    assert err.count("\n") == 1
    assert not target.exists()


def test_an_existing_queue_on_another_address_is_refused_before_anything_is_created(
    stores: Any, tmp_path: Path
) -> None:
    target = stores("file")
    with target.manager() as sm:
        sm.create_address("elsewhere")
        sm.create_queue("audit", address="elsewhere")
    done = target.imp(HANDWRITTEN)
    assert (
        done.returncode == 7
        and b"queue 'audit' exists in the store on address 'elsewhere'" in done.stderr
    )
    with target.manager() as sm:
        assert [a.name for a in sm.addresses()] == ["elsewhere"]


def test_existing_addresses_and_queues_are_reused(stores: Any) -> None:
    target = stores("file")
    with target.manager() as sm:
        sm.create_address("audit", routing_types=("ANYCAST",))
        sm.create_queue("audit", address="audit")
        sm.send(Message("audit", b"already here"))
    done = target.imp(HANDWRITTEN)
    assert done.returncode == 0 and b"created 1 addresses and 2 queues" in done.stdout
    with target.manager() as sm:
        assert sm.depth("audit") == 3


# -- bounded memory --------------------------------------------------------------------------

_MEASURED = (
    "import resource, sys\n"
    "from store.cli.main import main\n"
    "code = main(sys.argv[1:])\n"
    "print('MAXRSS', resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr)\n"
    "sys.exit(code)\n"
)


class _Pattern:
    """A stream of ``size`` bytes of a repeating pattern, never held whole."""

    def __init__(self, size: int) -> None:
        self.left = size
        self.block = bytes(range(256)) * 4096

    def read(self, n: int = -1) -> bytes:
        n = min(self.left if n < 0 else n, self.left, len(self.block))
        self.left -= n
        return self.block[:n]


def _peak_rss_kib(*argv: str) -> int:
    """Peak RSS (KiB) of ``store <argv>`` run in its own process through ``main``."""
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    done = subprocess.run(
        [sys.executable, "-c", _MEASURED, *argv],
        capture_output=True,
        env={**os.environ, "PYTHONPATH": path},
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode()
    return int(done.stderr.decode().rsplit("MAXRSS", 1)[1].split()[0])


def _exp_imp_peaks(stores: Any, tmp_path: Path, body: Any, name: str) -> tuple[int, int]:
    source = stores("file")
    with source.manager() as sm:
        sm.create_address("big")
        sm.create_queue("big.q", address="big")
        sm.send(Message("big", body))
    xml = tmp_path / f"{name}.xml"
    exp = _peak_rss_kib("data", "exp", "-q", "--config", str(source.path), "--output", str(xml))
    target = stores("file")
    imp = _peak_rss_kib("data", "imp", "-q", "--config", str(target.path), "--input", str(xml))
    return exp, imp


def test_a_256_mib_large_message_exports_and_imports_in_bounded_memory(
    stores: Any, tmp_path: Path
) -> None:
    """Growth of each process's peak RSS over the same command on a store with one small
    message stays under 64 MiB for a 256 MiB body (bench/xml_large_message.py does 1 GiB)."""
    size = 256 << 20
    small = _exp_imp_peaks(stores, tmp_path, b"small", "small")
    large = _exp_imp_peaks(stores, tmp_path, _Pattern(size), "large")
    growth = [(big - base) / 1024 for big, base in zip(large, small, strict=True)]
    assert all(g < 64 for g in growth), f"exp, imp grew by {growth} MiB"
    assert (tmp_path / "large.xml").stat().st_size > size * 4 // 3  # the body is in it


@pytest.mark.parametrize("command", ["exp", "imp"])
def test_an_unreadable_configuration_is_one_line_naming_it(tmp_path: Path, command: str) -> None:
    missing = tmp_path / "missing.toml"
    extra = ["--input", str(HANDWRITTEN)] if command == "imp" else []
    done = run("data", command, "--config", str(missing), *extra, cwd=tmp_path)
    assert done.returncode == 2 and done.stdout == b""
    err = done.stderr.decode()
    assert err.count("\n") == 1 and str(missing) in err and "Traceback" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # not even the default ./data
