//! The generic passes of this crate, and the copy-chain helper they share.

mod cse;
mod dce;
mod insert_cross_device_copies;
mod split_cross_vendor_copies;
mod transfers;

pub use cse::Cse;
pub use dce::Dce;
pub use insert_cross_device_copies::InsertCrossDeviceCopies;
pub use split_cross_vendor_copies::SplitCrossVendorCopies;
pub use transfers::{Transfers, Unplaced};

use crate::pass::{PassInfo, PassRegistry};

/// Adds `insert-cross-device-copies`, `split-cross-vendor-copies`, `cse` and
/// `dce` to `r`.
pub fn register(r: &mut PassRegistry) {
    r.register(PassInfo {
        name: "insert-cross-device-copies",
        summary: "put a copy (two, staged through a CPU, where no direct path exists) on every edge whose devices differ",
        options: &[],
        ctor: |_, cx| Ok(Box::new(InsertCrossDeviceCopies::new(cx.topology.clone()))),
    });
    r.register(PassInfo {
        name: "split-cross-vendor-copies",
        summary: "split every copy or move with no direct path into hops through a CPU",
        options: &[],
        ctor: |_, cx| Ok(Box::new(SplitCrossVendorCopies::new(cx.topology.clone()))),
    });
    r.register(PassInfo {
        name: "cse",
        summary: "merge nodes that compute the same thing from the same operands",
        options: &[],
        ctor: |_, _| Ok(Box::new(Cse)),
    });
    r.register(PassInfo {
        name: "dce",
        summary: "remove nodes whose results reach no returned value (inputs stay)",
        options: &[],
        ctor: |_, _| Ok(Box::new(Dce)),
    });
}
