"""The official `openai` SDK through `compact proxy`, offline.

Multi-turn tool sessions with Chat Completions (whole and streamed) and
Responses (streamed), the base URL pointing at the proxy; the proxy's
upstream is a scripted provider (tests/support/upstream.rs) that calls the
`lookup` tool `TOOL_ROUNDS` times per user turn, then answers
"Done after N tool calls.". The tool returns `size` bytes of log lines.

Usage: python proxy_openai.py BASE_URL (BASE_URL ends in /v1)
Exits non-zero when an assertion fails.
"""

import json
import sys

import openai

TOOL_ROUNDS = 2
TURNS = 4
TOOLS = [{"type": "function", "function": {"name": "lookup", "description": "Read logs.",
          "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}, "size": {"type": "integer"},
                                                          "step": {"type": "integer"}}}}}]


def lookup(arguments: str) -> str:
    args = json.loads(arguments)
    lines, i = [], 0
    while sum(len(line) for line in lines) < args["size"]:
        lines.append(f"{args['cmd']} step {args['step']} line {i}: latency={(i * 37) % 900}ms status=ok\n")
        i += 1
    return "".join(lines)


def chat(client: openai.OpenAI, stream: bool) -> int:
    messages = [{"role": "system", "content": "You are a careful operations agent."}]
    calls = 0
    for turn in range(TURNS):
        messages.append({"role": "user", "content": f"Turn {turn}: read the logs and report anomalies."})
        while True:
            calls += 1
            if stream:
                text, tool_calls = "", {}
                with client.chat.completions.create(model="gpt-4o", messages=messages, tools=TOOLS, stream=True,
                                                    stream_options={"include_usage": True}) as events:
                    usage = None
                    for chunk in events:
                        usage = chunk.usage or usage
                        for choice in chunk.choices:
                            text += choice.delta.content or ""
                            for tc in choice.delta.tool_calls or []:
                                slot = tool_calls.setdefault(tc.index, {"id": "", "name": "", "arguments": ""})
                                slot["id"] = tc.id or slot["id"]
                                slot["name"] = (tc.function.name or "") or slot["name"]
                                slot["arguments"] += tc.function.arguments or ""
                assert usage is not None and usage.prompt_tokens > 0, "the stream's usage chunk arrived"
                calls_made = [{"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}}
                              for c in tool_calls.values()]
            else:
                answer = client.chat.completions.create(model="gpt-4o", messages=messages, tools=TOOLS)
                message = answer.choices[0].message
                text = message.content or ""
                calls_made = [tc.model_dump() for tc in message.tool_calls or []]
                assert answer.usage.prompt_tokens > 0
            if not calls_made:
                assert text == f"Done after {TOOL_ROUNDS} tool calls.", text
                messages.append({"role": "assistant", "content": text})
                break
            messages.append({"role": "assistant", "content": None, "tool_calls": calls_made})
            for c in calls_made:
                messages.append({"role": "tool", "tool_call_id": c["id"], "content": lookup(c["function"]["arguments"])})
    return calls


def responses(client: openai.OpenAI) -> int:
    items = []
    calls = 0
    for turn in range(TURNS):
        items.append({"role": "user", "content": f"Turn {turn}: read the logs and report anomalies."})
        while True:
            calls += 1
            tools = [{"type": "function", "name": "lookup", "parameters": TOOLS[0]["function"]["parameters"]}]
            final = None
            text = ""
            with client.responses.stream(model="gpt-4o", instructions="You are a careful operations agent.",
                                         input=items, tools=tools, store=False) as events:
                for event in events:
                    if event.type == "response.output_text.delta":
                        text += event.delta
                final = events.get_final_response()
            assert final.usage.input_tokens > 0
            out = [o.model_dump(exclude_none=True) for o in final.output]
            items.extend(out)
            fcalls = [o for o in out if o["type"] == "function_call"]
            if not fcalls:
                assert text == f"Done after {TOOL_ROUNDS} tool calls.", text
                break
            for c in fcalls:
                items.append({"type": "function_call_output", "call_id": c["call_id"], "output": lookup(c["arguments"])})
    return calls


def main() -> None:
    base = sys.argv[1]
    plain = openai.OpenAI(base_url=base, api_key="sk-test-SECRET-openai", default_headers={"X-Compact-Session": "py-chat"})
    streamed = openai.OpenAI(base_url=base, api_key="sk-test-SECRET-openai", default_headers={"X-Compact-Session": "py-chat-stream"})
    resp = openai.OpenAI(base_url=base, api_key="sk-test-SECRET-openai", default_headers={"X-Compact-Session": "py-responses"})
    n = chat(plain, stream=False) + chat(streamed, stream=True) + responses(resp)
    print(json.dumps({"calls": n}))


if __name__ == "__main__":
    main()
