//! The proxy in this process in front of a scripted upstream, its events
//! collected.

use std::sync::Arc;
use std::time::Duration;

use compact_middleware::CompactManager;
use compact_middleware::config::Config;
use compact_middleware::events::{CollectingExporter, Event};
use compact_middleware::model::{Format, Request, validate};
use compact_service::proxy::Proxy;
use serde_json::Value;

pub(crate) struct Running {
    pub(crate) url: String,
    pub(crate) events: Arc<CollectingExporter>,
    manager: CompactManager,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Running {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Running {
    pub(crate) fn spans(&self, name: &str) -> Vec<Value> {
        self.manager.dispatcher().flush(Duration::from_secs(5));
        self.events
            .events()
            .into_iter()
            .filter_map(|e| match e {
                Event::Span(s) if s.name.as_deref() == Some(name) => {
                    Some(serde_json::to_value(&s).unwrap())
                }
                _ => None,
            })
            .collect()
    }

    pub(crate) fn model_calls(&self) -> Vec<Value> {
        self.spans("compact.model_call")
    }
}

/// A proxy in front of `upstream` with `yaml` over a test configuration
/// (no archive), its events collected.
pub(crate) async fn proxy(upstream: &str, yaml: &str) -> Running {
    let mut config =
        Config::from_yaml_str(&format!("storage: {{adapter: none}}\n{yaml}")).expect("config");
    if config.proxy.upstream.is_none() && config.proxy.upstreams.is_empty() {
        config.proxy.upstream = Some(upstream.to_owned());
    }
    let events = Arc::new(CollectingExporter::new());
    let manager = CompactManager::builder(config.clone())
        .exporter(events.clone())
        .build()
        .expect("manager");
    let proxy = Proxy::new(&config.proxy, manager.clone()).expect("proxy");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let task = tokio::spawn(async move {
        let _ = compact_service::proxy::serve(proxy, listener, std::future::pending()).await;
    });
    Running {
        url,
        events,
        manager,
        task,
    }
}

/// The history of an upstream request decodes and has no pairing problem.
pub(crate) fn provider_valid(body: &Value, format: Format) {
    let mut v = body.clone();
    if format == Format::Responses {
        v["messages"] = v["input"].take();
    }
    let req = Request::from_value(v, format).expect("the upstream got a history it can decode");
    assert!(
        validate(&req.messages).is_empty(),
        "pairing problems: {:?}",
        validate(&req.messages)
    );
}
