//! How a verified graph will run, decided before any device is open: the
//! steps and the work each does ([`schedule`], [`work`]), the byte regions
//! of slices and concats ([`region`]), and the rules that make a copy a
//! shared buffer, a deferred operand or an import, and a slice a view
//! ([`views`]), and which of the runner's lanes runs each step
//! ([`lanes`]). The runtime (`fuel-runtime`) carries a [`Schedule`] out on
//! real devices; the cost model (`fuel_collective::cost`) prices the same
//! decisions. Nothing here touches a device: the device-dependent facts
//! (which alignment a device binds views at, whether it imports host
//! memory) come in as values.

mod copies;
mod fold_div;
pub mod lanes;
pub mod listing;
pub mod region;
pub mod returned;
pub mod schedule;
pub mod views;
pub mod work;

pub use region::{
    concat_regions, concat_regions_into, slice_regions, slice_regions_into, slice_run,
    try_region_list, Region,
};
pub use returned::ReadOut;
pub use schedule::{CopyMode, CopySite, Island, Schedule, SoleReader, Step, Work};
pub use views::{slice_is_view, slice_is_view_when, Caps, ASSUMED_VIEW_ALIGN, INPUT_IN_PLACE_MIN};
pub use work::{chained_launches, divides_in_fold, DeviceWork, Kernel};

use crate::device::Device;

/// The host's page: the alignment and the smallest capacity of the host
/// arena's own buffers, so a GPU backend can address (import) them. Below a
/// page a host buffer is pooled and never lent to a device.
pub const HOST_PAGE: usize = 4096;

/// How an [`PlanError::OutOfMemory`] for a list of byte regions the host
/// cannot hold begins (its catalogue entry, E0723, is told apart by it).
pub const NO_REGION_LIST: &str = "the host cannot hold the list of byte regions to copy for it";

/// Why a graph has no plan. Every variant names the problem and the fix;
/// the runtime's `ExecError` carries each as its variant of the same name
/// and words.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    /// A collective op is still in the graph.
    #[error("`{op}` is a collective, which the executor does not run; run the `lower-collectives` pass first")]
    Collective {
        /// The op's mnemonic.
        op: String,
    },
    /// The host cannot hold what the plan needs (a slice's region list).
    #[error("out of memory on {device}: cannot allocate {bytes} bytes ({reason})")]
    OutOfMemory {
        /// The device.
        device: Device,
        /// The request.
        bytes: usize,
        /// Why.
        reason: String,
    },
    /// A broken invariant of a verified graph: a bug, not bad input.
    #[error("internal executor error: {0}; please report it")]
    Internal(String),
}

/// Choices about how a graph runs, which the runtime's
/// `compile_with_options` follows and the cost model prices; none of them
/// changes what it computes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Options {
    /// A `copy` or `move` from one host arena to another shares its
    /// source's buffer instead of copying it: all host arenas are this
    /// process's memory and every reader only reads. It saves the memcpy
    /// and the destination's bytes (a star's root then holds only its
    /// result). A graph output shares too: host outputs over one buffer are
    /// returned as tensors over one set of copy-on-write bytes. Default
    /// `true`; `false` makes every such copy a real memcpy, to measure or
    /// debug the copy itself. Copies to or from a GPU are never shared.
    pub share_host_copies: bool,
    /// With `share_host_copies`, whether a host-to-host copy that is a
    /// graph output shares too (default `true`). The eager calls turn it
    /// off: they write each rank's result over the shard it was handed,
    /// so the next call finds every shard its own and allocates nothing.
    pub share_host_outputs: bool,
    /// A copy between a GPU and the host whose one reader is an element-wise
    /// fold on the destination (host, or Vulkan), or a concat on the host,
    /// and which is not a graph output, is done by that
    /// reader itself, one operand at a time, in operand order: the host
    /// reads a mapped Vulkan buffer in place or downloads it (a fold into
    /// one scratch buffer, a concat straight into its result where the
    /// operand lands whole in one region); a Vulkan fold uploads into one
    /// scratch buffer and folds it in place. A root of n ranks then holds
    /// its result and at most one scratch buffer instead of n - 1 copies
    /// and its result, and an all_gather joined on the host reads each GPU
    /// shard once instead of copying it first. The transfer waits for the
    /// reader's other operands, so it no longer overlaps them. Default
    /// `true`.
    pub defer_gpu_copies: bool,
    /// A `copy` or `move` from a host arena to a Vulkan device that imports
    /// host memory (`VK_EXT_external_memory_host`; see
    /// `fuel-opt devices`), whose result is not a graph output and whose
    /// source is a host buffer of at least a page that the arena made, is a
    /// view of the host buffer on the device instead of a transfer
    /// ([`Work::Import`]). Default `true`. It is the one switch for host
    /// import: off, the runtime also opens Vulkan devices without it (so no
    /// caller's input is read in place either). [`Options::from_env`] reads
    /// it from `FUEL_VULKAN_IMPORT`.
    pub import_host_buffers: bool,
    /// A `slice` whose bytes are one contiguous run of its operand's (a
    /// slice along the first axis, or of a tensor whose leading dims are
    /// all 1) is a view of the operand's buffer instead of a copy
    /// ([`Work::View`]), on devices that bind buffers at an
    /// offset: host arenas always, Vulkan at offsets that are multiples of
    /// its `minStorageBufferOffsetAlignment`. CUDA slices still copy.
    /// Default `true`; `false` copies every slice, to measure the copy.
    pub view_slices: bool,
    /// An element-wise fold on a host arena whose one reader is a `div` on
    /// the same device, and which is not a graph output, divides its own
    /// result ([`Kernel::FoldDiv`]): a Mean's sum and division are one pass
    /// over memory, and the sum has no buffer of its own. The bits are the
    /// fold's and then the division's. Default `true`; `false` runs them
    /// as two steps, to measure or debug either.
    pub divide_in_folds: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            share_host_copies: true,
            share_host_outputs: true,
            defer_gpu_copies: true,
            import_host_buffers: true,
            view_slices: true,
            divide_in_folds: true,
        }
    }
}

/// The variable [`Options::from_env`] reads `import_host_buffers` from.
pub const IMPORT_VAR: &str = "FUEL_VULKAN_IMPORT";

impl Options {
    /// The defaults, with `import_host_buffers` from [`IMPORT_VAR`]: unset,
    /// empty or `1` imports, `0` copies; any other value is an error naming
    /// the variable. What the CLI and the tests hand the compiler (the
    /// libraries read no variable themselves).
    pub fn from_env() -> Result<Options, crate::env::EnvError> {
        Ok(Options {
            import_host_buffers: crate::env::flag(
                IMPORT_VAR,
                true,
                "1 imports host buffers into Vulkan, 0 copies them",
            )?,
            ..Options::default()
        })
    }
}
