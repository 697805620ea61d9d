"""Opening PostgreSQL: the lazy psycopg import, DSN checks, schema names and the pool.

psycopg is imported only when a store is opened, so the plugin loads (and
registers its factory) on a machine without psycopg; opening the store then
fails with a :class:`~hermes_hookspecs.errors.ConfigError` that says what to
install.
"""

from __future__ import annotations

import re
from types import ModuleType
from typing import TYPE_CHECKING, Any, cast

from hermes_hookspecs.errors import ConfigError, StoreError

if TYPE_CHECKING:
    import psycopg
    from psycopg_pool import ConnectionPool

DSN_ENV = "HERMES_CORE_POSTGRES_DSN"
INSTALL_HINT = (
    'pip install "psycopg[binary]>=3.2" "psycopg-pool>=3.2"  (or hermes-session-core[postgres])'
)
_SCHEMA_RE = re.compile(r"^[a-z_][a-z0-9_]{0,47}$")


def import_psycopg() -> tuple[ModuleType, ModuleType]:
    """Return ``(psycopg, psycopg_pool)`` or raise a ConfigError naming the install command."""
    try:
        import psycopg
        import psycopg_pool
    except ImportError as exc:
        raise ConfigError(
            f"session.store = 'postgres' needs psycopg 3 and psycopg-pool ({exc}); "
            f"install them: {INSTALL_HINT}"
        ) from None
    return psycopg, psycopg_pool


def require_dsn(dsn: str) -> str:
    """The DSN, or a ConfigError telling where to set it."""
    if not isinstance(dsn, str) or not dsn.strip():
        raise ConfigError(
            "session.postgres_dsn is empty: set session.postgres_dsn in the configuration "
            f"or the {DSN_ENV} environment variable (e.g. "
            "postgresql://user:password@127.0.0.1:5432/dbname)"
        )
    return dsn.strip()


def check_schema_name(schema: str) -> str:
    """A PostgreSQL schema name the store may create and use (lower-case identifier)."""
    if not isinstance(schema, str) or not _SCHEMA_RE.match(schema):
        raise ConfigError(
            f"postgres schema name {schema!r} is invalid; expected 1-48 characters of "
            "[a-z0-9_], not starting with a digit"
        )
    return schema


def describe_dsn(dsn: str) -> str:
    """The DSN with any password removed, for error messages."""
    try:
        from psycopg.conninfo import conninfo_to_dict

        parts = conninfo_to_dict(dsn)
    except Exception:  # an unparsable DSN is described as such
        return "<unparsable DSN>"
    parts.pop("password", None)
    shown = " ".join(f"{key}={value}" for key, value in sorted(parts.items()))
    return shown or "<default connection parameters>"


def connect_once(dsn: str, connect_timeout: float) -> psycopg.Connection[Any]:
    """One autocommit connection, with connection failures turned into a StoreError."""
    pg, _ = import_psycopg()
    try:
        return cast(
            "psycopg.Connection[Any]",
            pg.connect(dsn, autocommit=True, connect_timeout=max(1, round(connect_timeout))),
        )
    except pg.Error as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise StoreError(f"cannot connect to PostgreSQL ({describe_dsn(dsn)}): {first}") from None


def open_pool(
    dsn: str,
    *,
    search_path: str,
    min_size: int,
    max_size: int,
    connect_timeout: float,
    name: str,
) -> ConnectionPool[Any]:
    """A started pool of autocommit connections whose ``search_path`` is the store's schema."""
    _, psycopg_pool = import_psycopg()
    if min_size < 0 or max_size < 1 or max_size < min_size:
        raise ConfigError(
            f"postgres pool sizes min_size={min_size!r}, max_size={max_size!r}: "
            "expected 0 <= min_size <= max_size and max_size >= 1"
        )

    def configure(conn: psycopg.Connection[Any]) -> None:
        conn.execute(f"SET search_path TO {search_path}")

    pool: ConnectionPool[Any] = psycopg_pool.ConnectionPool(
        dsn,
        min_size=min_size,
        max_size=max_size,
        kwargs={"autocommit": True, "connect_timeout": max(1, round(connect_timeout))},
        configure=configure,
        name=name,
        open=False,
        timeout=connect_timeout,
    )
    try:
        pool.open(wait=True, timeout=connect_timeout)
    except psycopg_pool.PoolTimeout as exc:
        pool.close()
        raise StoreError(
            f"cannot open a connection pool to PostgreSQL ({describe_dsn(dsn)}): {exc}"
        ) from None
    return pool


def first_line(exc: BaseException) -> str:
    """The first line of an error's message (a server error's detail lines left out), or
    its type's name when it says nothing."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
