use std::path::Path;
use std::sync::Arc;

use compact_middleware::config::{Config, ConfigError, Loaded, Source, StateStoreKind};
use compact_middleware::state::{PostgresSessionStore, SessionStore, SqliteSessionStore};
use serde_json::Value;
use tokio::runtime::Runtime;

use crate::WiringError;

/// Points `state:` at the SQLite file `file`, as the flag `flag` (say
/// `--state`) asked.
pub fn set_state_file(loaded: &mut Loaded, file: &Path, flag: &str) -> Result<(), ConfigError> {
    let source = Source::Flag(flag.into());
    loaded.set(
        "state.store",
        Value::String("sqlite".into()),
        source.clone(),
    )?;
    loaded.set(
        "state.path",
        Value::String(file.display().to_string()),
        source,
    )
}

/// The session store `state.store` names; `None` for `memory` (the
/// manager's own map). PostgreSQL connects on `rt`, whose tasks then carry
/// its connections.
pub fn session_store(
    config: &Config,
    rt: &Runtime,
) -> Result<Option<Arc<dyn SessionStore>>, WiringError> {
    match config.state.store {
        StateStoreKind::Memory => Ok(None),
        StateStoreKind::Sqlite => {
            let store = SqliteSessionStore::open(&config.state.path)
                .map_err(|e| WiringError::config("state.path", e))?;
            Ok(Some(Arc::new(store)))
        }
        StateStoreKind::Postgres => {
            // Validation requires the URL with this store; never print it
            // unmasked (the store's errors mask its password).
            // The URL with `state.ssl_mode` / `state.ssl_root_cert` added.
            let url = config
                .state
                .postgres_url()
                .ok_or_else(|| WiringError::Config {
                    field: "state.url",
                    message: "state.url is required when state.store is postgres".into(),
                })?;
            let wait = std::time::Duration::from_millis(config.state.wait_ms);
            let store = rt
                .block_on(PostgresSessionStore::connect_with_wait(&url, wait))
                .map_err(|e| WiringError::config("state.url", e))?;
            Ok(Some(Arc::new(store)))
        }
    }
}
