//! No code: this crate's manifest names the features of shared dependencies that every build of
//! the workspace turns on alike, so that each dependency compiles once (see its `Cargo.toml`).
