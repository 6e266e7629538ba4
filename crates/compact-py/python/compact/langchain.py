"""LangChain v1 agents with compaction before every model call.

    from langchain.agents import create_agent
    from compact import CompactManager
    from compact.langchain import CompactMiddleware

    manager = CompactManager({"model": "gpt-4o"})
    agent = create_agent(model, tools, middleware=[CompactMiddleware(manager)])

`CompactMiddleware.before_model` turns `state["messages"]` into OpenAI Chat
Completions messages, compacts them in process, and when anything changed
replaces the state's messages with the result. Messages compaction did not
touch are the state's own objects (ids kept); a cleared or capped tool result
is its `ToolMessage` with new content (same `tool_call_id`), so every tool
call keeps its result. Unlike `SummarizationMiddleware` it counts exact
tokens and never separates a tool call from its result.

Needs `langchain>=1.0`; the core `compact` package does not.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from . import CompactManager

try:
    from langchain.agents.middleware import AgentMiddleware
    from langchain_core.messages import (
        AIMessage,
        AnyMessage,
        RemoveMessage,
        ToolMessage,
        convert_to_messages,
        convert_to_openai_messages,
    )
    from langchain_core.tools import BaseTool, StructuredTool
    from langgraph.graph.message import REMOVE_ALL_MESSAGES
except ImportError as error:  # pragma: no cover - depends on the environment
    raise ImportError("compact.langchain needs LangChain v1: pip install 'langchain>=1.0'") from error

__all__ = ["CompactMiddleware", "from_chat", "recall_tool", "to_chat"]

SessionId = str | Callable[[Any, Any], str] | None


def to_chat(messages: list[AnyMessage]) -> list[dict[str, Any]]:
    """LangChain messages as Chat Completions messages, one for one (tool
    call ids kept)."""
    converted = convert_to_openai_messages(messages)
    if len(converted) == len(messages):
        return converted
    return [convert_to_openai_messages(m) for m in messages]


def _arguments(text: Any) -> dict[str, Any]:
    """Tool call arguments as LangChain keeps them (a dict); compaction may
    have replaced them with a placeholder text."""
    if isinstance(text, dict):
        return text
    try:
        value = json.loads(text)
    except (TypeError, ValueError):
        return {"compacted": text}
    return value if isinstance(value, dict) else {"value": value}


def from_chat(
    chat: list[dict[str, Any]], originals: list[AnyMessage], sent: list[dict[str, Any]]
) -> list[AnyMessage]:
    """The compacted Chat Completions messages `chat` as LangChain messages.

    An item of `sent` (the conversion of `originals`) that came back is its
    original message. A tool result compaction rewrote is its original
    `ToolMessage` with the new content, an assistant message whose tool
    arguments were cleared its original `AIMessage` with the new arguments;
    anything else (the summary) is converted.
    """
    by_object = {id(d): m for d, m in zip(sent, originals)}
    results = {m.tool_call_id: m for m in originals if isinstance(m, ToolMessage)}
    callers = {
        call["id"]: m for m in originals if isinstance(m, AIMessage) for call in m.tool_calls if call.get("id")
    }
    out: list[AnyMessage] = []
    for item in chat:
        original = by_object.get(id(item))
        if original is not None:
            out.append(original)
            continue
        role = item.get("role")
        if role == "tool" and item.get("tool_call_id") in results:
            out.append(results[item["tool_call_id"]].model_copy(update={"content": item.get("content", "")}))
            continue
        calls = item.get("tool_calls") or []
        first = calls[0].get("id") if calls else None
        if role == "assistant" and first in callers:
            source = callers[first]
            arguments = {c.get("id"): _arguments(c.get("function", {}).get("arguments")) for c in calls}
            tool_calls = [dict(call, args=arguments.get(call.get("id"), call.get("args"))) for call in source.tool_calls]
            out.append(source.model_copy(update={"content": item.get("content") or "", "tool_calls": tool_calls}))
            continue
        out.append(convert_to_messages([item])[0])
    return out


class CompactMiddleware(AgentMiddleware):
    """Compacts the agent's messages before every model call (`before_model`).

    `session_id` names the conversation: a string, a function of `(state,
    runtime)`, or None for the run's `thread_id` (`"langchain"` without one).
    """

    def __init__(self, manager: CompactManager, *, session_id: SessionId = None) -> None:
        super().__init__()
        self.manager = manager
        self.session_id = session_id

    def _session(self, state: Any, runtime: Any) -> str:
        if callable(self.session_id):
            return self.session_id(state, runtime)
        if self.session_id is not None:
            return self.session_id
        try:
            from langgraph.config import get_config

            thread = get_config().get("configurable", {}).get("thread_id")
        except RuntimeError:  # outside a graph run
            thread = None
        return str(thread) if thread is not None else "langchain"

    def _update(self, messages: list[AnyMessage], sent: list[dict[str, Any]], outcome: Any) -> dict[str, Any] | None:
        chat = outcome.messages
        if len(chat) == len(sent) and all(a is b for a, b in zip(chat, sent)):
            return None
        return {"messages": [RemoveMessage(id=REMOVE_ALL_MESSAGES), *from_chat(chat, messages, sent)]}

    def before_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        messages = state["messages"]
        sent = to_chat(messages)
        outcome = self.manager.preflight(self._session(state, runtime), sent, format="chat")
        return self._update(messages, sent, outcome)

    async def abefore_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        messages = state["messages"]
        sent = to_chat(messages)
        outcome = await self.manager.apreflight(self._session(state, runtime), sent, format="chat")
        return self._update(messages, sent, outcome)


def recall_tool(manager: CompactManager, session_id: str) -> BaseTool:
    """The `compact_recall` tool as a LangChain tool: the agent gets back
    what compaction took out of its context (`recall.enabled`), by the id a
    placeholder shows (`recall r7kq2m4x`) or by words. `session_id` is the
    session `CompactMiddleware` compacts. Sync and async; a model's bad
    arguments come back as text it can read.
    """
    definition = CompactManager.recall_tool_definition()

    def recall(**arguments: Any) -> str:
        return manager.recall_tool_call(session_id, _given(arguments))

    async def arecall(**arguments: Any) -> str:
        return await manager.arecall_tool_call(session_id, _given(arguments))

    return StructuredTool.from_function(
        func=recall,
        coroutine=arecall,
        name=definition["name"],
        description=definition["description"],
        args_schema=definition["parameters"],
        infer_schema=False,
    )


def _given(arguments: dict[str, Any]) -> dict[str, Any]:
    """The arguments the model gave (LangChain fills the absent ones with None)."""
    return {k: v for k, v in arguments.items() if v is not None}
