"""`compact.CompactManager`: compaction, the report, estimates, status, config."""

from __future__ import annotations

import json
import pickle
import subprocess

import pytest

import compact
import uuid

from conftest import POSTGRES_URL, chat_history, compact_bin, pairing_errors, summaries

SMALL = {"model": "gpt-4o", "max_context_tokens": 6000, "storage": {"adapter": "none"}}


def test_an_overflowing_history_comes_back_compacted_with_every_pair_intact():
    manager = compact.CompactManager(SMALL)
    history = chat_history(turns=12)
    outcome = manager.preflight("s1", history)
    report = outcome.report
    assert report["triggered"] is True
    assert report["tokens_after"] < report["tokens_before"]
    assert report["tokens_after"] <= report["budget"]
    assert pairing_errors(outcome.messages) == []
    assert len(outcome.messages) < len(history)
    # The system prompt is pinned, the last turn kept as it was.
    assert outcome.messages[0] is history[0]
    assert outcome.messages[-1] is history[-1]
    # Provider-clean: none of our fields reach the model.
    assert not any("meta" in m or "compacted" in m for m in outcome.messages)


def test_keep_meta_marks_what_compaction_rewrote():
    manager = compact.CompactManager(SMALL)
    outcome = manager.preflight("s1", chat_history(turns=12), keep_meta=True)
    assert any(m.get("compacted") is True for m in outcome.messages)


def test_a_history_that_fits_comes_back_as_the_same_objects():
    manager = compact.CompactManager(SMALL)
    history = chat_history(turns=1)
    outcome = manager.preflight("s1", history)
    assert outcome.report["triggered"] is False
    assert len(outcome.messages) == len(history)
    assert all(a is b for a, b in zip(outcome.messages, history))
    assert outcome.messages is not history


def test_the_raw_history_resent_continues_the_summary_chain():
    manager = compact.CompactManager(SMALL)
    history = chat_history(turns=12)
    first = manager.preflight("s1", history)
    history += chat_history(turns=14)[-4:]
    second = manager.preflight("s1", history)
    assert second.report["continuation"] == "raw_prefix"
    assert summaries(second.messages) == 1
    assert pairing_errors(second.messages) == []
    assert manager.status("s1")["summary"]["version"] >= first.report["summary_version"]
    # Messages kept from the caller's history are the caller's objects,
    # even those the session's previous output stood in for.
    kept = [m for m in second.messages if any(m is h for h in history)]
    assert len(kept) >= len(second.messages) - 2


def test_responses_items_and_tools_are_accepted():
    manager = compact.CompactManager(SMALL)
    items = [
        {"role": "user", "content": "read the logs"},
        {"type": "function_call", "call_id": "c1", "name": "read_logs", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": "ok " * 50},
    ]
    tools = [{"type": "function", "name": "read_logs", "parameters": {"type": "object", "properties": {}}}]
    outcome = manager.preflight("r", items, tools, format="responses")
    assert outcome.report["breakdown"]["tools_schema"] > 0
    assert all(a is b for a, b in zip(outcome.messages, items))


def test_force_and_manual_compact_summarize_what_fits():
    manager = compact.CompactManager({"model": "gpt-4o", "storage": {"adapter": "none"}})
    history = chat_history(turns=8)
    assert manager.preflight("a", history).report["triggered"] is False
    forced = manager.preflight("a", history, force=True)
    assert forced.report["forced"] == "manual"
    manual = manager.manual_compact("b", history, note="before a handoff")
    assert manual.report["note"] == "before a handoff"
    assert summaries(manual.messages) == 1


def test_on_context_overflow_compacts_below_the_reactive_target():
    manager = compact.CompactManager({"model": "gpt-4o", "max_context_tokens": 8000, "storage": {"adapter": "none"}})
    history = chat_history(turns=6)
    error = RuntimeError("This model's maximum context length is 8000 tokens")
    outcome = manager.on_context_overflow("s", history, error)
    report = outcome.report
    assert report["forced"] == "context_overflow"
    assert report["note"] == "RuntimeError: This model's maximum context length is 8000 tokens"
    assert report["tokens_after"] < report["tokens_before"]
    assert pairing_errors(outcome.messages) == []


def test_usage_anchors_the_estimate():
    manager = compact.CompactManager(SMALL)
    history = chat_history(turns=1)
    outcome = manager.preflight("u", history, usage={"input_tokens": 900, "cache_read_input_tokens": 100})
    assert outcome.report["basis"] == "usage"
    assert outcome.report["anchor"]["usage_tokens"] == 1000
    assert manager.estimate(history, usage=1000)["basis"] == "usage"


def test_usage_reports_the_providers_cache_figures():
    pytest.importorskip("openai")
    from openai.types.completion_usage import CompletionUsage, PromptTokensDetails

    manager = compact.CompactManager({**SMALL, "model": "gpt-4o"})
    history = chat_history(turns=1)
    # The SDK's own usage object, its cached tokens nested.
    usage = CompletionUsage(
        prompt_tokens=2006,
        completion_tokens=300,
        total_tokens=2306,
        prompt_tokens_details=PromptTokensDetails(cached_tokens=1920),
    )
    outcome = manager.preflight("cache", history, usage=usage)
    cache = outcome.report["cache"]
    assert cache["reported"] == {
        "input_tokens": 2006,
        "cache_read": 1920,
        "cache_write": 0,
        "cache_write_1h": 0,
        "output_tokens": 300,
    }
    # gpt-4o's list prices: 86 plain x $2.50, 1,920 cached x $1.25, 300 out x $10 per million.
    assert cache["reported_cost_usd"] == pytest.approx((86 * 2.5 + 1920 * 1.25 + 300 * 10) / 1e6)
    assert outcome.report["basis"] == "usage"
    # Anthropic's dict: the cache figures are outside input_tokens.
    outcome = manager.preflight(
        "cache-2",
        history,
        usage={"input_tokens": 10, "cache_read_input_tokens": 900, "cache_creation_input_tokens": 90},
    )
    assert outcome.report["cache"]["reported"]["input_tokens"] == 1000
    with pytest.raises(compact.InvalidInput) as err:
        manager.preflight("cache-3", history, usage={"prompt_tokens": 5, "prompt_tokens_details": {"cached_tokens": "x"}})
    assert err.value.path == "$.usage.prompt_tokens_details.cached_tokens"


def test_estimate_is_the_dict_compact_estimate_prints():
    manager = compact.CompactManager({"model": "gpt-4o"})
    history = chat_history(turns=3)
    tools = [{"type": "function", "function": {"name": "read_logs", "parameters": {"type": "object"}}}]
    cli = subprocess.run(
        [str(compact_bin()), "estimate", "--model", "gpt-4o"],
        input=json.dumps({"messages": history, "tools": tools}),
        capture_output=True,
        text=True,
        check=True,
    )
    assert manager.estimate(history, tools) == json.loads(cli.stdout)


def test_status_and_delete_session():
    manager = compact.CompactManager(SMALL)
    assert manager.status("gone")["known"] is False
    manager.preflight("s", chat_history(turns=12))
    status = manager.status("s")
    assert status["known"] is True
    assert status["summary"]["version"] == 1
    assert "COMPACT-SUMMARY" not in status["summary"]["text"] or status["summary"]["text"]
    assert manager.delete_session("s") is True
    assert manager.status("s")["known"] is False
    assert manager.delete_session("s") is False


def test_sessions_in_sqlite_outlive_the_manager(tmp_path):
    config = dict(SMALL, state={"store": "sqlite", "path": str(tmp_path / "state.sqlite3")})
    history = chat_history(turns=12)
    first = compact.CompactManager(config)
    version = first.preflight("durable", history).report["summary_version"]
    first.close()
    second = compact.CompactManager(config)
    assert second.status("durable")["summary"]["version"] == version
    history += chat_history(turns=14)[-4:]
    again = second.preflight("durable", history)
    assert again.report["continuation"] == "raw_prefix"


@pytest.mark.skipif(POSTGRES_URL is None, reason="COMPACT_TEST_POSTGRES_URL is not set (scripts/test.sh sets it)")
def test_two_managers_on_one_postgres_database_continue_one_chain():
    config = dict(SMALL, state={"store": "postgres", "url": POSTGRES_URL})
    first, second = compact.CompactManager(config), compact.CompactManager(config)
    session = f"pg-{uuid.uuid4().hex}"
    history = chat_history(turns=12)
    v1 = first.preflight(session, history).report["summary_version"]
    assert second.status(session)["summary"]["version"] == v1
    history += chat_history(turns=20)[-32:]
    again = second.preflight(session, history)
    assert again.report["continuation"] == "raw_prefix"
    assert again.report["summary_version"] == v1 + 1
    assert summaries(again.messages) == 1 and pairing_errors(again.messages) == []
    assert first.delete_session(session) is True


def test_the_archive_is_written_where_the_config_says(tmp_path):
    config = dict(SMALL, storage={"adapter": "fs", "path": str(tmp_path / "archive")})
    manager = compact.CompactManager(config)
    manager.preflight("archived", chat_history(turns=12))
    files = sorted(p.name for p in (tmp_path / "archive" / "archived").iterdir())
    assert any(name.startswith("transcript-pre-compact-") for name in files), files
    assert any(name.startswith("summary-") for name in files), files


def test_events_go_to_the_configured_jsonl_file(tmp_path):
    path = tmp_path / "events.jsonl"
    manager = compact.CompactManager(dict(SMALL, telemetry={"exporter": "jsonl", "jsonl_path": str(path)}))
    manager.preflight("ev", chat_history(turns=12))
    assert manager.flush(10.0)
    names = [json.loads(line)["name"] for line in path.read_text().splitlines() if '"span"' in line]
    assert "compact.preflight" in names and "compact.summary_created" in names


def test_config_precedence_file_then_environment_then_dict(tmp_path, monkeypatch):
    file = tmp_path / "compact.yaml"
    file.write_text("model: gpt-4o\nmax_context_tokens: 10000\npolicy:\n  trigger_pct: 0.7\n  target_pct: 0.5\n")
    assert compact.CompactManager(config_file=file).max_tokens == 10000
    monkeypatch.setenv("COMPACT_MAX_CONTEXT_TOKENS", "20000")
    manager = compact.CompactManager(config_file=str(file))
    assert manager.max_tokens == 20000
    assert manager.config["policy"]["trigger_pct"] == 0.7
    manager = compact.CompactManager({"max_context_tokens": 30000}, config_file=file)
    assert manager.max_tokens == 30000
    assert manager.model == "gpt-4o"


def test_config_errors_name_the_field(tmp_path):
    with pytest.raises(compact.ConfigError) as e:
        compact.CompactManager({"policy": {"trigger_pct": 2}})
    assert e.value.field == "policy.trigger_pct"
    assert isinstance(e.value, compact.CompactError) and isinstance(e.value, ValueError)
    with pytest.raises(compact.ConfigError) as e:
        compact.CompactManager({"polcy": {}})
    assert e.value.field == "polcy"
    assert "did you mean policy" in str(e.value)
    with pytest.raises(compact.ConfigError) as e:
        compact.CompactManager({"model": "my-own-model"})
    assert e.value.field == "model"
    with pytest.raises(compact.ConfigError) as e:
        compact.CompactManager({"telemetry": {"exporter": "ariadne", "ariadne_url": "not a url"}})
    assert e.value.field == "telemetry.ariadne_url"
    with pytest.raises(compact.ConfigError) as e:
        compact.CompactManager({"policy": {"trigger_pct": object()}})
    assert e.value.field == "policy.trigger_pct"
    with pytest.raises(compact.ConfigError) as e:
        compact.CompactManager(["not", "a", "dict"])
    with pytest.raises(compact.ConfigError) as e:
        compact.CompactManager(config_file="/nonexistent/compact.yaml")
    assert e.value.field is None
    with pytest.raises(compact.ConfigError) as e:
        # A directory is no SQLite file.
        compact.CompactManager({"state": {"store": "sqlite", "path": str(tmp_path)}})
    assert e.value.field == "state.path"


@pytest.mark.parametrize(
    ("messages", "path"),
    [
        ([{"role": "user", "content": 3}], "$.messages[0].content"),
        ([{"role": "user", "content": "hi"}, "not a message"], "$.messages[1]"),
        ([{"role": "user", "content": float("nan")}], "$.messages[0].content"),
        ([{"role": "user", "content": "x", 3: "int key"}], "$.messages[0]"),
        ([{"role": "user", "content": [{"type": "text", "text": b"bytes"}]}], "$.messages[0].content[0].text"),
        ([{"role": "user", "content": "x", "meta": {"n": 2**80}}], "$.messages[0].meta.n"),
        ("not a list", "$.messages"),
    ],
)
def test_bad_messages_raise_invalid_input_with_the_json_path(messages, path):
    manager = compact.CompactManager(SMALL)
    with pytest.raises(compact.InvalidInput) as e:
        manager.preflight("s", messages)
    assert e.value.path == path, str(e.value)
    assert str(e.value).startswith(path)


def test_other_bad_arguments_name_their_path():
    manager = compact.CompactManager(SMALL)
    ok = [{"role": "user", "content": "hi"}]
    cases = [
        ({"tools": "nope"}, "$.tools"),
        ({"usage": {"output_tokens": 3}}, "$.usage.input_tokens"),
        ({"usage": -1}, "$.usage"),
        ({"format": "xml"}, "$.format"),
    ]
    for kwargs, path in cases:
        with pytest.raises(compact.InvalidInput) as e:
            manager.preflight("s", ok, **kwargs)
        assert e.value.path == path, (kwargs, str(e.value))
    with pytest.raises(compact.InvalidInput) as e:
        manager.preflight("../../etc", ok)
    assert e.value.path == "$.session_id"


def test_a_dict_that_contains_itself_is_refused_not_a_crash():
    manager = compact.CompactManager(SMALL)
    loop: dict = {"role": "user", "content": "x"}
    loop["meta"] = loop
    with pytest.raises(compact.InvalidInput) as e:
        manager.preflight("s", [loop])
    assert "nested deeper" in str(e.value)


def test_insufficient_budget_carries_the_figures_and_guidance():
    manager = compact.CompactManager({"model": "gpt-4o", "max_context_tokens": 4000, "storage": {"adapter": "none"}})
    pinned = [{"role": "system", "content": "rule " * 6000}, {"role": "user", "content": "hi"}]
    with pytest.raises(compact.InsufficientBudget) as e:
        manager.preflight("s", pinned)
    error = e.value
    assert error.pinned_tokens > error.budget
    assert error.max_tokens == 4000
    assert "max_context_tokens" in error.guidance
    assert isinstance(error, compact.CompactError)


def test_exceptions_survive_pickling():
    manager = compact.CompactManager(SMALL)
    with pytest.raises(compact.InvalidInput) as e:
        manager.preflight("s", [{"role": "user", "content": 3}])
    copy = pickle.loads(pickle.dumps(e.value))
    assert type(copy) is compact.InvalidInput
    assert (copy.path, str(copy)) == (e.value.path, str(e.value))


def test_the_manager_is_a_context_manager_that_flushes_on_exit(tmp_path):
    path = tmp_path / "events.jsonl"
    with compact.CompactManager(dict(SMALL, telemetry={"exporter": "jsonl", "jsonl_path": str(path)})) as manager:
        manager.preflight("cm", chat_history(turns=12))
    assert "compact.preflight" in path.read_text()
    # Compaction still works after close; only the exporters stopped.
    assert manager.preflight("cm2", chat_history(turns=1)).report["triggered"] is False
