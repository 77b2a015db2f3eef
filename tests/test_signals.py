"""run_until_signalled: SIGTERM cancels the main task, its clean-up runs, exit code 143."""

from __future__ import annotations

import asyncio
import os
import signal

import pytest

from agentcore import run_until_signalled


def test_returns_what_main_returns_and_leaves_the_handlers_as_they_were() -> None:
    before = signal.getsignal(signal.SIGTERM)

    async def main() -> str:
        return "done"

    assert run_until_signalled(main()) == "done"
    assert signal.getsignal(signal.SIGTERM) == before


def test_sigterm_cancels_main_after_its_clean_up_and_exits_143() -> None:
    cleaned: list[str] = []

    async def main() -> str:
        try:
            os.kill(os.getpid(), signal.SIGTERM)
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cleaned.append("cancelled")
            raise
        finally:
            await asyncio.sleep(0)  # clean-up may await (a lease release does)
            cleaned.append("finally")
        return "not reached"

    with pytest.raises(SystemExit) as info:
        run_until_signalled(main())
    assert info.value.code == 128 + signal.SIGTERM
    assert cleaned == ["cancelled", "finally"]


def test_a_cancellation_that_is_not_a_signal_is_left_alone() -> None:
    async def main() -> None:
        task = asyncio.current_task()
        assert task is not None
        task.cancel()
        await asyncio.sleep(1)

    with pytest.raises(asyncio.CancelledError):
        run_until_signalled(main())


def test_other_signals_can_be_chosen() -> None:
    async def main() -> None:
        os.kill(os.getpid(), signal.SIGUSR1)
        await asyncio.sleep(30)

    with pytest.raises(SystemExit) as info:
        run_until_signalled(main(), signals=(signal.SIGUSR1,))
    assert info.value.code == 128 + signal.SIGUSR1
