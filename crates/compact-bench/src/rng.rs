//! The seeded generator lives in `compact-fixtures`, shared with `compact
//! demo` and the soak harness; this path keeps `crate::rng::Rng` working.

pub use compact_fixtures::Rng;
