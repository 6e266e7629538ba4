"""The real LangChain v1 `create_agent` loop compacting through
`compact.langchain.CompactMiddleware`, with an offline fake chat model."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

pytest.importorskip("langchain")

from langchain.agents import create_agent  # noqa: E402
from langchain_core.language_models.chat_models import BaseChatModel  # noqa: E402
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage  # noqa: E402
from langchain_core.outputs import ChatGeneration, ChatResult  # noqa: E402
from langchain_core.tools import tool  # noqa: E402
from langgraph.checkpoint.memory import InMemorySaver  # noqa: E402

import compact  # noqa: E402
from compact.langchain import CompactMiddleware, from_chat, to_chat  # noqa: E402

CALLS_PER_TURN = 4
USER_TURNS = 3


@tool
def read_logs(job: str) -> str:
    """Read the logs of a job (about 3 000 tokens)."""
    return "".join(f"{job} line {i}: request req-{i:05} took {(i * 37) % 900} ms, status=ok\n" for i in range(220))


class ScriptedChatModel(BaseChatModel):
    """Offline: per user turn, CALLS_PER_TURN tool calls then a reply; keeps
    every list of messages it was called with."""

    seen: list[list[Any]] = []

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Any, **kwargs: Any) -> ScriptedChatModel:
        return self

    def _generate(self, messages: list[Any], stop: Any = None, run_manager: Any = None, **kwargs: Any) -> ChatResult:
        self.seen.append(list(messages))
        n = len(self.seen) - 1
        step = n % (CALLS_PER_TURN + 1)
        if step < CALLS_PER_TURN:
            message = AIMessage("", tool_calls=[{"id": f"call_{n}", "name": "read_logs", "args": {"job": f"J-{n}"}}])
        else:
            message = AIMessage(f"turn done after call {n}")
        return ChatResult(generations=[ChatGeneration(message=message)])


def pairing_errors(messages: list[Any]) -> list[str]:
    errors, calls, answered = [], [], set()
    for i, m in enumerate(messages):
        if isinstance(m, AIMessage):
            calls += [c["id"] for c in m.tool_calls]
        if isinstance(m, ToolMessage):
            if m.tool_call_id not in calls:
                errors.append(f"message {i}: result for {m.tool_call_id} without its call")
            elif m.tool_call_id in answered:
                errors.append(f"message {i}: second result for {m.tool_call_id}")
            answered.add(m.tool_call_id)
    return errors + [f"call {c} has no result" for c in calls if c not in answered]


def has_summary(messages: list[Any]) -> int:
    return sum("COMPACT-SUMMARY" in str(m.content) for m in messages)


CONFIG = {"model": "gpt-4o", "max_context_tokens": 6000, "storage": {"adapter": "none"}}


def run(asynchronous: bool) -> tuple[compact.CompactManager, ScriptedChatModel, dict]:
    manager = compact.CompactManager(CONFIG)
    model = ScriptedChatModel()
    model.seen = []
    agent = create_agent(
        model,
        [read_logs],
        system_prompt="You fix jobs.",
        middleware=[CompactMiddleware(manager)],
        checkpointer=InMemorySaver(),
    )
    config = {"configurable": {"thread_id": "lc-thread"}, "recursion_limit": 50}
    state: dict = {}
    for turn in range(USER_TURNS):
        request = {"messages": [HumanMessage(f"Turn {turn}: check the jobs and fix what fails.")]}
        if asynchronous:
            state = asyncio.run(agent.ainvoke(request, config))
        else:
            state = agent.invoke(request, config)
    return manager, model, state


@pytest.mark.parametrize("asynchronous", [False, True], ids=["invoke", "ainvoke"])
def test_the_agent_loop_compacts_its_state_with_pairs_intact(asynchronous):
    manager, model, state = run(asynchronous)
    assert len(model.seen) == USER_TURNS * (CALLS_PER_TURN + 1)
    first = next((n for n, seen in enumerate(model.seen) if has_summary(seen)), None)
    assert first is not None, "no model call received a COMPACT-SUMMARY"
    for n, seen in enumerate(model.seen):
        assert pairing_errors(seen) == [], f"model call {n}"
        # What the model received fits the budget, whatever the state held.
        estimate = manager.estimate(to_chat(seen[1:]))  # without the system prompt
        assert estimate["t_est"] <= 6000 - 1500, f"model call {n}: {estimate}"
        if n >= first:
            assert has_summary(seen) == 1, f"model call {n}"
    # The session is the run's thread, and the state holds the compacted history.
    status = manager.status("lc-thread")
    assert status["summary"]["version"] >= 1
    assert has_summary(state["messages"]) == 1
    assert pairing_errors(state["messages"]) == []
    assert state["messages"][-1].content == f"turn done after call {len(model.seen) - 1}"


def test_conversion_keeps_ids_objects_and_tool_call_ids():
    messages = [
        HumanMessage("hi", id="h1"),
        AIMessage("", tool_calls=[{"id": "c1", "name": "read_logs", "args": {"job": "J"}}], id="a1"),
        ToolMessage("x" * 50_000, tool_call_id="c1", name="read_logs", id="t1"),
        AIMessage("done", id="a2"),
    ]
    chat = to_chat(messages)
    assert [m.get("role") for m in chat] == ["user", "assistant", "tool", "assistant"]
    assert chat[1]["tool_calls"][0]["id"] == "c1" and chat[2]["tool_call_id"] == "c1"
    rewritten = dict(chat[2], content="cleared")
    back = from_chat([chat[0], chat[1], rewritten, chat[3]], messages, chat)
    assert back[0] is messages[0] and back[1] is messages[1] and back[3] is messages[3]
    assert isinstance(back[2], ToolMessage)
    assert (back[2].id, back[2].tool_call_id, back[2].content) == ("t1", "c1", "cleared")
    cleared_args = dict(chat[1], tool_calls=[dict(chat[1]["tool_calls"][0], function={"name": "read_logs", "arguments": "⟦removed⟧"})])
    back = from_chat([cleared_args], messages, chat)
    assert back[0].id == "a1" and back[0].tool_calls[0]["id"] == "c1"
    assert back[0].tool_calls[0]["args"] == {"compacted": "⟦removed⟧"}
    assert json.loads(json.dumps(to_chat(back)))  # still valid Chat Completions


def test_a_history_that_fits_leaves_the_state_alone():
    manager = compact.CompactManager(CONFIG)
    middleware = CompactMiddleware(manager, session_id="quiet")
    state = {"messages": [HumanMessage("hi", id="h1"), AIMessage("hello", id="a1")]}
    assert middleware.before_model(state, None) is None
    assert asyncio.run(middleware.abefore_model(state, None)) is None
