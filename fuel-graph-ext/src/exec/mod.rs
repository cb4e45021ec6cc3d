//! The executor: compile a lowered graph once, run it many times on real
//! CPU, Vulkan and CUDA devices.
//!
//! [`compile`] checks the graph (no collectives left, the verifier at
//! [`Level::Placement`]), opens each device, checks every value's dtype
//! against its backend, builds the schedule and buffer plan ([`schedule`]) and
//! starts one worker thread per device ([`worker`]). [`Executable::run`]
//! then only feeds data: it releases each step to its device's worker once
//! the step's operands exist, frees every buffer right after its last reader
//! finishes, and reads the outputs back as host [`Tensor`]s. A copy between
//! two host arenas that only feeds other steps shares its source's buffer
//! instead of copying it ([`schedule::Work::Share`]), and a copy across the
//! host/GPU line read only by a fold on its destination is moved by that
//! fold ([`schedule::Work::Defer`]); both on by default, see [`Options`]. A failed step
//! stops the run, all buffers are released, and the executable can run again.
//! Backends: [`cpu`], [`vulkan`], [`cuda`]; moving bytes between them is the
//! one exhaustive match in [`copy`]. See `docs/backends.md`.

pub mod comm;
pub mod discover;
pub mod error;
pub mod schedule;
pub mod tensor;

pub use crate::backend::alloc::MemStats;
pub use crate::backend::fault::FaultPoint;
pub use discover::{discover, Discovery, Unavailable};
pub use error::ExecError;
pub use tensor::Tensor;

use crate::backend::fault::{self, Faults};
use crate::backend::worker::Worker;
use crate::backend::{self, cpu, cuda, vulkan, Buf, Ctx};
use crate::device::{Device, DeviceKind};
use crate::graph::Graph;
use crate::interp::HostTensor;
use crate::topology::Topology;
use crate::verify::{verify, Level};
use schedule::{Schedule, Step, Work};
use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::sync::{mpsc, Arc, Mutex};

/// A graph ready to run on opened devices.
pub struct Executable {
    plan: Arc<Schedule>,
    ctxs: HashMap<Device, Ctx>,
    // Declared after `ctxs` is irrelevant: workers hold no device handles
    // between jobs, and are joined on drop.
    workers: HashMap<Device, Worker>,
    armed: Mutex<Option<FaultPoint>>,
    /// Held for the whole of a run; holds the inline runner's scratch.
    running: Mutex<Scratch>,
    /// Every device is a host arena: steps run on the caller's thread.
    inline: bool,
    /// `keep[i]`: slot `i` is a graph output.
    keep: Vec<bool>,
    /// `sole[i]`: slot `i` is returned exactly once, so its buffer can
    /// become that output tensor without a copy.
    sole: Vec<bool>,
}

/// Per-run state kept between runs so a run allocates no vectors of its
/// own: the inline runner's tables, and (both runners) the caller's output
/// bytes that host-arena outputs are written into.
#[derive(Default)]
struct Scratch {
    table: Vec<Option<Arc<Buf>>>,
    reads_left: Vec<usize>,
    ins: Vec<Arc<Buf>>,
    /// Per slot: the caller's output bytes the step may write into.
    reuse: Vec<Option<Arc<[u8]>>>,
}

/// Choices [`compile_with_options`] makes about how a graph runs; none of
/// them changes what it computes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Options {
    /// A `copy` or `move` from one host arena to another whose result is not
    /// a graph output shares its source's buffer instead of copying it: all
    /// host arenas are this process's memory and every reader only reads.
    /// It saves the memcpy and the destination's bytes (a star's root then
    /// holds only its result). Default `true`; `false` makes every such copy
    /// a real memcpy, to measure or debug the copy itself. Outputs always
    /// copy, and copies to or from a GPU are never shared.
    pub share_host_copies: bool,
    /// A copy between a GPU and the host whose one reader is an element-wise
    /// fold on the destination (host, or Vulkan), and which is not a graph
    /// output, is done by the fold itself, one operand at a time, in operand
    /// order: the host reads a mapped Vulkan buffer in place or downloads
    /// into one scratch buffer; a Vulkan fold uploads into one scratch
    /// buffer and folds it in place. A root of n ranks then holds its result
    /// and at most one scratch buffer instead of n - 1 copies and its
    /// result. The transfer waits for the fold's other operands, so it no
    /// longer overlaps them. Default `true`.
    pub defer_gpu_copies_into_folds: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            share_host_copies: true,
            defer_gpu_copies_into_folds: true,
        }
    }
}

/// Compiles `g` for `devices` with the default [`Topology`]. An empty device
/// list means "the devices the graph uses".
pub fn compile(g: &Graph, devices: &[Device]) -> Result<Executable, ExecError> {
    compile_with(g, devices, &Topology::default())
}

/// [`compile`] with an explicit topology (CUDA peer pairs, staging CPU).
pub fn compile_with(
    g: &Graph,
    devices: &[Device],
    topology: &Topology,
) -> Result<Executable, ExecError> {
    compile_with_options(g, devices, topology, Options::default())
}

/// [`compile_with`] with explicit [`Options`].
pub fn compile_with_options(
    g: &Graph,
    devices: &[Device],
    topology: &Topology,
    options: Options,
) -> Result<Executable, ExecError> {
    for id in g.node_ids() {
        if let Some(n) = g.node(id) {
            if n.op.is_collective() {
                return Err(ExecError::Collective {
                    op: n.op.mnemonic(),
                });
            }
        }
    }
    verify(g, Level::Placement, topology).map_err(|e| ExecError::Verify(e.rendered))?;
    let used: BTreeSet<Device> = g
        .node_ids()
        .filter_map(|id| g.node(id)?.op.device())
        .collect();
    let listed: BTreeSet<Device> = if devices.is_empty() {
        used.clone()
    } else {
        devices.iter().copied().collect()
    };
    for d in &used {
        if !listed.contains(d) {
            return Err(ExecError::DeviceNotListed {
                device: *d,
                listed: listed
                    .iter()
                    .map(|d| d.to_string())
                    .collect::<Vec<_>>()
                    .join(","),
            });
        }
    }
    let ctxs = open_devices(&listed)?;
    let plan = Schedule::new_with(g, &options)?;
    for s in &plan.steps {
        let ctx = ctxs
            .get(&s.device)
            .ok_or_else(|| ExecError::Internal(format!("{} not opened", s.device)))?;
        ctx.supports(s.ty.dtype)?;
    }
    // Host arenas share the host's cores: handing their steps to worker
    // threads buys no overlap, only a thread handoff per step, and the
    // kernels of large steps use every core anyway. Such an executable runs
    // its steps in schedule order on the caller's thread.
    let inline = ctxs.values().all(|c| matches!(c, Ctx::Cpu(_)));
    if !inline {
        if let Some(s) = plan
            .steps
            .iter()
            .find(|s| matches!(s.work, Work::Comm { .. }))
        {
            return Err(ExecError::DriverCollective {
                op: s.mnemonic.clone(),
                device: s.device,
                reason: "an SPMD collective runs on the rank's own thread, so its graph must use CPU devices only; copy to and from the GPU around it".into(),
            });
        }
    }
    let mut workers = HashMap::new();
    for d in ctxs.keys().filter(|_| !inline) {
        let w = Worker::spawn(format!("fuel-{d}")).map_err(|e| {
            ExecError::Internal(format!("cannot start the worker thread for {d}: {e}"))
        })?;
        workers.insert(*d, w);
    }
    let keep = (0..plan.steps.len())
        .map(|i| plan.outputs.contains(&i))
        .collect();
    let sole = (0..plan.steps.len())
        .map(|i| plan.outputs.iter().filter(|&&o| o == i).count() == 1)
        .collect();
    Ok(Executable {
        plan: Arc::new(plan),
        ctxs,
        workers,
        armed: Mutex::new(None),
        running: Mutex::new(Scratch::default()),
        inline,
        keep,
        sole,
    })
}

fn open_devices(listed: &BTreeSet<Device>) -> Result<HashMap<Device, Ctx>, ExecError> {
    let mut ctxs = HashMap::new();
    let mut instance: Option<Arc<vulkan::Instance>> = None;
    for d in listed {
        let ctx = match d.kind {
            DeviceKind::Cpu => Ctx::Cpu(Arc::new(cpu::Arena::open(*d))),
            DeviceKind::Cuda => Ctx::Cuda(cuda::CudaDev::open(*d)?),
            DeviceKind::Vulkan => {
                let inst = match &instance {
                    Some(i) => i.clone(),
                    None => {
                        let i =
                            vulkan::Instance::open().map_err(|u| ExecError::DeviceUnavailable {
                                device: d.to_string(),
                                reason: u.reason,
                                hint: u.hint,
                            })?;
                        instance = Some(i.clone());
                        i
                    }
                };
                Ctx::Vulkan(inst.open_device(*d)?)
            }
        };
        ctxs.insert(*d, ctx);
    }
    Ok(ctxs)
}

type Table = Arc<Mutex<Vec<Option<Arc<Buf>>>>>;

impl Executable {
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
    pub fn shared_copies(&self) -> BTreeSet<crate::graph::NodeId> {
        self.plan
            .steps
            .iter()
            .filter(|s| matches!(s.work, Work::Share { .. }))
            .map(|s| s.node)
            .collect()
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
    pub fn run(&self, inputs: &BTreeMap<String, Tensor>) -> Result<Vec<Tensor>, ExecError> {
        let mut outputs = Vec::new();
        self.run_into(inputs, &mut outputs)?;
        Ok(outputs)
    }

    /// [`run`](Self::run), writing the outputs into `outputs`. Tensors
    /// already there of the right type whose bytes nobody else shares are
    /// overwritten in place, so a loop that passes the same vector every
    /// time allocates no output memory after the first run.
    pub fn run_into(
        &self,
        inputs: &BTreeMap<String, Tensor>,
        outputs: &mut Vec<Tensor>,
    ) -> Result<(), ExecError> {
        let mut scratch = self
            .running
            .lock()
            .map_err(|_| ExecError::Internal("a previous run panicked".into()))?;
        let armed = self.armed.lock().ok().and_then(|mut a| a.take());
        let faults = Arc::new(Faults::new(armed));
        let plan = &self.plan;
        let n = plan.steps.len();
        // Check inputs before touching any device.
        let mut data: Vec<Option<Arc<[u8]>>> = vec![None; n];
        for (i, s) in plan.steps.iter().enumerate() {
            if let Work::Input { name } = &s.work {
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
        // Outputs on host arenas write straight into the caller's previous
        // output tensors where they can, and become the new ones uncopied.
        let s = &mut *scratch;
        s.reuse.clear();
        s.reuse.resize_with(n, || None);
        for (k, &o) in plan.outputs.iter().enumerate() {
            if self.sole[o] && plan.steps[o].device.is_cpu() {
                s.reuse[o] = outputs
                    .get_mut(k)
                    .and_then(|t| t.take_bytes_for(&plan.steps[o].ty));
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

    /// Runs every step in schedule order on this thread (host arenas only),
    /// freeing each buffer after its last read as the worker runner does.
    fn run_inline(
        &self,
        s: &mut Scratch,
        mut data: Vec<Option<Arc<[u8]>>>,
        faults: &Faults,
    ) -> Result<(), ExecError> {
        let plan = &self.plan;
        let n = plan.steps.len();
        s.table.clear();
        s.table.resize_with(n, || None);
        s.reads_left.clear();
        s.reads_left.extend_from_slice(&plan.reads);
        for (i, step) in plan.steps.iter().enumerate() {
            let ctx = self
                .ctxs
                .get(&step.device)
                .ok_or_else(|| ExecError::Internal(format!("{} not opened", step.device)))?;
            s.ins.clear();
            for &o in &step.operands {
                let b = s.table[o]
                    .clone()
                    .ok_or_else(|| ExecError::Internal(format!("operand slot {o} is empty")))?;
                s.ins.push(b);
            }
            if let Work::Share { .. } | Work::Defer { .. } = step.work {
                let shared = share(step, &s.ins, faults)?;
                s.ins.clear();
                s.table[i] = Some(shared);
                self.release_operands(i, &mut s.reads_left, &mut s.table);
                continue;
            }
            let input = data[i].take();
            let reuse = s.reuse[i].take();
            let res = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                if let Work::Comm { op, comm } = &step.work {
                    return run_comm(plan, step, *op, *comm, ctx, &s.ins, faults);
                }
                backend::run_step(step, ctx, &s.ins, input.as_ref(), faults, reuse)
            }));
            s.ins.clear();
            let buf = match res {
                Ok(r) => r?,
                Err(p) => return Err(panicked(step, &*p)),
            };
            s.table[i] = Some(Arc::new(buf));
            self.release_operands(i, &mut s.reads_left, &mut s.table);
        }
        Ok(())
    }

    /// After step `i` finished: drops every slot whose last read that was,
    /// and `i`'s own when nothing reads it and it is not an output. A buffer
    /// that a shared copy also holds lives on in that slot.
    fn release_operands(&self, i: usize, reads_left: &mut [usize], table: &mut [Option<Arc<Buf>>]) {
        for &o in &self.plan.steps[i].operands {
            reads_left[o] -= 1;
            if reads_left[o] == 0 && !self.keep[o] {
                table[o] = None;
            }
        }
        if self.plan.reads[i] == 0 && !self.keep[i] {
            table[i] = None;
        }
    }

    fn dispatch(
        &self,
        table: &Table,
        mut data: Vec<Option<Arc<[u8]>>>,
        reuse: &mut [Option<Arc<[u8]>>],
        faults: &Arc<Faults>,
    ) -> Result<(), ExecError> {
        let plan = &self.plan;
        let n = plan.steps.len();
        // Indices below are step numbers of `plan`, which sizes every
        // vector here, so indexing cannot go out of bounds.
        let mut reads_left = plan.reads.clone();
        let mut deps_left: Vec<usize> = plan
            .steps
            .iter()
            .map(|s| s.operands.iter().collect::<BTreeSet<_>>().len())
            .collect();
        let mut ready: VecDeque<usize> = (0..n).filter(|&i| deps_left[i] == 0).collect();
        let (done_tx, done_rx) = mpsc::channel::<(usize, Result<(), ExecError>)>();
        let mut in_flight = 0usize;
        let mut first_err: Option<ExecError> = None;
        loop {
            while first_err.is_none() {
                let Some(i) = ready.pop_front() else { break };
                match self.launch(i, table, data[i].take(), reuse[i].take(), faults, &done_tx) {
                    Ok(()) => in_flight += 1,
                    Err(e) => first_err = Some(e),
                }
            }
            if in_flight == 0 {
                break;
            }
            let Ok((i, res)) = done_rx.recv() else {
                first_err.get_or_insert(ExecError::Internal("a worker vanished".into()));
                break;
            };
            in_flight -= 1;
            if let Err(e) = res {
                first_err.get_or_insert(e);
                continue;
            }
            let mut t = table
                .lock()
                .map_err(|_| ExecError::Internal("buffer table lock poisoned".into()))?;
            self.release_operands(i, &mut reads_left, &mut t);
            drop(t);
            for &d in &plan.dependents[i] {
                deps_left[d] -= 1;
                if deps_left[d] == 0 {
                    ready.push_back(d);
                }
            }
        }
        match first_err {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    fn launch(
        &self,
        i: usize,
        table: &Table,
        input: Option<Arc<[u8]>>,
        reuse: Option<Arc<[u8]>>,
        faults: &Arc<Faults>,
        done: &mpsc::Sender<(usize, Result<(), ExecError>)>,
    ) -> Result<(), ExecError> {
        let step = &self.plan.steps[i];
        let ctx = self
            .ctxs
            .get(&step.device)
            .cloned()
            .ok_or_else(|| ExecError::Internal(format!("{} not opened", step.device)))?;
        let ins: Vec<Arc<Buf>> = {
            let t = table
                .lock()
                .map_err(|_| ExecError::Internal("buffer table lock poisoned".into()))?;
            step.operands
                .iter()
                .map(|&o| {
                    t[o].clone()
                        .ok_or_else(|| ExecError::Internal(format!("operand slot {o} is empty")))
                })
                .collect::<Result<_, _>>()?
        };
        if let Work::Share { .. } | Work::Defer { .. } = step.work {
            // No device work: the slot takes its source's buffer right here.
            let res = share(step, &ins, faults).and_then(|b| match table.lock() {
                Ok(mut t) => {
                    t[i] = Some(b);
                    Ok(())
                }
                Err(_) => Err(ExecError::Internal("buffer table lock poisoned".into())),
            });
            let _ = done.send((i, res));
            return Ok(());
        }
        let worker = self
            .workers
            .get(&step.device)
            .ok_or_else(|| ExecError::Internal(format!("no worker for {}", step.device)))?;
        let plan = self.plan.clone();
        let table = table.clone();
        let faults = faults.clone();
        let done = done.clone();
        let sent = worker.send(Box::new(move || {
            let step = &plan.steps[i];
            let res = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                backend::run_step(step, &ctx, &ins, input.as_ref(), &faults, reuse)
            }));
            drop(ins);
            let res = match res {
                Ok(Ok(buf)) => match table.lock() {
                    Ok(mut t) => {
                        t[i] = Some(Arc::new(buf));
                        Ok(())
                    }
                    Err(_) => Err(ExecError::Internal("buffer table lock poisoned".into())),
                },
                Ok(Err(e)) => Err(e),
                Err(p) => Err(panicked(step, &*p)),
            };
            let _ = done.send((i, res));
        }));
        if sent {
            Ok(())
        } else {
            Err(ExecError::Internal(format!(
                "the worker for {} stopped",
                step.device
            )))
        }
    }

    fn read_outputs(
        &self,
        t: &mut [Option<Arc<Buf>>],
        outputs: &mut Vec<Tensor>,
    ) -> Result<(), ExecError> {
        outputs.truncate(self.plan.outputs.len());
        for (k, &o) in self.plan.outputs.iter().enumerate() {
            let step = &self.plan.steps[o];
            // A host buffer over shared bytes becomes the tensor as it is.
            if self.sole[o] {
                if let Some(b) = t[o].take() {
                    match Arc::try_unwrap(b) {
                        Ok(Buf::Cpu(cb)) => match cb.into_shared() {
                            Ok(bytes) => {
                                put(
                                    outputs,
                                    k,
                                    Tensor::from_bytes(step.ty.clone(), bytes)
                                        .map_err(ExecError::Internal)?,
                                );
                                continue;
                            }
                            Err(cb) => t[o] = Some(Arc::new(Buf::Cpu(cb))),
                        },
                        Ok(other) => t[o] = Some(Arc::new(other)),
                        Err(shared) => t[o] = Some(shared),
                    }
                }
            }
            let buf = t[o]
                .as_ref()
                .ok_or_else(|| ExecError::Internal(format!("output slot {o} is empty")))?;
            let reuse = outputs.get_mut(k).and_then(|t| t.bytes_mut_for(&step.ty));
            match reuse {
                Some(dst) => buf.download_into(dst)?,
                None => {
                    let mut bytes: Arc<[u8]> =
                        std::iter::repeat_n(0u8, step.ty.size_bytes()).collect();
                    let dst = Arc::get_mut(&mut bytes)
                        .ok_or_else(|| ExecError::Internal("a fresh buffer is shared".into()))?;
                    buf.download_into(dst)?;
                    let t =
                        Tensor::from_bytes(step.ty.clone(), bytes).map_err(ExecError::Internal)?;
                    if k < outputs.len() {
                        outputs[k] = t;
                    } else {
                        outputs.push(t);
                    }
                }
            }
        }
        Ok(())
    }
}

/// A [`Work::Share`] or [`Work::Defer`] step: the source's buffer itself,
/// after the fault point a real copy would pass.
fn share(step: &Step, ins: &[Arc<Buf>], faults: &Faults) -> Result<Arc<Buf>, ExecError> {
    if faults.check(fault::Event::Copy) {
        return Err(ExecError::Injected {
            device: step.device,
            op: "copy".into(),
        });
    }
    // A shared copy's source is a host buffer; a deferred one's is on the
    // other side of the host/GPU line from the step's device.
    let host_source = matches!(step.work, Work::Share { .. }) || !step.device.is_cpu();
    match ins.first() {
        Some(b) if matches!(**b, Buf::Cpu(_)) == host_source => Ok(b.clone()),
        _ => Err(ExecError::Internal(format!(
            "`{}` on {}: a shared copy's source is on the wrong kind of device",
            step.mnemonic, step.device
        ))),
    }
}

/// Sets output `k` (outputs are filled in order, so `k <= outputs.len()`).
fn put(outputs: &mut Vec<Tensor>, k: usize, t: Tensor) {
    if k < outputs.len() {
        outputs[k] = t;
    } else {
        outputs.push(t);
    }
}

fn panicked(step: &Step, p: &(dyn std::any::Any + Send)) -> ExecError {
    ExecError::Internal(format!(
        "`{}` on {} panicked: {}",
        step.mnemonic,
        step.device,
        p.downcast_ref::<String>()
            .cloned()
            .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_default()
    ))
}

impl Drop for Executable {
    fn drop(&mut self) {
        // Join the workers before the devices go.
        self.workers.clear();
    }
}

/// Runs one `comm.*` step through the communicator registered as `comm` on
/// this thread: the operand's bytes go in, this rank's result comes back into
/// a buffer of the step's device.
fn run_comm(
    plan: &Schedule,
    step: &Step,
    op: crate::op::CommOp,
    comm: u32,
    ctx: &Ctx,
    ins: &[Arc<Buf>],
    faults: &Faults,
) -> Result<Buf, ExecError> {
    let refuse = |reason: String| ExecError::DriverCollective {
        op: step.mnemonic.clone(),
        device: step.device,
        reason,
    };
    let handler = comm::lookup(comm).ok_or_else(|| {
        refuse(format!(
            "no communicator {comm} is registered on this thread; run each rank's graph on the thread that owns its communicator"
        ))
    })?;
    let (Some(Buf::Cpu(src)), Some(&slot)) = (ins.first().map(|b| &**b), step.operands.first())
    else {
        return Err(ExecError::Internal(
            "an SPMD collective without a host operand".into(),
        ));
    };
    let in_ty = plan
        .steps
        .get(slot)
        .map(|s| s.ty.clone())
        .ok_or_else(|| ExecError::Internal("operand step missing".into()))?;
    let input = Tensor::from_bytes(in_ty, src.bytes().to_vec()).map_err(ExecError::Internal)?;
    let out = handler.run(&op, &input, &step.ty).map_err(refuse)?;
    let mut buf = ctx.alloc(out.bytes().len(), faults)?;
    match &mut buf {
        Buf::Cpu(d) => d.bytes_mut().copy_from_slice(out.bytes()),
        _ => {
            return Err(ExecError::Internal(
                "an SPMD collective off the host".into(),
            ))
        }
    }
    Ok(buf)
}
