//! The per-step protocol both runners share: gather a step's operands from
//! the buffer table, run it (the runner's own work, or device work through
//! [`crate::backend::run`]) with panics turned into errors, free every
//! buffer after its last read, and read the outputs back (by rules fixed
//! at compile time: [`OutputRules`]).

use super::{spmd, CommTable, ExecError, Executable, Tensor};
use crate::backend::fault::{Event, Faults};
use crate::backend::{self, Buf, Ctx, DeviceCall};
use fuel_graph_ext::plan::schedule::{Schedule, Step, Work};
use fuel_graph_ext::plan::{DeviceWork, ReadOut};
use std::sync::Arc;

/// How a compiled graph's outputs reach the caller, read off its plan
/// once (the plan's [`ReadOut`](fuel_graph_ext::plan::ReadOut) rule, which
/// the cost model prices too); [`Executable`]'s fields of the same names.
pub(super) struct OutputRules {
    pub keep: Vec<bool>,
    pub sole: Vec<bool>,
    pub same_as: Vec<Option<usize>>,
    pub lent: Vec<bool>,
    pub writes_into: Vec<Option<usize>>,
}

impl OutputRules {
    pub(super) fn of(plan: &Schedule) -> OutputRules {
        let returned = plan.returned_counts();
        let keep = returned.iter().map(|&r| r > 0).collect();
        // A shared copy owns no bytes: its source's slot is the one that
        // may be written into the caller's bytes or become the tensor.
        let sole: Vec<bool> = returned
            .iter()
            .zip(&plan.steps)
            .map(|(&r, st)| r == 1 && !matches!(st.work, Work::Share { .. }))
            .collect();
        let lent = plan.lent_to_imports();
        let reads = plan.read_outs(&lent);
        let same_as = reads
            .iter()
            .map(|r| match r {
                ReadOut::CloneOf(j) => Some(*j),
                _ => None,
            })
            .collect();
        // Output `k` read in place is written into the caller's previous
        // tensor by the slot its bytes come from through shared copies
        // (the plan's rule: a host step's buffer that no import views, and
        // `k` is the first output to hold it; later ones are its clones).
        let writes_into = plan
            .outputs
            .iter()
            .zip(&reads)
            .map(|(&o, read)| {
                let r = plan.share_root(o);
                let writes = !matches!(
                    plan.steps[r].work,
                    Work::Device(DeviceWork::Input { .. }) | Work::View { .. }
                );
                (*read == ReadOut::InPlace && writes && plan.steps[r].device.is_cpu()).then_some(r)
            })
            .collect();
        OutputRules {
            keep,
            sole,
            same_as,
            lent,
            writes_into,
        }
    }
}

/// Step `i`'s operands, in operand order, from the buffer table.
pub(super) fn operands(
    step: &Step,
    table: &[Option<Arc<Buf>>],
    out: &mut Vec<Arc<Buf>>,
) -> Result<(), ExecError> {
    out.clear();
    for &o in &step.operands {
        let b = table
            .get(o)
            .and_then(Clone::clone)
            .ok_or_else(|| ExecError::Internal(format!("operand slot {o} is empty")))?;
        out.push(b);
    }
    Ok(())
}

/// What a step needs besides its operands: the caller's input tensor and the
/// output bytes its result may be written into.
#[derive(Default)]
pub(super) struct StepData {
    pub input: Option<Arc<[u8]>>,
    pub reuse: Option<Arc<[u8]>>,
    /// The step folds onto `reuse`, which holds operand 0's values, and
    /// its operands are the ones after the first (`donate.rs`).
    pub onto: bool,
}

/// Runs step `i` of `plan` on `ctx` and returns the buffer its slot holds.
/// A panic inside the backend becomes an internal error naming the step.
pub(super) fn execute(
    plan: &Schedule,
    comms: &CommTable,
    i: usize,
    ctx: &Ctx,
    ins: &[Arc<Buf>],
    data: StepData,
    faults: &Faults,
) -> Result<Arc<Buf>, ExecError> {
    let step = plan
        .steps
        .get(i)
        .ok_or_else(|| ExecError::Internal(format!("no step {i}")))?;
    // `FUEL_LOG=fuel_runtime::exec=trace`: every step's time, to read
    // beside the cost model's estimate of it.
    let started = tracing::enabled!(tracing::Level::TRACE).then(std::time::Instant::now);
    let res = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| match &step.work {
        Work::Share { .. } | Work::Defer { .. } => share(step, ins, faults),
        Work::Import { .. } => {
            let src = ins
                .first()
                .ok_or_else(|| ExecError::Internal("an import without a source".into()))?;
            backend::import_host(ctx, src, step.ty.size_bytes(), faults).map(Arc::new)
        }
        Work::View { offset, host_only } => {
            if faults.check(Event::Kernel) {
                return Err(ExecError::Injected {
                    device: step.device,
                    op: step.mnemonic.clone(),
                });
            }
            let src = ins
                .first()
                .ok_or_else(|| ExecError::Internal("a view without a source".into()))?;
            backend::view(src, *offset, step.ty.size_bytes(), *host_only).map(Arc::new)
        }
        Work::Device(work) => backend::run(
            ctx,
            DeviceCall {
                work,
                ty: &step.ty,
                op: &step.mnemonic,
                ins,
                input: data.input.as_ref(),
                reuse: data.reuse,
                onto: data.onto,
            },
            faults,
        )
        .map(Arc::new),
        Work::Comm { .. } => {
            spmd::run(plan, step, comms, ctx, ins, data.reuse, faults).map(Arc::new)
        }
        Work::Island { .. } => Err(ExecError::Internal(
            "a driver all-reduce runs for its whole island, not step by step".into(),
        )),
    }));
    if let Some(t) = started {
        tracing::trace!(
            step = i,
            node = step.node.0.index(),
            op = %step.mnemonic,
            device = %step.device,
            bytes = step.ty.size_bytes(),
            work = work_name(&step.work),
            us = t.elapsed().as_secs_f64() * 1e6,
            "step"
        );
    }
    match res {
        Ok(r) => r,
        Err(p) => Err(panicked(step, &*p)),
    }
}

/// How a step's [`Work`] is carried out, in a word, for the step trace.
fn work_name(w: &Work) -> &'static str {
    match w {
        Work::Device(_) => "device",
        Work::Share { .. } => "share",
        Work::Defer { .. } => "defer",
        Work::Import { .. } => "import",
        Work::View { .. } => "view",
        Work::Comm { .. } => "comm",
        Work::Island { .. } => "island",
    }
}

/// A [`Work::Share`] or [`Work::Defer`] step: the source's buffer itself,
/// after the fault point a real copy would pass.
fn share(step: &Step, ins: &[Arc<Buf>], faults: &Faults) -> Result<Arc<Buf>, ExecError> {
    if faults.check(Event::Copy) {
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

fn panicked(step: &Step, p: &(dyn std::any::Any + Send)) -> ExecError {
    ExecError::Internal(format!(
        "`{}` on {} panicked: {}",
        step.mnemonic,
        step.device,
        panic_text(p)
    ))
}

/// A panic's message, when it has one.
pub(crate) fn panic_text(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<String>()
        .cloned()
        .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default()
}

impl Executable {
    /// After step `i` finished: drops every slot whose last read that was,
    /// and `i`'s own when nothing reads it and it is not an output. A buffer
    /// that a shared copy also holds lives on in that slot.
    pub(super) fn release_operands(
        &self,
        i: usize,
        reads_left: &mut [usize],
        table: &mut [Option<Arc<Buf>>],
    ) {
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

    /// Moves the outputs out of the table into `outputs` (in return order):
    /// a host output that holds the same buffer as an earlier one (a shared
    /// copy of it, or the same value returned twice) becomes a clone of that
    /// tensor; a host buffer over shared bytes becomes its tensor as it is;
    /// any other is downloaded into the caller's tensor when it has the
    /// right type and nobody shares its bytes, else into a new one.
    pub(super) fn read_outputs(
        &self,
        t: &mut [Option<Arc<Buf>>],
        outputs: &mut Vec<Tensor>,
    ) -> Result<(), ExecError> {
        outputs.truncate(self.plan.outputs.len());
        for (k, &o) in self.plan.outputs.iter().enumerate() {
            let step = &self.plan.steps[o];
            if let Some(j) = self.same_as[k] {
                let oj = self.plan.outputs[j];
                // One buffer, or a GPU's import of the other's host buffer
                // (the plan's `ReadOut::CloneOf`; an import that fell back
                // to a copy at run time is read back as usual).
                let same = match (&t[o], &t[oj]) {
                    (Some(a), Some(b)) => same_bytes(a, b),
                    // The earlier output's slot became its tensor (the
                    // caller's bytes, uncopied): compare with those.
                    (Some(a), None) => outputs.get(j).is_some_and(|tj| {
                        caller_bytes(a).is_some_and(|x| Arc::ptr_eq(x, &tj.shared()))
                    }),
                    _ => false,
                };
                if same && j < outputs.len() {
                    let tensor = outputs[j].clone();
                    put(outputs, k, tensor);
                    continue;
                }
            }
            if self.sole[o] {
                if let Some(b) = t[o].take() {
                    match Arc::try_unwrap(b) {
                        Ok(Buf::Cpu(cb)) => match cb.into_shared() {
                            Ok(bytes) => {
                                let tensor = Tensor::from_bytes(step.ty.clone(), bytes)
                                    .map_err(ExecError::Internal)?;
                                put(outputs, k, tensor);
                                continue;
                            }
                            Err(cb) => t[o] = Some(Arc::new(Buf::Cpu(cb))),
                        },
                        #[allow(unreachable_patterns)] // with every GPU backend compiled out
                        Ok(other) => t[o] = Some(Arc::new(other)),
                        Err(shared) => t[o] = Some(shared),
                    }
                }
            }
            let buf = t[o]
                .as_ref()
                .ok_or_else(|| ExecError::Internal(format!("output slot {o} is empty")))?;
            // The caller's bytes (an input, read in place on a Vulkan
            // device too, or output bytes written in place) that other
            // slots may still share: the run is over and
            // nothing writes them again, so they become the tensor as they
            // are, and copy-on-write keeps each holder's values its own.
            if let Some(bytes) = caller_bytes(buf).filter(|b| b.len() == step.ty.size_bytes()) {
                let tensor = Tensor::from_bytes(step.ty.clone(), bytes.clone())
                    .map_err(ExecError::Internal)?;
                put(outputs, k, tensor);
                continue;
            }
            match outputs.get_mut(k).and_then(|t| t.bytes_mut_for(&step.ty)) {
                Some(dst) => buf.download_into(dst)?,
                None => {
                    let mut bytes = host_bytes(step.ty.size_bytes(), step.device)?;
                    let dst = Arc::get_mut(&mut bytes)
                        .ok_or_else(|| ExecError::Internal("a fresh buffer is shared".into()))?;
                    buf.download_into(dst)?;
                    let tensor =
                        Tensor::from_bytes(step.ty.clone(), bytes).map_err(ExecError::Internal)?;
                    put(outputs, k, tensor);
                }
            }
        }
        Ok(())
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

/// `n` zeroed host bytes for an output read back from `device`. An
/// `Arc<[u8]>` cannot be reserved fallibly, so room for it is checked
/// first with a reservation that is released at once: a size the host
/// cannot hold is an error, not an abort.
fn host_bytes(n: usize, device: fuel_graph_ext::device::Device) -> Result<Arc<[u8]>, ExecError> {
    let mut probe: Vec<u8> = Vec::new();
    probe
        .try_reserve_exact(n)
        .map_err(|e| ExecError::OutOfMemory {
            device,
            bytes: n,
            reason: format!("the host cannot hold the output read back: {e}"),
        })?;
    drop(probe);
    Ok(std::iter::repeat_n(0u8, n).collect())
}

/// Whether two output slots hold the same bytes, so that they come back
/// as one tensor and its clone: one buffer, a GPU's import of the other's
/// host buffer, or the caller's bytes that a host slot holds and a GPU
/// reads where they lie (a broadcast's root input imported by lavapipe).
fn same_bytes(a: &Arc<Buf>, b: &Arc<Buf>) -> bool {
    Arc::ptr_eq(bytes_owner(a), bytes_owner(b))
        || matches!((caller_bytes(a), caller_bytes(b)), (Some(x), Some(y)) if Arc::ptr_eq(x, y))
}

/// The caller's bytes `b` holds as they are: a host buffer over them, or a
/// GPU buffer that reads them in place.
fn caller_bytes(b: &Buf) -> Option<&Arc<[u8]>> {
    match b {
        Buf::Cpu(c) => c.shared_bytes(),
        #[cfg(feature = "vulkan")]
        Buf::Vulkan(v) => v.caller_bytes(),
        #[allow(unreachable_patterns)] // with every GPU backend compiled out
        _ => None,
    }
}

/// The buffer whose bytes `b` holds: the host buffer a GPU's import views
/// whole, else `b` itself.
fn bytes_owner(b: &Arc<Buf>) -> &Arc<Buf> {
    match &**b {
        #[cfg(feature = "vulkan")]
        Buf::Vulkan(v) => v.host_viewed().unwrap_or(b),
        _ => b,
    }
}
