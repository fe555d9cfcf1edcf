//! Empty: a build script is what makes cargo resolve this crate's `[build-dependencies]`, whose
//! features are the ones the host's crates share.
fn main() {}
