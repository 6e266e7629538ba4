//! Events.
