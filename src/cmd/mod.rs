//! One module per subcommand.
pub mod bench;
pub mod config;
pub mod demo;
pub mod estimate;
pub mod preflight;
pub mod serve;
