//! How the runner hands each graph output back, decided from the plan
//! alone so that the runtime and the cost model read one rule.
//!
//! A host output is free when the caller already holds its bytes: it was
//! written into the caller's tensor, or it is a chain of shared host
//! copies ([`Work::Share`]) of a caller's input or of such an output. It
//! is one memcpy when its buffer must stay the arena's (imported into a
//! Vulkan device, a view of another buffer, or a shared copy of a buffer
//! the arena made). Host outputs that hold one buffer (a star's result on
//! `cpu:0` and its shared copies on `cpu:1..3`, or one value returned
//! twice) come back as tensors over one set of bytes: every one after the
//! first is a clone of the first, which is safe because a `Tensor`'s bytes
//! are copy-on-write. A caller's input that a Vulkan device reads where it
//! lies and that comes back unchanged is the caller's tensor, as a host
//! input is. An output on a GPU that holds a host buffer, because
//! nothing but the caller reads it ([`Schedule::share_returned_imports`]:
//! a star's result on `cpu:0` returned on `vulkan:0` and `vulkan:1`), is
//! one of these host outputs. Any other output on a GPU is read back,
//! unless it imports a host buffer that an earlier output holds too: then
//! it is a clone of that output, and the bytes are read back once.

use super::schedule::{Schedule, Work};
use super::work::DeviceWork;
use std::collections::HashMap;

/// How output `k` (return order) comes back to the caller.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReadOut {
    /// A clone of output `j`'s tensor (an earlier output on a host arena
    /// that holds the same buffer): no bytes move.
    CloneOf(usize),
    /// A host output whose bytes the caller already holds: no bytes move.
    InPlace,
    /// A host output copied out of the arena's buffer after the run.
    CopiedOut,
    /// An output on a GPU, downloaded after the run.
    Download,
}

impl Schedule {
    /// The slot whose buffer slot `i` holds through shared host copies:
    /// `i` itself unless it is a [`Work::Share`].
    pub fn share_root(&self, i: usize) -> usize {
        self.share_chain(i).last().unwrap_or(i)
    }

    /// How often each slot is returned, by slot (a graph may return one
    /// value many times; counting once keeps the callers linear).
    pub fn returned_counts(&self) -> Vec<usize> {
        let mut returned = vec![0usize; self.steps.len()];
        for &o in &self.outputs {
            if let Some(r) = returned.get_mut(o) {
                *r += 1;
            }
        }
        returned
    }

    /// How each output comes back, in return order ([`ReadOut`]); `lent`
    /// is [`Schedule::lent_to_imports`].
    pub fn read_outs(&self, lent: &[bool]) -> Vec<ReadOut> {
        let mut first: HashMap<usize, usize> = HashMap::new();
        let kept = |i: usize| lent.get(i).copied().unwrap_or(false);
        let mut reads = Vec::with_capacity(self.outputs.len());
        for (k, &o) in self.outputs.iter().enumerate() {
            let Some(step) = self.steps.get(o) else {
                reads.push(ReadOut::CopiedOut);
                continue;
            };
            // The buffer whose bytes the output holds: a host output's
            // through shared copies, and a GPU's import's host buffer (a
            // GPU's other outputs hold bytes of their own).
            // Host bytes: a host arena's, a GPU's share of one, or a
            // caller's input that a GPU reads where it lies.
            let host_bytes = step.device.is_cpu()
                || matches!(
                    step.work,
                    Work::Share { .. } | Work::Device(DeviceWork::Input { in_place: true, .. })
                );
            let root = match (&step.work, step.operands.first()) {
                _ if host_bytes => Some(self.share_root(o)),
                (Work::Import { .. }, Some(&src)) => Some(self.share_root(src)),
                _ => None,
            };
            let Some(root) = root else {
                reads.push(ReadOut::Download);
                continue;
            };
            // Outputs that hold one buffer come back as clones of the first,
            // read back once between them.
            let j = *first.entry(root).or_insert(k);
            let same_type = self.steps[self.outputs[j]].ty == step.ty;
            if j != k && same_type {
                reads.push(ReadOut::CloneOf(j));
                continue;
            }
            if !host_bytes {
                reads.push(ReadOut::Download);
                continue;
            }
            let root_step = &self.steps[root];
            let caller_holds = match &root_step.work {
                // A host input, or one a GPU reads in place, is read
                // where the caller's tensor lies.
                Work::Device(DeviceWork::Input { in_place, .. }) => {
                    root_step.device.is_cpu() || *in_place
                }
                Work::View { .. } => false,
                // The root is written into the first holder's tensor
                // when no import views it (every later holder is a clone).
                _ => !kept(root),
            };
            reads.push(if caller_holds {
                ReadOut::InPlace
            } else {
                ReadOut::CopiedOut
            });
        }
        reads
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::text;

    fn reads(src: &str) -> Vec<ReadOut> {
        let plan = Schedule::new(&text::parse(src).unwrap()).unwrap();
        plan.read_outs(&plan.lent_to_imports())
    }

    /// Outputs read back when the devices' capabilities are assumed
    /// (Vulkan imports host buffers).
    fn reads_assumed(src: &str) -> Vec<ReadOut> {
        use crate::plan::{Caps, Options};
        let g = text::parse(src).unwrap();
        let options = Options::default();
        let mut plan = Schedule::new_with(&g, &options).unwrap();
        let topo = crate::Topology::default();
        plan.fit_to_devices(&options, |d| Caps::assumed(d, &topo));
        plan.read_outs(&plan.lent_to_imports())
    }

    #[test]
    fn gpu_shares_of_a_returned_host_buffer_are_its_clones() {
        // A star's result on cpu:0, returned on two Vulkan devices that
        // read it no further: each shares the host buffer, which is
        // written into the first output's tensor, whichever comes first.
        let src = "graph @g {\n  %0 = input \"a\" @vulkan:0 : f32[1024]\n  %1 = input \"b\" @vulkan:1 : f32[1024]\n  %2 = input \"c\" @cpu:0 : f32[1024]\n  %3 = copy %0 -> cpu:0 : f32[1024]\n  %4 = copy %1 -> cpu:0 : f32[1024]\n  %5 = add %3, %4, %2 @cpu:0 : f32[1024]\n  %6 = copy %5 -> vulkan:0 : f32[1024]\n  %7 = copy %5 -> vulkan:1 : f32[1024]\n  return %6, %7, %5\n}\n";
        let shared = [ReadOut::InPlace, ReadOut::CloneOf(0), ReadOut::CloneOf(0)];
        assert_eq!(reads_assumed(src), shared);
        let host_first = src.replace("return %6, %7, %5", "return %5, %6, %7");
        assert_eq!(reads_assumed(&host_first), shared);
        // Read by a kernel on vulkan:0 as well, %6 is an import: the host
        // buffer stays the arena's, read back once by the first output.
        let read = src.replace(
            "  return %6, %7, %5",
            "  %8 = mul %6, %6 @vulkan:0 : f32[1024]\n  return %6, %7, %5, %8",
        );
        assert_eq!(
            reads_assumed(&read),
            [
                ReadOut::Download,
                ReadOut::CloneOf(0),
                ReadOut::CloneOf(0),
                ReadOut::Download
            ]
        );
        let host_first = read.replace("return %6, %7, %5", "return %5, %6, %7");
        assert_eq!(
            reads_assumed(&host_first)[..3],
            [ReadOut::CopiedOut, ReadOut::CloneOf(0), ReadOut::CloneOf(0)]
        );
        // Without imports (copies to the GPUs), each is read back.
        let plan = Schedule::new(&text::parse(src).unwrap()).unwrap();
        assert_eq!(
            plan.read_outs(&plan.lent_to_imports()),
            [ReadOut::Download, ReadOut::Download, ReadOut::InPlace]
        );
    }

    #[test]
    fn a_vulkan_input_read_in_place_comes_back_as_the_callers_tensor() {
        // Returned as it is, on a Vulkan device that reads callers' bytes
        // in place: the caller holds them already. Under a page it is
        // uploaded, and read back.
        let src = "graph @g {\n  %0 = input \"a\" @vulkan:0 : f32[1024]\n  %1 = input \"b\" @vulkan:0 : f32[16]\n  return %0, %1\n}\n";
        use crate::plan::{Caps, Options};
        let g = text::parse(src).unwrap();
        let options = Options::default();
        let mut plan = Schedule::new_with(&g, &options).unwrap();
        let mut topo = crate::Topology::default();
        topo.host_memory.insert(crate::DeviceKind::Vulkan);
        plan.fit_to_devices(&options, |d| Caps::assumed(d, &topo));
        assert_eq!(
            plan.read_outs(&plan.lent_to_imports()),
            [ReadOut::InPlace, ReadOut::Download]
        );
        // Where Vulkan memory is not the host's, both are read back.
        assert_eq!(reads_assumed(src), [ReadOut::Download, ReadOut::Download]);
    }

    #[test]
    fn a_star_s_shared_results_are_clones_of_the_root_s() {
        let src = "graph @g {\n  %0 = input \"a\" @cpu:0 : f32[4]\n  %1 = input \"b\" @cpu:1 : f32[4]\n  %2 = copy %1 -> cpu:0 : f32[4]\n  %3 = add %0, %2 @cpu:0 : f32[4]\n  %4 = copy %3 -> cpu:1 : f32[4]\n  return %3, %4\n}\n";
        assert_eq!(reads(src), [ReadOut::InPlace, ReadOut::CloneOf(0)]);
        // Returned the other way round, the share comes first and still
        // holds the caller's bytes: the root's own tensor is written.
        let swapped = src.replace("return %3, %4", "return %4, %3");
        assert_eq!(reads(&swapped), [ReadOut::InPlace, ReadOut::CloneOf(0)]);
    }

    #[test]
    fn a_shared_copy_returned_first_holds_its_roots_bytes_in_place() {
        let src = "graph @g {\n  %0 = input \"a\" @cpu:0 : f32[4]\n  %1 = add %0, %0 @cpu:0 : f32[4]\n  %2 = copy %1 -> cpu:1 : f32[4]\n  %3 = copy %0 -> cpu:1 : f32[4]\n  return %2, %3, %1, %1\n}\n";
        // %2 shares %1's buffer, which is written into %2's tensor (%1,
        // returned twice after it, is that tensor's clone); %3 shares the
        // caller's input.
        assert_eq!(
            reads(src),
            [
                ReadOut::InPlace,
                ReadOut::InPlace,
                ReadOut::CloneOf(0),
                ReadOut::CloneOf(0)
            ]
        );
        // A slice's view is not a buffer of its own: copied out.
        let viewed = "graph @g {\n  %0 = input \"a\" @cpu:0 : f32[8]\n  %1 = add %0, %0 @cpu:0 : f32[8]\n  %2 = slice %1 {axis=0, len=4, start=4} @cpu:0 : f32[4]\n  %3 = copy %2 -> cpu:1 : f32[4]\n  return %3\n}\n";
        let g = text::parse(viewed).unwrap();
        let mut plan = Schedule::new(&g).unwrap();
        assert_eq!(plan.view_slices(|_| Some(1)), 1);
        assert_eq!(
            plan.read_outs(&plan.lent_to_imports()),
            [ReadOut::CopiedOut]
        );
    }
}
