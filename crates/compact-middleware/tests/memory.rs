//! Memory layers: the sliding window (the window table, the memory table
//! evolution, background summarization, one `processing` row per
//! conversation, crash recovery), cross-session memory and memory files in
//! the instructions (never in the history), and the precedence of the
//! memory strategy.
mod fake_openai;
mod memory_support;

use std::sync::Arc;
use std::time::Duration;

use compact_middleware::config::{Config, Mode, SummarizerKind, SummarizerSettings};
use compact_middleware::memory::{
    InstructionBlocks, MemoryStatus, MemoryStore, SlidingWindow, SqliteStore, inject_instructions,
    summary_range,
};
use compact_middleware::strategy::{Level, Resolved, deep_merge, from_seed_fields, resolve_layers};
use compact_middleware::summarize::{
    OpenAiConfig, OpenAiSummarizer, Strategy, Summarizer, SummaryEntry,
};
use compact_middleware::{CompactManager, Message};
use fake_openai::{FakeServer, Reply, ok, status};
use memory_support::{
    begins_on_threads, compact_users_session_a, conversation,
    crash_mid_summarization_is_recoverable, seed_002_evolution, settings,
};
use serde_json::json;
use tokio::sync::Notify;

/// This file's conversation ([`conversation`]): the user asks about a ticket.
fn conversation_about(n: usize) -> Vec<SummaryEntry> {
    conversation(n, "please check ticket")
}

/// A manager of `config` on the memory store `store`, without session
/// storage or exporters.
fn with_memory(config: Config, store: &Arc<dyn MemoryStore>) -> CompactManager {
    CompactManager::builder(config)
        .without_config_exporters()
        .memory_store(store.clone())
        .without_storage()
        .build()
        .expect("manager")
}

fn openai(base_url: &str) -> Arc<dyn Summarizer> {
    let s = SummarizerSettings {
        kind: SummarizerKind::Openai,
        base_url: base_url.to_owned(),
        retries: 0,
        retry_backoff_ms: 1,
        ..SummarizerSettings::default()
    };
    Arc::new(
        OpenAiSummarizer::new(OpenAiConfig::from_settings(&s, |_| None).expect("cfg"))
            .expect("client"),
    )
}

// --------------------------------------------------------------- the window

#[test]
fn the_seed_002_window_table() {
    assert_eq!(summary_range(5, 14), (0, 5));
    assert_eq!(summary_range(13, 14), (0, 13));
    assert_eq!(summary_range(15, 14), (2, 15));
    assert_eq!(summary_range(19, 14), (6, 19));
    // The start is moved up to an even sequence: pairs are never split.
    assert_eq!(summary_range(16, 14), (4, 16));
    for last in 0..200 {
        let (start, end) = summary_range(last, 14);
        assert_eq!(start % 2, 0);
        assert_eq!(end, last);
        assert!(end + 1 - start <= 14);
    }
}

#[tokio::test]
async fn the_seed_002_memory_table_evolution() {
    let store = Arc::new(SqliteStore::in_memory().expect("store"));
    seed_002_evolution(store.clone(), &conversation_about(20)).await;
    for r in store.history("c1").expect("history") {
        assert!(!r.memory_text.is_empty());
        assert!(r.generation_time_ms.is_some());
    }
    // Another conversation has its own chain.
    assert!(store.latest_completed("c2").expect("latest").is_none());
}

#[tokio::test]
async fn summaries_are_incremental_and_told_when_the_window_slides() {
    let server = FakeServer::start(vec![]).await;
    let store = Arc::new(SqliteStore::in_memory().expect("store"));
    let window = SlidingWindow::new(store.clone(), openai(&server.base_url()), settings());
    let messages = conversation_about(20);
    for (i, last) in [5, 9, 13, 15].into_iter().enumerate() {
        server.push(ok(&format!("Memory {}.", i + 1)));
        let s = window
            .trigger_summarization_if_needed("c", &messages, last)
            .expect("t")
            .expect("s");
        s.handle.await.expect("task");
    }
    let prompts: Vec<String> = server.requests().iter().map(|r| r.user_prompt()).collect();
    // First: seq 0-5, no previous memory.
    assert!(prompts[0].contains("(seq 0)") && prompts[0].contains("(seq 5)"));
    assert!(prompts[0].contains("--- PREVIOUS SUMMARY ---\n(none)"));
    // Second: only seq 6-9, folded into memory 1.
    assert!(prompts[1].contains("Memory 1."));
    assert!(!prompts[1].contains("(seq 5)"));
    assert!(prompts[1].contains("(seq 6)") && prompts[1].contains("(seq 9)"));
    // Fourth: the window moved to start at 2.
    assert!(prompts[3].contains("Memory 3."));
    assert!(prompts[3].contains("(seq 14)") && !prompts[3].contains("(seq 13)"));
    assert!(prompts[3].contains("The memory window now starts at message 2"));
    assert_eq!(
        store
            .latest_completed("c")
            .expect("l")
            .expect("m")
            .memory_text,
        "Memory 4."
    );
}

#[tokio::test]
async fn background_summarization_never_blocks_and_allows_one_processing_row() {
    let gate = Arc::new(Notify::new());
    let server = FakeServer::start(vec![Reply::Gated(
        gate.clone(),
        Box::new(ok("Rounds 1-3: R-1..R-3 closed.")),
    )])
    .await;
    let store = Arc::new(SqliteStore::in_memory().expect("store"));
    let window = SlidingWindow::new(store.clone(), openai(&server.base_url()), settings());
    let mut messages = conversation_about(6);

    // Round 3 ends (seq 5 saved): a processing row, the task runs in the background.
    let first = window
        .trigger_summarization_if_needed("c", &messages, 5)
        .expect("t")
        .expect("scheduled");
    assert_eq!(
        (first.memory_id, first.start_sequence, first.end_sequence),
        (1, 0, 5)
    );
    assert_eq!(
        store.processing("c").expect("p").map(|r| r.memory_id),
        Some(1)
    );

    // Round 4 starts: no completed memory yet, raw messages 0-6.
    messages.extend(conversation_about(8).split_off(6));
    let ctx = window
        .get_context_for_workflow("c", &messages[..7])
        .expect("ctx");
    assert!(ctx.memory.is_none());
    assert_eq!(ctx.gap_messages.len(), 6);

    // Round 4 ends (seq 7): still processing, no new task — from many
    // concurrent callers at once.
    let mut tasks = Vec::new();
    for _ in 0..16 {
        let w = window.clone();
        let m = messages.clone();
        tasks.push(tokio::spawn(async move {
            w.trigger_summarization_if_needed("c", &m, 7)
                .map(|s| s.is_some())
        }));
    }
    for t in tasks {
        assert!(
            !t.await.expect("join").expect("trigger"),
            "no second processing row"
        );
    }
    let processing = store
        .history("c")
        .expect("h")
        .iter()
        .filter(|r| r.status == MemoryStatus::Processing)
        .count();
    assert_eq!(processing, 1);

    gate.notify_one();
    assert_eq!(first.handle.await.expect("task"), MemoryStatus::Completed);

    // Round 5 starts: memory 1 (end 5) plus the gap seq 6-7 before the current message 8.
    messages.extend(conversation_about(10).split_off(8));
    let ctx = window
        .get_context_for_workflow("c", &messages[..9])
        .expect("ctx");
    assert_eq!(ctx.memory_text(), Some("Rounds 1-3: R-1..R-3 closed."));
    assert_eq!(ctx.gap_start, 6);
    assert_eq!(ctx.gap_messages, messages[6..8].to_vec());

    // Round 5 ends (seq 9): memory 2 based on memory 1.
    server.push(ok("Rounds 1-5."));
    let second = window
        .trigger_summarization_if_needed("c", &messages, 9)
        .expect("t")
        .expect("scheduled");
    assert_eq!(second.base_memory_id, Some(1));
    second.handle.await.expect("task");
}

#[tokio::test]
async fn concurrent_stores_on_one_file_never_hold_two_processing_rows() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("memory.sqlite3");
    let stores: Vec<Arc<SqliteStore>> = (0..4)
        .map(|_| Arc::new(SqliteStore::open(&path).expect("open")))
        .collect();
    let tasks = begins_on_threads(&stores);
    let mut won = 0;
    for t in tasks {
        if t.await.expect("join").expect("begin").is_some() {
            won += 1;
        }
    }
    assert_eq!(won, 1);
    assert_eq!(
        stores[0]
            .history("c")
            .expect("h")
            .iter()
            .filter(|r| r.status == MemoryStatus::Processing)
            .count(),
        1
    );
}

#[tokio::test]
async fn a_failed_summary_marks_the_row_failed_and_the_next_round_retries() {
    let server = FakeServer::start(vec![status(500)]).await;
    let store = Arc::new(SqliteStore::in_memory().expect("store"));
    let window = SlidingWindow::new(store.clone(), openai(&server.base_url()), settings());
    let messages = conversation_about(8);
    let s = window
        .trigger_summarization_if_needed("c", &messages, 5)
        .expect("t")
        .expect("s");
    assert_eq!(s.handle.await.expect("task"), MemoryStatus::Failed);
    assert_eq!(
        store.get(1).expect("get").expect("row").status,
        MemoryStatus::Failed
    );
    server.push(ok("Rounds 1-4."));
    let s = window
        .trigger_summarization_if_needed("c", &messages, 7)
        .expect("t")
        .expect("s");
    assert_eq!(s.base_memory_id, None, "a failed row is never a base");
    assert_eq!(s.handle.await.expect("task"), MemoryStatus::Completed);
}

#[tokio::test]
async fn a_crash_mid_summarization_is_recoverable() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("memory.sqlite3");
    crash_mid_summarization_is_recoverable(
        || Arc::new(SqliteStore::open(&path).expect("open")) as Arc<dyn MemoryStore>,
        &conversation_about(12),
    )
    .await;
}

// ---------------------------------------------------- instructions injection

fn base_config(yaml: &str) -> Config {
    Config::from_yaml_str(&format!("model: gpt-4o\nmax_context_tokens: 16000\n{yaml}"))
        .expect("config")
}

#[tokio::test]
async fn memory_files_go_into_the_instructions_not_the_history() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("AGENT.md"), "Always run cargo fmt.").expect("write");
    std::fs::write(
        dir.path().join(".agent-context.md"),
        "Service: billing-api.",
    )
    .expect("write");
    let config = base_config(&format!(
        "memory:\n  files_dirs: [{}]\n",
        dir.path().display()
    ));
    let manager = CompactManager::builder(config)
        .without_config_exporters()
        .without_storage()
        .build()
        .expect("manager");
    let history = vec![
        Message::system("You are a coding agent."),
        Message::user("Hi"),
    ];
    let original = history.clone();
    let out = manager
        .preflight("s", history.clone())
        .await
        .expect("preflight");
    assert_eq!(history, original, "the caller's history is untouched");
    assert_eq!(out.messages.len(), 2);
    let system = out.messages[0].plain_text();
    assert!(system.starts_with("You are a coding agent.\n\n## Project Context (always apply)"));
    assert!(system.contains(&format!(
        "# From {}\nAlways run cargo fmt.",
        dir.path().join("AGENT.md").display()
    )));
    assert!(system.contains("Service: billing-api."));
    assert!(system.find("AGENT.md") < system.find(".agent-context.md"));
    assert_eq!(out.messages[1], original[1]);
    assert_eq!(out.report.injected, ["memory_files"]);

    // An agent that keeps our output does not get the block twice.
    let mut next = out.messages.clone();
    next.push(Message::assistant("Hello"));
    next.push(Message::user("More"));
    let out2 = manager.preflight("s", next).await.expect("preflight");
    assert_eq!(
        out2.messages[0]
            .plain_text()
            .matches("## Project Context")
            .count(),
        1
    );
}

#[test]
fn injection_prepends_a_system_message_when_there_is_none_and_keeps_content_parts() {
    let blocks = InstructionBlocks {
        cross_session: Some("User prefers metric units.".into()),
        ..InstructionBlocks::default()
    };
    let (out, changed) = inject_instructions(vec![Message::user("Hi")], &blocks);
    assert!(changed);
    assert_eq!(out.len(), 2);
    assert_eq!(
        out[0].plain_text(),
        "Cross-session memory: User prefers metric units."
    );
    let (again, changed) = inject_instructions(out.clone(), &blocks);
    assert!(!changed);
    assert_eq!(again, out);

    // Responses-style developer message with content parts: a part is added.
    let dev = compact_middleware::model::Request::from_value(
        json!([{"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "Be brief."}]}]),
        compact_middleware::model::Format::Auto,
    )
    .expect("decodes")
    .messages;
    let (out, _) = inject_instructions(dev, &blocks);
    let v = out[0].to_value();
    assert_eq!(v["content"][1]["type"], "input_text");
    assert!(
        v["content"][1]["text"]
            .as_str()
            .unwrap_or_default()
            .contains("Cross-session memory: ")
    );
}

#[tokio::test]
async fn cross_session_memory_is_persisted_and_injected_into_a_new_session() {
    let store: Arc<dyn MemoryStore> = Arc::new(SqliteStore::in_memory().expect("store"));
    let config = base_config("policy:\n  keep_recent_turns: 1\nmemory:\n  injection: true\n");
    let manager = with_memory(config, &store);

    // Session A: a summary is produced and persisted under the user's key.
    let out = compact_users_session_a(&manager).await;
    assert!(
        out.report.injected.is_empty(),
        "no memory existed when session a started"
    );
    let saved = store
        .session_memory("user-42")
        .expect("read")
        .expect("persisted");
    assert_eq!(saved.session_id, "a");
    assert!(saved.summary_text.contains("RT-"));

    // Session B for the same user: injected into the instructions only.
    manager.bind_memory_key("b", "user-42").await;
    let history = vec![
        Message::system("You are a support agent."),
        Message::user("Hi again"),
    ];
    let out = manager
        .preflight("b", history.clone())
        .await
        .expect("preflight");
    assert_eq!(out.report.injected, ["cross_session"]);
    assert_eq!(out.messages.len(), 2);
    assert!(out.messages[0].plain_text().contains(&format!(
        "Cross-session memory: {}",
        saved.summary_text.trim()
    )));
    assert_eq!(out.messages[1], history[1]);

    // Another user gets nothing; injection off gets nothing.
    manager.bind_memory_key("c", "user-7").await;
    let out = manager
        .preflight("c", history.clone())
        .await
        .expect("preflight");
    assert!(out.report.injected.is_empty());
    let off = with_memory(base_config(""), &store);
    off.bind_memory_key("d", "user-42").await;
    assert!(
        off.preflight("d", history)
            .await
            .expect("preflight")
            .report
            .injected
            .is_empty()
    );
}

#[tokio::test]
async fn sliding_window_mode_replaces_summarized_rounds_with_the_memory() {
    let store: Arc<dyn MemoryStore> = Arc::new(SqliteStore::in_memory().expect("store"));
    let mut config = base_config("memory:\n  summarize_after_seq: 3\n  rolling_window_size: 6\n");
    config.policy.mode = Mode::SlidingWindow;
    let manager = with_memory(config, &store);
    let mut history = vec![Message::system("You are an agent.")];
    for i in 0..3 {
        history.push(Message::user(format!("Question {i} about ticket Q-{i}.")));
        history.push(Message::assistant(format!("Answer {i}: resolved Q-{i}.")));
    }
    history.push(Message::user("Question 3."));
    let original = history.clone();

    // Seq 0-5 done: a background summary starts; this round sees raw messages.
    let out = manager
        .preflight("w", history.clone())
        .await
        .expect("preflight");
    assert_eq!(history, original);
    assert_eq!(
        out.messages.len(),
        history.len(),
        "memory not ready: raw context"
    );
    // Poll until the background summary completes; the timeout is only a
    // hang guard, far beyond what a loaded machine needs.
    let ready = tokio::time::timeout(Duration::from_secs(120), async {
        while store.latest_completed("w").expect("latest").is_none() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
    assert!(ready.is_ok(), "the background summary completes");

    // Next round: memory (seq 0-5) in the instructions, only the gap and the current message.
    history.push(Message::assistant("Answer 3."));
    history.push(Message::user("Question 4."));
    let out = manager
        .preflight("w", history.clone())
        .await
        .expect("preflight");
    assert_eq!(out.report.injected, ["conversation_memory"]);
    let texts: Vec<String> = out.messages.iter().map(Message::plain_text).collect();
    assert!(
        texts[0].contains("Previous context: (messages 0-5)"),
        "{}",
        texts[0]
    );
    assert_eq!(
        texts[1..],
        [
            "Question 3.".to_owned(),
            "Answer 3.".to_owned(),
            "Question 4.".to_owned()
        ]
    );
}

// ---------------------------------------------------------------- precedence

/// The levels as their owners keep them (an agent's in the configuration,
/// a conversation's in its session record, merged by a PATCH), over the
/// defaults: what the manager resolves for each call.
struct Strategies {
    defaults: Config,
    agents: std::cell::RefCell<std::collections::HashMap<String, serde_json::Value>>,
    conversations: std::cell::RefCell<std::collections::HashMap<String, serde_json::Value>>,
}

impl Strategies {
    fn new(defaults: Config) -> Self {
        Self {
            defaults,
            agents: Default::default(),
            conversations: Default::default(),
        }
    }

    fn set_agent(
        &self,
        agent: &str,
        layer: &serde_json::Value,
    ) -> Result<(), compact_middleware::config::ConfigError> {
        let layer = from_seed_fields(layer);
        self.defaults.overlay(&layer)?;
        self.agents.borrow_mut().insert(agent.to_owned(), layer);
        Ok(())
    }

    fn patch_conversation(
        &self,
        conversation: &str,
        layer: &serde_json::Value,
    ) -> Result<(), compact_middleware::config::ConfigError> {
        let mut map = self.conversations.borrow_mut();
        let mut merged = map
            .get(conversation)
            .cloned()
            .unwrap_or(serde_json::Value::Null);
        deep_merge(&mut merged, from_seed_fields(layer));
        self.defaults.overlay(&merged)?;
        map.insert(conversation.to_owned(), merged);
        Ok(())
    }

    fn clear_conversation(&self, conversation: &str) {
        self.conversations.borrow_mut().remove(conversation);
    }

    fn resolve(
        &self,
        agent: Option<&str>,
        conversation: Option<&str>,
        request: Option<&serde_json::Value>,
    ) -> Result<Resolved, compact_middleware::config::ConfigError> {
        let agent = agent.and_then(|a| self.agents.borrow().get(a).cloned());
        let conversation = conversation.and_then(|c| self.conversations.borrow().get(c).cloned());
        resolve_layers(
            &self.defaults,
            agent.as_ref(),
            conversation.as_ref(),
            request,
        )
    }
}

#[test]
fn precedence_is_request_then_conversation_then_agent_then_defaults() {
    let strategies = Strategies::new(Config::default());
    strategies
        .set_agent("data_analyst", &json!({"mode": "compact", "token_budget": 12000, "compact_exclude_tools": ["get_user_profile"]}))
        .expect("agent");
    strategies
        .patch_conversation("conv-1", &json!({"compact_keep": 3, "token_budget": 9000}))
        .expect("conversation");
    strategies
        .patch_conversation("conv-1", &json!({"policy": {"strategy": "brief"}}))
        .expect("patch merges");
    let request = json!({"compact_keep": 5, "memory_injection": true});

    let r = strategies
        .resolve(Some("data_analyst"), Some("conv-1"), Some(&request))
        .expect("resolve");
    assert_eq!(r.config.policy.keep_recent_turns, 5);
    assert_eq!(r.source_of("policy.keep_recent_turns"), Level::Request);
    assert_eq!(r.config.policy.token_budget, Some(9000));
    assert_eq!(r.source_of("policy.token_budget"), Level::Conversation);
    assert_eq!(r.config.policy.strategy, Strategy::Brief);
    assert_eq!(r.config.policy.mode, Mode::Compact);
    assert_eq!(r.source_of("policy.mode"), Level::Agent);
    assert_eq!(r.config.policy.exclude_tools, ["get_user_profile"]);
    assert!(r.config.memory.injection);
    assert_eq!(r.config.policy.trigger_pct, 0.85);
    assert_eq!(r.source_of("policy.trigger_pct"), Level::Default);

    // Without the request and the conversation the agent default applies.
    let r = strategies
        .resolve(Some("data_analyst"), None, None)
        .expect("resolve");
    assert_eq!(r.config.policy.keep_recent_turns, 6);
    assert_eq!(r.config.policy.token_budget, Some(12000));
    // A request alone over the defaults, with a strategy name for the mode.
    let r = strategies
        .resolve(None, None, Some(&json!({"mode": "trimming"})))
        .expect("resolve");
    assert_eq!(r.config.policy.mode, Mode::Trim);
    strategies.clear_conversation("conv-1");
    let r = strategies
        .resolve(Some("data_analyst"), Some("conv-1"), None)
        .expect("resolve");
    assert_eq!(r.config.policy.token_budget, Some(12000));
}

#[test]
fn an_invalid_level_is_rejected_with_its_path() {
    let strategies = Strategies::new(Config::default());
    let err = strategies
        .set_agent("a", &json!({"policy": {"trigger_pct": 2.0}}))
        .expect_err("invalid");
    assert!(err.to_string().contains("policy.trigger_pct"), "{err}");
    let err = strategies
        .resolve(None, None, Some(&json!({"compact_kep": 1})))
        .expect_err("unknown key");
    assert!(err.to_string().contains("compact_kep"), "{err}");
    // Levels are validated together: a request may lower both percentages.
    let r = strategies
        .resolve(None, None, Some(&json!({"policy": {"trigger_pct": 0.5, "target_pct": 0.3, "reactive_target_pct": 0.2}})))
        .expect("valid together");
    assert_eq!(r.config.policy.target_pct, 0.3);
}

#[test]
fn memory_and_summarizer_config_rules() {
    let bad = Config::from_yaml_str(
        "summarizer:\n  api_key_env: sk-live-abc.def\n  temperature: 3\nmemory:\n  rolling_window_size: 7\n",
    )
    .expect_err("invalid");
    let text = bad.to_string();
    assert!(text.contains("summarizer.api_key_env"), "{text}");
    assert!(
        !text.contains("sk-live-abc.def"),
        "the key is never echoed: {text}"
    );
    assert!(text.contains("summarizer.temperature"), "{text}");
    assert!(text.contains("memory.rolling_window_size"), "{text}");
    let ok = Config::from_yaml_str("summarizer:\n  kind: openai\n  api_key_env: OPENAI_API_KEY\n")
        .expect("valid");
    assert_eq!(ok.summarizer.kind, SummarizerKind::Openai);
}
