//! The `server:` section of compact's configuration file is the server's own
//! settings: what the file says reaches the server unchanged, and the
//! server runs with it.

use ariadne_server::ServerConfig;
use serde_json::json;

#[tokio::test]
async fn every_server_key_of_the_compact_config_file_reaches_the_server_unchanged() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data_dir = dir.path().join("events");
    // Every key of the section, none at its default. JSON is YAML.
    let server = json!({
        "addr": "127.0.0.1:0",
        "data_dir": data_dir.display().to_string(),
        "ingest_token": "write-token",
        "read_token": "read-token",
        "cors_origins": ["http://ui.example:5173"],
        "insecure": true,
        "limits": {
            "ingest_body_bytes": 2048,
            "otel_body_bytes": 4096,
            "preflight_body_bytes": 8192,
            "max_connections": 8,
            "max_sse_clients": 2,
            "sse_queue": 16,
            "heartbeat_secs": 3
        },
        "retention": {"max_events": 7, "max_age_secs": 60},
        "store": {
            "backend": "log",
            "clickhouse_url": "http://u:pw@127.0.0.1:8123",
            "clickhouse_database": "traces",
            "clickhouse_table": "spans",
            "replica": "replica-1",
            "segment_bytes": 8192
        }
    });
    let file = dir.path().join("compact.yaml");
    std::fs::write(&file, json!({ "server": server }).to_string()).expect("write");
    let loaded = compact_middleware::config::load(Some(&file), &[]).expect("loads");

    let settings: ServerConfig = loaded.config.server;
    assert_eq!(serde_json::to_value(&settings).expect("serializes"), server);
    assert_eq!(settings.data_dir, data_dir);
    assert_eq!(settings.limits.ingest_body_bytes, 2048);

    // And the server runs with it: the token and the body limit hold.
    let running = ariadne_server::spawn(settings).await.expect("starts");
    let client = reqwest::Client::new();
    let ingest = |body: String| {
        client
            .post(format!("{}/ingest", running.url()))
            .bearer_auth("write-token")
            .header("content-type", "application/json")
            .body(body)
    };
    let unauthorized = client
        .post(format!("{}/ingest", running.url()))
        .body("{}")
        .send()
        .await
        .expect("request");
    assert_eq!(unauthorized.status().as_u16(), 401);
    let big = json!({"type": "span", "pad": "x".repeat(4096)}).to_string();
    let too_big = ingest(big).send().await.expect("request");
    assert_eq!(too_big.status().as_u16(), 413);
    running.shutdown().await.expect("stops");
}
