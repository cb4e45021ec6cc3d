//! The schedule and buffer plan: pure functions of a verified graph.
//!
//! [`Schedule::new`] turns the graph into steps in a deterministic topological
//! order. Step `i` writes buffer slot `i`; each slot records how many operand
//! reads it will see, so the runner frees a buffer the moment its last reader
//! finishes (graph outputs are kept until they are read back). Slices and
//! concats become lists of byte [`Region`]s, which every backend carries out
//! as plain copies. A copy between two host arenas becomes [`Work::Share`]:
//! every host arena lives in this process's memory, so the step's slot
//! shares its source's buffer and nothing is copied or allocated (a graph
//! output too: the runtime returns host outputs over one buffer as tensors
//! over one set of copy-on-write bytes). A copy between a GPU and the host whose
//! one reader is an element-wise fold on the destination, or a concat on
//! the host, becomes [`Work::Defer`]: that reader moves it itself, one
//! operand at a time, so a root never holds all its copies at once (the
//! rule is [`CopySite::mode`], in `copies.rs`). Nothing here touches a
//! device.

pub use super::copies::{CopyMode, CopySite, SoleReader};
use super::fold_div::HeldFolds;
use super::region::{concat_regions_into, slice_regions_into, try_region_list, Region};
use super::work::{DeviceWork, Kernel};
use super::{Options, PlanError};
use crate::device::Device;
use crate::dtype::TensorType;
use crate::graph::{Graph, NodeId, ValueId};
use crate::op::{Op, ReduceOp};
use std::collections::HashMap;

pub use super::views::{slice_is_view, ASSUMED_VIEW_ALIGN};

/// What a step does: device work for its device's backend, or work the
/// runner does itself.
#[derive(Clone, Debug, PartialEq)]
pub enum Work {
    /// Input, copy or kernel on the step's device (the runtime's `backend::run`).
    Device(DeviceWork),
    /// A copy or move from the host arena `src` to another host arena, or
    /// to a Vulkan device when only the caller reads the result
    /// ([`Schedule::share_returned_imports`]): the
    /// step's slot holds operand 0's buffer itself. Every reader only reads
    /// it, and the buffer lives until both slots are done with it. A graph
    /// output shares too: the runtime hands out host outputs that hold one
    /// buffer as tensors over one set of bytes, which is safe because a
    /// [`Tensor`](crate::tensor::Tensor)'s bytes are copy-on-write (a write
    /// to one gives it bytes of its own and the others keep their values).
    Share { src: Device },
    /// A copy between a GPU and the host (either way; to a GPU only for
    /// Vulkan) whose only reader is an element-wise fold on the destination,
    /// and which is not a graph output: the slot holds the source buffer,
    /// and the fold moves it when it gets to it (see `backend::run`):
    /// the host reads a mapped Vulkan buffer in place or downloads into one
    /// scratch buffer; a Vulkan fold uploads into one scratch buffer and
    /// folds in place. The destination holds the result plus at most one
    /// operand instead of all of them.
    Defer { src: Device },
    /// A copy or move from the host arena `src` to a Vulkan device that
    /// imports host memory (`VK_EXT_external_memory_host`): the step's slot holds a *view* of operand 0's
    /// host buffer on the device (imported once per host block, kept across
    /// runs), which holds that buffer alive. Nothing is copied or allocated
    /// on the device; the bytes stay counted once, on the host arena. The
    /// rules are [`Work::Share`]'s: every reader only reads. An import that
    /// is also a graph output is read back into the caller's own tensor,
    /// so the caller never holds the view; one that only the caller reads
    /// becomes a [`Work::Share`]. Planned by
    /// [`Schedule::import_host_copies`] once the devices are open.
    Import { src: Device },
    /// A `slice` whose bytes are one contiguous run of its operand's,
    /// starting `offset` bytes in: the step's slot holds a *view* of
    /// operand 0's buffer (on the same device) instead of a copy, which
    /// holds that buffer alive. Nothing is copied or allocated. The rules
    /// are [`Work::Share`]'s: every reader only reads. It may be a graph
    /// output: outputs are read back into the caller's own bytes. Planned
    /// by [`Schedule::view_slices`] once the devices are open, since a
    /// device decides which offsets it can bind. `host_only`: a view at an
    /// offset the device cannot bind, planned where every reader copies it
    /// into a host arena ([`Schedule::read_on_host_only`]); the runtime
    /// reads it through the mapping or a transfer and never binds it.
    View { offset: usize, host_only: bool },
    /// An SPMD collective through the communicator handed to compile as
    /// `comm` (see the runtime's `exec::spmd`), on the worker of the step's device.
    Comm {
        op: crate::op::CommOp,
        comm: u32,
        ranks: usize,
    },
    /// Rank `rank`'s result of driver all-reduce `island`
    /// ([`Schedule::islands`]): the first of the island's steps to run runs
    /// the collective for every rank and fills every member's slot.
    Island { island: usize, rank: usize },
}

impl Work {
    /// False for work that moves no bytes and submits nothing (a shared or
    /// deferred copy, a view, an import of host memory, an input read in
    /// place): it takes well under a microsecond, less than handing it to
    /// a device's worker, so the threaded runner does it on the
    /// dispatcher's thread. (Where an import or an input in place falls
    /// back to a copy, that copy runs there too.)
    pub fn needs_device(&self) -> bool {
        !matches!(
            self,
            Work::Share { .. }
                | Work::Defer { .. }
                | Work::View { .. }
                | Work::Import { .. }
                | Work::Device(DeviceWork::Input { in_place: true, .. })
        )
    }

    /// A kernel step's kernel.
    pub fn kernel(&self) -> Option<&Kernel> {
        match self {
            Work::Device(DeviceWork::Kernel(k)) => Some(k),
            _ => None,
        }
    }

    /// The source of a copy that moves bytes.
    pub fn copy_source(&self) -> Option<Device> {
        match self {
            Work::Device(DeviceWork::Copy { src, .. }) => Some(*src),
            _ => None,
        }
    }
}

/// One scheduled node.
#[derive(Clone, Debug)]
pub struct Step {
    /// The graph node.
    pub node: NodeId,
    /// The op's mnemonic, for errors.
    pub mnemonic: String,
    /// What to do.
    pub work: Work,
    /// Where the result lives (and which worker runs the step).
    pub device: Device,
    /// The result type.
    pub ty: TensorType,
    /// Operand slots (step indices), in operand order.
    pub operands: Vec<usize>,
}

/// The whole schedule: steps, read counts, dependents, outputs.
#[derive(Clone, Debug)]
pub struct Schedule {
    /// Steps in topological order.
    pub steps: Vec<Step>,
    /// For each slot, how many operand reads it gets.
    pub reads: Vec<usize>,
    /// For each step, the steps that read its result (deduplicated).
    pub dependents: Vec<Vec<usize>>,
    /// The slot of each graph output, in return order.
    pub outputs: Vec<usize>,
    /// The driver all-reduces, each run once for all its ranks.
    pub islands: Vec<Island>,
}

/// The `driver_all_reduce` nodes of one collective: the same shards, the
/// same op, one node per rank whose result the graph uses. Its collective
/// driver (the host driver for CPU devices, NCCL for CUDA) runs it once for
/// every rank, nodes or not, since every rank must take part.
#[derive(Clone, Debug)]
pub struct Island {
    /// The reduction.
    pub op: ReduceOp,
    /// Rank r's shard (an operand slot).
    pub shards: Vec<usize>,
    /// Rank r's device: its node's, or its shard's when it has no node.
    pub devices: Vec<Device>,
    /// Rank r's step, when the graph has a node for it.
    pub members: Vec<Option<usize>>,
    /// The type of every shard and result.
    pub ty: TensorType,
    /// The nodes' mnemonic, for errors.
    pub mnemonic: String,
}

/// An empty region list with room for a slice or concat along `axis` of a
/// `ty` result from `parts` operands on `device`; a list the host cannot
/// hold is an error, not an abort.
fn regions_for(
    ty: &TensorType,
    axis: usize,
    parts: usize,
    device: Device,
) -> Result<Vec<Region>, PlanError> {
    try_region_list(ty, axis, parts).map_err(|e| PlanError::OutOfMemory {
        device,
        bytes: ty.size_bytes(),
        reason: format!("{}: {e}", super::NO_REGION_LIST),
    })
}

/// Where one rank's `driver_all_reduce` node sits in the schedule.
struct Member {
    /// Its step.
    step: usize,
    /// The rank it computes.
    rank: usize,
    /// Its device.
    device: Device,
}

/// Adds rank `at.rank`'s node of a driver all-reduce of `operands` to the
/// island of the same shards and op that still lacks that rank (a new one
/// if none does), and returns the step's work.
fn join_island(
    islands: &mut Vec<Island>,
    g: &Graph,
    n: &crate::graph::Node,
    op: ReduceOp,
    operands: &[usize],
    at: Member,
) -> Result<Work, PlanError> {
    let shard_devices = n
        .operands
        .iter()
        .map(|v| g.value_device(*v))
        .collect::<Option<Vec<_>>>()
        .ok_or_else(|| PlanError::Internal("a shard has no device".into()))?;
    let k = islands
        .iter()
        .position(|is: &Island| {
            is.op == op && is.shards == operands && is.members.get(at.rank) == Some(&None)
        })
        .unwrap_or_else(|| {
            islands.push(Island {
                op,
                shards: operands.to_vec(),
                devices: shard_devices,
                members: vec![None; operands.len()],
                ty: n.ty.clone(),
                mnemonic: n.op.mnemonic(),
            });
            islands.len() - 1
        });
    let is = &mut islands[k];
    let (Some(member), Some(dev)) = (is.members.get_mut(at.rank), is.devices.get_mut(at.rank))
    else {
        return Err(PlanError::Internal(format!(
            "rank {} of a driver all-reduce of {} shards",
            at.rank,
            operands.len()
        )));
    };
    *member = Some(at.step);
    *dev = at.device;
    Ok(Work::Island {
        island: k,
        rank: at.rank,
    })
}

/// The work of node `n` on `device`, for every op but a driver all-reduce
/// ([`join_island`]). With `regions` false a `slice` or `concat` gathers
/// no list of byte regions: a slice of one contiguous run carries that one
/// region (what [`Schedule::view_slices`] reads), anything else none.
fn work_of(
    g: &Graph,
    n: &crate::graph::Node,
    device: Device,
    regions: bool,
) -> Result<Work, PlanError> {
    let operand_ty = |i: usize| -> Result<&TensorType, PlanError> {
        n.operands
            .get(i)
            .and_then(|v| g.value_type(*v))
            .ok_or_else(|| PlanError::Internal("operand type missing".into()))
    };
    let kernel = |k| Work::Device(DeviceWork::Kernel(k));
    Ok(match &n.op {
        Op::Input { name, .. } => Work::Device(DeviceWork::Input {
            name: name.clone(),
            in_place: false,
        }),
        Op::Copy { .. } | Op::Move { .. } => {
            let src = n
                .operands
                .first()
                .and_then(|v| g.value_device(*v))
                .ok_or_else(|| PlanError::Internal("copy without a source".into()))?;
            Work::Device(DeviceWork::Copy {
                src,
                is_move: matches!(n.op, Op::Move { .. }),
            })
        }
        Op::Elementwise { kind, .. } => kernel(Kernel::Fold { kind: *kind }),
        Op::Extern(x) => kernel(Kernel::Extern {
            op: x.clone(),
            operands: (0..n.operands.len())
                .map(|i| operand_ty(i).cloned())
                .collect::<Result<_, _>>()?,
        }),
        Op::Comm {
            kind, comm, ranks, ..
        } => Work::Comm {
            op: *kind,
            comm: *comm,
            ranks: *ranks,
        },
        Op::Div { by, .. } => kernel(Kernel::Div { by: *by }),
        Op::Cast { .. } => kernel(Kernel::Cast {
            from: operand_ty(0)?.dtype,
        }),
        Op::Slice {
            axis, start, len, ..
        } if !regions => {
            let ty = operand_ty(0)?;
            let bytes = n.ty.size_bytes();
            let run = super::region::slice_run(ty, *axis, *start, *len).filter(|_| bytes > 0);
            let regions = run.map_or_else(Vec::new, |src| {
                vec![Region {
                    operand: 0,
                    src,
                    dst: 0,
                    len: bytes,
                }]
            });
            kernel(Kernel::Gather { regions })
        }
        Op::Concat { .. } if !regions => kernel(Kernel::Gather {
            regions: Vec::new(),
        }),
        Op::Slice {
            axis, start, len, ..
        } => {
            let ty = operand_ty(0)?;
            let mut regions = regions_for(ty, *axis, 1, device)?;
            slice_regions_into(&mut regions, ty, *axis, *start, *len);
            kernel(Kernel::Gather { regions })
        }
        Op::Concat { axis, .. } => {
            let tys = (0..n.operands.len())
                .map(operand_ty)
                .collect::<Result<Vec<_>, _>>()?;
            let mut regions = regions_for(&n.ty, *axis, tys.len(), device)?;
            concat_regions_into(&mut regions, &tys, *axis);
            kernel(Kernel::Gather { regions })
        }
        op => return Err(PlanError::Collective { op: op.mnemonic() }),
    })
}

/// For each step, how many operand reads its slot gets, and the steps that
/// read it (deduplicated, in order).
fn read_counts(steps: &[Step]) -> (Vec<usize>, Vec<Vec<usize>>) {
    let mut reads = vec![0usize; steps.len()];
    let mut dependents = vec![Vec::new(); steps.len()];
    for (i, s) in steps.iter().enumerate() {
        for &o in &s.operands {
            reads[o] += 1;
            // Steps are visited in order, so `i` is the last dependent
            // pushed if it is one already: no scan of the list (a value
            // read by 100 000 steps would make that quadratic).
            if dependents[o].last() != Some(&i) {
                dependents[o].push(i);
            }
        }
    }
    (reads, dependents)
}

impl Schedule {
    /// Schedules `g`, which must already have passed the verifier, with
    /// host-to-host copies shared (see [`Work::Share`]).
    pub fn new(g: &Graph) -> Result<Schedule, PlanError> {
        Schedule::new_with(g, &Options::default())
    }

    /// [`Schedule::new`] with the copy rewrites `options` asks for: with both
    /// off every copy is a real copy into a buffer of its own.
    pub fn new_with(g: &Graph, options: &Options) -> Result<Schedule, PlanError> {
        Schedule::build(g, options, true)
    }

    /// [`Schedule::new_with`] without the byte-region lists of slices and
    /// concats, which can have a row per element of a huge tensor: every
    /// step, its work and its copy mode are the same, and a slice of one
    /// contiguous run keeps its one region, so the views come out the same
    /// too. What the cost model prices, since it prices bytes, not regions;
    /// the runtime builds the full plan (after checking what fits).
    pub fn outline(g: &Graph, options: &Options) -> Result<Schedule, PlanError> {
        Schedule::build(g, options, false)
    }

    /// The plan of `g`, with region lists when `regions`.
    fn build(g: &Graph, options: &Options, regions: bool) -> Result<Schedule, PlanError> {
        let mut slot_of: HashMap<NodeId, usize> = HashMap::new();
        let mut steps = Vec::new();
        let mut islands: Vec<Island> = Vec::new();
        let mut folds = HeldFolds::new(g, options);
        for (number, id) in g.topo_order().into_iter().enumerate() {
            let n = g
                .node(id)
                .ok_or_else(|| PlanError::Internal(format!("node %{number} vanished")))?;
            if n.op.is_collective() {
                return Err(PlanError::Collective {
                    op: n.op.mnemonic(),
                });
            }
            let device = n
                .op
                .device()
                .ok_or_else(|| PlanError::Internal(format!("{} has no device", n.op.mnemonic())))?;
            // A division of a held fold takes the fold's operands.
            let (fused, operands) = match folds.take_for(n) {
                Some((kernel, operands)) => (Some(kernel), operands),
                None => {
                    let slot = |v: &ValueId| {
                        slot_of.get(&v.node).copied().ok_or_else(|| {
                            let name = crate::text::Numbering::new(g).name(g, *v);
                            PlanError::Internal(format!("operand {name} not scheduled"))
                        })
                    };
                    let operands = n.operands.iter().map(slot).collect::<Result<Vec<_>, _>>()?;
                    (None, operands)
                }
            };
            let operands = match folds.hold(g, id, n, device, operands) {
                Some(operands) => operands,
                None => continue,
            };
            let work = match (fused, &n.op) {
                (Some(k), _) => Work::Device(DeviceWork::Kernel(k)),
                // Every rank's node of one driver all-reduce joins one
                // island, which runs once for all of them.
                (None, Op::DriverAllReduce { op, rank, .. }) => {
                    let at = Member {
                        step: steps.len(),
                        rank: *rank,
                        device,
                    };
                    join_island(&mut islands, g, n, *op, &operands, at)?
                }
                (None, _) => work_of(g, n, device, regions)?,
            };
            slot_of.insert(id, steps.len());
            steps.push(Step {
                node: id,
                mnemonic: n.op.mnemonic(),
                work,
                device,
                ty: n.ty.clone(),
                operands,
            });
        }
        folds.all_taken()?;
        let (reads, dependents) = read_counts(&steps);
        let outputs = g
            .outputs()
            .iter()
            .map(|v| {
                slot_of
                    .get(&v.node)
                    .copied()
                    .ok_or_else(|| PlanError::Internal("output not scheduled".into()))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let mut plan = Schedule {
            steps,
            reads,
            dependents,
            outputs,
            islands,
        };
        plan.assign_copy_modes(options);
        Ok(plan)
    }

    /// What reads slot `i`, as [`CopySite::mode`] cares ([`SoleReader`]).
    pub fn sole_reader(&self, i: usize) -> SoleReader {
        match (self.reads.get(i), self.dependents.get(i)) {
            (Some(&reads), Some(deps)) => SoleReader::of(&self.steps, i, reads, deps),
            _ => SoleReader::Other,
        }
    }

    /// Gives each copy the mode [`CopySite::mode`] says under `options`:
    /// shared, deferred into its one reader, or a real copy.
    fn assign_copy_modes(&mut self, options: &Options) {
        let mut is_output = vec![false; self.steps.len()];
        for &o in &self.outputs {
            if let Some(x) = is_output.get_mut(o) {
                *x = true;
            }
        }
        for (i, &out) in is_output.iter().enumerate() {
            let Some(src) = self.steps[i].work.copy_source() else {
                continue;
            };
            let dst = self.steps[i].device;
            let reader = self.sole_reader(i);
            let copy = CopySite {
                src,
                dst,
                is_output: out,
                reader,
            };
            match copy.mode(options) {
                CopyMode::Moves => {}
                CopyMode::Shared => self.steps[i].work = Work::Share { src },
                CopyMode::Deferred => self.steps[i].work = Work::Defer { src },
            }
        }
    }

    /// The slot whose buffer slot `i` holds: its own, or for a
    /// [`Work::Share`], [`Work::Defer`], [`Work::Import`] or [`Work::View`]
    /// step the buffer it holds or views (followed through chains).
    pub fn owner(&self, i: usize) -> usize {
        let mut o = i;
        while let Some(Step {
            work: Work::Share { .. } | Work::Defer { .. } | Work::Import { .. } | Work::View { .. },
            operands,
            ..
        }) = self.steps.get(o)
        {
            match operands.first() {
                Some(&src) => o = src,
                None => break,
            }
        }
        o
    }

    /// The bytes each device would hold at its peak if the steps ran one
    /// after another in schedule order, freeing each buffer once no slot
    /// that holds it has a read left. A fold with deferred operands is
    /// counted as holding one scratch buffer of its size while it runs (an
    /// upper bound: a mapped operand, or a Vulkan fold's leading upload,
    /// needs none).
    pub fn sequential_peak(&self) -> HashMap<Device, usize> {
        let n = self.steps.len();
        let mut left = self.reads.clone();
        let mut now: HashMap<Device, usize> = HashMap::new();
        let mut peak: HashMap<Device, usize> = HashMap::new();
        let mut keep = vec![false; n];
        for &o in &self.outputs {
            if let Some(k) = keep.get_mut(o) {
                *k = true;
            }
        }
        let owner: Vec<usize> = (0..n).map(|i| self.owner(i)).collect();
        // Live slots per buffer, indexed by the owning slot.
        let mut holders = vec![0usize; n];
        let release = |slot: usize, holders: &mut Vec<usize>, now: &mut HashMap<Device, usize>| {
            let o = owner[slot];
            holders[o] -= 1;
            if holders[o] == 0 {
                let st = &self.steps[o];
                if let Some(c) = now.get_mut(&st.device) {
                    *c = c.saturating_sub(st.ty.size_bytes());
                }
            }
        };
        for (i, s) in self.steps.iter().enumerate() {
            holders[owner[i]] += 1;
            if owner[i] == i {
                let cur = now.entry(s.device).or_default();
                *cur = cur.saturating_add(s.ty.size_bytes());
                let scratch = if s
                    .operands
                    .iter()
                    .any(|&o| matches!(self.steps[o].work, Work::Defer { .. }))
                {
                    s.ty.size_bytes()
                } else {
                    0
                };
                let p = peak.entry(s.device).or_default();
                *p = (*p).max(cur.saturating_add(scratch));
            }
            for &o in &s.operands {
                left[o] -= 1;
                if left[o] == 0 && !keep[o] {
                    release(o, &mut holders, &mut now);
                }
            }
            if self.reads[i] == 0 && !keep[i] {
                release(i, &mut holders, &mut now);
            }
        }
        peak
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dtype::DType;
    use crate::plan::region::{concat_regions, slice_regions};

    fn r(operand: usize, src: usize, dst: usize, len: usize) -> Region {
        Region {
            operand,
            src,
            dst,
            len,
        }
    }

    #[test]
    fn slice_and_concat_regions() {
        let t = TensorType::new(DType::F32, &[3, 4]);
        // Rows 1..3 of a 3x4: one contiguous block.
        assert_eq!(slice_regions(&t, 0, 1, 2), vec![r(0, 16, 0, 32)]);
        // Columns 1..3: one region per row.
        assert_eq!(
            slice_regions(&t, 1, 1, 2),
            vec![r(0, 4, 0, 8), r(0, 20, 8, 8), r(0, 36, 16, 8)]
        );
        let a = TensorType::new(DType::I32, &[2, 1]);
        let b = TensorType::new(DType::I32, &[2, 2]);
        assert_eq!(
            concat_regions(&[&a, &b], 1),
            vec![r(0, 0, 0, 4), r(1, 0, 4, 8), r(0, 4, 12, 4), r(1, 8, 16, 8)]
        );
        let c = TensorType::new(DType::U8, &[5]);
        assert_eq!(
            concat_regions(&[&c, &c], 0),
            vec![r(0, 0, 0, 5), r(1, 0, 5, 5)]
        );
    }

    #[test]
    fn only_work_that_moves_bytes_or_submits_goes_to_a_worker() {
        let input = |in_place| {
            Work::Device(DeviceWork::Input {
                name: "a".into(),
                in_place,
            })
        };
        let vk = Device::vulkan(0);
        assert!(input(false).needs_device());
        assert!(!input(true).needs_device());
        assert!(!Work::Import {
            src: Device::cpu(0)
        }
        .needs_device());
        assert!(!Work::View {
            offset: 0,
            host_only: false
        }
        .needs_device());
        let copy = Work::Device(DeviceWork::Copy {
            src: vk,
            is_move: false,
        });
        assert!(copy.needs_device());
    }

    #[test]
    fn buffers_are_freed_after_their_last_read() {
        let src = "graph @g {\n  %0 = input \"a\" @cpu:0 : f32[4]\n  %1 = input \"b\" @cpu:0 : f32[4]\n  %2 = add %0, %1 @cpu:0 : f32[4]\n  %3 = add %2, %2 @cpu:0 : f32[4]\n  return %3\n}\n";
        let g = crate::text::parse(src).unwrap();
        let p = Schedule::new(&g).unwrap();
        assert_eq!(p.reads, vec![1, 1, 2, 0]);
        // a, b, a+b live at once (48 bytes); then a and b go before the last add.
        assert_eq!(p.sequential_peak()[&Device::cpu(0)], 48);
    }

    #[test]
    fn host_copies_that_only_feed_steps_share_their_source() {
        let src = "graph @g {\n  %0 = input \"a\" @cpu:0 : f32[4]\n  %1 = copy %0 -> cpu:1 : f32[4]\n  %2 = add %1, %1 @cpu:1 : f32[4]\n  %3 = copy %2 -> cpu:0 : f32[4]\n  return %3\n}\n";
        let g = crate::text::parse(src).unwrap();
        let p = Schedule::new(&g).unwrap();
        assert_eq!(
            p.steps[1].work,
            Work::Share {
                src: Device::cpu(0)
            }
        );
        // The output copy shares too: the caller's tensor is then over the
        // sum's bytes, which copy-on-write keeps its own.
        assert_eq!(
            p.steps[3].work,
            Work::Share {
                src: Device::cpu(1)
            }
        );
        assert_eq!(p.owner(1), 0);
        assert_eq!(p.owner(2), 2);
        let peak = p.sequential_peak();
        // cpu:1 holds only the sum. cpu:0's input lives on while the shared
        // slot is read (by the add), and is gone before the output copy.
        assert_eq!(peak[&Device::cpu(1)], 16);
        assert_eq!(peak[&Device::cpu(0)], 16);
        let unshared = Schedule::new_with(
            &g,
            &Options {
                share_host_copies: false,
                ..Default::default()
            },
        )
        .unwrap();
        assert!(unshared.steps[1].work.copy_source().is_some());
        assert_eq!(unshared.sequential_peak()[&Device::cpu(1)], 32);
    }

    #[test]
    fn gpu_copies_read_once_by_a_host_fold_are_deferred() {
        let src = "graph @g {\n  %0 = input \"a\" @vulkan:0 : f32[4]\n  %1 = input \"b\" @cpu:0 : f32[4]\n  %2 = copy %0 -> cpu:0 : f32[4]\n  %3 = copy %0 -> cpu:0 : f32[4]\n  %4 = add %1, %2 @cpu:0 : f32[4]\n  %5 = div %3 {by=2} @cpu:0 : f32[4]\n  return %4, %5\n}\n";
        let g = crate::text::parse(src).unwrap();
        let p = Schedule::new(&g).unwrap();
        let work = |mn: &str, k: usize| {
            p.steps
                .iter()
                .filter(|s| s.mnemonic == mn)
                .nth(k)
                .map(|s| s.work.clone())
                .unwrap()
        };
        // Read by the add: deferred. Read by a div (not a fold): copied.
        let deferred = Work::Defer {
            src: Device::vulkan(0),
        };
        assert_eq!(
            [work("copy", 0), work("copy", 1)]
                .iter()
                .filter(|w| **w == deferred)
                .count(),
            1
        );
        assert!(p
            .steps
            .iter()
            .any(|s| s.mnemonic == "copy" && s.work.copy_source().is_some()));
        // cpu:0 peaks with the input, the copy for the div, and the add's
        // result plus its scratch: 4 x 16 bytes at most, never 5.
        let peak = p.sequential_peak()[&Device::cpu(0)];
        assert!(peak <= 64, "{peak}");
        assert!(deferred_nodes(&g, false).is_empty());
    }

    /// The nodes of `g` whose copies the plan defers, with deferral on or
    /// off.
    fn deferred_nodes(g: &Graph, defer: bool) -> Vec<usize> {
        let options = Options {
            defer_gpu_copies: defer,
            ..Default::default()
        };
        let p = Schedule::new_with(g, &options).unwrap();
        p.steps
            .iter()
            .filter(|s| matches!(s.work, Work::Defer { .. }))
            .map(|s| s.node.0.index())
            .collect()
    }

    #[test]
    fn gpu_copies_read_once_by_a_host_concat_are_deferred() {
        // %3 and %4 are read only by the host concat: deferred. %6, a
        // host copy read by a concat on vulkan:1 (a GPU concat takes no
        // deferred operand), and %8, read by a concat and also returned,
        // stay copies.
        let src = "graph @g {\n  %0 = input \"a\" @vulkan:0 : f32[4]\n  %1 = input \"b\" @cpu:0 : f32[4]\n  %2 = input \"c\" @vulkan:1 : f32[4]\n  %3 = copy %0 -> cpu:0 : f32[4]\n  %4 = copy %2 -> cpu:0 : f32[4]\n  %5 = concat %3, %1, %4 {axis=0} @cpu:0 : f32[12]\n  %6 = copy %1 -> vulkan:1 : f32[4]\n  %7 = concat %2, %6 {axis=0} @vulkan:1 : f32[8]\n  %8 = copy %0 -> cpu:0 : f32[4]\n  %9 = concat %8, %1 {axis=0} @cpu:0 : f32[8]\n  return %5, %7, %8, %9\n}\n";
        let g = crate::text::parse(src).unwrap();
        assert_eq!(deferred_nodes(&g, true), [3, 4]);
        assert!(deferred_nodes(&g, false).is_empty());
    }
}
