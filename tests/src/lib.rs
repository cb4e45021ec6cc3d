//! Shared helpers for the golden-graph tests and cross-crate tests.
