"""The Python the README and docs/integrations.md show, executed as written
(only the names the reader supplies, such as `messages` and `model`, are
given), with offline models."""

from __future__ import annotations

import asyncio
import json
import pathlib

import pytest

from conftest import ROOT, chat_history, pairing_errors, summaries

pytest.importorskip("agents")
pytest.importorskip("langchain")


def block(document: pathlib.Path, heading: str) -> str:
    """The first python block after `heading`."""
    text = document.read_text(encoding="utf-8")
    start = text.index(heading)
    begin = text.index("```python\n", start) + len("```python\n")
    return text[begin : text.index("```", begin)]


def lines(code: str) -> int:
    return len([line for line in code.strip().splitlines() if line.strip()])


class FakeCompletions:
    def __init__(self) -> None:
        self.calls: list[dict] = []

    def create(self, **kwargs):
        self.calls.append(kwargs)


class FakeClient:
    def __init__(self) -> None:
        self.chat = type("Chat", (), {"completions": FakeCompletions()})()


def test_the_readme_snippet_runs_in_ten_lines(monkeypatch):
    from agents import RunConfig
    from langchain.agents import create_agent
    from test_langchain import ScriptedChatModel

    code = block(ROOT / "README.md", "From Python, in process")
    assert lines(code) <= 10, code
    monkeypatch.setenv("COMPACT_MAX_CONTEXT_TOKENS", "6000")
    monkeypatch.setenv("COMPACT_STORAGE_ADAPTER", "none")
    client = FakeClient()
    messages = chat_history(turns=12)
    namespace = {
        "client": client,
        "messages": messages,
        # JSON schemas: what the provider receives, and a tool create_agent accepts.
        "tools": [{"type": "function", "function": {"name": "read_logs", "parameters": {"type": "object", "properties": {"job": {"type": "string"}}}}}],
        "model": ScriptedChatModel(),
        "RunConfig": RunConfig,
        "create_agent": create_agent,
    }
    exec(code, namespace)
    sent = client.chat.completions.calls[0]["messages"]
    assert summaries(sent) == 1 and pairing_errors(sent) == []
    assert callable(namespace["run_config"].call_model_input_filter)
    assert namespace["agent"] is not None


def test_the_core_snippet_of_the_integrations_guide_runs(monkeypatch):
    code = block(ROOT / "docs" / "integrations.md", "## Python, in process: the `compact` wheel")
    monkeypatch.setenv("COMPACT_MAX_CONTEXT_TOKENS", "6000")
    monkeypatch.setenv("COMPACT_STORAGE_ADAPTER", "none")
    client = FakeClient()

    class Usage:  # the OpenAI SDK's usage object is a pydantic model
        def model_dump(self):
            return {"prompt_tokens": 4000, "completion_tokens": 12, "total_tokens": 4012}

    namespace = {"client": client, "messages": chat_history(turns=12), "tools": None, "last_response": type("R", (), {"usage": Usage()})()}
    exec(code, namespace)
    assert namespace["outcome"].report["basis"] == "usage"
    assert client.chat.completions.calls[0]["messages"] == namespace["outcome"].messages


def test_the_agents_snippet_of_the_integrations_guide_compacts_a_run(monkeypatch):
    from test_agents import INSTRUCTIONS, MODEL_CALLS, Agent, ScriptedModel, read_logs, run_turns

    code = block(ROOT / "docs" / "integrations.md", "### OpenAI Agents SDK, in process")
    assert lines(code) <= 10, code
    monkeypatch.setenv("COMPACT_MAX_CONTEXT_TOKENS", "5000")
    monkeypatch.setenv("COMPACT_STORAGE_ADAPTER", "none")
    namespace: dict = {}
    exec(code, namespace)
    model = ScriptedModel()
    agent = Agent(name="ops", instructions=INSTRUCTIONS, model=model, tools=[read_logs])
    asyncio.run(run_turns(agent, namespace["run_config"]))
    assert len(model.inputs) == MODEL_CALLS
    assert any(summaries(seen) for seen in model.inputs)
    assert all(pairing_errors(seen) == [] for seen in model.inputs)


def test_the_langchain_snippet_of_the_integrations_guide_compacts_a_run(monkeypatch):
    from langchain_core.messages import HumanMessage
    from test_langchain import ScriptedChatModel, has_summary, read_logs
    from test_langchain import pairing_errors as lc_pairing_errors

    code = block(ROOT / "docs" / "integrations.md", "### LangChain v1: `compact.langchain`")
    assert lines(code) <= 10, code
    monkeypatch.setenv("COMPACT_MAX_CONTEXT_TOKENS", "6000")
    monkeypatch.setenv("COMPACT_STORAGE_ADAPTER", "none")
    model = ScriptedChatModel()
    model.seen = []
    namespace = {"model": model, "tools": [read_logs]}
    exec(code, namespace)
    messages: list = []
    for turn in range(3):
        messages.append(HumanMessage(f"Turn {turn}: check the jobs and fix what fails."))
        state = namespace["agent"].invoke({"messages": messages}, {"recursion_limit": 50})
        messages = state["messages"]
    assert any(has_summary(seen) for seen in model.seen)
    assert all(lc_pairing_errors(seen) == [] for seen in model.seen)
    assert json.dumps(state["messages"][-1].content)
