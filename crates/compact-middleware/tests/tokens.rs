//! Token accounting: backends against the tiktoken-rs reference, the counting rules of
//! `docs/tokens.md`, model profiles, the item hash and the count cache.
use compact_middleware::tokens::{
    AUDIO_PART, Backend, CountCache, Encoding, FILE_PART, IMAGE_HIGH, IMAGE_LOW, PER_MESSAGE,
    PER_NAME, PER_TOOL_CALL, REPLY_PRIMING, TokenCounter, builtin_models, builtin_profile,
    count_item, count_tools, counter, item_hash,
};
use serde_json::{Map, Value, json};
use std::sync::Arc;

const ENCODINGS: [Encoding; 2] = [Encoding::O200k, Encoding::Cl100k];

fn reference(encoding: Encoding) -> &'static tiktoken_rs::CoreBPE {
    match encoding {
        Encoding::O200k => tiktoken_rs::o200k_base_singleton(),
        Encoding::Cl100k => tiktoken_rs::cl100k_base_singleton(),
    }
}

fn obj(v: Value) -> Map<String, Value> {
    match v {
        Value::Object(m) => m,
        other => panic!("test fixture is not an object: {other}"),
    }
}

fn bpe(encoding: Encoding) -> &'static dyn TokenCounter {
    counter(Backend::Bpe, encoding)
}

// ---------------------------------------------------------------------------------------
// Backends
// ---------------------------------------------------------------------------------------

fn corpus() -> Vec<String> {
    let mut texts: Vec<String> = [
        "",
        "Hello, world!",
        "The quick brown fox jumps over the lazy dog. It's what they'd've done; I'LL SEE.",
        "日本語のテキストと中文文本，还有한국어 텍스트。",
        "Emoji: 😀👍🏽👨‍👩‍👧‍👦🇫🇷 and ZWJ sequences, ✈️, keycaps 1️⃣",
        "Combining: e\u{301} a\u{308} n\u{303} Z\u{335}\u{321}\u{34e} अनुच्छेद ١٢٣٤٥",
        "Ελληνικά, русский текст, עברית, العربية, ไทย",
        "fn main() {\n    let x: Vec<u8> = vec![1, 2, 3];\n    println!(\"{x:?}\");\n}\n",
        "def f(a, b):\n\treturn a ** b  # comment\n\n\nclass X:\n    pass\n",
        "{\"id\":\"call_abc123\",\"arguments\":\"{\\\"city\\\":\\\"Paris\\\",\\\"n\\\":3}\",\"ok\":true}",
        "1234567890 3.14159 -42 1e10 0xDEADBEEF 2025-04-14T12:00:00Z",
        "<|endoftext|> <|im_start|>user<|im_end|> looks special but is ordinary text",
        "mixed\r\n\r\nline endings\rand\u{85}next\u{2028}line\u{2029}para\u{b}\u{c}",
        "trailing spaces   ",
        "   leading spaces",
        "\u{feff}BOM and \u{200b}zero width\u{200d}joiner",
        "http://example.com/path?query=1&x=y#frag /usr/local/bin//",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    texts.push(include_str!("fixtures/tokens/mixed.txt").to_string());
    for unit in [
        " ", "\n", "\t", " \n", "\t ", "\r\n", "\u{3000}", "\u{a0}", " \t\n",
    ] {
        for n in [
            1, 2, 3, 4, 7, 8, 15, 16, 17, 31, 64, 100, 127, 128, 129, 255, 1000, 10_000,
        ] {
            let run = unit.repeat(n);
            texts.push(run.clone());
            texts.push(format!("a{run}b"));
            texts.push(format!("x{run}"));
            texts.push(format!("{run}.y"));
            texts.push(format!("1{run}2"));
        }
    }
    texts.push(" ".repeat(100_000) + "end");
    texts.push("a".repeat(100_000));
    texts.push("ab".repeat(50_000));
    texts.push("9".repeat(100_000));
    texts.push("😀".repeat(20_000));
    texts.push("é".repeat(30_000));
    texts.push(".".repeat(50_000));
    texts.push("-=".repeat(30_000) + "\n\n");
    texts
}

#[test]
fn backends_equal_tiktoken_on_corpus() {
    for encoding in ENCODINGS {
        let (b, t) = (bpe(encoding), counter(Backend::Tiktoken, encoding));
        assert_eq!((b.encoding(), b.backend()), (encoding, Backend::Bpe));
        assert_eq!((t.encoding(), t.backend()), (encoding, Backend::Tiktoken));
        for text in corpus() {
            let expected = reference(encoding).encode_ordinary(&text).len();
            let short: String = text.chars().take(40).collect();
            assert_eq!(b.count(&text), expected, "bpe {encoding:?} {short:?}");
            assert_eq!(t.count(&text), expected, "tiktoken {encoding:?} {short:?}");
        }
    }
}

#[test]
fn counter_is_shared() {
    let a = counter(Backend::Bpe, Encoding::O200k) as *const dyn TokenCounter;
    let b = counter(Backend::Bpe, Encoding::O200k) as *const dyn TokenCounter;
    assert!(std::ptr::addr_eq(a, b));
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(48))]
    #[test]
    fn backends_agree_on_random_strings(
        text in proptest::prop_oneof![
            "\\PC{0,64}",
            "([ \t\r\n]{0,5}|[a-zA-Z]{0,6}|[0-9]{0,5}|[.,;'\"/(){}]{0,3}|[é日😀\u{301}\u{3000}]){0,20}",
        ]
    ) {
        for encoding in ENCODINGS {
            let expected = reference(encoding).encode_ordinary(&text).len();
            proptest::prop_assert_eq!(bpe(encoding).count(&text), expected);
            proptest::prop_assert_eq!(counter(Backend::Tiktoken, encoding).count(&text), expected);
        }
    }
}

#[test]
fn megabyte_of_whitespace_on_both_backends() {
    let texts = [
        " ".repeat(1 << 20),
        format!("start{}end", " ".repeat(1 << 20)),
        format!("x{}", " \t".repeat(1 << 19)),
        format!("{}\n{}.", " \n\t".repeat(1 << 18), "\t ".repeat(1 << 19)),
        format!("a{}1", "\u{3000}".repeat(1 << 20)),
    ];
    for encoding in ENCODINGS {
        for text in &texts {
            let b = bpe(encoding).count(text);
            let t = counter(Backend::Tiktoken, encoding).count(text);
            assert_eq!(b, t, "{encoding:?} len {}", text.len());
            assert!(b > 0);
        }
    }
}

/// Documents the upstream failure the Tiktoken backend works around: a run of a million
/// spaces makes fancy-regex's backtracking VM return `StackOverflow`, which tiktoken-rs
/// unwraps. If this starts failing, tiktoken-rs fixed it and the guard can be revisited.
#[test]
fn raw_tiktoken_panics_on_a_million_spaces() {
    let text = format!("a{}b", " ".repeat(1_000_000));
    let outcome =
        std::panic::catch_unwind(|| reference(Encoding::O200k).encode_ordinary(&text).len());
    let message = match outcome {
        Ok(n) => panic!("tiktoken-rs no longer panics (count {n})"),
        Err(e) => e.downcast_ref::<String>().cloned().unwrap_or_default(),
    };
    assert!(message.contains("StackOverflow"), "{message}");
}

// ---------------------------------------------------------------------------------------
// Plain chat messages against tiktoken-rs's num_tokens_from_messages
// ---------------------------------------------------------------------------------------

#[test]
fn plain_messages_match_tiktoken_num_tokens_from_messages() {
    use tiktoken_rs::ChatCompletionRequestMessage as M;
    let messages = [
        json!({"role": "system", "content": "You are a helpful, pattern-following assistant."}),
        json!({"role": "system", "name": "example_user", "content": "New synergies will help drive top-line growth."}),
        json!({"role": "system", "name": "example_assistant", "content": "Things working well together will increase revenue."}),
        json!({"role": "user", "content": "日本語で説明してください 😀 and some code: `let x = 1;`"}),
        json!({"role": "assistant", "content": "Sure.\n\n```rust\nfn main() {}\n```\n"}),
        json!({"role": "user", "name": "bob", "content": ""}),
        json!({"role": "developer", "content": "  trailing   whitespace   \n\n"}),
    ];
    let reference_messages: Vec<M> = messages
        .iter()
        .map(|m| M {
            role: m["role"].as_str().unwrap_or_default().to_string(),
            content: m["content"].as_str().map(str::to_string),
            name: m.get("name").and_then(Value::as_str).map(str::to_string),
            ..Default::default()
        })
        .collect();
    for model in [
        "gpt-4o",
        "gpt-4o-mini",
        "gpt-4.1",
        "o3",
        "gpt-5",
        "gpt-4",
        "gpt-3.5-turbo",
    ] {
        let expected = tiktoken_rs::num_tokens_from_messages(model, &reference_messages)
            .unwrap_or_else(|e| panic!("{model}: {e}"));
        let encoding = builtin_profile(model).map(|p| p.encoding);
        let encoding = encoding.unwrap_or_else(|| panic!("no profile for {model}"));
        for backend in [Backend::Bpe, Backend::Tiktoken] {
            let c = counter(backend, encoding);
            let ours: usize = messages
                .iter()
                .map(|m| count_item(c, &obj(m.clone())))
                .sum();
            assert_eq!(ours + REPLY_PRIMING, expected, "{model} {backend:?}");
        }
    }
}

// ---------------------------------------------------------------------------------------
// Counting rules (expectations written from docs/tokens.md, piece by piece)
// ---------------------------------------------------------------------------------------

#[test]
fn message_rule_counts_every_string_field_and_name() {
    let c = bpe(Encoding::O200k);
    let m = obj(json!({"role": "tool", "tool_call_id": "call_1", "content": "42", "name": "calc"}));
    let expected = PER_MESSAGE
        + c.count("tool")
        + c.count("call_1")
        + c.count("42")
        + c.count("calc")
        + PER_NAME;
    assert_eq!(count_item(c, &m), expected);
}

#[test]
fn our_own_fields_are_ignored() {
    let c = bpe(Encoding::O200k);
    let plain = obj(json!({"role": "user", "content": "hi"}));
    let with_meta = obj(json!({
        "role": "user", "content": "hi",
        "meta": {"protected": true, "label": "a long label that would cost tokens"},
        "compacted": true
    }));
    assert_eq!(count_item(c, &with_meta), count_item(c, &plain));
}

#[test]
fn content_parts_rule() {
    let c = bpe(Encoding::O200k);
    let m = obj(json!({"role": "user", "content": [
        {"type": "text", "text": "What is in this image?"},
        {"type": "image_url", "image_url": {"url": "https://example.com/a.png", "detail": "low"}},
        {"type": "image_url", "image_url": {"url": format!("data:image/png;base64,{}", "A".repeat(100_000))}},
        {"type": "input_audio", "input_audio": {"data": "UklGR".repeat(1000), "format": "wav"}},
        {"type": "file", "file": {"filename": "report.pdf", "file_data": "JVBERi0xLjQK".repeat(1000)}},
        {"type": "refusal", "refusal": "I can't help with that."}
    ]}));
    let expected = PER_MESSAGE
        + c.count("user")
        + c.count("What is in this image?")
        + IMAGE_LOW
        + IMAGE_HIGH
        + AUDIO_PART
        + FILE_PART
        + c.count("report.pdf")
        + c.count("I can't help with that.");
    assert_eq!(count_item(c, &m), expected);
}

#[test]
fn responses_message_parts_rule() {
    let c = bpe(Encoding::O200k);
    let m = obj(
        json!({"type": "message", "id": "msg_1", "status": "completed", "role": "assistant",
        "content": [{"type": "output_text", "text": "Done.", "annotations": [{"type": "url_citation", "url": "https://x"}]}]}),
    );
    assert_eq!(
        count_item(c, &m),
        PER_MESSAGE + c.count("assistant") + c.count("Done.")
    );
    let m = obj(json!({"role": "user", "content": [
        {"type": "input_text", "text": "look"},
        {"type": "input_image", "image_url": "data:image/jpeg;base64,/9j/4AAQ", "detail": "low"},
        {"type": "input_image", "file_id": "file-1"},
        {"type": "input_file", "filename": "a.pdf", "file_id": "file-2"}
    ]}));
    let expected = PER_MESSAGE
        + c.count("user")
        + c.count("look")
        + IMAGE_LOW
        + IMAGE_HIGH
        + FILE_PART
        + c.count("a.pdf");
    assert_eq!(count_item(c, &m), expected);
}

#[test]
fn chat_tool_calls_rule() {
    let c = bpe(Encoding::Cl100k);
    let m = obj(json!({"role": "assistant", "content": null, "tool_calls": [
        {"id": "call_a", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}},
        {"id": "call_b", "type": "function", "function": {"name": "get_time", "arguments": "{}"}}
    ]}));
    let expected = PER_MESSAGE
        + c.count("assistant")
        + (PER_TOOL_CALL
            + c.count("call_a")
            + c.count("get_weather")
            + c.count("{\"city\":\"Paris\"}"))
        + (PER_TOOL_CALL + c.count("call_b") + c.count("get_time") + c.count("{}"));
    assert_eq!(count_item(c, &m), expected);

    let legacy =
        obj(json!({"role": "assistant", "function_call": {"name": "f", "arguments": "{\"x\":1}"}}));
    let expected =
        PER_MESSAGE + c.count("assistant") + PER_TOOL_CALL + c.count("f") + c.count("{\"x\":1}");
    assert_eq!(count_item(c, &legacy), expected);
}

#[test]
fn responses_items_rule() {
    let c = bpe(Encoding::O200k);
    let call = obj(
        json!({"type": "function_call", "id": "fc_1", "status": "completed",
        "call_id": "call_9", "name": "search", "arguments": "{\"q\":\"rust\"}"}),
    );
    assert_eq!(
        count_item(c, &call),
        PER_MESSAGE + c.count("call_9") + c.count("search") + c.count("{\"q\":\"rust\"}")
    );

    let out =
        obj(json!({"type": "function_call_output", "call_id": "call_9", "output": "3 results"}));
    assert_eq!(
        count_item(c, &out),
        PER_MESSAGE + c.count("call_9") + c.count("3 results")
    );

    let out_parts = obj(
        json!({"type": "function_call_output", "call_id": "call_9", "output": [
            {"type": "input_text", "text": "see image"}, {"type": "input_image", "image_url": "https://x/y.png"}
        ]}),
    );
    assert_eq!(
        count_item(c, &out_parts),
        PER_MESSAGE + c.count("call_9") + c.count("see image") + IMAGE_HIGH
    );

    let reasoning = obj(json!({"type": "reasoning", "id": "rs_1",
        "summary": [{"type": "summary_text", "text": "Thinking about it."}],
        "encrypted_content": "gAAAA".repeat(10_000)}));
    assert_eq!(
        count_item(c, &reasoning),
        PER_MESSAGE + c.count("Thinking about it.")
    );

    let compaction = obj(json!({"type": "compaction", "id": "cmp_1", "encrypted_content": "xyz"}));
    assert_eq!(count_item(c, &compaction), PER_MESSAGE);

    // Other `*_call` items: every value except `type`/`id`/`status`, keys not counted,
    // numbers as their JSON text, nested `type` discriminators skipped.
    let shell = obj(
        json!({"type": "local_shell_call", "id": "lsh_1", "call_id": "c1", "status": "completed",
        "action": {"type": "exec", "command": ["ls", "-la"], "timeout_ms": 1000}}),
    );
    assert_eq!(
        count_item(c, &shell),
        PER_MESSAGE + c.count("c1") + c.count("ls") + c.count("-la") + c.count("1000")
    );

    let screenshot = obj(json!({"type": "computer_call_output", "call_id": "c2",
        "output": {"type": "computer_screenshot", "image_url": format!("data:image/png;base64,{}", "i".repeat(50_000))}}));
    assert_eq!(
        count_item(c, &screenshot),
        PER_MESSAGE + c.count("c2") + IMAGE_HIGH
    );

    // A `name` on a non-message item is a function name: no PER_NAME.
    let unknown = obj(json!({"type": "mystery", "name": "n", "flag": true, "nothing": null}));
    assert_eq!(
        count_item(c, &unknown),
        PER_MESSAGE + c.count("n") + c.count("true")
    );
}

#[test]
fn odd_items_never_panic() {
    let c = bpe(Encoding::O200k);
    for v in [
        json!({}),
        json!({"role": 7, "content": {"weird": [1, 2.5, null, {"type": 3}]}}),
        json!({"type": "text"}),
        json!({"content": [{"type": "text", "text": 5}, {"type": "image_url"}, {"type": "file", "file": 1}, "bare", 1, null]}),
        json!({"tool_calls": "not a list", "name": ["x"], "function_call": "s"}),
        json!({"tool_calls": [null, 1, {"function": null}]}),
        json!({"content": "data:image/png;base64"}),
        json!({"content": "data:"}),
    ] {
        let n = count_item(c, &obj(v));
        assert!(n >= PER_MESSAGE);
    }
    // A data URL without base64 is ordinary text.
    let m = obj(json!({"content": "data:text/plain,hello"}));
    assert_eq!(
        count_item(c, &m),
        PER_MESSAGE + c.count("data:text/plain,hello")
    );
}

#[test]
fn tools_rule_cookbook_shape() {
    for encoding in ENCODINGS {
        let c = bpe(encoding);
        let func_init = if encoding == Encoding::O200k { 7 } else { 10 };
        let tools = [json!({"type": "function", "function": {
            "name": "get_current_weather",
            "description": "Get the current weather in a given location.",
            "parameters": {"type": "object", "properties": {
                "location": {"type": "string", "description": "The city and state, e.g. San Francisco, CA"},
                "unit": {"type": "string", "description": "The unit.", "enum": ["celsius", "fahrenheit"]}
            }, "required": ["location"]}
        }})];
        let expected = func_init
            + c.count("get_current_weather:Get the current weather in a given location")
            + 3 // prop_init
            + 3 + c.count("location:string:The city and state, e.g. San Francisco, CA")
            + 3
            - 3
            + (3 + c.count("celsius"))
            + (3 + c.count("fahrenheit"))
            + c.count("unit:string:The unit")
            + 12; // func_end
        assert_eq!(count_tools(c, &tools), expected, "{encoding:?}");

        // The Responses flat shape counts the same.
        let flat = [json!({"type": "function", "name": "get_current_weather",
            "description": "Get the current weather in a given location.",
            "parameters": tools[0]["function"]["parameters"].clone(), "strict": true})];
        assert_eq!(count_tools(c, &flat), expected, "{encoding:?} flat");
    }
}

#[test]
fn tools_rule_missing_parts_and_fallbacks() {
    let c = bpe(Encoding::O200k);
    assert_eq!(count_tools(c, &[]), 0);

    // No description, no parameters.
    let bare = [json!({"type": "function", "function": {"name": "ping"}})];
    assert_eq!(count_tools(c, &bare), 7 + c.count("ping:") + 12);

    // Empty properties add nothing.
    let empty = [
        json!({"type": "function", "name": "ping", "parameters": {"type": "object", "properties": {}}}),
    ];
    assert_eq!(count_tools(c, &empty), 7 + c.count("ping:") + 12);

    // A nested property falls back to `key:` + its compact JSON.
    let nested_schema =
        json!({"type": "array", "items": {"type": "string"}, "description": "Tags."});
    let nested = [
        json!({"type": "function", "name": "tag", "description": "Tag it",
        "parameters": {"type": "object", "properties": {"tags": nested_schema.clone(), "n": {"type": "integer", "minimum": 0}}}}),
    ];
    let expected = 7
        + c.count("tag:Tag it")
        + 3
        + 3
        + c.count(&format!(
            "tags:{}",
            serde_json::to_string(&nested_schema).unwrap_or_default()
        ))
        + 3
        + c.count("n:integer:")
        + 12;
    assert_eq!(count_tools(c, &nested), expected);

    // Non-function tools: func_init + compact JSON.
    let web = json!({"type": "web_search", "search_context_size": "low"});
    let tools = [web.clone(), bare[0].clone()];
    let expected = 7 + c.count(&web.to_string()) + 7 + c.count("ping:") + 12;
    assert_eq!(count_tools(c, &tools), expected);

    // Odd input is counted, never a panic.
    let odd = [
        json!(null),
        json!("x"),
        json!({"type": "function", "function": "nope"}),
        json!({"type": "function", "function": {"name": 5, "parameters": {"properties": [1]}}}),
        json!({"type": "function", "function": {"name": "e", "parameters": {"properties": {"k": {"type": "string", "enum": [1, null]}}}}}),
    ];
    assert!(count_tools(c, &odd) > 12);
}

// ---------------------------------------------------------------------------------------
// Model profiles
// ---------------------------------------------------------------------------------------

#[test]
fn builtin_profiles_resolve_by_longest_prefix() {
    let window = |m: &str| builtin_profile(m).map(|p| (p.context_window, p.encoding));
    assert_eq!(window("gpt-4o"), Some((128_000, Encoding::O200k)));
    assert_eq!(
        window("gpt-4o-2024-08-06"),
        Some((128_000, Encoding::O200k))
    );
    assert_eq!(
        window("gpt-4o-mini-2024-07-18"),
        Some((128_000, Encoding::O200k))
    );
    assert_eq!(window("gpt-4"), Some((8_192, Encoding::Cl100k)));
    assert_eq!(window("gpt-4-0613"), Some((8_192, Encoding::Cl100k)));
    assert_eq!(window("gpt-4-32k-0613"), Some((32_768, Encoding::Cl100k)));
    assert_eq!(
        window("gpt-4-turbo-2024-04-09"),
        Some((128_000, Encoding::Cl100k))
    );
    assert_eq!(window("gpt-4.1"), Some((1_047_576, Encoding::O200k)));
    assert_eq!(
        window("gpt-4.1-mini-2025-04-14"),
        Some((1_047_576, Encoding::O200k))
    );
    assert_eq!(
        window("gpt-5-nano-2025-08-07"),
        Some((400_000, Encoding::O200k))
    );
    assert_eq!(window("gpt-5.1"), Some((400_000, Encoding::O200k)));
    assert_eq!(
        window("o3-mini-2025-01-31"),
        Some((200_000, Encoding::O200k))
    );
    assert_eq!(
        window("o1-mini-2024-09-12"),
        Some((128_000, Encoding::O200k))
    );
    assert_eq!(window("o4-mini"), Some((200_000, Encoding::O200k)));
    assert_eq!(
        window("gpt-3.5-turbo-0125"),
        Some((16_385, Encoding::Cl100k))
    );
    assert_eq!(
        window("chatgpt-4o-latest"),
        Some((128_000, Encoding::O200k))
    );
    assert_eq!(
        window("ft:gpt-4o-mini-2024-07-18:acme::abc123"),
        Some((128_000, Encoding::O200k))
    );
    // Not a '-' boundary: no match rather than a wrong one.
    for unknown in [
        "gpt-4oo",
        "gpt-5.2",
        "o10",
        "gpt",
        "",
        "claude-3-opus",
        "GPT-4O",
        "gpt-4x",
    ] {
        assert_eq!(builtin_profile(unknown), None, "{unknown}");
    }
    for (name, profile) in builtin_models() {
        assert_eq!(builtin_profile(name), Some(*profile), "{name}");
    }
}

// ---------------------------------------------------------------------------------------
// item_hash
// ---------------------------------------------------------------------------------------

#[test]
fn item_hash_equal_values_equal_hashes() {
    let a = obj(json!({"role": "user", "content": [{"type": "text", "text": "hi"}], "n": 1}));
    let b = obj(json!({"n": 1, "content": [{"text": "hi", "type": "text"}], "role": "user"}));
    assert_eq!(a, b);
    assert_eq!(item_hash(&a), item_hash(&b));
    assert_eq!(item_hash(&a), item_hash(&a.clone()));
}

#[test]
fn item_hash_is_stable() {
    // Pinned so that a change of the walk format (which would silently empty every
    // persisted cache) is a deliberate decision.
    let a = obj(json!({"role": "user", "content": "hello"}));
    assert_eq!(
        item_hash(&a),
        item_hash(&obj(json!({"content": "hello", "role": "user"})))
    );
    assert_eq!(
        format!("{:032x}", item_hash(&a)),
        format!("{:032x}", item_hash(&a))
    );
    assert_eq!(
        format!("{:032x}", item_hash(&a)),
        include_str!("fixtures/tokens/item_hash.txt").trim()
    );
}

#[test]
fn item_hash_distinguishes_every_change() {
    let base =
        json!({"role": "user", "content": [{"type": "text", "text": "ab"}], "x": [1, true, null]});
    let variants = [
        json!({"role": "user", "content": [{"type": "text", "text": "ac"}], "x": [1, true, null]}),
        json!({"role": "user", "content": [{"type": "text", "text": "ab"}], "x": [2, true, null]}),
        json!({"role": "user", "content": [{"type": "text", "text": "ab"}], "x": [1, false, null]}),
        json!({"role": "user", "content": [{"type": "text", "text": "ab"}], "x": [1, true]}),
        json!({"role": "user", "content": [{"type": "text", "text": "ab"}], "x": [1.0, true, null]}),
        json!({"role": "user", "content": [{"type": "text", "text": "ab"}], "x": ["1", true, null]}),
        json!({"role": "user", "content": [{"type": "text", "text": "ab"}], "y": [1, true, null]}),
        json!({"role": "user", "content": [{"type": "text", "text": "ab"}]}),
        json!({"role": "assistant", "content": [{"type": "text", "text": "ab"}], "x": [1, true, null]}),
    ];
    let h = item_hash(&obj(base));
    for v in variants {
        assert_ne!(item_hash(&obj(v.clone())), h, "{v}");
    }
    // Nesting and concatenation are not ambiguous.
    let pairs = [
        (json!({"c": ["ab"]}), json!({"c": ["a", "b"]})),
        (json!({"c": [["a"], "b"]}), json!({"c": [["a", "b"]]})),
        (json!({"c": {"a": "b"}}), json!({"c": ["a", "b"]})),
        (json!({"ab": "c"}), json!({"a": "bc"})),
        (json!({"c": ""}), json!({"c": null})),
        (json!({"c": []}), json!({"c": {}})),
        (json!({"c": "1"}), json!({"c": 1})),
        (json!({"c": [{}]}), json!({"c": {}})),
    ];
    for (a, b) in pairs {
        assert_ne!(
            item_hash(&obj(a.clone())),
            item_hash(&obj(b.clone())),
            "{a} vs {b}"
        );
    }
}

// ---------------------------------------------------------------------------------------
// CountCache
// ---------------------------------------------------------------------------------------

#[test]
fn cache_counts_hits_and_misses() {
    let cache = CountCache::new(100);
    let mut calls = 0;
    assert_eq!(
        cache.get_or_insert_with(1, Encoding::O200k, || {
            calls += 1;
            10
        }),
        10
    );
    assert_eq!(
        cache.get_or_insert_with(1, Encoding::O200k, || {
            calls += 1;
            99
        }),
        10
    );
    // Same hash, other encoding: a separate entry.
    assert_eq!(
        cache.get_or_insert_with(1, Encoding::Cl100k, || {
            calls += 1;
            11
        }),
        11
    );
    assert_eq!(calls, 2);
    let s = cache.stats();
    assert_eq!((s.hits, s.misses, s.len), (1, 2, 2));
}

#[test]
fn cache_respects_capacity_and_keeps_hot_entries() {
    for capacity in [0, 1, 2, 3, 10, 101] {
        let cache = CountCache::new(capacity);
        for key in 0..1000u128 {
            cache.get_or_insert_with(key, Encoding::O200k, || 1);
            // Key 0 is touched on every round, like an unchanged conversation prefix.
            cache.get_or_insert_with(0, Encoding::O200k, || 1);
            assert!(cache.stats().len <= capacity, "capacity {capacity}");
        }
        let s = cache.stats();
        assert_eq!(s.hits + s.misses, 2000);
        if capacity >= 2 {
            assert!(s.hits >= 999, "capacity {capacity}: {s:?}");
            let before = cache.stats().misses;
            cache.get_or_insert_with(0, Encoding::O200k, || 1);
            assert_eq!(cache.stats().misses, before);
        }
    }
}

#[test]
fn cache_is_shared_across_threads() {
    let cache = Arc::new(CountCache::new(64));
    let c = bpe(Encoding::O200k);
    let items: Vec<Map<String, Value>> = (0..32)
        .map(|i| obj(json!({"role": "user", "content": format!("message {i}")})))
        .collect();
    let items = Arc::new(items);
    let handles: Vec<_> = (0..4)
        .map(|_| {
            let (cache, items) = (Arc::clone(&cache), Arc::clone(&items));
            std::thread::spawn(move || {
                items
                    .iter()
                    .map(|m| {
                        cache.get_or_insert_with(item_hash(m), Encoding::O200k, || count_item(c, m))
                    })
                    .sum::<usize>()
            })
        })
        .collect();
    let expected: usize = items.iter().map(|m| count_item(c, m)).sum();
    for h in handles {
        assert_eq!(h.join().unwrap_or_default(), expected);
    }
    let s = cache.stats();
    assert_eq!(s.hits + s.misses, 128);
    assert!(s.len <= 64);
}

// ---------------------------------------------------------------------------------------
// Throughput (run with --release --ignored --nocapture)
// ---------------------------------------------------------------------------------------

#[test]
#[ignore = "measurement, run in release mode"]
fn throughput() {
    let unit = include_str!("fixtures/tokens/mixed.txt");
    let inputs = [
        ("mixed", unit.repeat((1 << 20) / unit.len() + 1)),
        ("whitespace", " \t".repeat(1 << 19)),
        ("repeated", "a".repeat(1 << 20)),
    ];
    for (label, text) in &inputs {
        for encoding in ENCODINGS {
            for backend in [Backend::Bpe, Backend::Tiktoken] {
                let c = counter(backend, encoding);
                c.count("warm up");
                let start = std::time::Instant::now();
                let mut n = 0;
                for _ in 0..5 {
                    n = c.count(text);
                }
                let secs = start.elapsed().as_secs_f64() / 5.0;
                println!(
                    "{label} {encoding:?} {backend:?}: {:.1} MB/s ({n} tokens in {:.2} MB)",
                    text.len() as f64 / 1e6 / secs,
                    text.len() as f64 / 1e6
                );
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// The ratio estimator against the BPE count
// ---------------------------------------------------------------------------------------

/// `(name, text)` of each calibration file: Latin-script prose, CJK prose, code, and
/// other alphabetic scripts (Cyrillic, Greek).
fn calibration_corpus() -> Vec<(&'static str, String)> {
    let dir =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tokens/calibration");
    ["latin", "cjk", "code", "cyrillic"]
        .into_iter()
        .map(|name| {
            let text = std::fs::read_to_string(dir.join(format!("{name}.txt"))).expect("corpus");
            (name, text)
        })
        .collect()
}

/// Relative error of the `o200k`-calibrated ratio estimate against the exact `o200k`
/// count, per paragraph-sized chunk and over the whole file.
fn ratio_errors(text: &str) -> (f64, f64) {
    let bpe = counter(Backend::Bpe, Encoding::O200k);
    let cpt = compact_middleware::tokens::CharsPerToken::O200K;
    let est = |t: &str| compact_middleware::tokens::ratio_estimate(t, &cpt) as f64;
    let exact = |t: &str| bpe.count(t) as f64;
    let whole = est(text) / exact(text) - 1.0;
    let worst = text
        .split("\n\n")
        .filter(|p| p.len() > 200)
        .map(|p| (est(p) / exact(p) - 1.0).abs())
        .fold(0.0, f64::max);
    (whole, worst)
}

#[test]
fn the_ratio_estimator_stays_close_to_the_bpe_count_per_script() {
    for (name, text) in calibration_corpus() {
        let (whole, worst) = ratio_errors(&text);
        // The figures are in docs/tokens.md; these bounds leave a little room.
        let (bound_whole, bound_chunk) = match name {
            "cyrillic" => (0.15, 0.30),
            _ => (0.06, 0.25),
        };
        assert!(
            whole.abs() <= bound_whole && worst <= bound_chunk,
            "{name}: whole-file error {whole:+.3}, worst paragraph {worst:.3}"
        );
    }
}

/// The figures in `docs/tokens.md`:
/// `cargo test -p compact-middleware --test tokens ratio_figures -- --ignored --nocapture`.
#[test]
#[ignore]
fn ratio_figures() {
    let bpe = counter(Backend::Bpe, Encoding::O200k);
    let cpt = compact_middleware::tokens::CharsPerToken::O200K;
    for (name, text) in calibration_corpus() {
        if std::env::var_os("RATIO_DEBUG").is_some() {
            for p in text.split("\n\n").filter(|p| p.len() > 200) {
                let e = compact_middleware::tokens::ratio_estimate(p, &cpt) as f64;
                let x = bpe.count(p) as f64;
                println!(
                    "  {name} {:+.3} {:.2}c/t {:?}",
                    e / x - 1.0,
                    p.chars().count() as f64 / x,
                    &p[..p.char_indices().nth(50).map_or(p.len(), |(i, _)| i)]
                );
            }
        }
        let (whole, worst) = ratio_errors(&text);
        println!(
            "{name}: {} chars, {} o200k tokens, {:.2} chars/token; ratio estimate error {:+.1}% (worst paragraph {:.1}%)",
            text.chars().count(),
            bpe.count(&text),
            text.chars().count() as f64 / bpe.count(&text) as f64,
            whole * 100.0,
            worst * 100.0
        );
    }
}

/// Text the ratios were not calibrated on: the mixed fixture (prose, code, JSON, CJK)
/// and this repository's own design document and pipeline source.
fn held_out_corpus() -> Vec<(&'static str, String)> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    [
        ("mixed.txt", "tests/fixtures/tokens/mixed.txt"),
        ("docs/design.md", "../../docs/design.md"),
        ("pipeline/mod.rs", "src/pipeline/mod.rs"),
    ]
    .into_iter()
    .filter_map(|(name, path)| Some((name, std::fs::read_to_string(root.join(path)).ok()?)))
    .collect()
}

/// A conversation made of the calibration paragraphs, user and assistant in turn.
fn calibration_conversation() -> Vec<compact_middleware::Message> {
    let mut out = vec![compact_middleware::Message::system(
        "You are a careful engineer. Answer with code when it helps.",
    )];
    for (i, p) in calibration_corpus()
        .iter()
        .flat_map(|(_, text)| text.split("\n\n").map(str::to_owned).collect::<Vec<_>>())
        .filter(|p| !p.trim().is_empty())
        .enumerate()
    {
        out.push(if i % 2 == 0 {
            compact_middleware::Message::user(p)
        } else {
            compact_middleware::Message::assistant(p)
        });
    }
    out
}

/// `(worst pure error, worst anchored error)` over every request of the calibration
/// conversation that ends with a user message, the exact `o200k` count standing in
/// for the provider's reported usage: the anchored estimate is the usage of the
/// request before plus the ratio estimate of the reply and the new user message.
fn anchoring_errors() -> (f64, f64) {
    use compact_middleware::estimate::{Estimator, relative_error};
    let exact = Estimator::new(
        counter(Backend::Bpe, Encoding::O200k),
        Arc::new(CountCache::new(10_000)),
    );
    let ratio = Estimator::new(
        compact_middleware::tokens::ratio_counter(compact_middleware::tokens::CharsPerToken::O200K),
        Arc::new(CountCache::new(10_000)),
    );
    let conversation = calibration_conversation();
    let ends: Vec<usize> = (2..=conversation.len())
        .filter(|&n| conversation[n - 1].role() == compact_middleware::model::Role::User)
        .collect();
    let (mut worst_pure, mut worst_anchored) = (0.0f64, 0.0f64);
    for pair in ends.windows(2) {
        let (before, now) = (&conversation[..pair[0]], &conversation[..pair[1]]);
        let usage = exact.estimate("m", 1 << 20, before, &[]).t_est;
        let truth = exact.estimate("m", 1 << 20, now, &[]).t_est;
        let pure = ratio.estimate("m", 1 << 20, now, &[]).t_est;
        let anchored = ratio.estimate_anchored("m", 1 << 20, now, &[], before.len(), usage);
        assert_eq!(
            anchored.basis,
            compact_middleware::estimate::Basis::Usage,
            "anchored"
        );
        let e = |est: usize| relative_error(est, truth).unwrap_or(0.0).abs();
        worst_pure = worst_pure.max(e(pure));
        worst_anchored = worst_anchored.max(e(anchored.t_est));
    }
    (worst_pure, worst_anchored)
}

#[test]
fn anchoring_to_the_reported_usage_shrinks_the_ratio_error() {
    let (pure, anchored) = anchoring_errors();
    // Past the first turns only the appended messages are estimated, so the error
    // of the whole is a fraction of the error of the pure estimate.
    assert!(anchored < pure, "anchored {anchored:.4} vs pure {pure:.4}");
    assert!(anchored <= 0.05, "anchored error {anchored:.4}");
}

#[test]
fn the_ratio_estimator_holds_on_text_it_was_not_calibrated_on() {
    let bpe = counter(Backend::Bpe, Encoding::O200k);
    let cpt = compact_middleware::tokens::CharsPerToken::O200K;
    let (_, mixed) = &held_out_corpus()[0];
    let e = compact_middleware::tokens::ratio_estimate(mixed, &cpt) as f64
        / bpe.count(mixed) as f64
        - 1.0;
    assert!(e.abs() <= 0.15, "mixed.txt: {e:+.3}");
}

/// The anchoring and held-out figures in `docs/tokens.md`:
/// `cargo test -p compact-middleware --test tokens anchoring_figures -- --ignored --nocapture`.
#[test]
#[ignore]
fn anchoring_figures() {
    let bpe = counter(Backend::Bpe, Encoding::O200k);
    for (name, text) in held_out_corpus() {
        let (whole, worst) = ratio_errors(&text);
        println!(
            "held out {name}: {} chars, {} o200k tokens; ratio estimate error {:+.1}% (worst paragraph {:.1}%)",
            text.chars().count(),
            bpe.count(&text),
            whole * 100.0,
            worst * 100.0
        );
    }
    let (pure, anchored) = anchoring_errors();
    println!(
        "calibration conversation ({} messages): worst request error pure {:.2}%, anchored {:.2}%",
        calibration_conversation().len(),
        pure * 100.0,
        anchored * 100.0
    );
}
