"""The OpenAI Agents SDK compacting through `compact serve`, offline.

Runs a real `agents.Agent` under the `RunConfig` that docs/integrations.md
shows (the snippet is read from the document and executed as written, only
its server address replaced), with a scripted `agents.models.interface.Model`
that records every input it receives and answers with calls to a tool whose
outputs are large, then a final text. Several user turns, each resending the
SDK's whole history.

Usage: python openai_agents_compaction.py BASE_URL REPORT_JSON
Exits non-zero when an assertion fails; writes what it saw to REPORT_JSON for
the Rust test to check again.
"""

from __future__ import annotations

import asyncio
import copy
import json
from json import dumps
import pathlib
import sys

from agents import Agent, Runner, function_tool, set_tracing_disabled
from agents.items import ModelResponse
from agents.models.interface import Model
from agents.usage import Usage
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)

DOC = pathlib.Path(__file__).resolve().parents[2] / "docs" / "integrations.md"
DOC_HEADING = "### Compaction for the SDK"
DOC_ADDRESS = "http://127.0.0.1:5175"
# Per user turn: this many tool calls, then one final text.
TOOL_CALLS_PER_TURN = 4
USER_TURNS = 3
MODEL_CALLS = USER_TURNS * (TOOL_CALLS_PER_TURN + 1)
MARKER = "COMPACT-SUMMARY"


def doc_snippet() -> str:
    """The first python block after the heading, as the reader sees it."""
    text = DOC.read_text(encoding="utf-8")
    start = text.index(DOC_HEADING)
    block = text.index("```python\n", start) + len("```python\n")
    return text[block : text.index("```", block)]


@function_tool
def read_logs(job: str) -> str:
    """Read the logs of a job (about 3 000 tokens)."""
    return "".join(
        f"{job} line {i}: request req-{i:05} took {(i * 37) % 900} ms, status=ok\n"
        for i in range(220)
    )


class ScriptedModel(Model):
    """Answers by script, offline; keeps a copy of every input it receives."""

    def __init__(self) -> None:
        self.inputs: list[list] = []

    async def get_response(self, system_instructions, input, *args, **kwargs):
        self.inputs.append(copy.deepcopy(input if isinstance(input, list) else [input]))
        n = len(self.inputs) - 1
        step = n % (TOOL_CALLS_PER_TURN + 1)
        if step < TOOL_CALLS_PER_TURN:
            out = ResponseFunctionToolCall(
                type="function_call",
                id=f"fc_{n}",
                call_id=f"call_{n}",
                name="read_logs",
                arguments=json.dumps({"job": f"J-{n}"}),
                status="completed",
            )
        else:
            text = ResponseOutputText(type="output_text", text=f"turn done after call {n}", annotations=[])
            out = ResponseOutputMessage(
                id=f"msg_{n}", type="message", role="assistant", status="completed", content=[text]
            )
        return ModelResponse(output=[out], usage=Usage(), response_id=None)

    def stream_response(self, *args, **kwargs):
        raise NotImplementedError("the scripted model does not stream")


class RecordingRequests:
    """`requests` for the snippet, keeping each `/v1/preflight` answer."""

    def __init__(self, real) -> None:
        self.real = real
        self.answers: list[dict] = []
        self.sent_lengths: list[int] = []
        self.sent_sizes: list[int] = []

    def post(self, url, json=None, **kwargs):
        self.sent_lengths.append(len(json["input"]))
        self.sent_sizes.append(compact_size(json["input"]))
        response = self.real.post(url, json=json, **kwargs)
        response.raise_for_status()
        self.answers.append(response.json())
        return response


def compact_size(items: list) -> int:
    """Bytes of the items as compact JSON (as serde_json writes them)."""
    return len(dumps(items, separators=(",", ":"), ensure_ascii=False).encode())


def summary_count(items: list) -> int:
    return sum(MARKER in json.dumps(item) for item in items)


def pairing_errors(items: list) -> list[str]:
    """Every function_call answered once, after it; no orphan output."""
    errors, open_calls, answered = [], set(), set()
    for i, item in enumerate(items):
        kind = item.get("type") if isinstance(item, dict) else None
        if kind == "function_call":
            open_calls.add(item["call_id"])
        elif kind == "function_call_output":
            cid = item["call_id"]
            if cid not in open_calls:
                errors.append(f"item {i}: output for {cid} without its call before it")
            elif cid in answered:
                errors.append(f"item {i}: second output for {cid}")
            answered.add(cid)
    errors += [f"call {cid} has no output" for cid in sorted(open_calls - answered)]
    return errors


def check(model: ScriptedModel, recorder: RecordingRequests) -> list[str]:
    failures = []
    if len(model.inputs) != MODEL_CALLS:
        failures.append(f"{len(model.inputs)} model calls, scripted {MODEL_CALLS}")
    if len(recorder.answers) != len(model.inputs):
        failures.append(f"{len(recorder.answers)} preflights for {len(model.inputs)} model calls")
    for n, (seen, answer) in enumerate(zip(model.inputs, recorder.answers)):
        if seen != answer["messages"]:
            failures.append(f"model call {n}: input is not what /v1/preflight returned")
        failures += [f"model call {n}: {e}" for e in pairing_errors(seen)]
    first = next((n for n, seen in enumerate(model.inputs) if summary_count(seen)), None)
    if first is None:
        failures.append("no model call received a compacted input (no COMPACT-SUMMARY)")
    else:
        for n, seen in enumerate(model.inputs[first:], start=first):
            if summary_count(seen) != 1:
                failures.append(f"model call {n}: {summary_count(seen)} COMPACT-SUMMARY items, expected 1")
            # Compacted: smaller than the raw history the SDK sent (a
            # summary may add an item while capped or cleared outputs and
            # folded turns shrink it).
            size = compact_size(seen)
            if size >= recorder.sent_sizes[n]:
                failures.append(f"model call {n}: {size} bytes, not less than the {recorder.sent_sizes[n]} sent ({len(seen)} of {recorder.sent_lengths[n]} items)")
    return failures


async def main(base_url: str, report_path: str) -> int:
    set_tracing_disabled(True)
    snippet = doc_snippet()
    lines = snippet.strip().splitlines()
    if len(lines) >= 10:
        print(f"the documented snippet has {len(lines)} lines, the promise is under 10", file=sys.stderr)
        return 1
    namespace: dict = {}
    exec(snippet.replace(DOC_ADDRESS, base_url), namespace)
    recorder = RecordingRequests(namespace["requests"])
    namespace["requests"] = recorder

    model = ScriptedModel()
    agent = Agent(name="ops", instructions="You fix jobs.", model=model, tools=[read_logs])
    history: list = []
    for turn in range(USER_TURNS):
        history.append({"role": "user", "content": f"Turn {turn}: check the jobs and fix what fails."})
        result = await Runner.run(agent, history, run_config=namespace["run_config"], max_turns=20)
        history = result.to_input_list()

    failures = check(model, recorder)
    pathlib.Path(report_path).write_text(
        json.dumps(
            {
                "model_calls": len(model.inputs),
                "inputs": model.inputs,
                "sent_lengths": recorder.sent_lengths,
                "sent_sizes": recorder.sent_sizes,
                "reports": [a.get("report") for a in recorder.answers],
                "failures": failures,
            }
        ),
        encoding="utf-8",
    )
    for f in failures:
        print(f"FAIL: {f}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv[1], sys.argv[2])))
