"""The OpenAI Agents SDK through `compact proxy` by base URL, offline.

A real `agents.Agent` with a `function_tool`, its model the SDK's own
OpenAI Responses model (streamed) and Chat Completions model, on an
`AsyncOpenAI` client whose base URL is the proxy. No compact code in the
agent: the session is the SDK's, several user turns each resending the
whole history.

Usage: python proxy_agents.py BASE_URL (ends in /v1)
"""

import asyncio
import json
import sys

from agents import Agent, OpenAIChatCompletionsModel, OpenAIResponsesModel, Runner, function_tool, set_tracing_disabled
from openai import AsyncOpenAI

TOOL_ROUNDS = 2
TURNS = 3


@function_tool
def lookup(cmd: str, size: int, step: int) -> str:
    """Read the logs a command prints."""
    lines, i = [], 0
    while sum(len(line) for line in lines) < size:
        lines.append(f"{cmd} step {step} line {i}: latency={(i * 37) % 900}ms status=ok\n")
        i += 1
    return "".join(lines)


async def session(model, streamed: bool) -> int:
    agent = Agent(name="ops", instructions="You are a careful operations agent.", tools=[lookup], model=model)
    history = []
    for turn in range(TURNS):
        history.append({"role": "user", "content": f"Turn {turn}: read the logs and report."})
        if streamed:
            result = Runner.run_streamed(agent, history)
            async for _ in result.stream_events():
                pass
        else:
            result = await Runner.run(agent, history)
        assert result.final_output == f"Done after {TOOL_ROUNDS} tool calls.", result.final_output
        history = result.to_input_list()
    return TURNS


async def main() -> None:
    set_tracing_disabled(True)
    base = sys.argv[1]

    def client(session_id: str) -> AsyncOpenAI:
        return AsyncOpenAI(base_url=base, api_key="sk-test-SECRET-agents", default_headers={"X-Compact-Session": session_id})

    n = await session(OpenAIResponsesModel(model="gpt-4o", openai_client=client("py-agents-responses")), streamed=True)
    n += await session(OpenAIChatCompletionsModel(model="gpt-4o", openai_client=client("py-agents-chat")), streamed=False)
    print(json.dumps({"turns": n}))


if __name__ == "__main__":
    asyncio.run(main())
