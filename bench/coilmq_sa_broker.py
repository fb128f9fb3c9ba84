"""coilmq 1.1.0's broker on its SQLAlchemy store (``coilmq.store.sa``), for ``bench.stomp``.

This script runs in a virtualenv of its own (``bench.coilmq_sa`` makes it: coilmq 1.1.0,
SQLAlchemy 1.x, psycopg2), not in the project's, whose SQLAlchemy 2 coilmq's store cannot use
(it calls ``MetaData(bind=...)`` and ``select([...])``). So it imports nothing of ``store`` and
nothing of ``bench``; ``bench.coilmq_sa`` starts it as
``<venv>/bin/python bench/coilmq_sa_broker.py --port P --url URL``.

The store is set up as coilmq's own ``qstore.factory = coilmq.store.sa:make_sa`` does it:
the URL (and the pool size, see ``--pool-size``) go into coilmq's configuration under
``qstore.sqlalchemy.``, and :func:`coilmq.store.sa.make_sa` builds the engine with
``engine_from_config``, creates the ``frames`` table and returns an ``SAQueue``. The broker is
coilmq's ``ThreadedStompServer`` with ``QueueManager(store)`` and a ``TopicManager``, as
``bench.stomp`` runs coilmq on its dbm store.

SIGTERM or SIGINT stops it: the server stops accepting, ``server_close`` closes the queue
manager (and so the store), the engine's pool is disposed and the process exits 0. The
caller drops the database.
"""

from __future__ import annotations

import argparse
import logging
import signal
import threading
from typing import Any


def main() -> int:
    """Serve until SIGTERM or SIGINT; return the exit status (0)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True, help="loopback port to listen on")
    parser.add_argument("--url", required=True, help="SQLAlchemy URL of an empty database")
    parser.add_argument(
        "--pool-size", type=int, default=40,
        help="the engine's pool_size (SQLAlchemy's default is 5, plus 10 overflow). Each of the"
        " server's connection threads has a session of its own (coilmq's scoped_session),"
        " and a session that only read (has_frames) keeps its connection until its next"
        " commit; with 16+16 clients SQLAlchemy's 15 run out while coilmq's queue manager"
        " holds its global lock. 40 covers the benchmark's 32 clients.",
    )  # fmt: skip
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)

    from coilmq.config import config
    from coilmq.queue import QueueManager
    from coilmq.server.socket_server import ThreadedStompServer
    from coilmq.store.sa import make_sa
    from coilmq.topic import TopicManager

    config.set("coilmq", "qstore.sqlalchemy.url", args.url)
    config.set("coilmq", "qstore.sqlalchemy.pool_size", str(args.pool_size))
    store = make_sa()
    server = ThreadedStompServer(
        ("127.0.0.1", args.port),
        queue_manager=QueueManager(store),
        topic_manager=TopicManager(),
    )
    stop = threading.Event()

    def on_signal(signum: int, frame: Any) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    # serve_forever in a thread of its own: shutdown() waits for it to leave its loop, which
    # it could not do if the signal handler called it from the loop's own thread.
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    while not stop.wait(0.5):  # a timed wait, so the signal handler runs promptly
        pass
    server.shutdown()
    thread.join()
    server.server_close()

    from coilmq.store.sa import meta

    meta.engine.dispose()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
