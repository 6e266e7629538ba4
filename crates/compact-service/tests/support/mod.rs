//! What the proxy's tests share: the scripted provider and the proxy.
#![allow(dead_code)]
pub(crate) mod harness;
pub(crate) mod upstream;
