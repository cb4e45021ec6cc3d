//! The inline runner: an executable whose devices are all host arenas runs
//! its steps in schedule order on the caller's thread. The arenas share the
//! host's cores, so worker threads would buy no overlap, only a thread
//! handoff per step, and the kernels of large steps use every core anyway.
//! A graph with a large fold, and no collective that waits on other
//! ranks, runs as one task on the kernels' pool instead, so its folds and
//! copies split over the cores without a handoff each.

use super::step::{execute, operands, StepData};
use super::{ExecError, Executable, Scratch};
use crate::backend::fault::Faults;
use fuel_graph_ext::plan::schedule::Work;
use std::sync::Arc;

impl Executable {
    /// Runs every step in schedule order (host arenas only), freeing each
    /// buffer after its last read as the worker runner does: on this
    /// thread, or, for a graph with steps large enough to split
    /// ([`Executable::inline_on_pool`]), as one task on the kernels' own
    /// pool, so that every split costs no handoff of its own.
    pub(super) fn run_inline(
        &self,
        s: &mut Scratch,
        data: Vec<Option<Arc<[u8]>>>,
        faults: &Faults,
    ) -> Result<(), ExecError> {
        if self.inline_on_pool {
            crate::backend::cpu::on_kernel_threads(|| self.run_inline_here(s, data, faults))
        } else {
            self.run_inline_here(s, data, faults)
        }
    }

    fn run_inline_here(
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
            if let Work::Island { island, .. } = step.work {
                // The island's first step runs it and fills every member's
                // slot; the others only count their reads.
                if s.table[i].is_none() {
                    operands(step, &s.table, &mut s.ins)?;
                    let results = self.run_island(island, &s.ins, &mut s.reuse, faults);
                    s.ins.clear();
                    for (m, buf) in results? {
                        s.table[m] = Some(buf);
                    }
                }
                self.release_operands(i, &mut s.reads_left, &mut s.table);
                continue;
            }
            let ctx = self.ctx(step.device)?;
            let onto = self.fold_onto_donor(i, s);
            operands(step, &s.table, &mut s.ins)?;
            let reuse = match onto {
                // Operand 0's buffer becomes the result: the run lets go
                // of it (this was its last read) and the fold continues on
                // its bytes with the operands after it.
                Some(o) => {
                    s.ins.remove(0);
                    s.table[o] = None;
                    s.donor[i].take()
                }
                None => s.take_reuse(i, step.ty.size_bytes()),
            };
            let step_data = StepData {
                input: data[i].take(),
                reuse,
                onto: onto.is_some(),
            };
            let res = execute(plan, &self.comms, i, ctx, &s.ins, step_data, faults);
            s.ins.clear();
            s.table[i] = Some(res?);
            self.release_operands(i, &mut s.reads_left, &mut s.table);
        }
        Ok(())
    }
}
