//! Kernels that take deferred operands (`schedule::Work::Defer`): a copy
//! between a GPU and the host whose one reader is a fold or a host concat
//! is not run as a copy; the reader moves that operand itself. Here are
//! those readers' staged forms (a host fold, a Vulkan fold, a host gather)
//! and [`scratch_buffers`], the count of buffers they allocate besides
//! their result, which `exec::planned` reads so that no test restates it.

#[cfg(any(feature = "cuda", feature = "vulkan"))]
use super::chained_launches;
use super::cpu::{Arena, CpuBuf};
#[cfg(feature = "cuda")]
use super::cuda;
use super::fault::Faults;
#[cfg(feature = "vulkan")]
use super::vulkan::{self, VkBuf, VkDev};
#[cfg(feature = "vulkan")]
use super::wrong;
use super::{cpu, Buf, Ctx, ExecError, Kernel, Region};
use fuel_graph_ext::dtype::DType;
use fuel_graph_ext::op::ElementwiseOp;
use std::sync::Arc;

/// A fold's operands in order, cut into runs of buffers on the fold's own
/// backend (picked by `local`) and the single foreign buffers between them.
enum Piece<'a, T> {
    Local(Vec<&'a T>),
    Foreign(&'a Buf),
}

fn pieces<'a, T>(
    ins: &'a [Arc<Buf>],
    local: impl Fn(&'a Buf) -> Option<&'a T>,
) -> Vec<Piece<'a, T>> {
    let mut out: Vec<Piece<'a, T>> = Vec::new();
    for b in ins {
        match (local(b), out.last_mut()) {
            (Some(x), Some(Piece::Local(run))) => run.push(x),
            (Some(x), _) => out.push(Piece::Local(vec![x])),
            (None, _) => out.push(Piece::Foreign(b)),
        }
    }
    out
}

/// One operand of a kernel, as [`scratch_buffers`] needs to know it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Operand {
    /// A buffer on the kernel's own device.
    Local,
    /// A deferred copy's source on the other side of the host/GPU line
    /// (`schedule::Work::Defer`); `mapped` when the host reads it in place.
    Deferred { mapped: bool },
}

/// How many buffers kernel `k` allocates on `ctx` besides its result, for
/// operands of the kinds `operands` gives, by the rules `kernel` and the
/// staged kernels follow: a host gather one per deferred operand that is
/// not mapped and does not land whole in one region
/// (`staged_gather`); a host fold one if any deferred operand is not
/// mapped; a Vulkan fold one if a deferred operand
/// comes after its first; a GPU fold longer than one launch one more per
/// extra launch ([`chained_launches`]).
pub fn scratch_buffers(ctx: &Ctx, k: &Kernel, operands: &[Operand]) -> usize {
    if let (Kernel::Gather { regions }, Ctx::Cpu(_)) = (k, ctx) {
        let by = by_operand(regions, operands.len());
        return operands
            .iter()
            .zip(&by)
            .filter(|(o, mine)| {
                **o == Operand::Deferred { mapped: false }
                    && !mine.is_empty()
                    && gather_needs_scratch(mine)
            })
            .count();
    }
    if !k.is_fold() {
        return 0;
    }
    match ctx {
        Ctx::Cpu(_) => usize::from(operands.contains(&Operand::Deferred { mapped: false })),
        #[cfg(feature = "cuda")]
        Ctx::Cuda(_) => chained_launches(operands.len(), cuda::ptx::MAX_ARITY),
        #[cfg(feature = "vulkan")]
        Ctx::Vulkan(_) => {
            // The leading run of device operands folds in chained launches;
            // every later run folds onto the result without allocating.
            let deferred = |o: &Operand| matches!(o, Operand::Deferred { .. });
            let lead = operands.iter().take_while(|o| !deferred(o)).count();
            let later_upload = operands.iter().skip(1).any(deferred);
            chained_launches(lead, vulkan::MAX_ARITY) + usize::from(later_upload)
        }
    }
}

/// A host fold whose operands include GPU buffers (deferred copies, see
/// `schedule::Work::Defer`). Where every GPU operand is a mapped Vulkan
/// buffer, one n-ary fold reads them all where they lie
/// ([`fold_where_they_lie`]). Otherwise runs of host operands fold straight
/// into `out`, and each GPU operand is folded in where it lies when the
/// host can read it there (a mapped Vulkan buffer), else downloaded into
/// one scratch buffer first; in operand order, so the result equals the
/// plain n-ary fold.
pub(super) fn staged_fold(
    arena: &Arc<Arena>,
    dtype: DType,
    kind: ElementwiseOp,
    ins: &[Arc<Buf>],
    out: &mut CpuBuf,
    faults: &Faults,
) -> Result<(), ExecError> {
    #[cfg(feature = "vulkan")]
    if let Some(done) = fold_where_they_lie(dtype, kind, ins, out) {
        return done;
    }
    let mut scratch: Option<CpuBuf> = None;
    for (i, piece) in pieces(ins, Buf::as_cpu).into_iter().enumerate() {
        // Every piece after the first folds onto the partial result.
        let onto = i > 0;
        let gpu = match piece {
            Piece::Local(run) => {
                cpu::fold_into(dtype, kind, &run, out, onto);
                continue;
            }
            Piece::Foreign(b) => b,
        };
        #[cfg(feature = "vulkan")]
        if let Buf::Vulkan(v) = gpu {
            let fold = |bytes: &[u8]| cpu::fold_bytes(dtype, kind, &[bytes], out.bytes_mut(), onto);
            match v.with_mapped(fold) {
                Some(Ok(true)) => continue,
                Some(Err(e)) => return Err(e),
                // Not mapped, or not aligned for the element type.
                Some(Ok(false)) | None => {}
            }
        }
        let s = match &mut scratch {
            Some(s) => s,
            None => scratch.insert(arena.alloc(out.bytes().len(), faults)?),
        };
        gpu.download_into(s.bytes_mut())?;
        cpu::fold_into(dtype, kind, &[&*s], out, onto);
    }
    Ok(())
}

/// A host fold whose GPU operands are all mapped Vulkan buffers, as one
/// n-ary fold of every operand where it lies: each is read once and the
/// result written once, where folding them onto the partial result one by
/// one reads and writes it again for each. `None` where an operand is on
/// another GPU or not mapped, or the bytes are not aligned for the element
/// type (then [`staged_fold`] goes on as before).
#[cfg(feature = "vulkan")]
fn fold_where_they_lie(
    dtype: DType,
    kind: ElementwiseOp,
    ins: &[Arc<Buf>],
    out: &mut CpuBuf,
) -> Option<Result<(), ExecError>> {
    let mut gpu = Vec::with_capacity(ins.len());
    for b in ins {
        match &**b {
            Buf::Cpu(_) => {}
            Buf::Vulkan(v) => gpu.push(v),
            #[allow(unreachable_patterns)]
            _ => return None,
        }
    }
    let folded = VkBuf::with_all_mapped(&gpu, |mapped| {
        let mut mapped = mapped.iter();
        let all: Vec<&[u8]> = ins
            .iter()
            .map(|b| match b.as_cpu() {
                Some(c) => c.bytes(),
                None => mapped.next().copied().unwrap_or_default(),
            })
            .collect();
        cpu::fold_bytes(dtype, kind, &all, out.bytes_mut(), false)
    })?;
    match folded {
        Ok(true) => Some(Ok(())),
        Ok(false) => None,
        Err(e) => Some(Err(e)),
    }
}

#[cfg(feature = "vulkan")]
/// A Vulkan fold whose operands include host buffers (deferred uploads, see
/// `schedule::Work::Defer`): in operand order, runs of device operands fold into
/// `out` (in place once it holds a partial result), a host operand first in
/// line is uploaded straight into `out`, and any later one is uploaded into
/// one scratch buffer and folded in. The device holds the result and at
/// most one scratch buffer instead of every upload at once.
pub(super) fn staged_vulkan_fold(
    v: &Arc<VkDev>,
    dtype: DType,
    kind: ElementwiseOp,
    ins: &[Arc<Buf>],
    out: &mut VkBuf,
    n: usize,
    faults: &Faults,
) -> Result<(), ExecError> {
    let mut scratch: Option<VkBuf> = None;
    for (i, piece) in pieces(ins, Buf::as_vulkan).into_iter().enumerate() {
        match piece {
            Piece::Local(run) if i == 0 => v.fold(dtype, kind, &run, out, n, faults)?,
            Piece::Local(run) => v.fold_onto(dtype, kind, out, &run, n, faults)?,
            Piece::Foreign(Buf::Cpu(h)) if i == 0 => v.upload(h.bytes(), out)?,
            Piece::Foreign(Buf::Cpu(h)) => {
                let s = match &mut scratch {
                    Some(s) => s,
                    None => scratch.insert(v.alloc(h.bytes().len(), faults)?),
                };
                v.upload(h.bytes(), s)?;
                v.fold_onto(dtype, kind, out, &[&*s], n, faults)?;
            }
            Piece::Foreign(_) => return Err(wrong("fold")),
        }
    }
    Ok(())
}

/// Whether a host gather downloads a deferred operand whose regions are
/// `regions` into a scratch buffer first: unless the operand lands in one
/// region from its start, which it is downloaded into where it lies.
fn gather_needs_scratch(regions: &[&Region]) -> bool {
    !matches!(regions, [r] if r.src == 0)
}

/// `regions` grouped by operand: entry `o` lists operand `o`'s, in order.
fn by_operand(regions: &[Region], operands: usize) -> Vec<Vec<&Region>> {
    let mut by: Vec<Vec<&Region>> = vec![Vec::new(); operands];
    for r in regions {
        if let Some(v) = by.get_mut(r.operand) {
            v.push(r);
        }
    }
    by
}

/// A host gather whose operands include GPU buffers (deferred copies, see
/// `schedule::Work::Defer`; the plan defers only into a concat, but any
/// regions work): a host operand's regions are copied as [`cpu::gather`] copies them; a GPU operand's are
/// copied out of its bytes where they lie when the host can read them (a
/// mapped Vulkan buffer), else the operand is downloaded straight into its
/// place in `out` when it lands there whole in one region, or into a
/// scratch buffer whose regions are then copied.
pub(super) fn staged_gather(
    arena: &Arc<Arena>,
    regions: &[Region],
    ins: &[Arc<Buf>],
    out: &mut CpuBuf,
    faults: &Faults,
) -> Result<(), ExecError> {
    let by = by_operand(regions, ins.len());
    if let Some(r) = regions.iter().find(|r| r.operand >= ins.len()) {
        return Err(ExecError::Internal(format!(
            "a gather region of operand {} of {}",
            r.operand,
            ins.len()
        )));
    }
    let copy = |mine: &[&Region], src: &[u8], dst: &mut [u8]| {
        cpu::copy_regions(mine, src, dst).map_err(ExecError::Internal)
    };
    for (b, mine) in ins.iter().zip(&by) {
        if mine.is_empty() {
            continue;
        }
        if let Some(h) = b.as_cpu() {
            copy(mine, h.bytes(), out.bytes_mut())?;
            continue;
        }
        #[cfg(feature = "vulkan")]
        if let Buf::Vulkan(v) = &**b {
            if let Some(done) = v.with_mapped(|bytes| copy(mine, bytes, out.bytes_mut())) {
                done??;
                continue;
            }
        }
        if !gather_needs_scratch(mine) {
            let r = mine[0];
            let to = out
                .bytes_mut()
                .get_mut(r.dst..r.dst + r.len)
                .ok_or_else(|| ExecError::Internal("a gather region outside the result".into()))?;
            b.download_into(to)?;
            continue;
        }
        let mut s = arena.alloc(b.len(), faults)?;
        b.download_into(s.bytes_mut())?;
        copy(mine, s.bytes(), out.bytes_mut())?;
    }
    Ok(())
}

#[cfg(all(test, feature = "vulkan"))]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::backend::vulkan::Instance;
    use fuel_graph_ext::Device;

    /// f32 bytes of `v`.
    fn f32s(v: &[f32]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_le_bytes()).collect()
    }

    /// A host fold of host and mapped Vulkan operands, interleaved, on two
    /// devices: one pass reads every operand where it lies, in operand
    /// order (the sums round as the plain n-ary fold's do), and allocates
    /// nothing. A CUDA or unmapped operand takes the staged path instead.
    #[test]
    fn a_host_fold_reads_every_mapped_operand_where_it_lies() {
        let inst = match Instance::open() {
            Ok(i) => i,
            Err(u) => {
                let test = "a_host_fold_reads_every_mapped_operand_where_it_lies";
                fuel_test_support::skip(test, fuel_test_support::Backend::Vulkan, &u.reason);
                return;
            }
        };
        let (d0, d1) = (
            inst.open_device(Device::vulkan(0)).unwrap(),
            inst.open_device(Device::vulkan(1)).unwrap(),
        );
        let faults = Faults::new(None);
        let arena = Arc::new(Arena::open(Device::cpu(0)));
        // Each column's sum rounds differently in another order.
        let rows: [[f32; 3]; 4] = [
            [1.0e8, 1.0, 0.5],
            [1.0, -1.0e8, 0.25],
            [-1.0e8, 3.0, 1.0e-8],
            [1.0e8, 1.0e8, -0.75],
        ];
        let host = |r: &[f32; 3]| {
            let mut b = arena.alloc(12, &faults).unwrap();
            b.bytes_mut().copy_from_slice(&f32s(r));
            Arc::new(Buf::Cpu(b))
        };
        let vk = |d: &Arc<crate::backend::vulkan::VkDev>, r: &[f32; 3]| {
            let mut b = d.alloc(12, &faults).unwrap();
            d.upload(&f32s(r), &mut b).unwrap();
            Arc::new(Buf::Vulkan(b))
        };
        let ins = [
            host(&rows[0]),
            vk(&d1, &rows[1]),
            host(&rows[2]),
            vk(&d0, &rows[3]),
        ];
        if !ins
            .iter()
            .all(|b| b.as_cpu().is_some() || matches!(&**b, Buf::Vulkan(v) if v.is_mapped()))
        {
            let test = "a_host_fold_reads_every_mapped_operand_where_it_lies";
            let why = "the Vulkan buffers are not mapped (a discrete GPU)";
            fuel_test_support::skip(test, fuel_test_support::Backend::Vulkan, why);
            return;
        }
        let mut out = arena.alloc(12, &faults).unwrap();
        let before = arena.stats().allocations;
        let done = fold_where_they_lie(DType::F32, ElementwiseOp::Add, &ins, &mut out);
        assert!(matches!(done, Some(Ok(()))), "{:?}", done.map(|r| r.err()));
        assert_eq!(
            arena.stats().allocations,
            before,
            "a fold in place needs no scratch"
        );
        let want: Vec<f32> = (0..3)
            .map(|c| ((rows[0][c] + rows[1][c]) + rows[2][c]) + rows[3][c])
            .collect();
        assert_eq!(out.bytes(), &f32s(&want)[..]);
    }
}
