"""The real OpenAI Agents SDK compacting in process through `compact.agents`.

An offline scripted `agents.models.interface.Model` answers with calls to a
function tool whose outputs are large, then a final text, over several user
turns; each turn resends the SDK's whole history. The manager exports its
events to a real `compact serve`.
"""

from __future__ import annotations

import asyncio
import copy
import json

import pytest

pytest.importorskip("agents")

from agents import Agent, RunConfig, Runner, function_tool, set_tracing_disabled  # noqa: E402
from agents.items import ModelResponse  # noqa: E402
from agents.models.interface import Model  # noqa: E402
from agents.usage import Usage  # noqa: E402
from openai.types.responses import (  # noqa: E402
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)

import compact  # noqa: E402
from compact.agents import OverflowRetryModel, compact_input_filter, is_context_overflow  # noqa: E402
from conftest import pairing_errors, summaries  # noqa: E402

TOOL_CALLS_PER_TURN = 4
USER_TURNS = 3
MODEL_CALLS = USER_TURNS * (TOOL_CALLS_PER_TURN + 1)
INSTRUCTIONS = "You fix jobs. Never restart a job without reading its logs."

set_tracing_disabled(True)


@function_tool
def read_logs(job: str) -> str:
    """Read the logs of a job (about 3 000 tokens)."""
    return "".join(f"{job} line {i}: request req-{i:05} took {(i * 37) % 900} ms, status=ok\n" for i in range(220))


class ScriptedModel(Model):
    """Answers by script, offline; keeps a copy of every input it receives."""

    def __init__(self) -> None:
        self.inputs: list[list] = []
        self.instructions: list[str | None] = []

    def answer(self, n: int):
        step = n % (TOOL_CALLS_PER_TURN + 1)
        if step < TOOL_CALLS_PER_TURN:
            return ResponseFunctionToolCall(
                type="function_call",
                id=f"fc_{n}",
                call_id=f"call_{n}",
                name="read_logs",
                arguments=json.dumps({"job": f"J-{n}"}),
                status="completed",
            )
        text = ResponseOutputText(type="output_text", text=f"turn done after call {n}", annotations=[])
        return ResponseOutputMessage(id=f"msg_{n}", type="message", role="assistant", status="completed", content=[text])

    async def get_response(self, system_instructions, input, *args, **kwargs):
        self.inputs.append(copy.deepcopy(input if isinstance(input, list) else [input]))
        self.instructions.append(system_instructions)
        return ModelResponse(output=[self.answer(len(self.inputs) - 1)], usage=Usage(), response_id=None)

    def stream_response(self, *args, **kwargs):
        raise NotImplementedError("the scripted model does not stream")


class RecordingManager:
    """The manager, keeping what each `apreflight` received and returned."""

    def __init__(self, manager: compact.CompactManager) -> None:
        self.manager = manager
        self.sent: list[list] = []
        self.returned: list[list] = []
        self.reports: list[dict] = []

    async def apreflight(self, session_id, messages, tools=None, **kwargs):
        self.sent.append(copy.deepcopy(messages))
        outcome = await self.manager.apreflight(session_id, messages, tools, **kwargs)
        self.returned.append(copy.deepcopy(outcome.messages))
        self.reports.append(outcome.report)
        return outcome


async def run_turns(agent: Agent, run_config: RunConfig) -> None:
    history: list = []
    for turn in range(USER_TURNS):
        history.append({"role": "user", "content": f"Turn {turn}: check the jobs and fix what fails."})
        result = await Runner.run(agent, history, run_config=run_config, max_turns=20)
        history = result.to_input_list()


def test_every_model_call_gets_compacted_input_and_events_reach_the_server(server):
    manager = compact.CompactManager(
        {
            "model": "gpt-4o",
            "max_context_tokens": 5000,
            "storage": {"adapter": "none"},
            "telemetry": {"exporter": "ariadne", "ariadne_url": f"{server.base}/ingest", "agent_name": "ops"},
        }
    )
    recorder = RecordingManager(manager)
    model = ScriptedModel()
    agent = Agent(name="ops", instructions=INSTRUCTIONS, model=model, tools=[read_logs])
    run_config = RunConfig(call_model_input_filter=compact_input_filter(recorder, session_id="agents-1"))
    asyncio.run(run_turns(agent, run_config))

    assert len(model.inputs) == MODEL_CALLS
    assert len(recorder.returned) == MODEL_CALLS
    first = None
    calls = zip(model.inputs, recorder.returned, recorder.sent, recorder.reports)
    for n, (seen, returned, sent, report) in enumerate(calls):
        # The instructions were counted as a pinned system item, and are
        # the model's instructions again, not an input item.
        assert sent[0] == {"role": "system", "content": INSTRUCTIONS}
        assert model.instructions[n] == INSTRUCTIONS
        assert seen == [m for m in returned if m != sent[0]], f"model call {n} is not the compacted input"
        assert pairing_errors(seen) == [], f"model call {n}"
        if first is None and summaries(seen):
            first = n
        # Within the budget, whatever the SDK resent.
        assert report["tokens_after"] <= report["budget"], f"model call {n}: {report}"
        if first is not None:
            assert summaries(seen) == 1, f"model call {n}"
            assert seen != sent[1:], f"model call {n} got the raw history"
            # What the SDK sent would not have fit; what the model got does.
            assert manager.estimate(sent)["t_est"] > report["budget"], f"model call {n}"
    assert first is not None, "no model call received a COMPACT-SUMMARY"
    assert manager.status("agents-1")["summary"]["version"] >= 1

    assert manager.flush(30.0)
    names = [span["name"] for span in server.spans("agents-1")]
    assert names.count("compact.preflight") == MODEL_CALLS
    assert "compact.summary_created" in names
    assert "compact.trigger_decision" in names


class OverflowingModel(ScriptedModel):
    """Rejects any input of more than `limit` JSON characters (a stand-in
    for the provider's token limit) with the error OpenAI sends for a
    request over the context window."""

    def __init__(self, limit: int) -> None:
        super().__init__()
        self.limit = limit
        self.rejected = 0

    async def get_response(self, system_instructions, input, *args, **kwargs):
        if len(json.dumps(input)) > self.limit:
            self.rejected += 1
            error = RuntimeError("This model's maximum context length is 10000 tokens.")
            error.code = "context_length_exceeded"
            raise error
        return await super().get_response(system_instructions, input, *args, **kwargs)


# The budget the manager believes in is larger than what the "provider"
# accepts: preflight lets some requests through that the provider refuses.
OPTIMISTIC = {
    "model": "gpt-4o",
    "max_context_tokens": 40000,
    "policy": {"reactive_target_pct": 0.2},
    "storage": {"adapter": "none"},
}


def test_a_context_length_error_is_compacted_and_retried_once():
    manager = compact.CompactManager(OPTIMISTIC)
    inner = OverflowingModel(limit=60_000)
    model = OverflowRetryModel(inner, manager)
    agent = Agent(name="ops", instructions=INSTRUCTIONS, model=model, tools=[read_logs])
    run_config = RunConfig(call_model_input_filter=compact_input_filter(manager, session_id="overflow-1"))
    asyncio.run(run_turns(agent, run_config))

    assert inner.rejected >= 1
    assert model.retries == inner.rejected
    assert len(inner.inputs) == MODEL_CALLS
    for n, seen in enumerate(inner.inputs):
        assert len(json.dumps(seen)) <= inner.limit, f"model call {n}"
        assert pairing_errors(seen) == [], f"model call {n}"
    status = manager.status("overflow-1")
    assert status["summary"]["version"] >= 1


def test_a_second_rejection_propagates():
    manager = compact.CompactManager(OPTIMISTIC)
    inner = OverflowingModel(limit=10)
    model = OverflowRetryModel(inner, manager, session_id="always")
    agent = Agent(name="ops", instructions=INSTRUCTIONS, model=model, tools=[read_logs])
    with pytest.raises(RuntimeError, match="maximum context length"):
        asyncio.run(Runner.run(agent, "hello", max_turns=3))
    assert inner.rejected == 2
    assert model.retries == 1


def test_context_overflow_errors_are_recognised():
    assert is_context_overflow(RuntimeError("prompt is too long: 210000 tokens > 200000 maximum"))
    coded = RuntimeError("bad request")
    coded.code = "context_length_exceeded"
    assert is_context_overflow(coded)
    assert not is_context_overflow(RuntimeError("rate limited"))
