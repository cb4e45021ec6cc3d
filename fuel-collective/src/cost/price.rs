//! The cost model's reading of a plan: the same [`Schedule`] the runtime
//! runs, built by the same rules, turned into the model's [`Step`]s.
//!
//! [`plan_for`] builds a lowered graph's plan with the capabilities the
//! model assumes of each device ([`Caps::assumed`]), through
//! [`Schedule::fit_to_devices`] as the runtime does with the opened
//! devices' own. [`plan_steps`] then maps each scheduled step to what it
//! costs: a copy by the mode the plan gave it (a real copy, a shared
//! buffer, an operand deferred into its fold or concat, an import), a slice by
//! whether the plan made it a view, an input by whether it is read in
//! place, a host output by whether the runner must copy it out. No rule of
//! how a graph runs is restated here: an execution trick added to the plan
//! is priced with no second edit.

use super::{runner_of, Step, StepKind};
use fuel_graph_ext::graph::NodeId;
use fuel_graph_ext::plan::{
    Caps, CopyMode, DeviceWork, Kernel, Options, ReadOut, Schedule, SoleReader, Work,
    INPUT_IN_PLACE_MIN,
};
use fuel_graph_ext::topology::Runner;
use fuel_graph_ext::{Device, DeviceKind, Graph, PlanError, Topology};
use std::collections::BTreeSet;

/// The plan of `g` as the runtime would build it on devices with the
/// capabilities the model assumes ([`Caps::assumed`]) and the default
/// [`Options`], in outline ([`Schedule::outline`]: no byte-region lists,
/// which the model does not price and which a huge tensor would make
/// huge). `g` must be lowered (no collectives left).
pub fn plan_for(g: &Graph, topo: &Topology) -> Result<Schedule, PlanError> {
    plan_for_with(g, topo, &Options::default())
}

/// [`plan_for`] under the executor `options` a run is compiled with (for
/// example `share_host_copies: false`, which calibration uses to time real
/// host-to-host copies).
pub fn plan_for_with(g: &Graph, topo: &Topology, options: &Options) -> Result<Schedule, PlanError> {
    let mut plan = Schedule::outline(g, options)?;
    plan.fit_to_devices(options, |d| Caps::assumed(d, topo));
    Ok(plan)
}

/// The model's steps for `plan` (of graph `g`): one per scheduled step
/// whose node is not in `skip` (for example the nodes that existed before a
/// lowering), each waiting on the steps of its operands that are priced.
/// Inputs are left out unless `io`; with `io`, each input is an
/// [`StepKind::Input`] and each graph output adds an [`StepKind::Output`].
pub fn plan_steps(
    plan: &Schedule,
    topo: &Topology,
    skip: &BTreeSet<NodeId>,
    io: bool,
) -> Vec<Step> {
    plan_steps_from(plan, topo, skip, io, |_| ())
}

/// Where a model step comes from ([`plan_steps_from`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    /// The scheduled step in this slot.
    Slot(usize),
    /// Handing back the graph output held in this slot.
    Output(usize),
}

/// [`plan_steps`], calling `origin` with where each step comes from, in
/// the order of the steps.
pub fn plan_steps_from(
    plan: &Schedule,
    topo: &Topology,
    skip: &BTreeSet<NodeId>,
    io: bool,
    mut origin: impl FnMut(Origin),
) -> Vec<Step> {
    // Schedule slot -> model step, for the slots that are priced.
    let mut index: Vec<Option<usize>> = vec![None; plan.steps.len()];
    let mut steps = Vec::with_capacity(plan.steps.len());
    for (slot, s) in plan.steps.iter().enumerate() {
        if skip.contains(&s.node) {
            continue;
        }
        let Some(kind) = step_kind(plan, slot, topo, io) else {
            continue;
        };
        let deps = s
            .operands
            .iter()
            .filter_map(|&o| index.get(o).copied().flatten())
            .collect();
        index[slot] = Some(steps.len());
        steps.push(Step { kind, deps });
        origin(Origin::Slot(slot));
    }
    if io {
        // How the runner hands each output back (`plan::ReadOut`): a host
        // output the caller already holds, or a clone of an earlier one
        // (a GPU's import of a returned host buffer included), costs
        // nothing; one whose buffer stays the arena's is copied out.
        let reads = plan.read_outs(&plan.lent_to_imports());
        for (&slot, read) in plan.outputs.iter().zip(reads) {
            let Some(s) = plan.steps.get(slot) else {
                continue;
            };
            if matches!(read, ReadOut::CloneOf(_)) {
                // A clone of an earlier output: nothing moves.
                continue;
            }
            // A GPU's output that holds a host buffer (a returned import,
            // shared) is read back as that host buffer is, and a caller's
            // input it reads in place is the caller's tensor already.
            let device = match s.work {
                Work::Share { src } => src,
                _ if read == ReadOut::InPlace => topo.staging,
                _ => s.device,
            };
            let kind = StepKind::Output {
                device,
                bytes: s.ty.size_bytes(),
                copied_out: device.is_cpu() && read == ReadOut::CopiedOut,
            };
            let deps = index.get(slot).copied().flatten().into_iter().collect();
            steps.push(Step { kind, deps });
            origin(Origin::Output(slot));
        }
    }
    steps
}

/// What scheduled step `slot` costs, or `None` for an input when inputs
/// are not priced.
fn step_kind(plan: &Schedule, slot: usize, topo: &Topology, io: bool) -> Option<StepKind> {
    let s = plan.steps.get(slot)?;
    let (device, bytes) = (s.device, s.ty.size_bytes());
    let transfer = |from, bytes, mode| StepKind::Transfer {
        from,
        to: device,
        bytes,
        mode,
    };
    Some(match &s.work {
        Work::Device(DeviceWork::Input { in_place, .. }) => {
            if !io {
                return None;
            }
            StepKind::Input {
                device,
                bytes,
                in_place: *in_place,
            }
        }
        Work::Device(DeviceWork::Copy { src, .. }) => transfer(*src, bytes, CopyMode::Moves),
        Work::Share { src } => transfer(*src, bytes, CopyMode::Shared),
        Work::Defer { src } => deferred(*src, device, bytes, plan.sole_reader(slot)),
        // An import and a view move no bytes: the dispatcher's bookkeeping.
        Work::Import { src } => transfer(*src, 0, CopyMode::Shared),
        Work::View { .. } => transfer(device, 0, CopyMode::Shared),
        Work::Device(DeviceWork::Kernel(Kernel::Gather { .. })) => {
            let deferred: usize = s
                .operands
                .iter()
                .filter_map(|&o| plan.steps.get(o))
                .filter(|o| matches!(o.work, Work::Defer { .. }))
                .map(|o| o.ty.size_bytes())
                .sum();
            StepKind::join(device, bytes, joined_bytes(bytes, deferred))
        }
        Work::Device(DeviceWork::Kernel(Kernel::Extern { op, .. })) => StepKind::Extern {
            device,
            bytes,
            us: op.cost.map(|c| c.secs() * 1e6),
        },
        // A fold that divides is priced as the fold: the division is done
        // on each block while it is in cache, so it adds no memory pass.
        Work::Device(DeviceWork::Kernel(Kernel::Fold { .. } | Kernel::FoldDiv { .. })) => {
            StepKind::Compute {
                device,
                inputs: s.operands.len(),
                bytes,
            }
        }
        Work::Device(DeviceWork::Kernel(Kernel::Div { .. } | Kernel::Cast { .. }))
        | Work::Comm { .. } => StepKind::Compute {
            device,
            inputs: 1,
            bytes,
        },
        Work::Island { island, .. } => {
            let shards = &plan.islands.get(*island)?.shards;
            let devs: Vec<_> = shards
                .iter()
                .filter_map(|&o| plan.steps.get(o).map(|st| st.device))
                .collect();
            let peered = devs.iter().all(|a| {
                devs.iter().all(|b| {
                    a == b
                        || (a.kind == b.kind
                            && a.kind == DeviceKind::Cuda
                            && topo.has_peer(a.index, b.index))
                })
            });
            StepKind::Driver {
                device,
                ranks: shards.len(),
                bytes,
                peered,
            }
        }
    })
}

/// What a copy of `bytes` `from -> to` deferred into its one reader
/// (`reader`) costs. A host fold moves the bytes itself, at the link's
/// deferred rate. Two readers instead land the operand where a plain copy
/// would, so it is priced as one: a concat on the host copies it straight
/// into its place in the result (out of a mapped buffer, or by a
/// download), and the concat's own step then copies only its other
/// operands ([`StepKind::Join`], [`joined_bytes`]); a GPU fold uploads its
/// first operand straight into its result, where a later one costs an
/// upload into scratch and one more launch ([`super::step_us`]).
/// The closed forms (`lower/closed_form.rs`) price their deferred copies
/// through this too.
pub fn deferred(from: Device, to: Device, bytes: usize, reader: SoleReader) -> StepKind {
    let lands_in_place = match reader {
        SoleReader::Join => to.is_cpu(),
        SoleReader::Fold { first } => first && !to.is_cpu(),
        SoleReader::Other => false,
    };
    let mode = if lands_in_place {
        CopyMode::Moves
    } else {
        CopyMode::Deferred
    };
    StepKind::Transfer {
        from,
        to,
        bytes,
        mode,
    }
}

/// The bytes a concat of `total` bytes copies itself when `deferred` of
/// them arrive as deferred operands, which [`deferred`] prices as copies
/// into their place.
pub fn joined_bytes(total: usize, deferred: usize) -> usize {
    total.saturating_sub(deferred)
}

/// Whether the runtime reads an input of `bytes` on `device` where the
/// caller's tensor lies instead of uploading it: the plan's rule
/// ([`Caps::assumed`], [`INPUT_IN_PLACE_MIN`]) for one input, for the
/// closed forms (`lower/closed_form.rs`), which price without a plan.
pub fn input_in_place(topo: &Topology, device: Device, bytes: usize) -> bool {
    Caps::assumed(device, topo).reads_inputs_in_place && bytes >= INPUT_IN_PLACE_MIN
}

/// The runner the runtime takes for `plan` ([`runner_of`] over every step,
/// inputs included: an input uploaded to a GPU keeps its worker busy even
/// where an estimate leaves inputs out).
pub fn plan_runner(plan: &Schedule, topo: &Topology) -> Runner {
    runner_of(&plan_steps(plan, topo, &BTreeSet::new(), true))
}
