//! One module per subcommand.
pub mod archive;
pub mod bench;
pub mod config;
pub mod demo;
pub mod estimate;
pub mod preflight;
pub mod replay;
pub mod serve;
pub mod tail;
mod turns;
