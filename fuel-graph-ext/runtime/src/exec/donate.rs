//! Inputs handed over to a run, to become its outputs: what an in-place
//! collective needs (`DeviceGroup::all_reduce_now` writes every rank's
//! result over its shard, as `torch.distributed.all_reduce(t)` does).
//!
//! [`Executable::run_donating`] takes the caller's input tensors by
//! `&mut`, drops the caller's share of the named inputs' bytes, and offers
//! each to one output on a host arena. The output's step writes into those
//! bytes only if, when it runs, the run holds them alone: every step that
//! read the input (through shared copies and views too) has finished and
//! freed it. That is decided by the reference count at that moment, so it
//! is never unsound, whatever the plan: where the input is still being
//! read (a star root's fold reads its own shard while it writes the
//! result), the output is written into the caller's previous output bytes
//! or new ones, and the input's bytes go back to the caller's map
//! untouched. Only the inline runner (every device a host arena) takes the
//! offers; the threaded runner hands every input back.

use super::{ExecError, Executable, Scratch};
use fuel_graph_ext::plan::Kernel;
use fuel_graph_ext::Tensor;
use std::collections::BTreeMap;
use std::sync::Arc;

impl Executable {
    /// [`run_into`](Self::run_into), with inputs handed over: output `k`
    /// may be written into the bytes of input `donate[k]` (a name of
    /// `inputs`, of the output's type, on the same host arena) once
    /// nothing reads that input any more. After the run, `inputs[name]`
    /// holds its bytes again where no output took them, and is an empty
    /// tensor (of its type, no bytes) where one did; the output tensor
    /// then holds them. An input whose bytes the caller also shares
    /// through a clone is never written. On an error every input not
    /// written yet is back in `inputs`, and one already written into is
    /// empty: its values were being replaced by the result.
    pub fn run_donating(
        &self,
        inputs: &mut BTreeMap<String, Tensor>,
        donate: &[Option<String>],
        outputs: &mut Vec<Tensor>,
    ) -> Result<(), ExecError> {
        self.with_scratch(|s| {
            self.input_data(inputs).and_then(|data| {
                self.hand_over(inputs, donate, &data, s);
                let result = self.run_data(data, outputs, s);
                self.hand_back(inputs, donate, s);
                result
            })
        })
    }

    /// Offers input `donate[k]`'s bytes to output `k`'s slot for each
    /// output on a host arena that is returned once and lent to no import,
    /// dropping the caller's share of them; records (k, output slot) for
    /// each offer in `s.handed`.
    fn hand_over(
        &self,
        inputs: &mut BTreeMap<String, Tensor>,
        donate: &[Option<String>],
        data: &[Option<Arc<[u8]>>],
        s: &mut Scratch,
    ) {
        let plan = &self.plan;
        s.donor.clear();
        s.donor.resize_with(plan.steps.len(), || None);
        s.unused.clear();
        s.handed.clear();
        for (k, (&o, name)) in plan.outputs.iter().zip(donate).enumerate() {
            let Some(name) = name else { continue };
            let step = &plan.steps[o];
            if !(self.sole[o] && step.device.is_cpu() && !self.lent[o]) || s.donor[o].is_some() {
                continue;
            }
            if s.handed
                .iter()
                .any(|&(j, _)| donate[j].as_ref() == Some(name))
            {
                continue;
            }
            let slot = self.input_slots.get(name).copied().filter(|&i| {
                plan.steps
                    .get(i)
                    .is_some_and(|st| st.device == step.device && st.ty == step.ty)
            });
            let (Some(i), Some(t)) = (slot, inputs.get_mut(name)) else {
                continue;
            };
            let Some(bytes) = data[i].clone() else {
                continue;
            };
            *t = Tensor::unfilled(t.ty().clone());
            s.donor[o] = Some(bytes);
            s.handed.push((k, o));
        }
    }

    /// Puts the handed-over bytes that no output took back into `inputs`.
    fn hand_back(
        &self,
        inputs: &mut BTreeMap<String, Tensor>,
        donate: &[Option<String>],
        s: &mut Scratch,
    ) {
        for (o, d) in s.donor.iter_mut().enumerate() {
            if let Some(d) = d.take() {
                s.unused.push((o, d));
            }
        }
        for (o, bytes) in s.unused.drain(..) {
            let k = s
                .handed
                .iter()
                .find(|&&(_, slot)| slot == o)
                .map(|&(k, _)| k);
            let name = k.and_then(|k| donate.get(k)).and_then(Option::as_ref);
            if let Some(t) = name.and_then(|n| inputs.get_mut(n)) {
                if let Ok(filled) = Tensor::from_bytes(t.ty().clone(), bytes) {
                    *t = filled;
                }
            }
        }
    }
}

impl Executable {
    /// Operand 0's slot, where step `i` can fold onto the bytes handed
    /// over for its result: the step is a fold, every operand lies on a
    /// host arena, the handed-over bytes are operand 0's buffer itself,
    /// and this is that buffer's last read (no output, read once here,
    /// held by no other slot). The runner then lets go of the slot and the
    /// fold continues on those bytes (`backend::fold_onto`): a star root's
    /// result lands in its own shard, as the other ranks' do.
    pub(super) fn fold_onto_donor(&self, i: usize, s: &Scratch) -> Option<usize> {
        let step = &self.plan.steps[i];
        if !step.work.kernel().is_some_and(Kernel::is_fold) {
            return None;
        }
        let d = s.donor.get(i)?.as_ref()?;
        let (&o, rest) = step.operands.split_first()?;
        if s.reads_left.get(o) != Some(&1) || self.keep[o] || rest.contains(&o) {
            return None;
        }
        let on_host = |x: &usize| {
            s.table
                .get(*x)
                .and_then(Option::as_ref)
                .is_some_and(|b| b.as_cpu().is_some())
        };
        let buf = s.table.get(o)?.as_ref()?;
        let held = buf.as_cpu()?.bytes();
        let alone = Arc::strong_count(buf) == 1
            && held.as_ptr() == d.as_ptr()
            && held.len() == d.len()
            && Arc::strong_count(d) == 2
            && Arc::weak_count(d) == 0;
        (alone && step.operands.iter().all(on_host)).then_some(o)
    }
}

impl Scratch {
    /// The bytes step `i` writes its result into: the input handed over
    /// for it if the run now holds those alone (and they fit), else the
    /// caller's previous output bytes, if any. Handed-over bytes it cannot
    /// take are kept for the caller.
    pub(super) fn take_reuse(&mut self, i: usize, bytes: usize) -> Option<Arc<[u8]>> {
        match self.donor.get_mut(i).and_then(Option::take) {
            Some(d)
                if d.len() == bytes
                    && crate::backend::cpu::aligned(&d)
                    && Arc::strong_count(&d) == 1
                    && Arc::weak_count(&d) == 0 =>
            {
                Some(d)
            }
            Some(d) => {
                self.unused.push((i, d));
                self.reuse.get_mut(i).and_then(Option::take)
            }
            None => self.reuse.get_mut(i).and_then(Option::take),
        }
    }
}
