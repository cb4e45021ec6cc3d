//! The rewrites planned once the devices are open, since a device decides
//! what it can do in place: host-to-Vulkan copies that become views of
//! imported host memory ([`Work::Import`]), inputs read where the caller's
//! bytes lie ([`Schedule::inputs_in_place`]) and slices of one contiguous
//! run that become views of their operand's buffer ([`Work::View`]). All are
//! pure functions of the schedule and what each device reports; the rule
//! the cost model reads for slices ([`slice_is_view`]) lives here too, so
//! the estimates follow what runs.

use super::schedule::{Schedule, Step, Work};
use super::work::{DeviceWork, Kernel};
use super::Options;
use crate::device::{Device, DeviceKind};
use crate::dtype::TensorType;
use crate::topology::Topology;
pub use crate::topology::ASSUMED_VIEW_ALIGN;

/// What one device can do that changes how a plan runs on it. The runtime
/// reads each opened device's own; the cost model assumes them from the
/// topology ([`Caps::assumed`]). Both then build the plan with
/// [`Schedule::fit_to_devices`], so the price and the run follow one plan.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Caps {
    /// The offset multiple at which the device binds a view of a buffer
    /// (1 for a host arena); `None` where it has no views (CUDA).
    pub view_align: Option<usize>,
    /// It reads host-arena buffers in place (a Vulkan device that imports
    /// host memory), so a host-to-device copy can be a [`Work::Import`].
    pub imports_host: bool,
    /// It reads a caller's host input where it lies (a Vulkan device whose
    /// memory is the host's and which imports host memory).
    pub reads_inputs_in_place: bool,
}

impl Caps {
    /// The capabilities the cost model assumes for `device` before any
    /// device is open: a host arena binds views anywhere; a Vulkan device
    /// binds them at the topology's alignment ([`Topology::view_align`]:
    /// [`ASSUMED_VIEW_ALIGN`] unless a `view-align` line or the calibrator
    /// says), imports host memory, and reads
    /// callers' inputs in place where the topology says its memory is the
    /// host's (calibration writes that for lavapipe); CUDA has none of it.
    pub fn assumed(device: Device, topo: &Topology) -> Caps {
        let vulkan = device.kind == DeviceKind::Vulkan;
        Caps {
            view_align: topo.view_align(device.kind),
            imports_host: vulkan,
            reads_inputs_in_place: vulkan && topo.in_host_memory(DeviceKind::Vulkan),
        }
    }
}

/// The smallest input read in place ([`Schedule::inputs_in_place`]): a
/// host page, the smallest buffer of the executor's own that a Vulkan
/// device can import too ([`super::HOST_PAGE`]). An upload
/// is a step on the device's worker, so one small upload kept a run on the
/// threaded runner, whose hand-offs cost tens of microseconds each on a
/// small VM: a 4 KiB all_reduce on `[vulkan:0, vulkan:1, cpu:0]` took
/// 80-130 us with its shards uploaded and 1.6 us read in place
/// (`docs/performance.md`). Under a page the fold's result could not be
/// imported back anyway, so the run keeps its workers and the copy is as
/// cheap as the import (about 0.1 us on lavapipe).
pub const INPUT_IN_PLACE_MIN: usize = super::HOST_PAGE;

/// Whether a `slice {axis, start, len}` of an `operand` tensor on `device`
/// will run as a [`Work::View`], read off the graph alone (before any
/// device is open): its bytes are one run of the operand's
/// ([`super::region::slice_run`]), and the device binds views there: any
/// host arena; a Vulkan device when the run starts at a multiple of the
/// topology's alignment ([`Topology::view_align`]) and is whole 4-byte
/// words; never CUDA. The cost
/// model prices such a slice as a view; [`Schedule::view_slices`], with
/// each device's real alignment, may make more slices views, never fewer
/// for a slice of a buffer of its own.
pub fn slice_is_view(
    topo: &Topology,
    device: Device,
    operand: &TensorType,
    axis: usize,
    start: usize,
    len: usize,
) -> bool {
    let Some(at) = super::region::slice_run(operand, axis, start, len) else {
        return false;
    };
    let bytes = operand.with_dim(axis, len).size_bytes();
    match (device.kind, topo.view_align(device.kind)) {
        (DeviceKind::Cpu, _) => true,
        (_, Some(align)) => at.is_multiple_of(align) && bytes.is_multiple_of(4),
        (_, None) => false,
    }
}

/// [`slice_is_view`], or where `only_copied` (every reader copies the
/// slice into a host arena, [`Schedule::read_on_host_only`], and it is not
/// an output) any one run on a Vulkan device, at any offset, since no
/// kernel binds it: the rule the closed forms price by.
pub fn slice_is_view_when(
    topo: &Topology,
    only_copied: bool,
    device: Device,
    operand: &TensorType,
    (axis, start, len): (usize, usize, usize),
) -> bool {
    slice_is_view(topo, device, operand, axis, start, len)
        || (only_copied
            && device.kind == DeviceKind::Vulkan
            && super::region::slice_run(operand, axis, start, len).is_some())
}

impl Schedule {
    /// Applies every rewrite that depends on what the devices can do, in
    /// the order the runtime needs them: slices that become views (with
    /// `options.view_slices`), then host buffers imported into Vulkan,
    /// inputs read in place and copies of callers' inputs imported (with
    /// `options.import_host_buffers`). `caps` says what each device can do.
    pub fn fit_to_devices(&mut self, options: &Options, caps: impl Fn(Device) -> Caps) {
        if options.view_slices {
            self.view_slices(|d| caps(d).view_align);
        }
        if options.import_host_buffers {
            self.import_host_copies(super::HOST_PAGE, |d| caps(d).imports_host);
            self.inputs_in_place(INPUT_IN_PLACE_MIN, |d| caps(d).reads_inputs_in_place);
            self.import_caller_copies(INPUT_IN_PLACE_MIN, |d| caps(d).reads_inputs_in_place);
            self.share_returned_imports();
        }
    }

    /// Turns each [`Work::Import`] that no step reads (only the caller, as
    /// a graph output) into a [`Work::Share`] of the same host buffer. An
    /// output comes back to the caller as host bytes whatever device holds
    /// it, and an import's bytes are the host buffer's, so the device has
    /// nothing to do. What changes is the host buffer: no import views it
    /// any more, so it need not stay in the arena's own block
    /// ([`Schedule::lent_to_imports`]) and can be written straight into
    /// the caller's output tensor ([`ReadOut::InPlace`](super::ReadOut)),
    /// where it was copied out of the arena after every run. Imports that
    /// a kernel or another step reads stay imports. Returns how many it
    /// turned.
    pub fn share_returned_imports(&mut self) -> usize {
        let mut turned = 0;
        for i in 0..self.steps.len() {
            let unread = self.dependents.get(i).is_none_or(Vec::is_empty);
            if let Work::Import { src } = self.steps[i].work {
                if unread {
                    self.steps[i].work = Work::Share { src };
                    turned += 1;
                }
            }
        }
        turned
    }

    /// Turns host-to-Vulkan copies into [`Work::Import`] views where
    /// `imports(dst)` says the device reads host memory in place: a `copy`
    /// or `move` (or a deferred one) from a host arena to such a device
    /// whose source buffer is one the arena makes
    /// page-aligned: the result of a kernel or a copy on the host (not a
    /// caller's input or output bytes), of at least `min_bytes`, followed
    /// through shared host copies. Returns how many copies it elided.
    pub fn import_host_copies(
        &mut self,
        min_bytes: usize,
        imports: impl Fn(Device) -> bool,
    ) -> usize {
        self.import_copies(min_bytes, imports, |o| {
            o.ty.size_bytes() >= min_bytes
                && matches!(
                    o.work,
                    Work::Device(DeviceWork::Kernel(_) | DeviceWork::Copy { .. })
                )
        })
    }

    /// Turns copies of a caller's host input to a device that reads
    /// callers' bytes where they lie (`reads_in_place`: a Vulkan device
    /// whose memory is the host's, as for [`Schedule::inputs_in_place`])
    /// into [`Work::Import`] views, for copies of at least `min_bytes`:
    /// the step imports the pages holding the caller's tensor. Besides the
    /// copy, it spares a Vulkan fold a deferred operand, which it would
    /// fold in with a second kernel pass (`docs/performance.md`). Returns
    /// how many it marked.
    pub fn import_caller_copies(
        &mut self,
        min_bytes: usize,
        reads_in_place: impl Fn(Device) -> bool,
    ) -> usize {
        self.import_copies(min_bytes, reads_in_place, |o| {
            matches!(o.work, Work::Device(DeviceWork::Input { .. }))
        })
    }

    /// Marks as [`Work::Import`] each copy (or deferred copy) of at least
    /// `min_bytes` from a host arena to a Vulkan device `device_ok` accepts
    /// whose source buffer, followed through shared host copies (a slice's
    /// view is not a buffer of its own), is a host step `owner_ok` accepts.
    fn import_copies(
        &mut self,
        min_bytes: usize,
        device_ok: impl Fn(Device) -> bool,
        owner_ok: impl Fn(&Step) -> bool,
    ) -> usize {
        let mut marked = 0;
        for i in 0..self.steps.len() {
            let st = &self.steps[i];
            let src = match st.work {
                Work::Device(DeviceWork::Copy { src, .. }) | Work::Defer { src } => src,
                _ => continue,
            };
            if !src.is_cpu()
                || st.device.kind != crate::device::DeviceKind::Vulkan
                || !device_ok(st.device)
                || st.ty.size_bytes() < min_bytes
            {
                continue;
            }
            let Some(&operand) = st.operands.first() else {
                continue;
            };
            let owner = self.share_root(operand);
            if self
                .steps
                .get(owner)
                .is_some_and(|o| o.device.is_cpu() && owner_ok(o))
            {
                self.steps[i].work = Work::Import { src };
                marked += 1;
            }
        }
        marked
    }

    /// Marks the inputs on devices that read a caller's bytes where they lie
    /// (`reads_in_place`: a Vulkan device whose memory is the host's and
    /// which imports host memory) and of at least `min_bytes` as read in
    /// place: the step imports the host pages holding the caller's tensor
    /// instead of allocating a buffer and copying into it. The tensor is
    /// only read, as every input is. Returns how many it marked.
    pub fn inputs_in_place(
        &mut self,
        min_bytes: usize,
        reads_in_place: impl Fn(Device) -> bool,
    ) -> usize {
        let mut marked = 0;
        for st in &mut self.steps {
            if let Work::Device(DeviceWork::Input { in_place, .. }) = &mut st.work {
                if st.ty.size_bytes() >= min_bytes && reads_in_place(st.device) {
                    *in_place = true;
                    marked += 1;
                }
            }
        }
        marked
    }

    /// For each slot, whether an [`Work::Import`] step views its buffer:
    /// such a slot must live in the arena's own block, never in a caller's
    /// output bytes, even when it is a graph output.
    pub fn lent_to_imports(&self) -> Vec<bool> {
        let mut lent = vec![false; self.steps.len()];
        for st in &self.steps {
            if !matches!(st.work, Work::Import { .. }) {
                continue;
            }
            let Some(&operand) = st.operands.first() else {
                continue;
            };
            for i in self.share_chain(operand) {
                if let Some(l) = lent.get_mut(i) {
                    *l = true;
                }
            }
        }
        lent
    }

    /// Whether step `i` has readers and every one is a copy of it into a
    /// host arena (deferred into its reader, or a plain copy): the host
    /// reads its bytes through the device's mapping or a transfer, at any
    /// offset, and no kernel binds them. Such a slice may be a view where
    /// the device could not bind one ([`Work::View`]'s `host_only`).
    pub fn read_on_host_only(&self, i: usize) -> bool {
        let readers = self.dependents.get(i).map_or(&[][..], Vec::as_slice);
        !readers.is_empty()
            && readers.iter().all(|&r| {
                self.steps.get(r).is_some_and(|st| {
                    st.device.is_cpu()
                        && st.operands.iter().filter(|o| **o == i).count() == 1
                        && matches!(
                            st.work,
                            Work::Defer { .. }
                                | Work::Device(DeviceWork::Copy { is_move: false, .. })
                        )
                })
            })
    }

    /// Slot `i`, then the slots whose buffer it holds through shared host
    /// copies ([`Work::Share`]), in order: the last is the buffer's owner
    /// ([`Schedule::share_root`]). Views stop the chain: a view is not the
    /// buffer it views.
    pub(crate) fn share_chain(&self, i: usize) -> impl Iterator<Item = usize> + '_ {
        std::iter::successors(Some(i), move |&o| match self.steps.get(o) {
            Some(Step {
                work: Work::Share { .. },
                operands,
                ..
            }) => operands.first().copied(),
            _ => None,
        })
    }

    /// Turns `slice` steps into [`Work::View`]s where the slice is one
    /// contiguous byte run of its operand and the step's device can bind a
    /// view at that offset: `align(device)` is the offset multiple it
    /// needs (counted from the start of the owning buffer, through views of
    /// views), or `None` where the device has no views. The view's length
    /// must also be a multiple of 4 on devices that ask for more than
    /// byte alignment (GPU shaders read whole words). Returns how many
    /// slices became views.
    pub fn view_slices(&mut self, align: impl Fn(Device) -> Option<usize>) -> usize {
        let mut viewed = 0;
        let returned = self.returned_counts();
        // Offset of each view step's bytes in its owning buffer.
        let mut base = vec![0usize; self.steps.len()];
        for i in 0..self.steps.len() {
            let st = &self.steps[i];
            let Some(Kernel::Gather { regions }) = st.work.kernel() else {
                continue;
            };
            let (Some(&operand), [r]) = (st.operands.first(), regions.as_slice()) else {
                continue;
            };
            let bytes = st.ty.size_bytes();
            let whole_run =
                st.operands.len() == 1 && r.operand == 0 && r.dst == 0 && r.len == bytes;
            let same_device = self
                .steps
                .get(operand)
                .is_some_and(|o| o.device == st.device);
            let Some(a) = align(st.device) else {
                continue;
            };
            let at = base
                .get(operand)
                .copied()
                .unwrap_or(0)
                .saturating_add(r.src);
            let fits = a <= 1 || (at.is_multiple_of(a) && bytes.is_multiple_of(4));
            let host_only = !fits && returned.get(i) == Some(&0) && self.read_on_host_only(i);
            if whole_run && same_device && a > 0 && (fits || host_only) {
                base[i] = at;
                self.steps[i].work = Work::View {
                    offset: r.src,
                    host_only,
                };
                viewed += 1;
            }
        }
        viewed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn large_inputs_on_devices_that_read_in_place_are_marked() {
        let src = "graph @g {\n  %0 = input \"a\" @vulkan:0 : f32[4096]\n  %1 = input \"b\" @vulkan:1 : f32[4096]\n  %2 = input \"c\" @vulkan:0 : f32[16]\n  %3 = input \"d\" @cpu:0 : f32[4096]\n  return %0, %1, %2, %3\n}\n";
        let g = crate::text::parse(src).unwrap();
        let mut p = Schedule::new(&g).unwrap();
        // Only vulkan:0 reads in place; 16 KiB is the least.
        assert_eq!(
            p.inputs_in_place(INPUT_IN_PLACE_MIN, |d| d == Device::vulkan(0)),
            1
        );
        let marked: Vec<bool> = p
            .steps
            .iter()
            .map(|s| {
                matches!(
                    s.work,
                    Work::Device(DeviceWork::Input { in_place: true, .. })
                )
            })
            .collect();
        assert_eq!(marked, [true, false, false, false]);
        let mut none = Schedule::new(&g).unwrap();
        assert_eq!(none.inputs_in_place(INPUT_IN_PLACE_MIN, |_| false), 0);
    }

    #[test]
    fn host_copies_to_importing_vulkan_devices_become_views() {
        let src = "graph @g {\n  %0 = input \"a\" @cpu:0 : f32[1024]\n  %1 = add %0, %0 @cpu:0 : f32[1024]\n  %2 = copy %1 -> cpu:1 : f32[1024]\n  %3 = copy %2 -> vulkan:0 : f32[1024]\n  %4 = copy %0 -> vulkan:0 : f32[1024]\n  %5 = add %3, %4 @vulkan:0 : f32[1024]\n  %6 = copy %1 -> vulkan:1 : f32[1024]\n  %7 = input \"s\" @cpu:0 : f32[4]\n  %8 = add %7, %7 @cpu:0 : f32[4]\n  %9 = copy %8 -> vulkan:0 : f32[4]\n  return %5, %6, %9\n}\n";
        let g = crate::text::parse(src).unwrap();
        let kind = |p: &Schedule, node: usize| {
            p.steps
                .iter()
                .find(|s| s.node == crate::graph::NodeId(petgraph::graph::NodeIndex::new(node)))
                .map(|s| matches!(s.work, Work::Import { .. }))
                .unwrap()
        };
        let mut p = Schedule::new(&g).unwrap();
        // Only vulkan:0 imports here.
        let n = p.import_host_copies(4096, |d| d == Device::vulkan(0));
        assert_eq!(n, 1);
        // Through the shared host copy %2 to the kernel result %1: a view.
        assert!(kind(&p, 3));
        // A caller's input (%4), a device that does not import (%6) and a
        // copy under a page (%9) stay copies.
        assert!(!kind(&p, 4) && !kind(&p, 6) && !kind(&p, 9));
        // The view's slot holds the host buffer: owner is the add on cpu:0.
        let i = p
            .steps
            .iter()
            .position(|s| s.node == crate::graph::NodeId(petgraph::graph::NodeIndex::new(3)))
            .unwrap();
        assert_eq!(p.steps[p.owner(i)].device, Device::cpu(0));
        let mut both = Schedule::new(&g).unwrap();
        // A graph output (%6 on vulkan:1) may be a view too.
        assert_eq!(both.import_host_copies(4096, |d| !d.is_cpu()), 2);
        assert!(kind(&both, 6));
    }

    #[test]
    fn copies_of_callers_host_inputs_are_read_in_place_where_the_device_can() {
        // %2: a caller's input through a shared host copy, deferred into a
        // fold on vulkan:0; %3: the same input to vulkan:1, which does not
        // read in place; %4: a kernel result (not a caller's); %6: 16
        // bytes, under the least.
        let src = "graph @g {\n  %0 = input \"a\" @cpu:0 : f32[4096]\n  %1 = copy %0 -> cpu:1 : f32[4096]\n  %2 = copy %1 -> vulkan:0 : f32[4096]\n  %3 = copy %0 -> vulkan:1 : f32[4096]\n  %4 = add %0, %0 @cpu:0 : f32[4096]\n  %5 = copy %4 -> vulkan:0 : f32[4096]\n  %6 = input \"s\" @cpu:0 : f32[4]\n  %7 = copy %6 -> vulkan:0 : f32[4]\n  %8 = add %2, %5 @vulkan:0 : f32[4096]\n  return %8, %3, %7\n}\n";
        let g = crate::text::parse(src).unwrap();
        let imported = |p: &Schedule| -> Vec<usize> {
            let order = g.topo_order();
            p.steps
                .iter()
                .filter(|s| matches!(s.work, Work::Import { .. }))
                .filter_map(|s| order.iter().position(|n| *n == s.node))
                .collect()
        };
        let mut p = Schedule::new(&g).unwrap();
        assert_eq!(
            p.import_caller_copies(INPUT_IN_PLACE_MIN, |d| d == Device::vulkan(0)),
            1
        );
        let order = g.topo_order();
        let at = |n: usize| order.iter().position(|x| x.0.index() == n).unwrap();
        assert_eq!(imported(&p), [at(2)]);
        let mut none = Schedule::new(&g).unwrap();
        assert_eq!(none.import_caller_copies(INPUT_IN_PLACE_MIN, |_| false), 0);
    }

    /// A Vulkan slice at an offset the device cannot bind is still a view
    /// where only copies into host arenas read it (deferred into a host
    /// fold, or plain): `host_only`, which the runtime never binds. Not
    /// where a Vulkan kernel reads it too, nor where it is an output.
    #[test]
    fn slices_read_only_by_the_host_are_views_at_any_offset() {
        // %1 (offset 12) feeds a host fold; %3 (offset 4) a Vulkan add and
        // a copy; %5 (offset 8) is returned; %7 (offset 16) only a copy.
        let src = "graph @g {
  %0 = input \"a\" @vulkan:0 : f32[8]
  %1 = slice %0 {axis=0, len=3, start=3} @vulkan:0 : f32[3]
  %2 = copy %1 -> cpu:0 : f32[3]
  %9 = input \"h\" @cpu:0 : f32[3]
  %10 = add %2, %9 @cpu:0 : f32[3]
  %3 = slice %0 {axis=0, len=3, start=1} @vulkan:0 : f32[3]
  %4 = add %3, %3 @vulkan:0 : f32[3]
  %11 = copy %3 -> cpu:1 : f32[3]
  %5 = slice %0 {axis=0, len=3, start=2} @vulkan:0 : f32[3]
  %7 = slice %0 {axis=0, len=3, start=4} @vulkan:0 : f32[3]
  %8 = copy %7 -> cpu:1 : f32[3]
  return %10, %4, %11, %5, %8
}
";
        let g = crate::text::parse(src).unwrap();
        let mut p = Schedule::new(&g).unwrap();
        // Each slice step by its offset in %0 (12, 4, 8, 16 bytes).
        let at: Vec<(usize, usize)> = (p.steps.iter().enumerate())
            .filter_map(|(i, s)| match s.work.kernel() {
                Some(Kernel::Gather { regions }) => Some((regions.first()?.src, i)),
                _ => None,
            })
            .collect();
        p.view_slices(|d| Some(if d.is_cpu() { 1 } else { 256 }));
        let work_of = |offset: usize| {
            let (_, i) = at.iter().find(|(o, _)| *o == offset).unwrap();
            p.steps[*i].work.clone()
        };
        let host_view = |offset| Work::View {
            offset,
            host_only: true,
        };
        assert_eq!(work_of(12), host_view(12));
        assert_eq!(work_of(16), host_view(16));
        assert!(
            !matches!(work_of(4), Work::View { .. }),
            "a kernel reads %3"
        );
        assert!(!matches!(work_of(8), Work::View { .. }), "%5 is returned");
    }

    #[test]
    fn slices_of_one_run_become_views_where_the_offset_binds() {
        // %1: rows 4..8 of %0 (offset 64 bytes); %2: row 1 of %1 (offset
        // 64 + 16 = 80 in %0's buffer); %3: a column cut (4 runs); %4: an
        // f16 row of 6 bytes; %5: a slice of a copy on another device.
        let src = "graph @g {\n  %0 = input \"a\" @vulkan:0 : f32[8,4]\n  %1 = slice %0 {axis=0, len=4, start=4} @vulkan:0 : f32[4,4]\n  %2 = slice %1 {axis=0, len=1, start=1} @vulkan:0 : f32[1,4]\n  %3 = slice %0 {axis=1, len=1, start=2} @vulkan:0 : f32[8,1]\n  %4 = input \"h\" @vulkan:0 : f16[4,3]\n  %5 = slice %4 {axis=0, len=1, start=2} @vulkan:0 : f16[1,3]\n  %6 = copy %0 -> cpu:0 : f32[8,4]\n  %7 = slice %6 {axis=0, len=1, start=3} @cpu:0 : f32[1,4]\n  return %1, %2, %3, %5, %7\n}\n";
        let g = crate::text::parse(src).unwrap();
        let viewed = |align: &dyn Fn(Device) -> Option<usize>| {
            let mut p = Schedule::new(&g).unwrap();
            p.view_slices(align);
            let order = g.topo_order();
            let mut v: Vec<usize> = p
                .steps
                .iter()
                .filter(|s| matches!(s.work, Work::View { .. }))
                .filter_map(|s| order.iter().position(|n| *n == s.node))
                .collect();
            v.sort();
            v
        };
        // The host binds any offset; a device with no views copies.
        let host_only = |d: Device| d.is_cpu().then_some(1);
        assert_eq!(viewed(&host_only), [7]);
        // Aligned to 16: %1 (64), %2 (80); %5 is 6 bytes long (not whole
        // words) and %3 is not one run.
        let sixteen = |d: Device| Some(if d.is_cpu() { 1 } else { 16 });
        assert_eq!(viewed(&sixteen), [1, 2, 7]);
        // Aligned to 64: %2's offset in the buffer it views (80) is not.
        let sixty_four = |d: Device| Some(if d.is_cpu() { 1 } else { 64 });
        assert_eq!(viewed(&sixty_four), [1, 7]);
    }

    /// The model assumes the alignment the topology gives (256 unless a
    /// `view-align` line says), in its caps and in the closed forms' rule.
    #[test]
    fn the_model_binds_vulkan_views_at_the_topologys_alignment() {
        let v = Device::vulkan(0);
        let ty = TensorType::new(crate::dtype::DType::F32, &[1_048_578]);
        // A third of it: 349526 entries, at 1398104 bytes (a multiple of
        // 4 and 8, not of 16).
        let third = |t: &Topology| slice_is_view(t, v, &ty, 0, 349_526, 349_526);
        let default = Topology::default();
        assert_eq!(
            Caps::assumed(v, &default).view_align,
            Some(ASSUMED_VIEW_ALIGN)
        );
        assert!(!third(&default));
        for (align, view) in [(4, true), (8, true), (16, false)] {
            let t = Topology::parse(&format!("view-align vulkan {align}")).unwrap();
            assert_eq!(Caps::assumed(v, &t).view_align, Some(align));
            assert_eq!(third(&t), view, "aligned to {align}");
        }
        // The first third starts at 0 under any alignment; CUDA has none.
        assert!(slice_is_view(&default, v, &ty, 0, 0, 349_526));
        assert!(!slice_is_view(
            &default,
            Device::cuda(0),
            &ty,
            0,
            0,
            349_526
        ));
    }

    #[test]
    fn an_output_may_lend_its_buffer_to_imports_but_a_sliced_view_may_not() {
        // %1 is a graph output and is sent to vulkan:0 (%2, imported: the
        // runner keeps %1 in the arena's block); %4 sends a slice of %1
        // that is a view (not a block of its own: it copies).
        let src = "graph @g {\n  %0 = input \"a\" @cpu:0 : f32[2048]\n  %1 = add %0, %0 @cpu:0 : f32[2048]\n  %2 = copy %1 -> vulkan:0 : f32[2048]\n  %3 = slice %1 {axis=0, len=1024, start=1024} @cpu:0 : f32[1024]\n  %4 = copy %3 -> vulkan:0 : f32[1024]\n  return %1, %2, %4\n}\n";
        let g = crate::text::parse(src).unwrap();
        let mut p = Schedule::new(&g).unwrap();
        assert_eq!(p.view_slices(|d| d.is_cpu().then_some(1)), 1);
        assert_eq!(p.import_host_copies(4096, |d| !d.is_cpu()), 1);
        let order = g.topo_order();
        let slot = |n: usize| p.steps.iter().position(|s| s.node == order[n]).unwrap();
        assert!(matches!(p.steps[slot(2)].work, Work::Import { .. }));
        assert!(!matches!(p.steps[slot(4)].work, Work::Import { .. }));
        let lent = p.lent_to_imports();
        let lent: Vec<usize> = (0..5).filter(|&n| lent[slot(n)]).collect();
        assert_eq!(lent, [1]);
    }
}
