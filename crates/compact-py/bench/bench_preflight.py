"""Per-call cost of `compact.CompactManager.preflight` from Python, side by side
with what Python agents use today, in one run on the same history.

    # a release build of the wheel, in a venv with the comparison packages
    python -m venv target/py-bench-venv
    target/py-bench-venv/bin/pip install -r crates/compact-py/bench/requirements.txt
    target/py-venv/bin/maturin build --release --no-default-features \\
        --manifest-path crates/compact-py/Cargo.toml -o target/wheels
    target/py-bench-venv/bin/pip install --force-reinstall target/wheels/compact-*.whl
    target/py-bench-venv/bin/python crates/compact-py/bench/bench_preflight.py

The history is the one `compact bench` uses (compact-bench's workload: a
system prompt and 100 turns of user request, tool call, ~3 000-character tool
output, reply: 401 Chat Completions messages, about 123k tokens).

Measured, each as p50/p90/min in microseconds:
- `preflight_warm`: the same history again in a 1M window (estimate + decide,
  nothing to compact; the Python objects are converted on every call);
- `preflight_raw_resent`: a 128k window, the whole raw history resent every
  call, one message longer each time (the OpenAI Agents SDK's way); the first
  call, which compacts, is not timed;
- `estimate`: `manager.estimate` of the history (no session);
- `langchain_trigger_check`: LangChain's `SummarizationMiddleware.before_model`
  on the same messages as LangChain messages, with a trigger it does not reach
  (its approximate count, chars/4, and the check; no summary);
- `tiktoken_count`: the exact count of the same messages with `tiktoken`
  (o200k_base, the OpenAI cookbook's `num_tokens_from_messages` rules).

No network: when tiktoken cannot download o200k_base, the copy shipped in
the tiktoken-rs crate (in ~/.cargo/registry) is loaded and checked against
tiktoken's own SHA-256 of the file. Read medians and ratios, not single
numbers: the machine is shared.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import compact


def history(turns: int = 100, output_chars: int = 3000) -> list[dict[str, Any]]:
    """compact-bench's `workload::history`, message for message."""
    items: list[dict[str, Any]] = [{"role": "system", "content": "You are a careful coding agent."}]
    for t in range(turns):
        call = f"call_{t:04}"
        items.append({"role": "user", "content": f"Step {t}: check the logs of job J-{t} and fix ticket AUTH-{1000 + t}."})
        items.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": call, "type": "function", "function": {"name": "read_logs", "arguments": f'{{"job":"J-{t}"}}'}}
                ],
            }
        )
        out, i = [], 0
        size = 0
        while size < output_chars:
            line = f"J-{t} line {i}: request req-{i:05} took {(i * 37) % 900} ms, status=ok\n"
            out.append(line)
            size += len(line)
            i += 1
        items.append({"role": "tool", "tool_call_id": call, "content": "".join(out)})
        items.append({"role": "assistant", "content": f"Job J-{t} is healthy; p99 stayed under 250 ms."})
    return items


def measure(fn: Callable[[int], Any], runs: int, warmup: int) -> dict[str, float]:
    """Runs `fn(i)` warmup + runs times; times the last `runs`, in µs."""
    for i in range(warmup):
        fn(i)
    times = []
    for i in range(warmup, warmup + runs):
        start = time.perf_counter_ns()
        fn(i)
        times.append((time.perf_counter_ns() - start) / 1000)
    times.sort()
    return {
        "runs": runs,
        "p50_us": round(statistics.median(times), 1),
        "p90_us": round(times[int(len(times) * 0.9) - 1], 1),
        "min_us": round(times[0], 1),
    }


def o200k() -> Any:
    import tiktoken

    try:
        return tiktoken.get_encoding("o200k_base")
    except Exception:  # no network: load the file tiktoken-rs ships
        pass
    import tiktoken_ext.openai_public as public

    pattern = os.path.expanduser("~/.cargo/registry/src/*/tiktoken-rs-*/assets/o200k_base.tiktoken")
    files = sorted(glob.glob(pattern))
    if not files:
        sys.exit(f"tiktoken cannot download o200k_base and no local copy matches {pattern}")
    load = public.load_tiktoken_bpe
    public.load_tiktoken_bpe = lambda _url, expected_hash=None: load(files[-1], expected_hash=expected_hash)
    try:
        return tiktoken.Encoding(**public.o200k_base())
    finally:
        public.load_tiktoken_bpe = load


def tiktoken_counter(encoding: Any) -> Callable[[list[dict[str, Any]]], int]:
    """The cookbook's num_tokens_from_messages: 3 per message, 1 per name,
    every string encoded (tool calls' name and arguments too), 3 to prime."""

    def strings(value: Any):
        if isinstance(value, str):
            yield value
        elif isinstance(value, dict):
            for v in value.values():
                yield from strings(v)
        elif isinstance(value, list):
            for v in value:
                yield from strings(v)

    def count(messages: list[dict[str, Any]]) -> int:
        total = 3
        for m in messages:
            total += 3
            for key, value in m.items():
                for s in strings(value):
                    total += len(encoding.encode(s, disallowed_special=()))
                if key == "name":
                    total += 1
        return total

    return count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--quick", action="store_true", help="a smoke run, not a measurement")
    parser.add_argument("--json", metavar="FILE", help="also write the results here")
    args = parser.parse_args()
    runs = 10 if args.quick else args.runs
    slow_runs = 5 if args.quick else max(20, runs // 10)

    base = history()
    results: dict[str, Any] = {}

    big = compact.CompactManager({"model": "gpt-4o", "max_context_tokens": 1_000_000, "storage": {"adapter": "none"}})
    estimate = big.estimate(base)
    results["history"] = {"messages": len(base), "tokens": estimate["t_est"], "json_bytes": len(json.dumps(base))}

    big.preflight("warm", base)
    results["preflight_warm"] = measure(lambda _: big.preflight("warm", base), runs, warmup=10)
    results["estimate"] = measure(lambda _: big.estimate(base), runs, warmup=10)

    window = compact.CompactManager({"model": "gpt-4o", "storage": {"adapter": "none"}})
    grown = [list(base)]
    for i in range(runs + 10):
        grown.append(grown[-1] + [{"role": "user", "content": f"Follow-up {i}: and the next job?"}])
    first = window.preflight("raw", grown[0])
    results["preflight_raw_resent"] = measure(lambda i: window.preflight("raw", grown[i + 1]), runs, warmup=10)
    last = window.preflight("raw", grown[-1])
    results["preflight_raw_resent"]["first_call_compacted"] = first.report["triggered"]
    results["preflight_raw_resent"]["continuation"] = last.report["continuation"]
    results["preflight_raw_resent"]["tokens_sent"] = last.report["tokens_after"]

    from langchain.agents.middleware import SummarizationMiddleware
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import convert_to_messages

    lc_messages = convert_to_messages(base)
    middleware = SummarizationMiddleware(model=GenericFakeChatModel(messages=iter([])), trigger=("tokens", 10**9))
    state = {"messages": lc_messages}
    assert middleware.before_model(state, None) is None
    results["langchain_trigger_check"] = measure(lambda _: middleware.before_model(state, None), runs, warmup=5)
    results["langchain_trigger_check"]["approximate_tokens"] = middleware.token_counter(lc_messages)

    encoding = o200k()
    count = tiktoken_counter(encoding)
    results["tiktoken_count"] = measure(lambda _: count(base), slow_runs, warmup=2)
    results["tiktoken_count"]["tokens"] = count(base)

    import langchain
    import tiktoken

    results["machine"] = {
        "python": platform.python_version(),
        "compact": compact.__version__,
        "langchain": langchain.__version__,
        "tiktoken": tiktoken.__version__,
        "cpus": os.cpu_count(),
        "load_avg": [round(x, 2) for x in os.getloadavg()],
        "quick": args.quick,
    }

    print(json.dumps(results, indent=2))
    rows = ["preflight_warm", "preflight_raw_resent", "estimate", "langchain_trigger_check", "tiktoken_count"]
    print("\nmeasurement                 p50 µs     p90 µs   vs preflight_warm", file=sys.stderr)
    for name in rows:
        r = results[name]
        ratio = r["p50_us"] / results["preflight_warm"]["p50_us"]
        print(f"{name:26} {r['p50_us']:9.1f}  {r['p90_us']:9.1f}   x{ratio:.1f}", file=sys.stderr)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(results, f, indent=2)


if __name__ == "__main__":
    main()
