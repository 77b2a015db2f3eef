"""Which store a URL opens: one registry of URL schemes, read by :func:`open_store`,
:func:`open_read_only`, :func:`store_layout`, :func:`schema_status` and
:func:`upgrade_schema`.

A scheme maps to a factory (the URL and ``migrate`` in, a :class:`TranscriptStore` out),
for a store with a durable layout a :class:`StoreLayout`, and, for a store that can be
opened to read without creating anything, a read-only opener. The built-in schemes are
registered here: ``memory``, ``sqlite``, ``postgresql`` and ``postgres``. A store of your
own registers its scheme with :func:`register_store`; nothing else switches on schemes.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from agentcore.contracts.errors import ConfigurationError, StoreCorruptedError, StoreError

from ._layout import POSTGRES_LAYOUT, SQLITE_LAYOUT, SchemaStatus, StoreLayout, sqlite_path
from ._memory import MemoryStore
from ._protocol import TranscriptStore

__all__ = [
    "DEFAULT_STORE_URL",
    "StoreFactory",
    "default_store_url",
    "open_read_only",
    "open_store",
    "register_store",
    "registered_stores",
    "schema_status",
    "store_layout",
    "upgrade_schema",
]

DEFAULT_STORE_URL = "sqlite:///agentcore.db"

_SCHEME = re.compile(r"[a-z][a-z0-9+.-]*")


class StoreFactory(Protocol):
    """Opens a store from its URL: what :func:`register_store` registers for a scheme."""

    def __call__(self, url: str, /, *, migrate: bool) -> TranscriptStore:
        """The store at ``url`` (whose scheme is the registered one).

        Args:
            migrate: bring an older layout up to date on open; when false, refuse an older
                layout with a StoreError (a store without layouts ignores it).

        Raises:
            ConfigurationError: the rest of the URL is malformed (say the form expected).
            StoreError: the store cannot be opened.
        """
        ...


@dataclass(frozen=True, slots=True)
class _Scheme:
    factory: StoreFactory
    layout: StoreLayout | None
    read_only: Callable[[str], TranscriptStore | None] | None


_SCHEMES: dict[str, _Scheme] = {}


def register_store(
    scheme: str,
    factory: StoreFactory,
    *,
    layout: StoreLayout | None = None,
    read_only: Callable[[str], TranscriptStore | None] | None = None,
) -> None:
    """Make ``scheme://...`` URLs open stores made by ``factory``, e.g.
    ``register_store("redis", open_redis_store)``; a scheme registered again is replaced.

    Args:
        scheme: the URL scheme, without ``://``: lower case letters, digits, ``+``, ``-``
            and ``.``, starting with a letter.
        factory: called as ``factory(url, migrate=...)`` by :func:`open_store`.
        layout: for a store whose layout is versioned: how ``agentcore db status`` and
            ``agentcore db upgrade`` read and upgrade it (``None``: it has none).
        read_only: opens the store at a URL only to read it (:func:`open_read_only`):
            creating nothing, and returning ``None`` when there is no store there
            (``None``: the factory with ``migrate=False``).

    Raises:
        ConfigurationError: ``scheme`` is not a valid URL scheme, ``factory`` or
            ``read_only`` cannot be called, or ``layout`` is not a :class:`StoreLayout`;
            nothing is registered.
    """
    if not isinstance(scheme, str) or not _SCHEME.fullmatch(scheme):  # pyright: ignore[reportUnnecessaryIsInstance]  # called from untyped code too
        raise ConfigurationError(
            f"Invalid store scheme {scheme!r}: give it without '://', in lower case letters, "
            "digits, '+', '-' and '.', starting with a letter (e.g. 'redis')."
        )
    if not callable(factory):
        raise ConfigurationError(
            f"The factory for {scheme}:// is {factory!r}, which cannot be called: give a "
            "function of (url, *, migrate) that returns the store."
        )
    if read_only is not None and not callable(read_only):
        raise ConfigurationError(
            f"The read-only opener for {scheme}:// is {read_only!r}, which cannot be called: "
            "give a function of (url) that returns the store, or None when there is none."
        )
    if layout is not None and not isinstance(layout, StoreLayout):  # pyright: ignore[reportUnnecessaryIsInstance]  # called from untyped code too
        raise ConfigurationError(
            f"The layout for {scheme}:// is {layout!r}: give a StoreLayout(status, upgrade)."
        )
    _SCHEMES[scheme] = _Scheme(factory, layout, read_only)


def registered_stores() -> list[str]:
    """The URL schemes :func:`open_store` accepts, sorted (e.g. ``["memory", "sqlite"]``)."""
    return sorted(_SCHEMES)


def default_store_url() -> str:
    """``$AGENTCORE_STORE`` if set, else ``sqlite:///agentcore.db``."""
    return os.environ.get("AGENTCORE_STORE") or DEFAULT_STORE_URL


def open_store(url: str | None = None, *, migrate: bool = True) -> TranscriptStore:
    """Open a store by URL (``None``: :func:`default_store_url`), through the factory
    registered for its scheme.

    Args:
        migrate: bring an older layout up to date on open (default). When false (for
            code that only reads, such as listings), an older durable store is refused
            with a StoreError naming ``agentcore db upgrade``; a new one is still created.

    Raises:
        ConfigurationError: an unknown scheme (the message lists the registered ones) or a
            malformed URL.
        StoreCorruptedError: the SQLite file exists but is not a usable database.
        StoreError: the PostgreSQL database cannot be reached, or the store has a newer
            layout (or an older one and ``migrate`` is false).
    """
    url = url or default_store_url()
    return _scheme(url).factory(url, migrate=migrate)


def open_read_only(url: str | None = None) -> TranscriptStore | None:
    """Open a store only to read it (listings, exports, verification), creating nothing:
    ``None`` when there is no store at ``url`` (``None``: :func:`default_store_url`).

    A SQLite file that does not exist is ``None`` (no file, directory or lock is made); one
    that exists is opened read-only, so a read-only file or directory can be read (an older
    file that can be written is upgraded first, as by :func:`open_store`). A scheme
    registered without a read-only opener is opened by its factory with ``migrate=False``.

    Raises:
        ConfigurationError: an unknown scheme or a malformed URL.
        StoreCorruptedError: the SQLite file is not a usable database.
        StoreError: the store cannot be read, or has a layout this agentcore cannot read.
    """
    url = url or default_store_url()
    found = _scheme(url)
    if found.read_only is None:
        return found.factory(url, migrate=False)
    return found.read_only(url)


def store_layout(url: str) -> StoreLayout | None:
    """The layout registered for ``url``'s scheme (``None``: its store has no layout, as
    ``memory://``).

    Raises:
        ConfigurationError: an unknown scheme.
    """
    return _scheme(url).layout


def schema_status(url: str) -> SchemaStatus:
    """Read a durable store's layout version without changing anything.

    Raises:
        ConfigurationError: a URL whose store has no layout (``memory://``) or an unknown
            scheme.
        StoreError: the store cannot be read, or is not an agentcore store.
    """
    return _layout(url).status(url)


def upgrade_schema(url: str) -> tuple[int, int]:
    """Apply a durable store's pending migrations, all in one transaction.

    Returns:
        ``(from, to)``: the version before and after (equal when nothing was pending).

    Raises:
        ConfigurationError: a URL whose store has no layout (``memory://``) or an unknown
            scheme.
        StoreError: the store is newer than this agentcore (it is left untouched), is not
            an agentcore store, or the upgrade failed (rolled back).
    """
    return _layout(url).upgrade(url)


def _scheme(url: str) -> _Scheme:
    scheme, sep, _ = url.partition("://")
    found = _SCHEMES.get(scheme) if sep else None
    if found is None:
        known = ", ".join(f"{s}://" for s in registered_stores())
        raise ConfigurationError(
            f"Unknown store URL {url!r}: the registered schemes are {known} (e.g. "
            "'sqlite:///runs.db', 'postgresql://user@host/dbname', 'memory://'). A store "
            "of your own registers its scheme with agentcore.stores.register_store."
        )
    return found


def _layout(url: str) -> StoreLayout:
    layout = _scheme(url).layout
    if layout is None:
        scheme = url.partition("://")[0]
        keeps = " (it keeps nothing between processes)" if scheme == "memory" else ""
        raise ConfigurationError(f"A {scheme}:// store{keeps} has no layout to read or upgrade.")
    return layout


def _open_memory(url: str, /, *, migrate: bool) -> TranscriptStore:
    del migrate  # nothing is kept, so nothing migrates
    if url != "memory://":
        raise ConfigurationError(f"Store URL {url!r}: a memory store's URL is 'memory://'.")
    return MemoryStore()


def _open_sqlite(url: str, /, *, migrate: bool) -> TranscriptStore:
    from .sqlite import SQLiteStore

    return SQLiteStore(sqlite_path(url), migrate=migrate)


def _read_sqlite(url: str, /) -> TranscriptStore | None:
    from .sqlite import SQLiteStore

    path = Path(sqlite_path(url))
    if not path.is_file():
        return None
    try:
        return SQLiteStore(path, read_only=True)
    except StoreCorruptedError:
        raise
    except StoreError:
        # An older store that can be written is upgraded on open, as by every other
        # command (a 0.1.0 file must list); a newer or foreign file is still refused.
        if not (os.access(path, os.W_OK) and os.access(path.parent, os.W_OK)):
            raise
        return SQLiteStore(path)


def _open_postgres(url: str, /, *, migrate: bool) -> TranscriptStore:
    from .postgres import PostgresStore  # psycopg loads on first use

    return PostgresStore(url, migrate=migrate)


register_store("memory", _open_memory)
register_store("sqlite", _open_sqlite, layout=SQLITE_LAYOUT, read_only=_read_sqlite)
register_store("postgresql", _open_postgres, layout=POSTGRES_LAYOUT)
register_store("postgres", _open_postgres, layout=POSTGRES_LAYOUT)
