//! The executor: compile a lowered graph once, run it many times on real
//! CPU, Vulkan and CUDA devices.
//!
//! [`Compiler`] (or [`compile`]) checks the graph (no collectives left, the
//! verifier at [`Level::Placement`]), builds the schedule ([`schedule`]),
//! checks every `comm.*` node against the communicator handed in for it
//! (`spmd`) and every `driver_all_reduce` island against its driver
//! (`island`), opens each device, checks every value's dtype and kernel
//! (an `extern` op's registered one, `crate::kernels`) against its backend,
//! joins the islands' collective drivers and starts one worker thread per
//! device, with a copy thread beside it on host arenas and Vulkan devices
//! (`prepare`). [`Executable::run`] then only feeds data: it releases
//! each step to its device's worker once the step's operands exist (or runs
//! them in order on the caller's thread when every device is a host arena
//! and the graph has no `extern` op on one of several devices),
//! frees every buffer right after its last reader finishes, and reads the
//! outputs back as host [`Tensor`]s. Both runners share one per-step
//! protocol (`step`). A copy between two host arenas that only feeds other
//! steps shares its source's buffer instead of copying it
//! ([`schedule::Work::Share`]), and a copy across the host/GPU line read only
//! by a fold on its destination is moved by that fold
//! ([`schedule::Work::Defer`]); both on by default, see [`Options`]. A failed
//! step stops the run, all buffers are released, and the executable can run
//! again; [`Executable::planned_events`] says how many copies, kernels and
//! allocations (the points a fault can be injected at) one run passes. The
//! backends are in [`crate::backend`], the collective drivers in
//! [`crate::driver`]. See `docs/backends.md`.

pub(crate) mod capacity;
pub mod discover;
mod donate;
mod gate;
mod island;
mod options;
mod planned;
mod prepare;
mod run_inline;
mod run_threaded;
mod spmd;
mod step;

pub use crate::backend::alloc::MemStats;
pub use crate::backend::fault::FaultPoint;
pub use crate::error::ExecError;
pub use discover::{discover, Discovery, Unavailable};
/// The plan this executor carries out, from the IR crate.
pub use fuel_graph_ext::plan::{schedule, views, Options};
pub use fuel_graph_ext::Tensor;
pub use gate::Dispatch;
pub use options::RuntimeOptions;
pub use planned::RunEvents;
pub(crate) use step::panic_text as panic_message;

use crate::backend::fault::Faults;
use crate::backend::worker::Worker;
use crate::backend::DeviceWork;
use crate::backend::{self, Buf, Ctx};
use crate::driver::GraphComm;
use fuel_graph_ext::device::Device;
use fuel_graph_ext::graph::Graph;
use fuel_graph_ext::interp::HostTensor;
use fuel_graph_ext::topology::Topology;
use fuel_graph_ext::verify::{verify, Level};
use run_threaded::Table;
use schedule::{Schedule, Work};
pub use spmd::CommTable;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use step::OutputRules;

/// A graph ready to run on opened devices.
pub struct Executable {
    plan: Arc<Schedule>,
    ctxs: backend::Ctxs,
    // Declared after `ctxs` is irrelevant: workers hold no device handles
    // between jobs, and are joined on drop.
    workers: HashMap<Device, Worker>,
    /// The threaded runner's copy thread of each host arena, beside its
    /// compute worker: a copy onto the device runs here, so it overlaps a
    /// long kernel (an `extern` op's) on the same device.
    copy_workers: HashMap<Device, Worker>,
    /// How long the dispatcher and the workers poll before they sleep
    /// ([`crate::backend::worker::SPIN_VAR`]).
    spin: std::time::Duration,
    /// The order the threaded runner hands each lane its steps in, worked
    /// out over the plan once.
    order: gate::Order,
    /// The communicators of the graph's `comm.*` nodes, by id.
    comms: Arc<CommTable>,
    /// The collective driver of each `driver_all_reduce` island, in
    /// [`Schedule::islands`] order.
    islands: Arc<Vec<island::Joined>>,
    armed: Mutex<Option<FaultPoint>>,
    /// Scratch of finished runs, for the next ones to reuse. A run takes one
    /// (or makes one) and puts it back when it ends; no lock is held while
    /// it runs, so runs on several threads proceed side by side.
    scratch: Mutex<Vec<Scratch>>,
    /// The bytes of the outputs [`run`](Executable::run) last handed out,
    /// oldest first, at most one run's worth. A later `run` writes into
    /// those the caller has since dropped instead of allocating: fresh
    /// output memory costs page faults on every run (glibc maps large
    /// blocks afresh and unmaps them when freed), which measured 5x the
    /// demo graph's own time.
    handed_out: Mutex<std::collections::VecDeque<Arc<[u8]>>>,
    /// Taken for the whole of a run of a graph with `comm.*` steps: every
    /// rank must issue its collectives in one order, which two runs side by
    /// side would interleave. Nothing under it runs another caller's work
    /// (host kernels never join the caller's rayon pool, see
    /// `backend::cpu::par_chunks`), so a thread cannot meet it twice.
    spmd_turn: Option<Mutex<()>>,
    /// Every device is a host arena: steps run on the caller's thread.
    inline: bool,
    /// An inline executable with a fold of [`backend::cpu::PARALLEL_MIN`]
    /// f32s' worth or more and no step that waits on other ranks (a driver
    /// all-reduce island, a `comm.*` step): each run is one task on the
    /// kernels' pool, where splitting a fold or copy costs no handoff.
    /// Graphs of copies and gathers alone (all_gather, broadcast,
    /// all_to_all) measured slower that way on the 2-core VM and stay on
    /// the caller's thread. (A run that waited on other ranks on the pool
    /// could hold a pool thread that those ranks' own runs need.)
    inline_on_pool: bool,
    /// `keep[i]`: slot `i` is a graph output.
    keep: Vec<bool>,
    /// `sole[i]`: slot `i` is returned exactly once, so its buffer can
    /// become that output tensor without a copy.
    sole: Vec<bool>,
    /// Per output (return order): the earlier output whose tensor it is,
    /// because both hold one host buffer ([`ReadOut::CloneOf`](fuel_graph_ext::plan::ReadOut)).
    same_as: Vec<Option<usize>>,
    /// `lent[i]`: a Vulkan import views slot `i`'s host buffer, so the step
    /// never writes into the caller's output bytes (not page-aligned).
    lent: Vec<bool>,
    /// Per output (return order): the host slot written into the caller's
    /// previous tensor for it, the output's own or, through shared copies,
    /// the buffer it holds (a star's root returned first as its share on
    /// another device); `None` for a clone and where the arena keeps the
    /// buffer.
    writes_into: Vec<Option<usize>>,
    /// The graph's input names: a run given any other name is refused.
    input_names: BTreeSet<String>,
    /// Each input's step, by name (what `run_donating` hands over).
    input_slots: BTreeMap<String, usize>,
}

/// Per-run state kept between runs so a run allocates no vectors of its
/// own: the inline runner's tables, and (both runners) the caller's output
/// bytes that host-arena outputs are written into. There is one for each
/// run that was ever in flight at once.
#[derive(Default)]
struct Scratch {
    table: Vec<Option<Arc<Buf>>>,
    reads_left: Vec<usize>,
    ins: Vec<Arc<Buf>>,
    /// Per slot: the caller's output bytes the step may write into.
    reuse: Vec<Option<Arc<[u8]>>>,
    /// Per slot: an input's bytes handed over for this output
    /// ([`Executable::run_donating`]), written into only once the run
    /// holds them alone; and those it could not use, for the caller.
    donor: Vec<Option<Arc<[u8]>>>,
    /// The handed-over bytes no output took, by output slot.
    unused: Vec<(usize, Arc<[u8]>)>,
    /// (output index, output slot) of each input handed over this run.
    handed: Vec<(usize, usize)>,
}

/// `FUEL_VULKAN_IMPORT` as the Vulkan backend reads it when a device
/// opens: whether Vulkan devices may import host-arena buffers (unset or
/// `1`: yes, `0`: no), or the error for any other value. `Ok(false)` in a
/// build without Vulkan.
pub fn vulkan_import_setting() -> Result<bool, String> {
    #[cfg(feature = "vulkan")]
    return backend::vulkan::import_setting();
    #[cfg(not(feature = "vulkan"))]
    Ok(false)
}

/// `FUEL_CUDA_PIN` as the CUDA backend reads it when a device opens:
/// whether CUDA devices page-lock host-arena buffers (unset or `1`: yes,
/// `0`: no), or the error for any other value. `Ok(false)` in a build
/// without CUDA.
pub fn cuda_pin_setting() -> Result<bool, String> {
    #[cfg(feature = "cuda")]
    return backend::cuda::pin::pin_setting();
    #[cfg(not(feature = "cuda"))]
    Ok(false)
}

/// Compiles `g` for `devices` with the default [`Topology`]. An empty device
/// list means "the devices the graph uses".
///
/// ```
/// use fuel_graph_ext::{DType, Device, LazyGraph, Tensor, TensorType};
/// use fuel_runtime::exec;
/// use std::collections::BTreeMap;
///
/// let graph = LazyGraph::new("g");
/// let x = graph.input("x", Device::cpu(0), TensorType::new(DType::I64, &[2]));
/// let y = x.copy_to(Device::cpu(1))?.mul(&x.copy_to(Device::cpu(1))?)?;
/// graph.output(&y)?;
/// let exe = exec::compile(&graph.snapshot(), &[])?; // opens cpu:0 and cpu:1, plans buffers
/// assert_eq!(exe.devices(), [Device::cpu(0), Device::cpu(1)]);
/// let inputs = BTreeMap::from([("x".to_string(), Tensor::from_slice(&[2], &[3i64, -4])?)]);
/// assert_eq!(exe.run(&inputs)?[0].to_vec::<i64>()?, [9, 16]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn compile(g: &Graph, devices: &[Device]) -> Result<Executable, ExecError> {
    Compiler::new(g).devices(devices).compile()
}

/// [`compile`] with an explicit topology (CUDA peer pairs, staging CPU).
pub fn compile_with(
    g: &Graph,
    devices: &[Device],
    topology: &Topology,
) -> Result<Executable, ExecError> {
    Compiler::new(g)
        .devices(devices)
        .topology(topology)
        .compile()
}

/// [`compile_with`] with explicit [`Options`].
pub fn compile_with_options(
    g: &Graph,
    devices: &[Device],
    topology: &Topology,
    options: Options,
) -> Result<Executable, ExecError> {
    Compiler::new(g)
        .devices(devices)
        .topology(topology)
        .options(options)
        .compile()
}

/// Everything `compile` takes, built up call by call: the graph, the
/// devices, the topology, the [`Options`], and the communicators its SPMD
/// `comm.*` nodes meet the other ranks through (handed in explicitly; the
/// [`Executable`] holds them).
///
/// ```no_run
/// # use fuel_graph_ext::{Graph, Topology};
/// use fuel_runtime::exec;
/// # fn f(g: &Graph, comm: std::sync::Arc<dyn fuel_runtime::driver::GraphComm>) -> Result<(), exec::ExecError> {
/// let exe = exec::Compiler::new(g)
///     .topology(&Topology::default())
///     .communicator(7, comm) // the `{comm=7}` of the graph's comm.* nodes
///     .compile()?;
/// # Ok(()) }
/// ```
pub struct Compiler<'g> {
    graph: &'g Graph,
    devices: Vec<Device>,
    topology: Option<&'g Topology>,
    options: Options,
    runtime: RuntimeOptions,
    comms: CommTable,
}

impl<'g> Compiler<'g> {
    /// Compiling `g` on the devices it uses, default topology and options,
    /// no communicators.
    pub fn new(g: &'g Graph) -> Self {
        Compiler {
            graph: g,
            devices: Vec::new(),
            topology: None,
            options: Options::default(),
            runtime: RuntimeOptions::default(),
            comms: CommTable::new(),
        }
    }

    /// The devices to open (empty: the ones the graph uses). The
    /// topology's staging CPU is opened too when the graph uses it, listed
    /// or not: the lowering routes copies through it.
    pub fn devices(mut self, devices: &[Device]) -> Self {
        self.devices = devices.to_vec();
        self
    }

    /// The topology the graph is verified against.
    pub fn topology(mut self, topology: &'g Topology) -> Self {
        self.topology = Some(topology);
        self
    }

    /// How the graph runs (see [`Options`]).
    pub fn options(mut self, options: Options) -> Self {
        self.options = options;
        self
    }

    /// How the runtime opens devices, joins islands and waits (see
    /// [`RuntimeOptions`]; the defaults unless given).
    pub fn runtime(mut self, runtime: RuntimeOptions) -> Self {
        self.runtime = runtime;
        self
    }

    /// The communicator the graph's `comm.*` nodes with `{comm=id}` run
    /// through. The executable keeps it for as long as it lives.
    pub fn communicator(mut self, id: u32, comm: Arc<dyn GraphComm>) -> Self {
        self.comms.insert(id, comm);
        self
    }

    /// Checks the graph (no collectives left, the verifier at
    /// [`Level::Placement`], every device listed, every `comm.*` node's
    /// communicator handed in, every driver island runnable), schedules it,
    /// opens the devices, checks every value's dtype against its backend,
    /// joins the islands' collective drivers and starts the workers.
    pub fn compile(self) -> Result<Executable, ExecError> {
        let g = self.graph;
        prepare::check_no_collectives(g)?;
        let default_topology = Topology::default();
        let topology = self.topology.unwrap_or(&default_topology);
        verify(g, Level::Placement, topology).map_err(|e| ExecError::Verify(e.rendered))?;
        let listed = prepare::listed_devices(g, &self.devices, topology)?;
        // Host arenas' sizes are known before anything is opened (read
        // once, for every host arena): a value too large for the host is
        // refused before the schedule is built (its byte regions grow with
        // the value's rows).
        let host = backend::limits::host();
        let mut caps: HashMap<Device, backend::limits::Capacity> = HashMap::new();
        if let Some(host) = &host {
            for d in listed.iter().filter(|d| d.is_cpu()) {
                caps.insert(*d, host.clone());
            }
        }
        capacity::check_buffers(g, &caps)?;
        let mut plan = Schedule::new_with(g, &self.options)?;
        let mut comms = self.comms;
        spmd::check(g, &plan, &mut comms)?;
        island::check(&plan)?;
        let ctxs = backend::open(&listed, &self.runtime, self.options.import_host_buffers)?;
        prepare::check_supported(&plan, &ctxs)?;
        plan.fit_to_devices(&self.options, |d| {
            ctxs.get(&d).map(Ctx::caps).unwrap_or_default()
        });
        for (d, c) in ctxs.iter().filter(|(_, c)| !matches!(c, Ctx::Cpu(_))) {
            if let Some(cap) = c.capacity() {
                caps.insert(*d, cap);
            }
        }
        capacity::check_buffers(g, &caps)?;
        capacity::check_peaks(&plan, &caps)?;
        let islands = island::join(&plan, &ctxs, self.runtime.join)?;
        let (inline, inline_on_pool) = prepare::runner_shape(&plan, &ctxs);
        if ctxs.values().any(|c| matches!(c, Ctx::Cpu(_))) {
            crate::backend::worker::host_pool_ready()?;
        }
        let spin = if inline {
            std::time::Duration::ZERO
        } else {
            self.runtime.spin
        };
        let (workers, copy_workers) = if inline {
            (HashMap::new(), HashMap::new())
        } else {
            prepare::start_workers(&ctxs, spin)?
        };
        let OutputRules {
            keep,
            sole,
            same_as,
            lent,
            writes_into,
        } = OutputRules::of(&plan);
        let spmd = plan
            .steps
            .iter()
            .any(|s| matches!(s.work, Work::Comm { .. }));
        let input_slots = plan
            .steps
            .iter()
            .enumerate()
            .filter_map(|(i, st)| match &st.work {
                Work::Device(DeviceWork::Input { name, .. }) => Some((name.clone(), i)),
                _ => None,
            })
            .collect();
        let order = gate::Order::new(&plan, self.runtime.dispatch);
        Ok(Executable {
            plan: Arc::new(plan),
            ctxs,
            workers,
            copy_workers,
            spin,
            order,
            comms: Arc::new(comms),
            islands: Arc::new(islands),
            armed: Mutex::new(None),
            scratch: Mutex::new(Vec::new()),
            handed_out: Mutex::new(Default::default()),
            spmd_turn: spmd.then(|| Mutex::new(())),
            inline,
            inline_on_pool,
            keep,
            sole,
            same_as,
            lent,
            writes_into,
            input_names: g
                .inputs()
                .into_iter()
                .map(|(_, name)| name.to_string())
                .collect(),
            input_slots,
        })
    }
}

impl Executable {
    /// The opened device `device`.
    fn ctx(&self, device: Device) -> Result<&Ctx, ExecError> {
        self.ctxs
            .get(&device)
            .ok_or_else(|| ExecError::Internal(format!("{device} not opened")))
    }

    /// Makes the next run fail at `point` (one run only).
    pub fn inject_fault(&self, point: FaultPoint) {
        if let Ok(mut a) = self.armed.lock() {
            *a = Some(point);
        }
    }

    /// Allocator numbers of one opened device.
    pub fn memory(&self, device: Device) -> Option<MemStats> {
        self.ctxs.get(&device).map(Ctx::stats)
    }

    /// The devices this executable opened.
    pub fn devices(&self) -> Vec<Device> {
        let mut d: Vec<Device> = self.ctxs.keys().copied().collect();
        d.sort();
        d
    }

    /// The device each output lives on, in return order.
    pub fn output_devices(&self) -> Vec<Device> {
        self.plan
            .outputs
            .iter()
            .filter_map(|&o| self.plan.steps.get(o).map(|s| s.device))
            .collect()
    }

    /// The graph's copies and moves that run without moving bytes: each
    /// shares its host source's buffer ([`schedule::Work::Share`]).
    pub fn shared_copies(&self) -> BTreeSet<fuel_graph_ext::graph::NodeId> {
        self.plan
            .steps
            .iter()
            .filter(|s| matches!(s.work, Work::Share { .. }))
            .map(|s| s.node)
            .collect()
    }

    /// The graph's slices that run as views of their operand's buffer
    /// ([`schedule::Work::View`]): no copy, no allocation.
    pub fn viewed_slices(&self) -> BTreeSet<fuel_graph_ext::graph::NodeId> {
        self.plan
            .steps
            .iter()
            .filter(|s| matches!(s.work, Work::View { .. }))
            .map(|s| s.node)
            .collect()
    }

    /// The graph's `div`s that run inside the fold they divide
    /// ([`fuel_graph_ext::plan::Kernel::FoldDiv`]): the fold has no step
    /// or buffer of its own.
    pub fn divided_folds(&self) -> BTreeSet<fuel_graph_ext::graph::NodeId> {
        self.plan
            .steps
            .iter()
            .filter(|s| {
                matches!(
                    s.work.kernel(),
                    Some(fuel_graph_ext::plan::Kernel::FoldDiv { .. })
                )
            })
            .map(|s| s.node)
            .collect()
    }

    /// The graph's host-to-Vulkan copies and moves that run as views of
    /// their host buffer on the device ([`schedule::Work::Import`]).
    pub fn imported_copies(&self) -> BTreeSet<fuel_graph_ext::graph::NodeId> {
        self.plan
            .steps
            .iter()
            .filter(|s| matches!(s.work, Work::Import { .. }))
            .map(|s| s.node)
            .collect()
    }

    /// Whether runs go step by step on the caller's thread (the inline
    /// runner: every step that needs a device's worker is on a host arena)
    /// rather than through a worker per device.
    pub fn runs_inline(&self) -> bool {
        self.inline
    }

    /// The graph's inputs read where the caller's bytes lie instead of
    /// uploaded ([`Schedule::inputs_in_place`](schedule::Schedule::inputs_in_place)).
    pub fn inputs_in_place(&self) -> BTreeSet<fuel_graph_ext::graph::NodeId> {
        self.plan
            .steps
            .iter()
            .filter(|s| {
                matches!(
                    s.work,
                    Work::Device(DeviceWork::Input { in_place: true, .. })
                )
            })
            .map(|s| s.node)
            .collect()
    }

    /// Each `driver_all_reduce` island: the collective driver that runs it
    /// (`host`, `nccl`) and its ranks' devices, in rank order.
    pub fn driver_islands(&self) -> Vec<(&'static str, Vec<Device>)> {
        self.plan
            .islands
            .iter()
            .zip(self.islands.iter())
            .map(|(is, joined)| (joined.driver(), is.devices.clone()))
            .collect()
    }

    /// The communicators handed to compile, by id, with their driver.
    pub fn communicators(&self) -> Vec<(u32, &'static str)> {
        self.comms.iter().map(|(id, c)| (*id, c.driver())).collect()
    }

    /// Per-device peak bytes if the steps ran one by one in schedule order.
    pub fn planned_peak(&self) -> HashMap<Device, usize> {
        self.plan.sequential_peak()
    }

    /// Runs with interpreter tensors (converted on the way in and out).
    pub fn run_host(
        &self,
        inputs: &BTreeMap<String, HostTensor>,
    ) -> Result<Vec<HostTensor>, ExecError> {
        let ins: BTreeMap<String, Tensor> = inputs
            .iter()
            .map(|(k, v)| (k.clone(), Tensor::from_host(v)))
            .collect();
        Ok(self.run(&ins)?.iter().map(Tensor::to_host).collect())
    }

    /// Runs the graph on `inputs` (one tensor per input name) and returns
    /// the outputs in return order. No graph work happens here.
    ///
    /// The executable keeps the bytes of the outputs it last returned (one
    /// run's worth at most, freed with the executable), and a later run
    /// writes into those the caller has dropped: a loop that drops each
    /// run's outputs allocates no output memory after its first run.
    /// Bytes the caller still holds, or shares through a clone, are never
    /// touched.
    pub fn run(&self, inputs: &BTreeMap<String, Tensor>) -> Result<Vec<Tensor>, ExecError> {
        let mut outputs = self.dropped_outputs();
        self.run_into(inputs, &mut outputs)?;
        if let Ok(mut kept) = self.handed_out.lock() {
            // An output that is a clone of an earlier one is kept once.
            let firsts = outputs
                .iter()
                .zip(&self.same_as)
                .filter(|(_, s)| s.is_none());
            kept.extend(firsts.map(|(t, _)| t.shared()));
            let over = kept.len().saturating_sub(self.plan.outputs.len());
            kept.drain(..over);
        }
        Ok(outputs)
    }

    /// One tensor per output for [`run_into`](Self::run_into) to fill:
    /// over kept bytes that no caller holds any more where there are such
    /// bytes of the output's size, and empty (to be allocated) elsewhere.
    fn dropped_outputs(&self) -> Vec<Tensor> {
        let Ok(mut kept) = self.handed_out.lock() else {
            return Vec::new();
        };
        let mut outputs = Vec::with_capacity(self.plan.outputs.len());
        for (&o, same) in self.plan.outputs.iter().zip(&self.same_as) {
            let ty = &self.plan.steps[o].ty;
            if same.is_some() {
                // Becomes a clone of an earlier output: no bytes of its own.
                outputs.push(Tensor::unfilled(ty.clone()));
                continue;
            }
            let free = kept
                .iter_mut()
                .position(|b| b.len() == ty.size_bytes() && Arc::get_mut(b).is_some());
            let reused = free
                .and_then(|i| kept.remove(i))
                .and_then(|bytes| Tensor::from_bytes(ty.clone(), bytes).ok());
            outputs.push(reused.unwrap_or_else(|| Tensor::unfilled(ty.clone())));
        }
        outputs
    }

    /// [`run`](Self::run), writing the outputs into `outputs`. Tensors
    /// already there of the right type whose bytes nobody else shares are
    /// overwritten in place, so a loop that passes the same vector every
    /// time allocates no output memory after the first run.
    ///
    /// ```
    /// use fuel_graph_ext::{DType, Device, LazyGraph, Tensor, TensorType};
    /// use fuel_runtime::exec;
    /// use std::collections::BTreeMap;
    ///
    /// let graph = LazyGraph::new("g");
    /// let x = graph.input("x", Device::cpu(0), TensorType::new(DType::F32, &[3]));
    /// graph.output(&x.add(&x)?)?;
    /// let exe = exec::compile(&graph.snapshot(), &[])?;
    /// let mut outputs = Vec::new();
    /// for step in 0..3 {
    ///     let x = Tensor::from_slice(&[3], &[step as f32; 3])?;
    ///     exe.run_into(&BTreeMap::from([("x".to_string(), x)]), &mut outputs)?;
    /// }
    /// assert_eq!(outputs[0].to_vec::<f32>()?, [4.0; 3]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// Several threads may run one executable at once, rayon tasks
    /// included: runs share no lock while they compute (a graph with
    /// `comm.*` steps runs one run at a time, in call order per thread).
    pub fn run_into(
        &self,
        inputs: &BTreeMap<String, Tensor>,
        outputs: &mut Vec<Tensor>,
    ) -> Result<(), ExecError> {
        self.with_scratch(|s| self.run_with(inputs, outputs, s))
    }

    /// Runs `run` with a scratch of its own (a kept one where one is free)
    /// and, for a graph with `comm.*` steps, this executable's turn.
    fn with_scratch<R>(&self, run: impl FnOnce(&mut Scratch) -> R) -> R {
        let _turn = self
            .spmd_turn
            .as_ref()
            .map(|t| t.lock().unwrap_or_else(|e| e.into_inner()));
        let mut scratch = self
            .scratch
            .lock()
            .ok()
            .and_then(|mut free| free.pop())
            .unwrap_or_default();
        let result = run(&mut scratch);
        if let Ok(mut free) = self.scratch.lock() {
            free.push(scratch);
        }
        result
    }

    /// One run with `scratch` as its own.
    fn run_with(
        &self,
        inputs: &BTreeMap<String, Tensor>,
        outputs: &mut Vec<Tensor>,
        scratch: &mut Scratch,
    ) -> Result<(), ExecError> {
        let data = self.input_data(inputs)?;
        self.run_data(data, outputs, scratch)
    }

    /// Each input step's bytes (shared with the caller's tensor), after
    /// checking every input against the graph before any device is touched.
    fn input_data(
        &self,
        inputs: &BTreeMap<String, Tensor>,
    ) -> Result<Vec<Option<Arc<[u8]>>>, ExecError> {
        let plan = &self.plan;
        let mut data: Vec<Option<Arc<[u8]>>> = vec![None; plan.steps.len()];
        for (i, s) in plan.steps.iter().enumerate() {
            if let Work::Device(DeviceWork::Input { name, .. }) = &s.work {
                let t = inputs
                    .get(name)
                    .ok_or_else(|| ExecError::MissingInput(name.clone()))?;
                if *t.ty() != s.ty {
                    return Err(ExecError::InputType {
                        name: name.clone(),
                        want: s.ty.clone(),
                        got: t.ty().clone(),
                    });
                }
                if t.bytes().len() != s.ty.size_bytes() {
                    return Err(ExecError::InputSize {
                        name: name.clone(),
                        ty: s.ty.clone(),
                        want: s.ty.size_bytes(),
                        got: t.bytes().len(),
                    });
                }
                data[i] = Some(t.shared());
            }
        }
        // Every input name is present, so a longer map holds a name the
        // graph does not have (a typo would otherwise be ignored).
        if inputs.len() > self.input_names.len() {
            if let Some(name) = inputs.keys().find(|k| !self.input_names.contains(*k)) {
                return Err(ExecError::unknown_input(name, &self.input_names));
            }
        }
        Ok(data)
    }

    /// One run over the input steps' `data` with `scratch` as its own.
    fn run_data(
        &self,
        data: Vec<Option<Arc<[u8]>>>,
        outputs: &mut Vec<Tensor>,
        scratch: &mut Scratch,
    ) -> Result<(), ExecError> {
        let armed = self.armed.lock().ok().and_then(|mut a| a.take());
        let faults = Arc::new(Faults::new(armed));
        let plan = &self.plan;
        let n = plan.steps.len();
        // Outputs on host arenas write straight into the caller's previous
        // output tensors where they can, and become the new ones uncopied.
        let s = scratch;
        s.reuse.clear();
        s.reuse.resize_with(n, || None);
        // An output that becomes a clone of an earlier one is never written
        // in place, and last run's clone still holds the earlier output's
        // bytes: let go of it first, or those bytes look shared and every
        // run folds into fresh (page-faulting) memory.
        for (k, same) in self.same_as.iter().enumerate() {
            if let (Some(_), Some(t)) = (same, outputs.get_mut(k)) {
                let ty = t.ty().clone();
                *t = Tensor::unfilled(ty);
            }
        }
        for (k, &slot) in self.writes_into.iter().enumerate() {
            if let Some(r) = slot {
                s.reuse[r] = outputs
                    .get_mut(k)
                    .and_then(|t| t.take_bytes_for(&plan.steps[r].ty));
            }
        }
        if self.inline {
            let result = self.run_inline(s, data, &faults);
            let result = result.and_then(|()| self.read_outputs(&mut s.table, outputs));
            // Success or failure, nothing outlives the run.
            s.table.iter_mut().for_each(|b| *b = None);
            s.reuse.iter_mut().for_each(|b| *b = None);
            s.ins.clear();
            if result.is_err() {
                // Some tensors may have lent their bytes to the failed run.
                outputs.clear();
            }
            return result;
        }
        let table: Table = Arc::new(Mutex::new((0..n).map(|_| None).collect()));
        let result = self.dispatch(&table, data, &mut s.reuse, &faults);
        let result = result.and_then(|()| match table.lock() {
            Ok(mut t) => self.read_outputs(&mut t, outputs),
            Err(_) => Err(ExecError::Internal("buffer table lock poisoned".into())),
        });
        // Success or failure, nothing outlives the run.
        if let Ok(mut t) = table.lock() {
            t.clear();
        }
        s.reuse.iter_mut().for_each(|b| *b = None);
        if result.is_err() {
            // Some tensors may have lent their bytes to the failed run.
            outputs.clear();
        }
        result
    }
}

impl Drop for Executable {
    fn drop(&mut self) {
        // Join the workers before the devices go.
        self.workers.clear();
        self.copy_workers.clear();
    }
}
