"""The official `anthropic` SDK through `compact proxy`, offline.

A multi-turn tool session with extended thinking (the scripted upstream
signs a `thinking` block on every turn; the SDK hands it back), system
prompt and user blocks with `cache_control`, an `anthropic-beta` header,
whole and streamed (`messages.stream`).

Usage: python proxy_anthropic.py BASE_URL (no /v1)
"""

import json
import sys

import anthropic

TOOL_ROUNDS = 2
TURNS = 4
TOOLS = [{"name": "lookup", "description": "Read logs.", "input_schema": {"type": "object", "properties": {
    "cmd": {"type": "string"}, "size": {"type": "integer"}, "step": {"type": "integer"}}}}]
SYSTEM = [{"type": "text", "text": "You are a careful operations agent.", "cache_control": {"type": "ephemeral"}}]


def lookup(args: dict) -> str:
    lines, i = [], 0
    while sum(len(line) for line in lines) < args["size"]:
        lines.append(f"{args['cmd']} step {args['step']} line {i}: latency={(i * 37) % 900}ms status=ok\n")
        i += 1
    return "".join(lines)


def session(client: anthropic.Anthropic, stream: bool) -> int:
    messages, calls = [], 0
    for turn in range(TURNS):
        messages.append({"role": "user", "content": [
            {"type": "text", "text": f"Turn {turn}: read the logs.", "cache_control": {"type": "ephemeral"}}]})
        while True:
            calls += 1
            kwargs = dict(model="claude-sonnet-4-5", max_tokens=2048, system=SYSTEM, tools=TOOLS, messages=messages,
                          thinking={"type": "enabled", "budget_tokens": 1024},
                          extra_headers={"anthropic-beta": "interleaved-thinking-2025-05-14"})
            if stream:
                with client.messages.stream(**kwargs) as events:
                    for _ in events:
                        pass
                    message = events.get_final_message()
            else:
                message = client.messages.create(**kwargs)
            assert message.usage.input_tokens > 0
            content = [b.model_dump(exclude_none=True) for b in message.content]
            assert content[0]["type"] == "thinking" and content[0]["signature"], content[0]
            messages.append({"role": "assistant", "content": content})
            uses = [b for b in content if b["type"] == "tool_use"]
            if not uses:
                assert content[-1]["text"] == f"Done after {TOOL_ROUNDS} tool calls.", content
                break
            messages.append({"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": u["id"], "content": lookup(u["input"])} for u in uses]})
    return calls


def main() -> None:
    base = sys.argv[1]
    n = 0
    for stream in (False, True):
        client = anthropic.Anthropic(base_url=base, api_key="sk-ant-test-SECRET",
                                     default_headers={"X-Compact-Session": f"py-anthropic-{int(stream)}"})
        n += session(client, stream)
    print(json.dumps({"calls": n}))


if __name__ == "__main__":
    main()
