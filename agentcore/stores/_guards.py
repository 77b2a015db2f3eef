"""Call guards: whether a started call may still be running in some process.

A lease says who may append to a run; it cannot say whether a worker that lost it is gone.
On PostgreSQL a lease expires while its holder is stalled (SIGSTOP, a debugger, a long
pause) as surely as when it died, and a stalled worker can wake at any later time and
finish the call it had started. So a non-idempotent call whose outcome is unknown is run
again after ``reconcile`` found nothing only when no process can still be running it.

A guard answers that, per call: the worker holds the call's guard from before its
``tool_started`` is written until the tool returns, and the operating system or the
database lets go of it when that worker's process (or database session) ends:

- memory: a set in this process (a memory store lives in one process);
- SQLite: a flock on ``<database>.locks/call-<hash>.lock``, dropped by the kernel when the
  process dies, kept while it is stopped;
- PostgreSQL: a session-level advisory lock on a connection of its own, freed by the server
  when that session ends (the process died or its connection was closed), kept while the
  process is stopped.

``call_running`` is the other side: whether anyone holds the guard now. A guard, once let
go, is never taken again by the same call except by the worker that runs it again.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import importlib
import os
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Protocol, runtime_checkable

from agentcore.contracts.errors import ConfigurationError, StoreError

__all__ = ["CallGuardStore", "FileGuards", "LocalGuards", "flock", "guard_digest", "need_flock"]


@runtime_checkable
class CallGuardStore(Protocol):
    """A store that can tell whether a started call may still be running (optional).

    A store without it cannot: a non-idempotent call whose outcome it lost is then never
    run again without a person (``needs_attention``), even when ``reconcile`` finds nothing.
    """

    def guard_call(self, run_id: str, key: str) -> AbstractAsyncContextManager[bool]:
        """Hold the guard of the call with idempotency ``key`` while the block runs.

        Yields ``True`` when this process now holds it, ``False`` when another holder has
        it (that call may be running: the caller must not start it).

        The guard is let go in ``__aexit__`` only, never when the manager is collected or
        when an event loop closes its async generators (``asyncio.run`` does at its end):
        a guard kept for a timed-out call whose thread still runs must outlive the loop.
        So write it as a class, not with ``@asynccontextmanager``.

        Raises:
            StoreError: the guard cannot be taken (nothing was started).
        """
        ...

    async def call_running(self, run_id: str, key: str) -> bool:
        """Whether a process holds the guard of the call with idempotency ``key`` now.

        Raises:
            StoreError: it cannot be told now (the caller must not assume either way).
        """
        ...


def need_flock(db_path: str) -> None:
    """Check that this platform has ``flock`` (the ``fcntl`` module), which a SQLite store's
    leases and call guards need.

    Raises:
        ConfigurationError: it has not (Windows): say which stores work there.
    """
    try:
        importlib.import_module("fcntl")  # POSIX only
    except ImportError as exc:
        raise ConfigurationError(
            f"SQLite store {db_path}: this platform has no flock (Python's fcntl module), "
            "which the SQLite store's run leases and call guards need: it runs on Linux, "
            "macOS and other POSIX systems. Here use PostgresStore, or MemoryStore for tests "
            "(a read-only SQLite store, read_only=True, takes no lock and opens)."
        ) from exc


def flock(fd: int) -> None:
    """Lock ``fd`` exclusively without waiting (``flock(LOCK_EX | LOCK_NB)``).

    Raises:
        BlockingIOError: another open file description holds it.
        OSError: it cannot be locked.
    """
    import fcntl  # here, not at the top: agentcore.stores imports where fcntl is missing

    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)


def guard_digest(run_id: str, key: str) -> bytes:
    """The 32-byte name of a call's guard (any str has one: surrogates pass through)."""
    text = f"{run_id}\0{key}".encode("utf-8", "surrogatepass")
    return hashlib.sha256(b"agentcore.call-guard\0" + text).digest()


class LocalGuards:
    """Guards held in this process: what a memory store offers (one process sees all)."""

    def __init__(self) -> None:
        self._held: set[tuple[str, str]] = set()

    def guard_call(self, run_id: str, key: str) -> AbstractAsyncContextManager[bool]:
        """See :meth:`CallGuardStore.guard_call`."""
        return _LocalGuard(self._held, (run_id, key))

    async def call_running(self, run_id: str, key: str) -> bool:
        """See :meth:`CallGuardStore.call_running`."""
        return (run_id, key) in self._held


class _LocalGuard:
    def __init__(self, held: set[tuple[str, str]], name: tuple[str, str]) -> None:
        self._held, self._name, self._mine = held, name, False

    async def __aenter__(self) -> bool:
        if self._name in self._held:
            return False
        self._held.add(self._name)
        self._mine = True
        return True

    async def __aexit__(self, *exc: object) -> None:
        if self._mine:
            self._held.discard(self._name)
            self._mine = False


class FileGuards:
    """Guards as flocks in ``<database>.locks/``, for the SQLite store.

    A flock belongs to an open file description, so two guards of one call conflict even
    inside one process. The holder removes the file before letting go of it; a checker
    that opened the old file just before finds it unlocked and concludes, rightly, that the
    call is over.
    """

    def __init__(self, db_path: str) -> None:
        self._dir = Path(f"{db_path}.locks")

    def _path(self, run_id: str, key: str) -> Path:
        return self._dir / f"call-{guard_digest(run_id, key).hex()[:32]}.lock"

    def guard_call(self, run_id: str, key: str) -> AbstractAsyncContextManager[bool]:
        """See :meth:`CallGuardStore.guard_call`."""
        return _FileGuard(self, self._path(run_id, key), key)

    def lock_file(self, path: Path, key: str) -> int | None:
        """Lock the guard file at ``path``: its descriptor, or ``None`` when it is held.

        The lock counts only on the file the path names once it is held: a holder that was
        letting go may have removed the file this one opened, and a lock on a removed file
        guards nothing, so it is taken again on the file that is there now.
        """
        try:
            self._dir.mkdir(exist_ok=True)
            while True:
                fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
                try:
                    flock(fd)
                except BlockingIOError:
                    os.close(fd)
                    return None
                try:
                    same = os.path.samestat(os.fstat(fd), os.stat(path))
                except FileNotFoundError:
                    same = False
                if same:
                    return fd
                os.close(fd)
        except OSError as exc:
            raise StoreError(f"Cannot take the guard of call {key!r}: {exc}") from exc

    async def call_running(self, run_id: str, key: str) -> bool:
        """See :meth:`CallGuardStore.call_running`."""
        try:
            fd = os.open(self._path(run_id, key), os.O_RDWR)
        except FileNotFoundError:
            return False  # never taken, or let go (the holder removes it first)
        except OSError as exc:
            raise StoreError(f"Cannot read the guard of call {key!r}: {exc}") from exc
        try:
            flock(fd)
        except OSError as exc:
            if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
                return True
            raise StoreError(f"Cannot read the guard of call {key!r}: {exc}") from exc
        finally:
            os.close(fd)
        return False


class _FileGuard:
    def __init__(self, guards: FileGuards, path: Path, key: str) -> None:
        self._guards, self._path, self._key = guards, path, key
        self._fd: int | None = None

    async def __aenter__(self) -> bool:
        self._fd = self._guards.lock_file(self._path, self._key)
        return self._fd is not None

    async def __aexit__(self, *exc: object) -> None:
        fd, self._fd = self._fd, None
        if fd is None:
            return
        with contextlib.suppress(OSError):
            os.unlink(self._path)
        os.close(fd)  # closing the descriptor drops the lock
