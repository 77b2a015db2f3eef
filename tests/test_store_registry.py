"""The store registry: a store of another package registers its URL scheme, and every place
that opens a store by URL (``open_store``, an Agent's ``store=``, the CLI, ``agentcore db``)
opens it; an unknown scheme names the registered ones."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from agentcore.cli import app
from agentcore.contracts.errors import ConfigurationError
from agentcore.stores import (
    MemoryStore,
    SchemaStatus,
    SQLiteStore,
    StoreLayout,
    TranscriptStore,
    open_read_only,
    open_store,
    register_store,
    registered_stores,
    schema_status,
    store_layout,
    upgrade_schema,
)
from agentcore.stores.testing import StoreConformance, fresh_run_id
from agentcore.testing import finish, scripted_agent


class ShelfStore(MemoryStore):
    """A third-party store: ``shelf://NAME`` is one in-process store per name, so two opens
    of one URL see the same runs (as two opens of a database would)."""

    shelves: dict[str, ShelfStore] = {}  # noqa: RUF012  # the shelves, shared on purpose
    opened: list[tuple[str, bool]] = []  # noqa: RUF012  # every open: (url, migrate)

    def __init__(self, url: str) -> None:
        super().__init__()
        self.url = url


def open_shelf(url: str, /, *, migrate: bool) -> TranscriptStore:
    name = url.removeprefix("shelf://")
    if not name:
        raise ConfigurationError(f"Store URL {url!r} has no shelf name: use shelf://NAME")
    ShelfStore.opened.append((url, migrate))
    return ShelfStore.shelves.setdefault(name, ShelfStore(url))


def shelf_status(url: str) -> SchemaStatus:
    return SchemaStatus(url, 1, 1, ())


def shelf_upgrade(url: str) -> tuple[int, int]:
    return 1, 1


register_store("shelf", open_shelf, layout=StoreLayout(shelf_status, shelf_upgrade))


def fresh_shelf() -> str:
    return f"shelf://{fresh_run_id('shelf')}"


async def test_open_store_opens_a_registered_scheme_with_its_factory() -> None:
    url = fresh_shelf()
    store = open_store(url, migrate=False)
    assert isinstance(store, ShelfStore) and store.url == url
    assert ShelfStore.opened[-1] == (url, False)
    assert open_store(url) is store and ShelfStore.opened[-1] == (url, True)
    assert "shelf" in registered_stores()


async def test_an_agent_runs_on_a_registered_store_given_by_url() -> None:
    url = fresh_shelf()
    agent = scripted_agent([], finish("42"), store=url)
    result = await agent.run("answer")
    assert result.answer == "42"
    events = await open_store(url).load(result.run_id)
    assert events[0].type == "run_started"
    assert events[-1].type == "run_finished"


def test_the_cli_lists_and_reads_the_layout_of_a_registered_store() -> None:
    url = fresh_shelf()
    agent = scripted_agent([], finish("42"), store=url)
    run_id = agent.run_sync("answer for the CLI").run_id
    listed = CliRunner().invoke(app, ["runs", "--store", url])
    assert listed.exit_code == 0, listed.output
    assert run_id in listed.output
    status = CliRunner().invoke(app, ["db", "status", "--store", url])
    assert status.exit_code == 0, status.output
    assert schema_status(url) == SchemaStatus(url, 1, 1, ())
    assert upgrade_schema(url) == (1, 1)


@pytest.mark.parametrize("url", ["mysql://x/y", "runs.db", "memory:", "Shelf://a"])
def test_an_unknown_scheme_names_every_registered_one(url: str) -> None:
    with pytest.raises(ConfigurationError) as caught:
        open_store(url)
    message = str(caught.value)
    assert f"Unknown store URL {url!r}" in message
    for scheme in ("memory://", "postgres://", "postgresql://", "shelf://", "sqlite://"):
        assert scheme in message
    assert "register_store" in message


def test_a_malformed_url_of_a_registered_scheme_says_what_its_form_is() -> None:
    with pytest.raises(ConfigurationError, match="no shelf name: use shelf://NAME"):
        open_store("shelf://")
    with pytest.raises(ConfigurationError, match=r"memory store's URL is 'memory://'"):
        open_store("memory://x")
    with pytest.raises(ConfigurationError, match=r"no file path: use sqlite:///runs.db"):
        open_store("sqlite://runs.db")


@pytest.mark.parametrize("scheme", ["", "shelf://", "Shelf", "1db", "my store", "db:"])
def test_an_invalid_scheme_is_refused_and_registers_nothing(scheme: str) -> None:
    before = registered_stores()
    with pytest.raises(ConfigurationError, match="Invalid store scheme"):
        register_store(scheme, open_shelf)
    assert registered_stores() == before


def test_a_factory_that_cannot_be_called_is_refused() -> None:
    with pytest.raises(ConfigurationError, match=r"factory for shelf-broken:// .* cannot"):
        register_store("shelf-broken", "open_shelf")  # pyright: ignore[reportArgumentType]  # the mistake under test
    with pytest.raises(ConfigurationError, match=r"read-only opener .* cannot be called"):
        register_store("shelf-broken", open_shelf, read_only="open")  # pyright: ignore[reportArgumentType]  # the mistake under test
    with pytest.raises(ConfigurationError, match=r"give a StoreLayout\(status, upgrade\)"):
        register_store("shelf-broken", open_shelf, layout=(shelf_status, shelf_upgrade))  # pyright: ignore[reportArgumentType]  # the mistake under test
    assert "shelf-broken" not in registered_stores()


async def test_open_read_only_uses_the_factory_without_migrating_unless_told_how() -> None:
    url = fresh_shelf()
    store = open_read_only(url)
    assert isinstance(store, ShelfStore) and ShelfStore.opened[-1] == (url, False)

    def nothing_there(url: str) -> TranscriptStore | None:
        return None

    register_store("shelf-empty", open_shelf, read_only=nothing_there)
    assert open_read_only("shelf-empty://a") is None


async def test_open_read_only_of_a_missing_sqlite_file_creates_nothing(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'sub' / 'runs.db'}"
    assert open_read_only(url) is None
    assert not (tmp_path / "sub").exists()  # a check, not I/O worth a thread
    written = open_store(url)
    await written.close()
    read = open_read_only(url)
    try:
        assert isinstance(read, SQLiteStore) and await read.list_runs() == []
    finally:
        assert read is not None
        await read.close()


def test_store_layout_is_the_registered_one() -> None:
    assert store_layout("memory://") is None
    layout = store_layout("shelf://a")
    assert layout is not None and layout.status("shelf://a").latest == 1
    with pytest.raises(ConfigurationError, match="Unknown store URL"):
        store_layout("mysql://x")


def test_a_store_without_a_layout_has_no_schema_status() -> None:
    register_store("shelf-plain", open_shelf)
    for call in (schema_status, upgrade_schema):
        with pytest.raises(ConfigurationError, match=r"shelf-plain:// store has no layout"):
            call("shelf-plain://a")
    with pytest.raises(ConfigurationError, match="keeps nothing between processes"):
        schema_status("memory://")


def test_registering_a_scheme_again_replaces_its_factory() -> None:
    made: list[str] = []

    def other(url: str, /, *, migrate: bool) -> TranscriptStore:
        made.append(url)
        return MemoryStore()

    register_store("shelf-again", open_shelf)
    register_store("shelf-again", other)
    store = open_store("shelf-again://x")
    assert not isinstance(store, ShelfStore) and made == ["shelf-again://x"]


class TestRegisteredStore(StoreConformance):
    """The conformance kit, on a store opened through the registry."""

    @pytest.fixture
    async def store(self) -> AsyncIterator[TranscriptStore]:
        s = open_store(fresh_shelf())
        try:
            yield s
        finally:
            await s.close()
