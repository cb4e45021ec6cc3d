//! How the executor runs each `copy` or `move` of a schedule
//! ([`CopyMode`]), and the one rule that decides it ([`CopySite::mode`]):
//! from the copy's ends, whether it is a graph output, and what reads it
//! ([`SoleReader`]). [`super::Schedule`] applies it to every copy; the cost
//! model's closed forms ask it of copies they price without a plan.

use super::schedule::Step;
use super::work::Kernel;
use super::Options;
use crate::device::Device;

/// How the executor runs one `copy` or `move`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CopyMode {
    /// A real copy into a buffer of its own, on the destination's worker.
    Moves,
    /// `Work::Share`: the slot holds its source's buffer; nothing moves.
    Shared,
    /// `Work::Defer`: the fold that reads it moves the bytes.
    Deferred,
}

/// What reads a copy, as far as [`CopySite::mode`] cares: one kernel on
/// the copy's destination that takes its operand deferred, or anything
/// else.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SoleReader {
    /// Read more than once, by a step on another device, or by a kernel
    /// that takes no deferred operand.
    Other,
    /// Read once, by an element-wise fold ([`Kernel::is_fold`]) on the
    /// copy's destination; `first` when it is the fold's first operand. A
    /// GPU fold uploads a deferred operand in that place straight into its
    /// result, with no kernel of its own, and one in a later place into a
    /// scratch buffer that one more launch folds in (the runtime's
    /// `backend::deferred::staged_vulkan_fold`).
    Fold {
        /// The copy is the fold's first operand.
        first: bool,
    },
    /// Read once, by a gather that joins several operands (a concat) on
    /// the copy's destination. A slice is left out: on the host it views
    /// the copy's buffer instead, which moves nothing more.
    Join,
}

impl SoleReader {
    /// The sole reader of slot `i` of a schedule with these `steps`, read
    /// `reads` times by `dependents`.
    pub(super) fn of(steps: &[Step], i: usize, reads: usize, dependents: &[usize]) -> SoleReader {
        let [r] = dependents else {
            return SoleReader::Other;
        };
        if reads != 1 || steps[*r].device != steps[i].device {
            return SoleReader::Other;
        }
        match steps[*r].work.kernel() {
            Some(k) if k.is_fold() => SoleReader::Fold {
                first: steps[*r].operands.first() == Some(&i),
            },
            Some(Kernel::Gather { .. }) if steps[*r].operands.len() > 1 => SoleReader::Join,
            _ => SoleReader::Other,
        }
    }
}

/// What decides how a copy runs: its ends, whether it is a graph output,
/// and what reads it. The cost model reads the same rule
/// (`fuel_collective::cost`), so its estimates follow what the executor
/// does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CopySite {
    /// Where the bytes are.
    pub src: Device,
    /// Where they go (the step's device).
    pub dst: Device,
    /// The copy's result is a graph output (outputs across the host/GPU
    /// line always copy; between host arenas they share like any copy).
    pub is_output: bool,
    /// Its only reader, if that is a kernel on `dst` that can take it
    /// deferred.
    pub reader: SoleReader,
}

impl CopySite {
    /// The mode `Schedule::new_with` gives this copy under `options`:
    /// host-to-host copies are shared, graph outputs included (the runtime
    /// returns them as tensors over one set of copy-on-write bytes); a copy
    /// between a GPU and the host that is not an output is deferred into
    /// its one reader where that is a fold on a host or Vulkan destination,
    /// or a concat on the host, which then reads the GPU buffer where it
    /// lies or downloads it into its own result.
    pub fn mode(&self, options: &Options) -> CopyMode {
        let (src, dst) = (self.src, self.dst);
        if src.is_cpu() && dst.is_cpu() {
            let shares = !self.is_output || options.share_host_outputs;
            return if options.share_host_copies && shares {
                CopyMode::Shared
            } else {
                CopyMode::Moves
            };
        }
        if self.is_output {
            return CopyMode::Moves;
        }
        // The host and Vulkan folds take deferred operands, and so does
        // the host's concat.
        let across = src.is_cpu() != dst.is_cpu();
        let takes_deferred = match self.reader {
            SoleReader::Fold { .. } => {
                dst.is_cpu() || dst.kind == crate::device::DeviceKind::Vulkan
            }
            SoleReader::Join => dst.is_cpu(),
            SoleReader::Other => false,
        };
        if across && takes_deferred && options.defer_gpu_copies {
            CopyMode::Deferred
        } else {
            CopyMode::Moves
        }
    }
}
