//! What the proxy's tests share: the scripted provider.
pub(crate) mod upstream;
