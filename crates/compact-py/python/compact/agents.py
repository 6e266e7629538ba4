"""The OpenAI Agents SDK (`openai-agents`) with compaction before every model call.

    from agents import Agent, RunConfig, Runner
    from compact import CompactManager
    from compact.agents import compact_input_filter

    manager = CompactManager({"model": "gpt-4o"})
    run_config = RunConfig(call_model_input_filter=compact_input_filter(manager, session_id="chat-42"))
    result = await Runner.run(agent, history, run_config=run_config)

`compact_input_filter` compacts `ModelInputData.input` (Responses items) in
process and keeps the instructions; the manager remembers the session's
summary chain, so the SDK may keep resending its whole raw history.

`OverflowRetryModel` wraps any SDK `Model`: when the provider still rejects a
request as too long, it runs the reactive path (`on_context_overflow`) and
retries once with the compacted input.

Needs `openai-agents` (tested with 0.24); the core `compact` package does not.
"""

from __future__ import annotations

import contextvars
from collections.abc import AsyncIterator, Callable
from typing import Any

from . import CompactError, CompactManager

try:
    from agents.models.interface import Model
    from agents.run_config import CallModelData, ModelInputData
    from agents.tool import FunctionTool
except ImportError as error:  # pragma: no cover - depends on the environment
    raise ImportError(
        "compact.agents needs the OpenAI Agents SDK: pip install 'openai-agents>=0.24'"
    ) from error

__all__ = [
    "OverflowRetryModel",
    "compact_input_filter",
    "is_context_overflow",
    "recall_tool",
]

SessionId = str | Callable[[CallModelData[Any]], str]

# The session the filter last compacted for in this task, so that
# `OverflowRetryModel` knows it without being told.
_session: contextvars.ContextVar[str] = contextvars.ContextVar("compact_session")


def _plain(item: Any) -> Any:
    """A Responses item as plain JSON data (the SDK may hand pydantic models)."""
    if type(item) is dict:
        return item
    dump = getattr(item, "model_dump", None)
    if dump is not None:
        return dump(mode="json", exclude_unset=True)
    return item


def _tool_schemas(agent: Any) -> list[dict[str, Any]]:
    """The function tools of `agent` as the Responses API receives them, so
    that their schemas are counted (hosted tools are left out)."""
    schemas = []
    for tool in getattr(agent, "tools", None) or []:
        if isinstance(tool, FunctionTool):
            schemas.append(
                {
                    "type": "function",
                    "name": tool.name,
                    "description": tool.description,
                    "parameters": tool.params_json_schema,
                    "strict": tool.strict_json_schema,
                }
            )
    return schemas


def compact_input_filter(
    manager: CompactManager,
    *,
    session_id: SessionId,
    count_instructions: bool = True,
    count_tools: bool = True,
) -> Callable[[CallModelData[Any]], Any]:
    """A `RunConfig(call_model_input_filter=...)` that compacts every model call.

    `session_id` names the conversation: a string, or a function of the
    `CallModelData` (say, of its `context`). The instructions are kept as
    they are; with `count_instructions` they are counted (as a pinned system
    item the filter removes again) and with `count_tools` so are the agent's
    function tool schemas, so the budget is the model's whole request.
    Compaction runs off the event loop and without the GIL.
    """

    async def compact_model_input(data: CallModelData[Any]) -> ModelInputData:
        sid = session_id(data) if callable(session_id) else session_id
        _session.set(sid)
        model_data = data.model_data
        items = [_plain(item) for item in model_data.input]
        instructions = model_data.instructions
        system = None
        if count_instructions and instructions:
            system = {"role": "system", "content": instructions}
            items.insert(0, system)
        tools = _tool_schemas(data.agent) if count_tools else None
        outcome = await manager.apreflight(sid, items, tools, format="responses")
        messages = outcome.messages
        if system is not None:
            messages = [m for m in messages if m is not system]
        return ModelInputData(input=messages, instructions=instructions)

    return compact_model_input


def recall_tool(manager: CompactManager, session_id: str | Callable[[Any], str]) -> FunctionTool:
    """The `compact_recall` tool as an Agents SDK `FunctionTool`: the agent
    gets back what compaction took out of its context (`recall.enabled`),
    by the id a placeholder shows (`recall r7kq2m4x`) or by words.

    `session_id` is the session `compact_input_filter` compacts: a string,
    or a function of the tool call's `ToolContext`. The call runs off the
    event loop and without the GIL; a model's bad arguments come back as
    text it can read. Add it to the agent's `tools`.
    """
    definition = CompactManager.recall_tool_definition()

    async def invoke(context: Any, arguments: str) -> str:
        sid = session_id(context) if callable(session_id) else session_id
        return await manager.arecall_tool_call(sid, arguments or "{}")

    return FunctionTool(
        name=definition["name"],
        description=definition["description"],
        params_json_schema=definition["parameters"],
        on_invoke_tool=invoke,
        strict_json_schema=False,
    )


_OVERFLOW_CODES = {"context_length_exceeded", "string_above_max_length"}
_OVERFLOW_PHRASES = (
    "context_length_exceeded",
    "maximum context length",
    "context window",
    "prompt is too long",
    "too many tokens",
    "input is too long",
)


def is_context_overflow(error: BaseException) -> bool:
    """Whether a provider error says the request was too long for the model
    (OpenAI's `context_length_exceeded`, Anthropic's "prompt is too long", and
    the like)."""
    code = getattr(error, "code", None)
    if isinstance(code, str) and code in _OVERFLOW_CODES:
        return True
    body = getattr(error, "body", None)
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and inner.get("code") in _OVERFLOW_CODES:
            return True
    text = str(error).lower()
    return any(phrase in text for phrase in _OVERFLOW_PHRASES)


class OverflowRetryModel(Model):
    """An SDK `Model` that survives one context-length error per call.

    When `model` rejects a request as too long (`is_overflow`, by default
    `is_context_overflow`), the input goes through
    `manager.on_context_overflow`, which compacts harder
    (`policy.reactive_target_pct`), and the call is retried once with the
    result. A second rejection propagates. `session_id` defaults to the one
    `compact_input_filter` last used in the same run.

        agent = Agent(name="ops", model=OverflowRetryModel(OpenAIResponsesModel(...), manager))
    """

    def __init__(
        self,
        model: Model,
        manager: CompactManager,
        *,
        session_id: str | None = None,
        is_overflow: Callable[[BaseException], bool] = is_context_overflow,
    ) -> None:
        self.model = model
        self.manager = manager
        self.session_id = session_id
        self.is_overflow = is_overflow
        self.retries = 0
        """How many calls were retried after a context-length error."""

    def _session(self) -> str:
        if self.session_id is not None:
            return self.session_id
        sid = _session.get(None)
        if sid is None:
            raise CompactError(
                "OverflowRetryModel needs a session_id (or compact_input_filter in the same run)",
                kind="InvalidInput",
            )
        return sid

    async def _compacted(self, input: Any, system_instructions: Any, error: BaseException) -> list[Any]:
        items = [{"role": "user", "content": input}] if isinstance(input, str) else [_plain(i) for i in input]
        system = None
        if system_instructions:
            system = {"role": "system", "content": system_instructions}
            items.insert(0, system)
        outcome = await self.manager.aon_context_overflow(self._session(), items, error, format="responses")
        self.retries += 1
        return [m for m in outcome.messages if m is not system]

    async def get_response(self, system_instructions, input, *args: Any, **kwargs: Any):
        try:
            return await self.model.get_response(system_instructions, input, *args, **kwargs)
        except Exception as error:
            if not self.is_overflow(error):
                raise
            retry = await self._compacted(input, system_instructions, error)
        return await self.model.get_response(system_instructions, retry, *args, **kwargs)

    async def stream_response(
        self, system_instructions, input, *args: Any, **kwargs: Any
    ) -> AsyncIterator[Any]:
        # Only an error before the first event can be retried: after it,
        # the caller has seen part of a response.
        stream = self.model.stream_response(system_instructions, input, *args, **kwargs)
        try:
            first = await stream.__anext__()
        except StopAsyncIteration:
            return
        except Exception as error:
            if not self.is_overflow(error):
                raise
            retry = await self._compacted(input, system_instructions, error)
            async for event in self.model.stream_response(system_instructions, retry, *args, **kwargs):
                yield event
            return
        yield first
        async for event in stream:
            yield event

    async def close(self) -> None:
        await self.model.close()

    def get_retry_advice(self, request: Any) -> Any:
        return self.model.get_retry_advice(request)
