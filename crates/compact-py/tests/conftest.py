"""Shared fixtures: histories, a real `compact serve` on loopback, the CLI."""

from __future__ import annotations

import json
import os
import pathlib
import socket
import subprocess
import time
import urllib.request

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[3]
# Read before the autouse fixture clears COMPACT_* (scripts/test.sh starts a
# throwaway server and exports it).
POSTGRES_URL = os.environ.get("COMPACT_TEST_POSTGRES_URL")


def compact_bin() -> pathlib.Path:
    """The `compact` binary the Rust build left (COMPACT_BIN overrides)."""
    path = pathlib.Path(os.environ.get("COMPACT_BIN", ROOT / "target" / "debug" / "compact"))
    if not path.exists():
        pytest.fail(f"{path} is missing: build it first (cargo build --bin compact) or set COMPACT_BIN")
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http_json(url: str, body: object | None = None) -> object:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, headers={"content-type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())


class Server:
    """`compact serve` started for one test, stopped after it."""

    def __init__(self, data_dir: pathlib.Path) -> None:
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        env = {k: v for k, v in os.environ.items() if not k.startswith("COMPACT_")}
        env["HOME"] = str(data_dir)
        self.process = subprocess.Popen(
            [str(compact_bin()), "serve", "--addr", f"127.0.0.1:{self.port}", "--data-dir", str(data_dir)],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        # A hang guard only: a debug build on a loaded machine may be slow.
        for _ in range(4800):
            try:
                http_json(f"{self.base}/healthz")
                return
            except OSError:
                if self.process.poll() is not None:
                    raise RuntimeError("compact serve exited") from None
                time.sleep(0.025)
        raise RuntimeError("compact serve never became healthy")

    def spans(self, trace_id: str) -> list[dict]:
        return http_json(f"{self.base}/api/traces/{trace_id}")["spans"]

    def stop(self) -> None:
        self.process.kill()
        self.process.wait()


@pytest.fixture
def server(tmp_path):
    s = Server(tmp_path / "serve")
    yield s
    s.stop()


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch, tmp_path):
    """Tests configure managers explicitly: no COMPACT_* from the caller's
    environment, and archives under the test's own directory."""
    for name in list(os.environ):
        if name.startswith("COMPACT_"):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)


def chat_history(turns: int, output_lines: int = 80, parallel: int = 1) -> list[dict]:
    """A Chat Completions history: a system prompt, then per turn a user
    request, `parallel` tool calls with large outputs, and a reply."""
    messages: list[dict] = [{"role": "system", "content": "You are the on-call agent. Never delete data."}]
    for t in range(turns):
        messages.append({"role": "user", "content": f"Turn {t}: check job J-{t} and fix what fails."})
        calls = [
            {"id": f"call_{t}_{p}", "type": "function", "function": {"name": "read_logs", "arguments": json.dumps({"job": f"J-{t}", "part": p})}}
            for p in range(parallel)
        ]
        messages.append({"role": "assistant", "content": None, "tool_calls": calls})
        for p in range(parallel):
            log = "".join(f"J-{t} line {i}: request req-{i:05} took {(i * 37) % 900} ms, status=ok\n" for i in range(output_lines))
            messages.append({"role": "tool", "tool_call_id": f"call_{t}_{p}", "content": log})
        messages.append({"role": "assistant", "content": f"Job J-{t} is healthy; nothing to fix."})
    return messages


def pairing_errors(messages: list[dict]) -> list[str]:
    """Chat or Responses: every result answers an earlier call, once; every
    call keeps its result."""
    errors, calls, answered = [], [], set()
    for i, m in enumerate(messages):
        for call in m.get("tool_calls") or []:
            calls.append(call["id"])
        if m.get("type") == "function_call":
            calls.append(m["call_id"])
        answer = m.get("tool_call_id") if m.get("role") == "tool" else m.get("call_id") if m.get("type") == "function_call_output" else None
        if answer is not None:
            if answer not in calls:
                errors.append(f"item {i}: result for {answer} without its call before it")
            elif answer in answered:
                errors.append(f"item {i}: second result for {answer}")
            answered.add(answer)
    errors += [f"call {c} has no result" for c in calls if c not in answered]
    return errors


def summaries(messages: list[dict]) -> int:
    return sum("COMPACT-SUMMARY" in json.dumps(m) for m in messages)
