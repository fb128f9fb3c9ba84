"""One node of a shared-store HA pair run as a process: what ``store ha run`` does (docs/ha.md).

::

    from store.node import NodeRunner

    runner = NodeRunner(config, "backup", acknowledged=print)
    result = runner.run()        # waits to go live, writes until stopped: NodeRunResult

:class:`NodeRunner` goes live through the node manager (:func:`store.ha.go_live`) and then
sends durable messages through the storage manager (:func:`steady_writer`), so this package
sits above :mod:`store.messaging` and :mod:`store.ha` both; ``store.ha`` itself imports
nothing above the back-ends. Module: :mod:`~store.node.runner`.

Thread-safety: see :class:`NodeRunner`.
"""

from __future__ import annotations

from store.node.runner import SMOKE_QUEUE, NodeRunner, NodeRunResult, steady_writer

__all__ = ["SMOKE_QUEUE", "NodeRunResult", "NodeRunner", "steady_writer"]
