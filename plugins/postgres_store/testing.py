"""Helpers for tests that need a PostgreSQL server (this project's and third parties').

* :func:`find_dsn` returns a DSN that answers, or the reason there is none
  (how to start one); tests skip with that reason, except under CI
  (``CI=true``), where a missing server is a failure.
* :func:`scratch_schema` names a fresh schema and drops it afterwards, so each
  test gets an empty store without creating databases.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

from .connection import DSN_ENV

#: what ``.ci/start-postgres.sh`` creates; tried when the environment names no DSN
LOCAL_DSN = "postgresql://hermes_test:hermes_test@127.0.0.1:5432/hermes_test"
START_HINT = (
    f"set {DSN_ENV} to a PostgreSQL DSN, or start the local server as root with "
    '`eval "$(bash .ci/start-postgres.sh)"` (Debian: pg_ctlcluster 15 main start; '
    "creates role/database hermes_test)"
)


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")


def find_dsn() -> tuple[str | None, str]:
    """``(dsn, "")`` when a server answers, else ``(None, reason with a how-to)``."""
    try:
        import psycopg
    except ImportError:
        return None, 'psycopg is not installed (pip install "psycopg[binary]" psycopg-pool)'
    explicit = os.environ.get(DSN_ENV, "").strip()
    dsn = explicit or LOCAL_DSN
    try:
        with psycopg.connect(dsn, connect_timeout=3) as conn:
            conn.execute("SELECT 1")
    except psycopg.Error as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        where = f"{DSN_ENV}" if explicit else f"the default local DSN ({LOCAL_DSN})"
        return None, f"no PostgreSQL server answers at {where}: {first}; {START_HINT}"
    return dsn, ""


def drop_schema(dsn: str, schema: str) -> None:
    import psycopg
    from psycopg import sql

    with psycopg.connect(dsn, autocommit=True, connect_timeout=5) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


@contextmanager
def scratch_schema(dsn: str, prefix: str = "t") -> Iterator[str]:
    """A fresh schema name (created by the store on open), dropped on exit."""
    schema = f"{prefix}_{uuid.uuid4().hex[:16]}"
    try:
        yield schema
    finally:
        drop_schema(dsn, schema)
