"""Reading SQLStates out of database errors, JDBC's or a Python driver's, without the JDBC
extra: the store classifies errors of every back-end with these, so they live apart from
:mod:`store.db.jdbc_dbapi` (which imports JayDeBeApi) and a base install can import them.

Thread-safety: pure functions.
"""

from __future__ import annotations

__all__ = ["booted_elsewhere", "sqlstate_of"]

# SQLStates meaning "another process has this embedded database open" (Derby's XSDB6).
_BOOTED_ELSEWHERE = frozenset({"XSDB6"})


def booted_elsewhere(exc: BaseException) -> bool:
    """True if ``exc`` (or what it wraps) says another process holds the embedded database."""
    seen: BaseException | None = exc
    for _ in range(10):
        if seen is None:
            return False
        if _BOOTED_ELSEWHERE.intersection(getattr(seen, "sqlstates", None) or ()):
            return True
        seen = getattr(seen, "orig", None) or seen.__cause__
    return False


def sqlstate_of(exc: BaseException) -> str | None:
    """The SQLState of a wrapped or Java SQL exception, or None."""
    state = getattr(exc, "sqlstate", None)
    if state:
        return str(state)
    getter = getattr(exc, "getSQLState", None)
    return str(getter()) if getter is not None and getter() is not None else None
