//! SPMD collectives inside a compiled graph: the executor's side of `comm.*`.
//!
//! In the SPMD shape every rank (a thread or a process) builds and runs its
//! own graph, and a `comm.<collective>` node meets the other ranks. The
//! executor does not know how to meet them; a communicator does. A
//! communicator registers itself here as a [`CommHandler`] under an id that
//! its nodes carry (`{comm=ID}`), and the executor calls it when it reaches
//! such a node. Registrations are per thread: a rank's executable runs its
//! steps on the rank's own thread (graphs with `comm.*` nodes must be on CPU
//! devices only, which the executor runs inline), so a handler needs neither
//! `Send` nor `Sync` — which NCCL's handles and a single-threaded MPI would
//! not give — and each rank thread finds its own communicator.

use crate::backend::fault::Faults;
use crate::backend::{Buf, Ctx};
use crate::dtype::TensorType;
use crate::exec::tensor::Tensor;
use crate::exec::ExecError;
use crate::op::CommOp;
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::{Rc, Weak};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

/// What the executor calls for a `comm.*` node.
pub trait CommHandler {
    /// How many ranks meet.
    fn world_size(&self) -> usize;
    /// Runs one collective on this rank's operand and returns this rank's
    /// result, of type `out`.
    fn run(&self, op: &CommOp, input: &Tensor, out: &TensorType) -> Result<Tensor, String>;
}

static NEXT_ID: AtomicU32 = AtomicU32::new(1);

thread_local! {
    static HANDLERS: RefCell<BTreeMap<u32, Weak<dyn CommHandler>>> = const { RefCell::new(BTreeMap::new()) };
}

/// Registers `h` for this thread and returns the id its nodes carry. The
/// registration lasts while `h` is alive.
pub fn register(h: &Rc<dyn CommHandler>) -> u32 {
    let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
    HANDLERS.with(|m| {
        let mut m = m.borrow_mut();
        m.retain(|_, w| w.strong_count() > 0);
        m.insert(id, Rc::downgrade(h));
    });
    id
}

/// The handler registered as `id` on this thread, if it is still alive.
pub fn lookup(id: u32) -> Option<Rc<dyn CommHandler>> {
    HANDLERS.with(|m| m.borrow().get(&id).and_then(Weak::upgrade))
}

/// Runs one `comm.*` step through the communicator registered as `comm` on
/// this thread: the operand's bytes go in, this rank's result comes back into
/// a buffer of the step's device.
pub(super) fn run(
    plan: &super::schedule::Schedule,
    step: &super::schedule::Step,
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
    let handler = lookup(comm).ok_or_else(|| {
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
        #[allow(unreachable_patterns)] // with every GPU backend compiled out
        _ => {
            return Err(ExecError::Internal(
                "an SPMD collective off the host".into(),
            ))
        }
    }
    Ok(buf)
}
