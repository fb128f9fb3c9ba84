"""Reading SQLStates out of database errors, JDBC's or a Python driver's, without the JDBC
extra: the store classifies errors of every back-end with these, so they live apart from
:mod:`store.db.jdbc_dbapi` (which imports JayDeBeApi) and a base install can import them.

Thread-safety: pure functions.
"""

from __future__ import annotations

from store.errors import ConfigError

__all__ = ["booted_elsewhere", "login_refused", "refused_login_error", "sqlstate_of"]

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


#: MySQL / MariaDB server errors refusing a login: ER_DBACCESS_DENIED_ERROR (1044),
#: ER_ACCESS_DENIED_ERROR (1045), ER_ACCESS_DENIED_NO_PASSWORD_ERROR (1698).
_MYSQL_LOGIN_REFUSED = frozenset({1044, 1045, 1698})
#: SQLStates of a refused login: the SQL standard's class 28, "invalid authorization
#: specification" (PostgreSQL's 28000 and 28P01, MySQL's 28000), and Derby's 08004
#: ("connection authentication failure").
_LOGIN_STATES = ("28", "08004")
#: What PostgreSQL's server says when it refuses a login for a wrong password or user (a
#: psycopg connection error has no SQLState: the server's message is all the client gets). A
#: role that exists but may not log in now (``NOLOGIN``, what a DBA sets for a while) is not
#: one: a node waits through that as through an outage.
_PG_LOGIN_TEXT = ("password authentication failed", "no password supplied")
_PG_NO_ROLE = ('role "', "does not exist")


def login_refused(exc: BaseException) -> bool:
    """True if ``exc`` (or what it wraps) is the database refusing the configured user or
    password: something trying again does not fix, unlike a server that does not answer."""
    seen: BaseException | None = exc
    for _ in range(10):
        if seen is None:
            return False
        args = getattr(seen, "args", ())
        if args and isinstance(args[0], int) and args[0] in _MYSQL_LOGIN_REFUSED:
            return True
        state = sqlstate_of(seen)
        if state is not None and state.startswith(_LOGIN_STATES):
            return True
        if type(seen).__module__.startswith("psycopg"):
            text = str(seen)
            if "FATAL" in text and (
                any(t in text for t in _PG_LOGIN_TEXT) or all(t in text for t in _PG_NO_ROLE)
            ):
                return True
        seen = getattr(seen, "orig", None) or seen.__cause__
    return False


def refused_login_error(exc: BaseException, where: str) -> ConfigError | None:
    """The ConfigError (exit 2 of ``store``) for a refused login at ``where``, naming the
    keys to check, or None when ``exc`` is not one (:func:`login_refused`)."""
    if not login_refused(exc):
        return None
    cause = getattr(exc, "orig", None) or exc.__cause__ or exc
    reason = " ".join(str(cause).split())
    return ConfigError(
        f"{where} refused the login: {reason}",
        key="jdbc-password",
        hint="check jdbc-user and jdbc-password (or the URL's user and password)",
    )


def sqlstate_of(exc: BaseException) -> str | None:
    """The SQLState of a wrapped or Java SQL exception, or None."""
    state = getattr(exc, "sqlstate", None)
    if state:
        return str(state)
    getter = getattr(exc, "getSQLState", None)
    return str(getter()) if getter is not None and getter() is not None else None
