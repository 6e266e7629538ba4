//! The message model.
