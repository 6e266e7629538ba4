//! The timeline as an SRE uses it, in a real browser: a real server, a
//! `compact demo` run against it (`--pace 0`), and headless Chromium driven
//! through chromedriver (the W3C WebDriver protocol over HTTP). The fleet
//! lists the sessions by last activity (a trace posted without timestamps
//! is not put on top), the session view draws one point per turn, a
//! compaction row opens its summary diff, and spans still in flight are
//! marked as in progress.
//!
//! Needs `chromedriver` and `chromium` (Debian: `apt-get install -y
//! chromium chromium-driver`); `CHROMEDRIVER` and `CHROMIUM` override their
//! paths. The screenshots are kept under `target/tmp/ui-screenshots/`.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use ariadne_server::{ServerConfig, spawn};
use serde_json::{Value, json};

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

fn tool(var: &str, default: &str) -> PathBuf {
    let path = std::env::var_os(var)
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(default));
    assert!(
        path.exists(),
        "{} is required for the UI test: apt-get install -y chromium chromium-driver (or set {var})",
        path.display()
    );
    path
}

/// chromedriver on a free port; killed when dropped.
struct Driver {
    child: Child,
    url: String,
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One browser session.
struct Browser {
    http: reqwest::Client,
    base: String,
}

impl Browser {
    async fn start(driver: &Driver) -> Browser {
        let http = reqwest::Client::new();
        // A hang guard only: chromedriver may take a moment to listen.
        for _ in 0..400 {
            if let Ok(r) = http.get(format!("{}/status", driver.url)).send().await
                && r.status().is_success()
            {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let chromium = tool("CHROMIUM", "/usr/bin/chromium");
        let caps = json!({"capabilities":{"alwaysMatch":{"browserName":"chrome",
            "goog:chromeOptions":{"binary": chromium,
                "args":["--headless","--no-sandbox","--disable-gpu","--disable-dev-shm-usage",
                        "--window-size=1920,1080","--hide-scrollbars","--no-first-run"]}}}});
        let v: Value = http
            .post(format!("{}/session", driver.url))
            .json(&caps)
            .send()
            .await
            .expect("new session")
            .json()
            .await
            .expect("session json");
        let id = v["value"]["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("no session: {v}"))
            .to_owned();
        Browser {
            http,
            base: format!("{}/session/{id}", driver.url),
        }
    }

    async fn call(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> Value {
        let mut req = self.http.request(method, format!("{}{path}", self.base));
        if let Some(b) = body {
            req = req.json(&b);
        }
        let v: Value = req
            .send()
            .await
            .expect("webdriver")
            .json()
            .await
            .expect("webdriver json");
        assert!(
            v["value"].get("error").is_none(),
            "webdriver {path}: {}",
            v["value"]
        );
        v["value"].clone()
    }

    async fn go(&self, url: &str) {
        self.call(reqwest::Method::POST, "/url", Some(json!({ "url": url })))
            .await;
    }

    async fn js(&self, script: &str) -> Value {
        self.call(
            reqwest::Method::POST,
            "/execute/sync",
            Some(json!({"script": script, "args": []})),
        )
        .await
    }

    /// Waits until `script` returns something truthy and returns it. The
    /// deadline is a hang guard, not an assertion on speed.
    async fn wait_for(&self, what: &str, script: &str) -> Value {
        for _ in 0..600 {
            let v = self.js(script).await;
            let truthy = match &v {
                Value::Null | Value::Bool(false) => false,
                Value::Number(n) => n.as_f64() != Some(0.0),
                Value::String(s) => !s.is_empty(),
                _ => true,
            };
            if truthy {
                return v;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        self.screenshot(&format!("failed-{}", what.replace(' ', "-")))
            .await;
        panic!("the page never showed {what}");
    }

    async fn click(&self, selector: &str) {
        let found = self
            .js(&format!(
                "const e = document.querySelector({sel}); if (!e) return false; e.click(); return true;",
                sel = json!(selector)
            ))
            .await;
        assert_eq!(found, json!(true), "{selector} to click");
    }

    async fn screenshot(&self, name: &str) -> PathBuf {
        let b64 = self.call(reqwest::Method::GET, "/screenshot", None).await;
        let png = base64_decode(b64.as_str().unwrap_or_default());
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("ui-screenshots");
        std::fs::create_dir_all(&dir).expect("screenshot dir");
        let path = dir.join(format!("{name}.png"));
        std::fs::write(&path, png).expect("screenshot written");
        path
    }

    async fn quit(self) {
        let _ = self.http.delete(&self.base).send().await;
    }
}

fn base64_decode(s: &str) -> Vec<u8> {
    let val = |c: u8| -> Option<u32> {
        Some(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        } as u32)
    };
    let digits: Vec<u32> = s.bytes().filter_map(val).collect();
    let mut out = Vec::with_capacity(digits.len() * 3 / 4);
    for chunk in digits.chunks(4) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |acc, (i, d)| acc | d << (18 - 6 * i));
        let bytes = [(n >> 16) as u8, (n >> 8) as u8, n as u8];
        out.extend_from_slice(&bytes[..chunk.len().saturating_sub(1)]);
    }
    out
}

async fn post(client: &reqwest::Client, url: &str, body: Value) {
    let r = client
        .post(format!("{url}/ingest"))
        .json(&body)
        .send()
        .await
        .expect("ingest");
    assert!(r.status().is_success(), "ingest: {}", r.status());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_sre_reads_a_demo_session() {
    let data = tempfile::tempdir().expect("tempdir");
    let server = spawn(ServerConfig {
        addr: ([127, 0, 0, 1], 0).into(),
        data_dir: data.path().join("server"),
        ..ServerConfig::default()
    })
    .await
    .expect("server");
    let url = server.url();
    let client = reqwest::Client::new();

    // A run as Ariadne's Python exporter posts it: a trace without
    // timestamps, a finished span and one still in flight. It is older than
    // the demo, so it must be listed below it.
    post(
        &client,
        &url,
        json!({"type":"trace","trace_id":"py-run","name":"python-agent"}),
    )
    .await;
    post(&client, &url, json!({"batch":[
        {"type":"span","trace_id":"py-run","span_id":"root","kind":"agent","name":"planner",
         "started_at":"2026-01-01T10:00:00.000Z"},
        {"type":"span","trace_id":"py-run","span_id":"g1","parent_id":"root","kind":"generation",
         "name":"generation gpt-4o","started_at":"2026-01-01T10:00:00.100Z","ended_at":"2026-01-01T10:00:02.000Z"}
    ]}))
    .await;
    // A failed tool call and a compaction that ran out of budget after a
    // summarizer fallback: the fleet's badges and filters must show them.
    post(&client, &url, json!({"batch":[
        {"type":"span","trace_id":"py-run","span_id":"f1","parent_id":"root","kind":"function",
         "name":"search_venues","started_at":"2026-01-01T10:00:02.100Z","ended_at":"2026-01-01T10:00:02.900Z",
         "status":"error","data":{"error":{"message":"venue API timed out"}}},
        {"type":"span","trace_id":"py-run","span_id":"e1","parent_id":"root","kind":"compaction",
         "name":"compact.error","started_at":"2026-01-01T10:00:03.000Z","ended_at":"2026-01-01T10:00:03.010Z",
         "status":"error","data":{"error_type":"InsufficientBudget","fallback":"extractive",
         "message":"pinned messages alone exceed the budget"}}
    ]}))
    .await;

    let demo = Command::new(env!("CARGO_BIN_EXE_compact"))
        .args(["demo", "--url", &url, "--pace", "0", "--turns", "60"])
        .current_dir(data.path())
        .env("TMPDIR", data.path())
        .env("XDG_DATA_HOME", data.path().join("xdg"))
        .env("HOME", data.path().join("home"))
        .stdin(Stdio::null())
        .output()
        .expect("compact demo runs");
    assert!(
        demo.status.success(),
        "{}",
        String::from_utf8_lossy(&demo.stderr)
    );
    let sessions: Value = client
        .get(format!("{url}/api/sessions"))
        .send()
        .await
        .expect("sessions")
        .json()
        .await
        .expect("sessions json");
    let demo_id = sessions["sessions"][0]["trace_id"]
        .as_str()
        .expect("a session")
        .to_owned();
    assert!(demo_id.starts_with("demo-"), "{sessions}");
    let compactions = sessions["sessions"][0]["counts"]["compactions"]
        .as_u64()
        .expect("counts");
    assert!(compactions > 0);
    let py_counts = sessions["sessions"][1]["counts"].clone();
    assert_eq!(sessions["sessions"][1]["trace_id"], "py-run");
    let totals = sessions["totals"].clone();
    let session: Value = client
        .get(format!("{url}/api/sessions/{demo_id}"))
        .send()
        .await
        .expect("session")
        .json()
        .await
        .expect("session json");

    let port = free_port();
    let driver = Driver {
        child: Command::new(tool("CHROMEDRIVER", "/usr/bin/chromedriver"))
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("chromedriver starts"),
        url: format!("http://127.0.0.1:{port}"),
    };
    let b = Browser::start(&driver).await;

    // The fleet: the demo on top, the run without timestamps below it, the
    // counters counting history.
    b.go(&format!("{url}/")).await;
    let order = b
        .wait_for(
            "two sessions listed",
            "const ids = Array.from(document.querySelectorAll('#trace-list li[data-trace-id]')).map(e => e.dataset.traceId); return ids.length >= 2 ? ids : null;",
        )
        .await;
    assert_eq!(order, json!([demo_id, "py-run"]));
    let events = b
        .wait_for(
            "the event counter",
            "return document.getElementById('c-events').textContent",
        )
        .await;
    assert_ne!(events, json!("0"), "history counted");
    // The counters count everything the server retains, history included.
    let counters = b
        .js("return ['c-events','c-spans','c-compact','c-errors'].map(id => document.getElementById(id).textContent.replace(/,/g, ''))")
        .await;
    assert_eq!(
        counters,
        json!([
            totals["events"].to_string(),
            totals["spans"].to_string(),
            totals["compactions"].to_string(),
            totals["errors"].to_string()
        ])
    );
    // Badges: what each session went through.
    let badges = |id: &str| {
        format!(
            "return Array.from(document.querySelectorAll('#trace-list li[data-trace-id=\"{id}\"] .badge')).map(e => e.textContent)"
        )
    };
    assert_eq!(
        b.js(&badges(&demo_id)).await,
        json!([format!("{compactions} compact")])
    );
    assert_eq!(
        b.js(&badges("py-run")).await,
        json!([
            format!("{} err", py_counts["errors"]),
            format!("{} insufficient", py_counts["insufficient"]),
            format!("{} fallback", py_counts["fallbacks"])
        ])
    );
    // Nothing comes from anywhere but the server: the page works offline.
    assert_eq!(
        b.js("return performance.getEntriesByType('resource').concat(Array.from(document.querySelectorAll('script[src],link[href]')).map(e => ({name: e.src || e.href}))).every(e => new URL(e.name, location.href).origin === location.origin)").await,
        json!(true)
    );
    b.screenshot("fleet").await;

    // Search by session id, then filter by what sessions went through.
    let listed_where = |cond: &str| {
        format!(
            "const ids = Array.from(document.querySelectorAll('#trace-list li[data-trace-id]')).map(e => e.dataset.traceId); return {cond};"
        )
    };
    let both = listed_where("ids.length === 2");
    let search = |q: &str| {
        format!(
            "const i = document.getElementById('f-session'); i.value = {q}; i.dispatchEvent(new Event('input')); return true;",
            q = json!(q)
        )
    };
    b.js(&search("py-")).await;
    b.wait_for(
        "the search result",
        &listed_where("ids.join(' ') === 'py-run'"),
    )
    .await;
    b.js(&search("")).await;
    b.wait_for("both sessions again", &both).await;
    for (chip, only) in [
        ("insufficient", "py-run"),
        ("errors", "py-run"),
        ("compactions", demo_id.as_str()),
    ] {
        b.click(&format!("#f-has button[data-has=\"{chip}\"]"))
            .await;
        b.wait_for(
            &format!("only {only} with {chip}"),
            &listed_where(&format!("ids.join(' ') === {}", json!(only))),
        )
        .await;
        if chip == "insufficient" {
            b.screenshot("fleet-filtered").await;
        }
        b.click(&format!("#f-has button[data-has=\"{chip}\"]"))
            .await;
        b.wait_for("the filter cleared", &both).await;
    }

    // One session: one point per turn, one row per preflight.
    b.click(&format!("#trace-list li[data-trace-id=\"{demo_id}\"]"))
        .await;
    let points = b
        .wait_for(
            "the usage chart",
            "return document.querySelectorAll('#usage-chart circle.pt').length",
        )
        .await;
    assert_eq!(points, json!(60));
    assert_eq!(
        b.js("return document.querySelectorAll('tr.pf-row').length")
            .await,
        json!(60)
    );
    assert_eq!(
        b.js("return document.querySelectorAll('tr.pf-row.compaction').length")
            .await,
        json!(compactions)
    );
    assert_eq!(
        b.js("return document.querySelectorAll('#usage-chart .trigger-line, #usage-chart .target-line, #usage-chart .window-line').length").await,
        json!(3)
    );
    b.screenshot("session").await;

    // A compaction that wrote summary v2 opens the diff v1 → v2.
    let row = b
        .wait_for(
            "a compaction with summary v2",
            "const r = Array.from(document.querySelectorAll('tr.pf-row.compaction')).find(r => r.querySelector('.version') && r.querySelector('.version').textContent === 'v2'); return r ? r.dataset.turn : null;",
        )
        .await;
    b.click(&format!(
        "tr.pf-row[data-turn=\"{}\"]",
        row.as_str().unwrap_or_default()
    ))
    .await;
    let head = b
        .wait_for(
            "the summary diff",
            "const d = document.querySelector('#inspector .diff-box[data-version=\"2\"] .diff-head'); return d && document.querySelector('#inspector table.diff') ? d.textContent : null;",
        )
        .await;
    assert!(head.as_str().is_some_and(|h| h.starts_with("v1")), "{head}");
    assert!(
        b.js("return document.querySelectorAll('#inspector table.diff td.add').length > 0")
            .await
            == json!(true),
        "the new summary adds lines"
    );
    // The row says what the API says about that preflight.
    let turn: u64 = row.as_str().and_then(|t| t.parse().ok()).expect("turn");
    let api_row = session["preflights"]
        .as_array()
        .and_then(|rows| rows.iter().find(|r| r["turn"] == turn))
        .expect("the row in the API")
        .clone();
    let cells = b
        .js(&format!(
            "return Array.from(document.querySelectorAll('tr.pf-row[data-turn=\"{turn}\"] td')).map(td => td.textContent)"
        ))
        .await;
    let cells: Vec<String> = serde_json::from_value(cells).expect("cells");
    let digits = |s: &str| s.chars().filter(char::is_ascii_digit).collect::<String>();
    assert_eq!(
        digits(&cells[2]),
        format!("{}{}", api_row["tokens_before"], api_row["tokens_after"]),
        "tokens before → after: {cells:?}"
    );
    let pct = |v: &Value| format!("{:.1}%", v.as_f64().unwrap_or(f64::NAN) * 100.0);
    assert_eq!(
        cells[3],
        format!(
            "{} → {}",
            pct(&api_row["usage_before"]),
            pct(&api_row["usage_after"])
        )
    );
    assert!(cells[4].contains("over trigger"), "decision: {cells:?}");
    assert_eq!(
        b.js(&format!(
            "return document.querySelectorAll('tr.pf-row[data-turn=\"{turn}\"] td.tiers .tier').length"
        ))
        .await,
        json!(api_row["tiers"].as_array().map_or(0, Vec::len))
    );
    assert_eq!(
        cells[6],
        format!(
            "v2 · {} / {}",
            api_row["summary"]["facts_kept"], api_row["summary"]["facts_dropped"]
        )
    );
    assert_eq!(
        cells[7],
        api_row["archival"]["keys"]
            .as_array()
            .map_or(0, Vec::len)
            .to_string()
    );
    // The prompt cache: the share of the request it serves, and the break
    // this compaction caused, as the API says.
    let broken = api_row["cache"]["broken_tokens"].as_u64().unwrap_or(0);
    assert!(cells[8].contains('%'), "cache: {cells:?}");
    assert_eq!(
        cells[8].contains("break"),
        broken > 0,
        "cache: {cells:?} {}",
        api_row["cache"]
    );
    assert!(
        cells[9].ends_with("ms") || cells[9].ends_with(" s"),
        "took: {cells:?}"
    );
    // What was archived, by path.
    let archived = b
        .js("return Array.from(document.querySelectorAll('#inspector ul.archived li')).map(li => li.textContent)")
        .await;
    assert_eq!(archived, api_row["archival"]["keys"]);
    assert!(
        archived.to_string().contains(&demo_id),
        "archived under the session: {archived}"
    );
    b.screenshot("compaction-diff").await;

    // On a laptop screen every column of the session table is in view, and
    // the chart is drawn again to the narrower width.
    b.call(
        reqwest::Method::POST,
        "/window/rect",
        Some(json!({"width": 1366, "height": 800})),
    )
    .await;
    b.wait_for(
        "the table and the chart to fit 1366 px",
        "const s = document.querySelector('.table-scroll'); const c = document.getElementById('usage-chart'); \
         return s && c && window.innerWidth <= 1366 && s.scrollWidth <= s.clientWidth \
           && c.getBoundingClientRect().right <= c.parentElement.getBoundingClientRect().right;",
    )
    .await;
    b.screenshot("session-1366").await;
    b.call(
        reqwest::Method::POST,
        "/window/rect",
        Some(json!({"width": 1920, "height": 1080})),
    )
    .await;

    // Spans still in flight are in progress, not "<1 ms".
    b.go(&format!("{url}/?trace=py-run&view=spans")).await;
    let in_flight = b
        .wait_for(
            "an in-flight span",
            "const r = document.querySelector('.span-row.in-progress'); return r ? r.dataset.spanId + ':' + r.querySelector('.dur').textContent : null;",
        )
        .await;
    assert_eq!(in_flight, json!("root:in progress"));
    assert_eq!(
        b.js("return document.querySelectorAll('.span-row.in-progress').length")
            .await,
        json!(1)
    );
    b.screenshot("spans-in-flight").await;

    // The icon browsers ask for.
    let icon = client
        .get(format!("{url}/favicon.ico"))
        .send()
        .await
        .expect("favicon");
    assert_eq!(icon.status(), 200);
    assert_eq!(
        icon.headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok()),
        Some("image/svg+xml")
    );

    b.quit().await;
    drop(driver);
    server.shutdown().await.expect("clean shutdown");
}
