//! The server's settings: where it listens, where it keeps its data, who may
//! talk to it, and how much it holds. Defined once, with their defaults and
//! rules, in compact-events ([`compact_events::settings`]), which the
//! middleware's configuration loads from the `server:` section: what a file
//! or a `COMPACT_SERVER_*` variable says reaches the server unchanged. Here
//! under the names the server's API has always used.

pub use compact_events::settings::{
    ServerLimits as Limits, ServerRetention as Retention, ServerSettings as ServerConfig,
    ServerStore as StoreOptions, ServerStoreBackend as StoreBackend,
};
