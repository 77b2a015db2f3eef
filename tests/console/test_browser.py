"""The console in a real browser: Debian's Chromium driven by Playwright, against a console
served by uvicorn on a loopback port, with the one-time login ``agentcore serve`` uses.

Lists runs, opens a transcript, approves a pending call and watches the run finish live
(no reload: the page follows the run's server-sent events), denies another with a reason
and sees the model's next step. Locally a missing browser skips with the reason; under
``CI=true`` it fails (.ci/run installs ``chromium``). With ``AGENTCORE_SCREENSHOTS=DIR``
the pages are saved there as PNG (docs/console/ holds the Console page's).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from agentcore import RunResult
from agentcore.console import TokenLogin, create_app
from agentcore.stores import SQLiteStore

from . import _support
from ._support import make_agent, seed, seed_history

CHROMIUM_NAMES = ("chromium", "chromium-browser")


def _unavailable(reason: str) -> None:
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"CI=true, but the browser test cannot run: {reason}")
    pytest.skip(reason)


def chromium() -> str:
    for name in CHROMIUM_NAMES:
        found = shutil.which(name)
        if found:
            return found
    _unavailable("no Chromium on PATH (Debian: apt-get install -y chromium)")
    raise AssertionError("unreachable")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Served:
    """A console served by uvicorn in a thread of the test process."""

    def __init__(self, app: Any, port: int) -> None:  # Any: an ASGI app
        import uvicorn

        self.server = uvicorn.Server(
            uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on")
        )
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> Served:
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.02)
        return self

    def __exit__(self, *_: object) -> None:
        self.server.should_exit = True
        self.thread.join(10)


@pytest.fixture
def browser_path() -> str:
    path = chromium()
    try:
        import playwright.sync_api  # noqa: F401  # pyright: ignore[reportUnusedImport]
    except ImportError as exc:
        _unavailable(f"playwright is not installed ({exc}): pip install -e '.[dev]'")
    return path


@pytest.fixture
def shots(tmp_path: Path) -> Path:
    wanted = os.environ.get("AGENTCORE_SCREENSHOTS")
    folder = Path(wanted) if wanted else tmp_path / "shots"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture
def seeded(tmp_path: Path) -> tuple[str, RunResult, RunResult]:
    url = f"sqlite:///{tmp_path / 'runs.db'}"

    async def fill() -> tuple[RunResult, RunResult]:
        store = SQLiteStore(tmp_path / "runs.db")
        try:
            await seed_history(store, 240, days=14, now=time.time() - 600)
        finally:
            await store.close()
        agent = make_agent(url)
        try:
            return await seed(agent)
        finally:
            await agent.close()

    first, second = asyncio.run(fill())
    return url, first, second


@pytest.mark.slow
def test_approve_and_deny_in_a_real_browser(
    browser_path: str,
    seeded: tuple[str, RunResult, RunResult],
    shots: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from playwright.sync_api import expect, sync_playwright

    url, first, second = seeded
    monkeypatch.setattr(_support, "REFUND_DELAY_S", 1.5)  # long enough to watch it run
    login = TokenLogin()
    app = create_app(url, agents={"refunds": make_agent(url)}, login=login, poll_s=0.1)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    with Served(app, port), sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=browser_path, args=["--no-sandbox"])
        try:
            tabs = browser.new_context(viewport={"width": 1180, "height": 860})
            page = tabs.new_page()
            # sign in with the one-time link, as `agentcore serve` prints it
            page.goto(f"{base}/login?token={login.token}")
            page.fill("input[name=name]", "Ada Lovelace")
            page.click("button[type=submit]")
            expect(page.locator("h1")).to_have_text("Runs")
            expect(page.locator("header .user")).to_contain_text("Ada Lovelace")
            # the list: newest first, the two waiting runs on top
            rows = page.locator("table.runs tbody tr")
            expect(rows.first).to_contain_text(second.run_id)
            page.screenshot(path=str(shots / "runs.png"))
            page.fill("input[name=q]", "order A1")
            page.click(".filters button")
            expect(rows).to_have_count(1)
            # open the transcript of the first run: its pending refund, bound to step and hash
            page.click(f"a.run-link:has-text('{first.run_id}')")
            assert first.pending is not None and first.pending.args_hash is not None
            expect(page.locator("#pending")).to_contain_text(first.pending.args_hash)
            expect(page.locator("#run-status")).to_have_text("awaiting_confirmation")
            expect(page.locator(".timeline")).to_contain_text("dispatcher: needs_confirmation")
            page.screenshot(path=str(shots / "run-pending.png"), full_page=True)
            # a second tab on the waiting runs follows the list
            waiting = tabs.new_page()  # signed in too
            waiting.goto(f"{base}/runs?status=awaiting_confirmation")
            expect(waiting.locator("h1")).to_have_text("Waiting for you")
            expect(waiting.locator("table.runs tbody tr")).to_have_count(2)
            # approve: the page comes back at once, at the approval, and follows the run
            page.click("form.approve button[type=submit]")
            page.wait_for_url(f"{base}/runs/{first.run_id}#seq-*")
            expect(page.locator(".entry:target")).to_be_in_viewport()
            expect(page.locator("#run-status")).to_have_text("running")
            page.evaluate("window.__sameDocument = true")
            expect(page.locator("#live")).to_be_visible()
            expect(page.locator("#run-status")).to_have_text("completed", timeout=15_000)
            assert page.evaluate("window.__sameDocument === true"), "the page was reloaded"
            expect(page.locator(".timeline")).to_contain_text("approved by Ada Lovelace")
            expect(page.locator(".timeline")).to_contain_text("refund returned")
            expect(page.locator(".entry.new", has_text="refund returned")).to_be_in_viewport()
            expect(waiting.locator("table.runs tbody tr")).to_have_count(1)  # no reload
            expect(page.locator("dd.answer")).to_have_text("refunded")
            page.screenshot(path=str(shots / "run-completed.png"), full_page=True)
            # deny the second with a reason: the model reads it and takes another step
            page.goto(f"{base}/runs/{second.run_id}")
            page.fill("form.deny input[name=reason]", "Refunds over 20 need a manager.")
            page.click("form.deny button[type=submit]")
            page.wait_for_url(f"{base}/runs/{second.run_id}#seq-*")
            timeline = page.locator(".timeline")
            expect(timeline).to_contain_text("denied by Ada Lovelace")
            expect(timeline).to_contain_text("Refunds over 20 need a manager.")
            expect(timeline).to_contain_text("tool lookup", timeout=15_000)
            expect(timeline).to_contain_text("The refund was denied; check the order instead.")
            expect(page.locator("#run-status")).to_have_text("completed", timeout=15_000)
            page.screenshot(path=str(shots / "run-denied.png"), full_page=True)
            # contract health: a chart per metric, the contract versions marked
            page.goto(f"{base}/health")
            expect(page.locator("figure.chart")).to_have_count(7)
            expect(page.locator(".legend.contracts")).to_contain_text("contract v2:b73d2e41")
            page.screenshot(path=str(shots / "health.png"), full_page=True)
        finally:
            browser.close()
