//! One module per subcommand.
pub(crate) mod archive;
pub(crate) mod bench;
pub(crate) mod config;
pub(crate) mod demo;
pub(crate) mod estimate;
pub(crate) mod preflight;
pub(crate) mod proxy;
pub(crate) mod recall;
pub(crate) mod replay;
pub(crate) mod serve;
pub(crate) mod status;
pub(crate) mod tail;
mod turns;
