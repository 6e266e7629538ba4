//! An Ariadne-compatible trace server.
