//! The cross-crate tests live in `tests/*.rs` and share
//! `fuel-test-support` (`tests/support/`) with every other test of the
//! workspace. This library only carries the README's Rust example, compiled
//! and run as a doctest.

/// The README's Rust example, compiled and run as a doctest.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
pub struct ReadmeDoctests;
