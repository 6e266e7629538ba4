"""Recall (issue 25) from Python: `manager.recall` / `arecall`, and the
`compact_recall` tool in the real OpenAI Agents SDK and LangChain loops,
where an offline scripted model follows a cleared output's recall id and
gets the cleared text back."""

from __future__ import annotations

import asyncio
import copy
import json
import re
from typing import Any

import pytest

import compact

RECALL_ID = re.compile(r"— recall (r[a-z2-9]{8})⟧")
CONFIG = {
    "model": "gpt-4o",
    "max_context_tokens": 12000,
    "storage": {"adapter": "none"},
    "recall": {"enabled": True, "path": ":memory:"},
    "policy": {"keep_task": False, "keep_recent_turns": 1, "keep_tool_io_pairs": 1},
}


def logs(job: str) -> str:
    """A job's logs (about 3 000 tokens); line 0 names the job."""
    return "".join(f"{job} line {i}: request req-{i:05} took {(i * 37) % 900} ms, status=ok\n" for i in range(220))


def chat_history(turns: int) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You fix jobs."}]
    for t in range(turns):
        call = f"call_{t}"
        messages.append({"role": "user", "content": f"Turn {t}: check job J-{t}"})
        messages.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": call, "type": "function", "function": {"name": "read_logs", "arguments": json.dumps({"job": f"J-{t}"})}}
                ],
            }
        )
        messages.append({"role": "tool", "tool_call_id": call, "content": logs(f"J-{t}")})
        messages.append({"role": "assistant", "content": f"J-{t} checked."})
    return messages


def first_recall_id(items: Any) -> str | None:
    match = RECALL_ID.search(json.dumps(items, default=str, ensure_ascii=False))
    return match.group(1) if match else None


async def awaited(method: Any, *args: Any, **kwargs: Any) -> Any:
    """Runs an `a*` method inside the event loop (where it must be awaited)."""
    return await method(*args, **kwargs)


def test_recall_by_id_and_by_words_sync_and_async():
    manager = compact.CompactManager(CONFIG)
    outcome = manager.preflight("py-1", chat_history(6))
    rid = first_recall_id(outcome.messages)
    assert rid is not None, outcome.messages
    cleared = next(m for m in outcome.messages if m.get("role") == "tool" and rid in str(m["content"]))
    job = f"J-{cleared['tool_call_id'].removeprefix('call_')}"

    answer = manager.recall("py-1", id=rid)
    entry = answer["entry"]
    assert entry["id"] == rid
    assert entry["origin"]["tool"] == "read_logs"
    assert entry["text"].startswith(f"{job} line 0: request req-00000")
    assert entry["total_chars"] == len(logs(job))
    # Paging: the next page starts where this one stopped.
    page = manager.recall("py-1", id=rid, offset=entry["next_offset"])["entry"]
    assert entry["text"] + page["text"] == logs(job)[: len(entry["text"]) + len(page["text"])]

    hits = manager.recall("py-1", f"{job} line 0 request", limit=2)["hits"]
    assert 1 <= len(hits) <= 2
    assert hits[0]["id"] == rid
    assert asyncio.run(awaited(manager.arecall, "py-1", id=rid)) == answer

    # Another session does not have the id; malformed queries are refused.
    assert "entry" not in manager.recall("py-2", id=rid)
    with pytest.raises(compact.InvalidInput):
        manager.recall("py-1")
    with pytest.raises(compact.InvalidInput):
        manager.recall("py-1", "words", id=rid)

    text = manager.recall_tool_call("py-1", json.dumps({"id": rid}))
    assert text.startswith(f"recall {rid} (read_logs)") and f"{job} line 0:" in text
    assert asyncio.run(awaited(manager.arecall_tool_call, "py-1", {"id": rid})) == text
    assert manager.recall_tool_call("py-1", "{not json").startswith("compact_recall: bad arguments")
    definition = compact.CompactManager.recall_tool_definition()
    assert definition["name"] == "compact_recall"
    assert set(definition["parameters"]["properties"]) == {"query", "id", "limit", "offset"}

    off = compact.CompactManager({"model": "gpt-4o", "storage": {"adapter": "none"}})
    with pytest.raises(compact.ConfigError):
        off.recall("py-1", "anything")


def test_advertise_hands_back_the_tools_with_compact_recall():
    tool = {"type": "function", "function": {"name": "read_logs", "parameters": {"type": "object"}}}
    on = compact.CompactManager({**CONFIG, "recall": {**CONFIG["recall"], "advertise": True}})
    outcome = on.preflight("adv", chat_history(6), [tool])
    assert outcome.tools is not None and len(outcome.tools) == 2
    assert outcome.tools[0] == tool
    assert outcome.tools[1]["function"]["name"] == "compact_recall"
    # Responses items get the Responses shape.
    responses = on.preflight("adv-r", [{"role": "user", "content": "hi"}], format="responses")
    assert responses.tools == [{**compact.CompactManager.recall_tool_definition(), "type": "function"}]
    # Off (the default): nothing handed back, the caller's tools stand.
    off = compact.CompactManager(CONFIG)
    assert off.preflight("adv", chat_history(6), [tool]).tools is None


# ---------------------------------------------------------------- Agents SDK


def test_an_agents_sdk_run_recalls_a_cleared_output_by_its_id():
    pytest.importorskip("agents")
    from agents import Agent, RunConfig, Runner, function_tool, set_tracing_disabled
    from agents.items import ModelResponse
    from agents.models.interface import Model
    from agents.tool import FunctionTool
    from agents.usage import Usage
    from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText

    from compact.agents import compact_input_filter, recall_tool

    set_tracing_disabled(True)

    @function_tool
    def read_logs(job: str) -> str:
        """Read the logs of a job (about 3 000 tokens)."""
        return logs(job)

    class ScriptedModel(Model):
        """Offline: per user turn two log reads and a reply, until a
        placeholder with a recall id shows up; then it recalls that id and
        answers `done`."""

        def __init__(self) -> None:
            self.inputs: list[list] = []
            self.reads = 0
            self.recalled: str | None = None
            self.after_recall: list | None = None

        def answer(self, items: list) -> Any:
            n = len(self.inputs)
            if self.recalled is None:
                rid = first_recall_id(items)
                if rid is not None:
                    self.recalled = rid
                    return call(n, "compact_recall", {"id": rid})
            elif self.after_recall is None:
                self.after_recall = items
                return reply(n, "done")
            if self.reads < 2:
                self.reads += 1
                return call(n, "read_logs", {"job": f"J-{n}"})
            self.reads = 0
            return reply(n, f"turn done after call {n}")

        async def get_response(self, system_instructions, input, *args, **kwargs):
            items = copy.deepcopy(input if isinstance(input, list) else [input])
            output = self.answer(items)
            self.inputs.append(items)
            return ModelResponse(output=[output], usage=Usage(), response_id=None)

        def stream_response(self, *args, **kwargs):
            raise NotImplementedError("the scripted model does not stream")

    def reply(n: int, text: str) -> ResponseOutputMessage:
        content = ResponseOutputText(type="output_text", text=text, annotations=[])
        return ResponseOutputMessage(id=f"msg_{n}", type="message", role="assistant", status="completed", content=[content])

    def call(n: int, name: str, arguments: dict) -> ResponseFunctionToolCall:
        return ResponseFunctionToolCall(
            type="function_call", id=f"fc_{n}", call_id=f"call_{n}", name=name, arguments=json.dumps(arguments), status="completed"
        )

    manager = compact.CompactManager(CONFIG)
    tool = recall_tool(manager, "agents-recall")
    assert isinstance(tool, FunctionTool) and tool.name == "compact_recall"
    model = ScriptedModel()
    agent = Agent(name="ops", instructions="You fix jobs.", model=model, tools=[read_logs, tool])
    run_config = RunConfig(call_model_input_filter=compact_input_filter(manager, session_id="agents-recall"))

    async def run_turns() -> Any:
        history: list = []
        result = None
        for turn in range(8):
            history.append({"role": "user", "content": f"Turn {turn}: check the jobs."})
            result = await Runner.run(agent, history, run_config=run_config, max_turns=20)
            history = result.to_input_list()
            if model.after_recall is not None:
                break
        return result

    result = asyncio.run(run_turns())
    assert result is not None and result.final_output == "done"
    rid = model.recalled
    assert rid is not None, "no placeholder with a recall id reached the model"
    seen = model.after_recall
    assert seen is not None
    # The id's call, and what the recall tool gave back to the model.
    placeholder = next(i for i in seen if i.get("type") == "function_call_output" and rid in str(i.get("output")))
    job = f"J-{placeholder['call_id'].removeprefix('call_')}"
    outputs = [
        i["output"]
        for i in seen
        if i.get("type") == "function_call_output" and str(i.get("output", "")).startswith(f"recall {rid}")
    ]
    assert len(outputs) == 1, seen
    assert f"{job} line 0: request req-00000" in outputs[0]
    assert logs(job)[:2000] in outputs[0]


# ---------------------------------------------------------------- LangChain


def test_a_langchain_agent_recalls_a_cleared_output_by_its_id():
    pytest.importorskip("langchain")
    from langchain.agents import create_agent
    from langchain_core.language_models.chat_models import BaseChatModel
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
    from langchain_core.outputs import ChatGeneration, ChatResult
    from langchain_core.tools import BaseTool
    from langchain_core.tools import tool as lc_tool
    from langgraph.checkpoint.memory import InMemorySaver

    from compact.langchain import CompactMiddleware, recall_tool

    @lc_tool
    def read_logs(job: str) -> str:
        """Read the logs of a job (about 3 000 tokens)."""
        return logs(job)

    class ScriptedChatModel(BaseChatModel):
        """Offline: per user turn two log reads and a reply, until a
        placeholder with a recall id shows up; then it recalls that id and
        answers `done`."""

        seen: list[list[Any]] = []
        reads: int = 0
        recalled: str | None = None
        after_recall: list[Any] | None = None

        @property
        def _llm_type(self) -> str:
            return "scripted"

        def bind_tools(self, tools: Any, **kwargs: Any) -> ScriptedChatModel:
            return self

        def _generate(self, messages, stop=None, run_manager=None, **kwargs) -> ChatResult:
            n = len(self.seen)
            self.seen.append(list(messages))
            message = None
            if self.recalled is None:
                rid = first_recall_id([str(m.content) for m in messages])
                if rid is not None:
                    self.recalled = rid
                    message = AIMessage("", tool_calls=[{"id": f"call_{n}", "name": "compact_recall", "args": {"id": rid}}])
            elif self.after_recall is None:
                self.after_recall = list(messages)
                message = AIMessage("done")
            if message is None and self.reads < 2:
                self.reads += 1
                message = AIMessage("", tool_calls=[{"id": f"call_{n}", "name": "read_logs", "args": {"job": f"J-{n}"}}])
            elif message is None:
                self.reads = 0
                message = AIMessage(f"turn done after call {n}")
            return ChatResult(generations=[ChatGeneration(message=message)])

    manager = compact.CompactManager(CONFIG)
    tool = recall_tool(manager, "lc-recall")
    assert isinstance(tool, BaseTool) and tool.name == "compact_recall"
    model = ScriptedChatModel()
    model.seen = []
    agent = create_agent(
        model,
        [read_logs, tool],
        system_prompt="You fix jobs.",
        middleware=[CompactMiddleware(manager)],
        checkpointer=InMemorySaver(),
    )
    config = {"configurable": {"thread_id": "lc-recall"}, "recursion_limit": 50}
    state: dict = {}
    for turn in range(8):
        state = agent.invoke({"messages": [HumanMessage(f"Turn {turn}: check the jobs.")]}, config)
        if model.after_recall is not None:
            break
    assert state["messages"][-1].content == "done"
    rid = model.recalled
    assert rid is not None, "no placeholder with a recall id reached the model"
    last = model.after_recall
    assert last is not None
    placeholder = next(m for m in last if isinstance(m, ToolMessage) and rid in str(m.content))
    job = f"J-{placeholder.tool_call_id.removeprefix('call_')}"
    answers = [m for m in last if isinstance(m, ToolMessage) and str(m.content).startswith(f"recall {rid}")]
    assert len(answers) == 1, last
    assert answers[0].name == "compact_recall"
    assert f"{job} line 0: request req-00000" in answers[0].content
    assert logs(job)[:2000] in answers[0].content
    # The async tool path answers the same.
    assert asyncio.run(tool.ainvoke({"id": rid})) == answers[0].content
