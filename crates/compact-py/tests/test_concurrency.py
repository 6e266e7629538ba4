"""One manager called from many threads and asyncio tasks at once."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
import time

import compact
from conftest import chat_history, pairing_errors, summaries

CONFIG = {"model": "gpt-4o", "max_context_tokens": 6000, "storage": {"adapter": "none"}}
SESSIONS = 6
TURNS = 5


def growing(session: int) -> list[list[dict]]:
    """The histories one session sends, turn after turn (raw, resent whole)."""
    full = chat_history(turns=8 + TURNS + session % 3)
    per_turn = 4
    return [full[: len(full) - per_turn * (TURNS - 1 - t)] for t in range(TURNS)]


def canonical(outcome: compact.Outcome) -> str:
    report = dict(outcome.report)
    report.pop("duration_us")
    return json.dumps([outcome.messages, report], sort_keys=True)


def sequential() -> dict[int, list[str]]:
    manager = compact.CompactManager(CONFIG)
    return {s: [canonical(manager.preflight(f"s{s}", h)) for h in growing(s)] for s in range(SESSIONS)}


def test_threads_sharing_one_manager_get_what_one_thread_gets():
    expected = sequential()
    manager = compact.CompactManager(CONFIG)
    got: dict[int, list[str]] = {}
    errors: list[BaseException] = []
    start = threading.Barrier(SESSIONS)

    def run(s: int) -> None:
        try:
            start.wait()
            got[s] = [canonical(manager.preflight(f"s{s}", h)) for h in growing(s)]
        except BaseException as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=run, args=(s,)) for s in range(SESSIONS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert got == expected


def test_threads_calling_one_session_serialize_into_one_chain():
    manager = compact.CompactManager(CONFIG)
    history = chat_history(turns=12)
    outcomes: list[compact.Outcome] = []
    lock = threading.Lock()

    def run() -> None:
        outcome = manager.preflight("shared", history)
        with lock:
            outcomes.append(outcome)

    threads = [threading.Thread(target=run) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(outcomes) == 8
    for o in outcomes:
        assert summaries(o.messages) == 1
        assert pairing_errors(o.messages) == []
    # The same history sent again is recognised: one compaction, not eight.
    assert manager.status("shared")["summary"]["version"] == 1


LOCKER = """
import sqlite3, sys
db = sqlite3.connect(sys.argv[1], isolation_level=None)
db.execute("BEGIN EXCLUSIVE")
print("locked", flush=True)
sys.stdin.readline()
db.execute("ROLLBACK")
"""


def test_the_gil_is_released_while_a_call_waits(tmp_path):
    """A preflight that waits for its SQLite session store, which another
    process holds locked until this thread tells it to let go, succeeds only
    if this thread can run meanwhile: with the GIL held, it would wait out
    the store's 10 s busy timeout and fail."""
    db = tmp_path / "state.sqlite3"
    manager = compact.CompactManager(dict(CONFIG, state={"store": "sqlite", "path": str(db)}))
    manager.preflight("warm-up", [{"role": "user", "content": "hi"}])
    # Another process: SQLite's locks do not separate two SQLite libraries
    # (Python's and the wheel's) in one process.
    locker = subprocess.Popen(
        [sys.executable, "-c", LOCKER, str(db)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert locker.stdout.readline().strip() == "locked"
    result: dict = {}

    def run() -> None:
        try:
            result["outcome"] = manager.preflight("gil", chat_history(turns=12))
        except BaseException as e:  # reported below
            result["error"] = e

    waiting = threading.Thread(target=run)
    waiting.start()
    time.sleep(0.5)  # lets the call reach the store; needs the GIL back to return
    locker.communicate("go\n", timeout=60)
    waiting.join()
    assert "error" not in result, result.get("error")
    assert summaries(result["outcome"].messages) == 1


def test_asyncio_tasks_sharing_one_manager_get_what_one_thread_gets():
    expected = sequential()
    manager = compact.CompactManager(CONFIG)

    async def session(s: int) -> list[str]:
        return [canonical(await manager.apreflight(f"s{s}", h)) for h in growing(s)]

    async def main() -> list[list[str]]:
        return await asyncio.gather(*(session(s) for s in range(SESSIONS)))

    got = asyncio.run(main())
    assert dict(enumerate(got)) == expected


def test_apreflight_leaves_the_event_loop_running():
    manager = compact.CompactManager({"model": "gpt-4o", "storage": {"adapter": "none"}})
    history = chat_history(turns=40, output_lines=200)

    async def main() -> int:
        pending = manager.amanual_compact("loop", history)
        # A blocking call would be done before the loop could run anything.
        ticks = 0
        while not pending.done():
            ticks += 1
            await asyncio.sleep(0)
        outcome = await pending
        assert summaries(outcome.messages) == 1
        return ticks

    assert asyncio.run(main()) >= 1


def test_async_errors_are_raised_by_await():
    manager = compact.CompactManager(CONFIG)

    async def main() -> None:
        try:
            await manager.apreflight("s", [{"role": "user", "content": 3}])
        except compact.InvalidInput as e:
            assert e.path == "$.messages[0].content"
        else:
            raise AssertionError("no InvalidInput")
        small = compact.CompactManager({"model": "gpt-4o", "max_context_tokens": 4000, "storage": {"adapter": "none"}})
        try:
            await small.apreflight("s", [{"role": "system", "content": "rule " * 6000}, {"role": "user", "content": "x"}])
        except compact.InsufficientBudget:
            pass
        else:
            raise AssertionError("no InsufficientBudget")
        status = await manager.astatus("nobody")
        assert status["known"] is False
        assert await manager.adelete_session("nobody") is False

    asyncio.run(main())


def test_a_cancelled_call_still_completes_its_compaction():
    manager = compact.CompactManager(CONFIG)
    history = chat_history(turns=12)

    async def main() -> None:
        pending = manager.apreflight("cancel", history)
        pending.cancel()
        await asyncio.sleep(0)
        # The session's lock serializes the next call after the cancelled one.
        outcome = await manager.apreflight("cancel", history)
        assert summaries(outcome.messages) == 1

    asyncio.run(main())
    assert manager.status("cancel")["summary"]["version"] == 1


def test_the_a_methods_need_a_running_loop():
    manager = compact.CompactManager(CONFIG)
    try:
        manager.apreflight("s", [])
    except RuntimeError as e:
        assert "running asyncio event loop" in str(e)
    else:
        raise AssertionError("no RuntimeError")
