//! Opened devices and their buffers, one variant per backend.
//!
//! [`Ctx`] is an opened device and [`Buf`] a buffer on one. Both are closed
//! enums so that the Copy arm ([`copy`]) can be one exhaustive
//! match over (source kind, destination kind). [`run_step`] carries out one
//! scheduled step on its device.

pub mod alloc;
pub mod copy;
pub mod cpu;
pub mod cuda;
pub mod fault;
pub mod vulkan;
pub mod worker;

use crate::device::{Device, DeviceKind};
use crate::dtype::DType;
use crate::exec::error::ExecError;
use crate::exec::schedule::{Step, Work};
use alloc::MemStats;
use cpu::{Arena, CpuBuf};
use cuda::{CudaBuf, CudaDev};
use fault::{Event, Faults};
use std::sync::Arc;
use vulkan::{VkBuf, VkDev};

/// One contiguous byte range copied from an operand into the result.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Region {
    /// Which operand of the step.
    pub operand: usize,
    /// Byte offset in that operand.
    pub src: usize,
    /// Byte offset in the result.
    pub dst: usize,
    /// Bytes.
    pub len: usize,
}

/// An opened device.
#[derive(Clone)]
pub enum Ctx {
    /// A host arena.
    Cpu(Arc<Arena>),
    /// A CUDA GPU.
    Cuda(Arc<CudaDev>),
    /// A Vulkan logical device.
    Vulkan(Arc<VkDev>),
}

/// A buffer on one device.
pub enum Buf {
    /// In a host arena.
    Cpu(CpuBuf),
    /// On a CUDA GPU.
    Cuda(CudaBuf),
    /// On a Vulkan device.
    Vulkan(VkBuf),
}

impl Ctx {
    /// The device's name.
    pub fn device(&self) -> Device {
        match self {
            Ctx::Cpu(a) => a.device,
            Ctx::Cuda(c) => c.device,
            Ctx::Vulkan(v) => v.device,
        }
    }

    /// Allocator numbers.
    pub fn stats(&self) -> MemStats {
        match self {
            Ctx::Cpu(a) => a.stats(),
            Ctx::Cuda(c) => c.stats(),
            Ctx::Vulkan(v) => v.stats(),
        }
    }

    /// Whether values of `dtype` may live here.
    pub fn supports(&self, dtype: DType) -> Result<(), ExecError> {
        let r = match self {
            Ctx::Cpu(_) => Ok(()),
            Ctx::Cuda(c) => c.supports(dtype),
            Ctx::Vulkan(v) => v.supports(dtype),
        };
        r.map_err(|reason| ExecError::Unsupported {
            dtype,
            device: self.device(),
            reason,
        })
    }

    /// A buffer of `bytes` on this device.
    pub fn alloc(&self, bytes: usize, faults: &Faults) -> Result<Buf, ExecError> {
        self.alloc_reusing(bytes, faults, None)
    }

    /// [`alloc`](Self::alloc); a host arena writes into `reuse` (a caller's
    /// output bytes) when it can, other devices ignore it.
    pub fn alloc_reusing(
        &self,
        bytes: usize,
        faults: &Faults,
        reuse: Option<Arc<[u8]>>,
    ) -> Result<Buf, ExecError> {
        Ok(match self {
            Ctx::Cpu(a) => Buf::Cpu(a.alloc_reusing(bytes, faults, reuse)?),
            Ctx::Cuda(c) => Buf::Cuda(c.alloc(bytes, faults)?),
            Ctx::Vulkan(v) => Buf::Vulkan(v.alloc(bytes, faults)?),
        })
    }

    /// Host bytes into a new buffer here.
    pub fn upload(&self, bytes: &[u8], faults: &Faults) -> Result<Buf, ExecError> {
        let mut out = self.alloc(bytes.len(), faults)?;
        match (&mut out, self) {
            (Buf::Cpu(d), _) => cpu::memcpy(bytes, d),
            (Buf::Cuda(d), Ctx::Cuda(c)) => c.upload(bytes, d)?,
            (Buf::Vulkan(d), Ctx::Vulkan(v)) => v.upload(bytes, d)?,
            (Buf::Cuda(_) | Buf::Vulkan(_), _) => {
                return Err(ExecError::Internal("buffer on the wrong device".into()))
            }
        }
        Ok(out)
    }
}

impl Buf {
    /// The kind of device it lives on.
    pub fn kind(&self) -> DeviceKind {
        match self {
            Buf::Cpu(_) => DeviceKind::Cpu,
            Buf::Cuda(_) => DeviceKind::Cuda,
            Buf::Vulkan(_) => DeviceKind::Vulkan,
        }
    }

    /// Reads the whole buffer back to the host.
    pub fn download(&self, bytes: usize) -> Result<Vec<u8>, ExecError> {
        let mut out = vec![0u8; bytes];
        self.download_into(&mut out)?;
        Ok(out)
    }

    /// Reads the first `out.len()` bytes of the buffer into `out`.
    pub fn download_into(&self, out: &mut [u8]) -> Result<(), ExecError> {
        match self {
            Buf::Cpu(b) => {
                let src = b
                    .bytes()
                    .get(..out.len())
                    .ok_or_else(|| ExecError::Internal("download past the buffer".into()))?;
                cpu::copy_bytes(src, out);
            }
            Buf::Cuda(b) => b.dev().download(b, out)?,
            Buf::Vulkan(b) => b.dev().download(b, out)?,
        }
        Ok(())
    }
}

fn wrong(op: &str) -> ExecError {
    ExecError::Internal(format!("`{op}` got an operand on another backend"))
}

fn cpu_ops<'a>(ins: &'a [Arc<Buf>], op: &str) -> Result<Vec<&'a CpuBuf>, ExecError> {
    ins.iter()
        .map(|b| match &**b {
            Buf::Cpu(c) => Ok(c),
            _ => Err(wrong(op)),
        })
        .collect()
}

fn cuda_ops<'a>(ins: &'a [Arc<Buf>], op: &str) -> Result<Vec<&'a CudaBuf>, ExecError> {
    ins.iter()
        .map(|b| match &**b {
            Buf::Cuda(c) => Ok(c),
            _ => Err(wrong(op)),
        })
        .collect()
}

fn vk_ops<'a>(ins: &'a [Arc<Buf>], op: &str) -> Result<Vec<&'a VkBuf>, ExecError> {
    ins.iter()
        .map(|b| match &**b {
            Buf::Vulkan(c) => Ok(c),
            _ => Err(wrong(op)),
        })
        .collect()
}

/// A fold's operands in order, cut into runs of buffers on the fold's own
/// backend (picked by `local`) and the single foreign buffers between them.
enum Piece<'a, T> {
    Local(Vec<&'a T>),
    Foreign(&'a Buf),
}

fn as_cpu(b: &Buf) -> Option<&CpuBuf> {
    match b {
        Buf::Cpu(c) => Some(c),
        _ => None,
    }
}

fn as_vulkan(b: &Buf) -> Option<&VkBuf> {
    match b {
        Buf::Vulkan(x) => Some(x),
        _ => None,
    }
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

/// A host fold whose operands include GPU buffers (deferred copies, see
/// `schedule::Work::Defer`): runs of host operands fold straight into `out`, and
/// each GPU operand is folded in where it lies when the host can read it
/// there (a mapped Vulkan buffer), else downloaded into one scratch buffer
/// first; in operand order, so the result equals the plain n-ary fold.
fn staged_fold(
    arena: &Arc<Arena>,
    dtype: DType,
    kind: crate::op::ElementwiseOp,
    ins: &[Arc<Buf>],
    out: &mut CpuBuf,
    faults: &Faults,
) -> Result<(), ExecError> {
    let mut scratch: Option<CpuBuf> = None;
    for (i, piece) in pieces(ins, as_cpu).into_iter().enumerate() {
        // Every piece after the first folds onto the partial result.
        let onto = i > 0;
        let gpu = match piece {
            Piece::Local(run) => {
                cpu::fold_into(dtype, kind, &run, out, onto);
                continue;
            }
            Piece::Foreign(b) => b,
        };
        if let Buf::Vulkan(v) = gpu {
            match v.with_mapped(|bytes| cpu::fold_bytes_into(dtype, kind, bytes, out, onto)) {
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

/// A Vulkan fold whose operands include host buffers (deferred uploads, see
/// `schedule::Work::Defer`): in operand order, runs of device operands fold into
/// `out` (in place once it holds a partial result), a host operand first in
/// line is uploaded straight into `out`, and any later one is uploaded into
/// one scratch buffer and folded in. The device holds the result and at
/// most one scratch buffer instead of every upload at once.
fn staged_vulkan_fold(
    v: &Arc<VkDev>,
    dtype: DType,
    kind: crate::op::ElementwiseOp,
    ins: &[Arc<Buf>],
    out: &mut VkBuf,
    n: usize,
    faults: &Faults,
) -> Result<(), ExecError> {
    let mut scratch: Option<VkBuf> = None;
    for (i, piece) in pieces(ins, as_vulkan).into_iter().enumerate() {
        match piece {
            Piece::Local(run) if i == 0 => v.fold(dtype, kind, &run, out, n, faults)?,
            Piece::Local(run) => v.fold_onto(dtype, kind, out, &run, n)?,
            Piece::Foreign(Buf::Cpu(h)) if i == 0 => v.upload(h.bytes(), out)?,
            Piece::Foreign(Buf::Cpu(h)) => {
                let s = match &mut scratch {
                    Some(s) => s,
                    None => scratch.insert(v.alloc(h.bytes().len(), faults)?),
                };
                v.upload(h.bytes(), s)?;
                v.fold_onto(dtype, kind, out, &[&*s], n)?;
            }
            Piece::Foreign(_) => return Err(wrong("fold")),
        }
    }
    Ok(())
}

/// Runs one step on `ctx` and returns its result buffer. `input` is the
/// caller's tensor for an input step (a host arena wraps it without
/// copying); `reuse` is storage the result may be written into (see
/// [`Ctx::alloc_reusing`]).
pub fn run_step(
    step: &Step,
    ctx: &Ctx,
    ins: &[Arc<Buf>],
    input: Option<&Arc<[u8]>>,
    faults: &Faults,
    reuse: Option<Arc<[u8]>>,
) -> Result<Buf, ExecError> {
    let bytes = step.ty.size_bytes();
    let n = step.ty.num_elements();
    let dtype = step.ty.dtype;
    let op = step.mnemonic.as_str();
    match &step.work {
        Work::Input { name } => {
            let data = input.ok_or_else(|| ExecError::MissingInput(name.clone()))?;
            match ctx {
                Ctx::Cpu(a) if cpu::aligned(data) => Ok(Buf::Cpu(a.wrap(data.clone(), faults)?)),
                _ => ctx.upload(data, faults),
            }
        }
        Work::Comm { .. } => Err(ExecError::Internal(
            "SPMD collectives run on the caller's thread, not through run_step".into(),
        )),
        Work::Share { .. } | Work::Defer { .. } => Err(ExecError::Internal(
            "a shared host copy holds its source's buffer; the runner does it, not run_step".into(),
        )),
        Work::Copy { .. } => {
            let src = ins
                .first()
                .ok_or_else(|| ExecError::Internal("copy without a source".into()))?;
            crate::backend::copy::copy(src, ctx, bytes, faults, reuse)
        }
        Work::Fold { .. } | Work::Div { .. } | Work::Gather { .. } => {
            let mut out = ctx.alloc_reusing(bytes, faults, reuse)?;
            if faults.check(Event::Kernel) {
                return Err(ExecError::Injected {
                    device: ctx.device(),
                    op: op.into(),
                });
            }
            match (&mut out, ctx) {
                (Buf::Cpu(d), Ctx::Cpu(arena)) => {
                    if let Work::Fold { kind } = &step.work {
                        if ins.iter().any(|b| !matches!(**b, Buf::Cpu(_))) {
                            staged_fold(arena, dtype, *kind, ins, d, faults)?;
                            return Ok(out);
                        }
                    }
                    let ins = cpu_ops(ins, op)?;
                    match &step.work {
                        Work::Fold { kind } => cpu::fold(dtype, *kind, &ins, d),
                        Work::Div { by } => {
                            let a = ins.first().ok_or_else(|| wrong(op))?;
                            cpu::div(dtype, *by, a, d)
                        }
                        Work::Gather { regions } => {
                            cpu::gather(regions, &ins, d).map_err(ExecError::Internal)?
                        }
                        Work::Input { .. }
                        | Work::Copy { .. }
                        | Work::Share { .. }
                        | Work::Defer { .. }
                        | Work::Comm { .. } => {}
                    }
                }
                (Buf::Cuda(d), Ctx::Cuda(c)) => {
                    let ins = cuda_ops(ins, op)?;
                    match &step.work {
                        Work::Fold { kind } => c.fold(dtype, *kind, &ins, d, n, faults)?,
                        Work::Div { by } => {
                            let a = ins.first().ok_or_else(|| wrong(op))?;
                            c.div(dtype, *by, a, d, n)?
                        }
                        Work::Gather { regions } => c.copy_regions(op, regions, &ins, d)?,
                        Work::Input { .. }
                        | Work::Copy { .. }
                        | Work::Share { .. }
                        | Work::Defer { .. }
                        | Work::Comm { .. } => {}
                    }
                }
                (Buf::Vulkan(d), Ctx::Vulkan(v)) => {
                    if let Work::Fold { kind } = &step.work {
                        if ins.iter().any(|b| matches!(**b, Buf::Cpu(_))) {
                            staged_vulkan_fold(v, dtype, *kind, ins, d, n, faults)?;
                            return Ok(out);
                        }
                    }
                    let ins = vk_ops(ins, op)?;
                    match &step.work {
                        Work::Fold { kind } => v.fold(dtype, *kind, &ins, d, n, faults)?,
                        Work::Div { by } => {
                            let a = ins.first().ok_or_else(|| wrong(op))?;
                            v.div(dtype, *by, a, d, n)?
                        }
                        Work::Gather { regions } => v.copy_regions(op, regions, &ins, d)?,
                        Work::Input { .. }
                        | Work::Copy { .. }
                        | Work::Share { .. }
                        | Work::Defer { .. }
                        | Work::Comm { .. } => {}
                    }
                }
                (Buf::Cpu(_) | Buf::Cuda(_) | Buf::Vulkan(_), _) => return Err(wrong(op)),
            }
            Ok(out)
        }
    }
}
