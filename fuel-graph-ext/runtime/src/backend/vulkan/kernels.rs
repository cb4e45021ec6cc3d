//! Compute kernels: one WGSL element-wise pipeline per dtype (compiled to
//! SPIR-V by naga in `build.rs`; bf16, which WGSL lacks, has its own
//! shader over 32-bit words, two elements each), its dispatch, the n-ary fold (chained
//! past [`MAX_ARITY`] operands), region copies, and the `div` and generic
//! `cast` kernels, one pipeline each for every dtype, written with 32-bit integer
//! arithmetic only so that they are exact on any device. Each checks that
//! every buffer it binds is its own `VkDevice`'s, and no buffer is bound
//! twice in one dispatch: a fold onto its destination reads the
//! accumulator through the destination's own read-write binding (`onto`),
//! never through a second, read-only binding of the same memory.

use super::*;

pub(super) const SPV_F32: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/elementwise_f32.spv"));
pub(super) const SPV_I32: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/elementwise_i32.spv"));
pub(super) const SPV_F16: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/elementwise_f16.spv"));
pub(super) const SPV_F64: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/elementwise_f64.spv"));
pub(super) const SPV_I64: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/elementwise_i64.spv"));
pub(super) const SPV_U32: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/elementwise_u32.spv"));
pub(super) const SPV_U64: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/elementwise_u64.spv"));
pub(super) const SPV_BF16: &[u8] =
    include_bytes!(concat!(env!("OUT_DIR"), "/elementwise_bf16.spv"));
pub(super) const SPV_CAST: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/cast.spv"));
pub(super) const SPV_DIV: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/div.spv"));

pub(super) struct Pipeline {
    pub(super) pipeline: vk::Pipeline,
    pub(super) module: vk::ShaderModule,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub(super) struct Params {
    pub(super) n: u32,
    pub(super) row_stride: u32,
    pub(super) count: u32,
    pub(super) op: u32,
    pub(super) by: u32,
    /// 1: the fold starts from the destination's own elements.
    pub(super) onto: u32,
}

impl Params {
    pub(super) fn bytes(&self) -> [u8; 24] {
        let mut b = [0u8; 24];
        for (i, w) in [
            self.n,
            self.row_stride,
            self.count,
            self.op,
            self.by,
            self.onto,
        ]
        .iter()
        .enumerate()
        {
            b[i * 4..i * 4 + 4].copy_from_slice(&w.to_le_bytes());
        }
        b
    }
}

impl VkDev {
    /// Copies byte regions of `srcs` (all on this device) into `dst`.
    pub fn copy_regions(
        &self,
        op: &str,
        regions: &[Region],
        srcs: &[&VkBuf],
        dst: &VkBuf,
        faults: &Faults,
    ) -> Result<(), ExecError> {
        for s in srcs {
            if !s.dev.same_device(self) {
                return Err(ExecError::NoDirectCopy {
                    src: s.dev.device,
                    dst: self.device,
                });
            }
        }
        self.check_own(op, &[dst])?;
        self.run(Lane::Compute, op, faults, |cmd, _| {
            for (k, s) in srcs.iter().enumerate() {
                let rs: Vec<vk::BufferCopy> = regions
                    .iter()
                    .filter(|r| r.operand == k && r.len > 0)
                    .map(|r| {
                        vk::BufferCopy::default()
                            .src_offset(s.offset + r.src as u64)
                            .dst_offset(dst.offset + r.dst as u64)
                            .size(r.len as u64)
                    })
                    .collect();
                if !rs.is_empty() {
                    // SAFETY: regions were computed from the buffers' types.
                    unsafe { self.dev.cmd_copy_buffer(cmd, s.buffer, dst.buffer, &rs) };
                }
            }
            Ok(())
        })
    }

    pub(super) fn pipeline(&self, dtype: DType) -> Result<&Pipeline, ExecError> {
        self.pipes
            .iter()
            .find(|(d, _)| *d == dtype)
            .map(|(_, p)| p)
            .ok_or_else(|| self.unsupported(dtype))
    }

    pub(super) fn unsupported(&self, dtype: DType) -> ExecError {
        ExecError::Unsupported {
            dtype,
            device: self.device,
            reason: self.supports(dtype).err().unwrap_or_default(),
        }
    }

    /// One dispatch of the element-wise shader: `dst = op(ins...)`, or with
    /// `onto`, `dst = op(dst, ins...)` (the destination read through its
    /// own binding). Every buffer must be this device's, and `dst` none of
    /// `ins`: a buffer bound both read-only and read-write would be aliased
    /// memory the shader is not declared to expect.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn dispatch(
        &self,
        dtype: DType,
        op: u32,
        ins: &[&VkBuf],
        dst: &VkBuf,
        n: usize,
        onto: bool,
        faults: &Faults,
    ) -> Result<(), ExecError> {
        let pipe = self.pipeline(dtype)?.pipeline;
        if dtype == DType::BF16 {
            // One invocation per word of two elements; the element count
            // goes where the others' unused divisor does.
            let elems = self.elems32(n, "dispatch")?;
            return self.dispatch_on(
                pipe,
                ins.len() as u32,
                op,
                elems,
                ins,
                dst,
                n.div_ceil(2),
                onto,
                faults,
            );
        }
        // The fold kernel reads no divisor (division has its own kernel).
        self.dispatch_on(pipe, ins.len() as u32, op, 0, ins, dst, n, onto, faults)
    }

    /// `n` elements as the 32-bit count a kernel takes.
    pub(super) fn elems32(&self, n: usize, op: &str) -> Result<u32, ExecError> {
        u32::try_from(n).map_err(|_| ExecError::Device {
            device: self.device,
            op: op.into(),
            reason: format!("{n} elements exceed one dispatch (2^32-1)"),
        })
    }

    /// One dispatch of `pipe` over `n` invocations, with `count`, `op`, `by`
    /// and `onto` as its last four parameters.
    #[allow(clippy::too_many_arguments)] // one per shader parameter
    pub(super) fn dispatch_on(
        &self,
        pipe: vk::Pipeline,
        count: u32,
        op: u32,
        by: u32,
        ins: &[&VkBuf],
        dst: &VkBuf,
        n: usize,
        onto: bool,
        faults: &Faults,
    ) -> Result<(), ExecError> {
        let first = ins
            .first()
            .ok_or_else(|| ExecError::Internal("dispatch without operands".into()))?;
        if ins.len() > MAX_ARITY {
            return Err(ExecError::Internal(format!(
                "a dispatch of {} operands (at most {MAX_ARITY})",
                ins.len()
            )));
        }
        self.check_own("dispatch", ins)?;
        self.check_own("dispatch", &[dst])?;
        if ins.iter().any(|b| b.buffer == dst.buffer) {
            return Err(ExecError::Internal(
                "a dispatch bound its destination as an operand too; fold onto it instead".into(),
            ));
        }
        let n32 = self.elems32(n, "dispatch")?;
        let groups = n32.div_ceil(WORKGROUP).max(1);
        let gx = groups.min(MAX_GROUPS_X);
        let gy = groups.div_ceil(gx);
        let params = Params {
            n: n32,
            row_stride: gx * WORKGROUP,
            count,
            op,
            by,
            onto: u32::from(onto),
        };
        self.run(Lane::Compute, "dispatch", faults, |cmd, pool| {
            let layouts = [self.set_layout];
            // SAFETY: the pool was reset and has room for one set.
            let set = unsafe {
                self.dev.allocate_descriptor_sets(
                    &vk::DescriptorSetAllocateInfo::default()
                        .descriptor_pool(pool)
                        .set_layouts(&layouts),
                )
            }
            .map_err(|e| self.err("vkAllocateDescriptorSets", e))?
            .first()
            .copied()
            .ok_or_else(|| ExecError::Internal("no descriptor set".into()))?;
            let infos: Vec<[vk::DescriptorBufferInfo; 1]> = (0..=MAX_ARITY)
                .map(|b| {
                    let buf = if b == MAX_ARITY {
                        dst
                    } else {
                        ins.get(b).copied().unwrap_or(first)
                    };
                    [vk::DescriptorBufferInfo::default()
                        .buffer(buf.buffer)
                        .offset(buf.offset)
                        .range(vk::WHOLE_SIZE)]
                })
                .collect();
            let writes: Vec<vk::WriteDescriptorSet> = infos
                .iter()
                .enumerate()
                .map(|(b, info)| {
                    vk::WriteDescriptorSet::default()
                        .dst_set(set)
                        .dst_binding(b as u32)
                        .descriptor_type(vk::DescriptorType::STORAGE_BUFFER)
                        .buffer_info(info)
                })
                .collect();
            // SAFETY: every handle is live; the command buffer is recording.
            unsafe {
                self.dev.update_descriptor_sets(&writes, &[]);
                self.dev
                    .cmd_bind_pipeline(cmd, vk::PipelineBindPoint::COMPUTE, pipe);
                self.dev.cmd_bind_descriptor_sets(
                    cmd,
                    vk::PipelineBindPoint::COMPUTE,
                    self.layout,
                    0,
                    &[set],
                    &[],
                );
                self.dev.cmd_push_constants(
                    cmd,
                    self.layout,
                    vk::ShaderStageFlags::COMPUTE,
                    0,
                    &params.bytes(),
                );
                self.dev.cmd_dispatch(cmd, gx, gy, 1);
            }
            Ok(())
        })
    }

    /// `dst = fold(kind, [dst] ++ more)`, in place: each dispatch reads the
    /// accumulator from `dst`'s own read-write binding and up to
    /// [`MAX_ARITY`] of `more` from the operand bindings, so `dst` is bound
    /// once (never also as a read-only operand, which would alias). Each
    /// invocation reads and then writes only its own element, so no
    /// accumulator copy is needed.
    pub fn fold_onto(
        &self,
        dtype: DType,
        kind: ElementwiseOp,
        dst: &VkBuf,
        more: &[&VkBuf],
        n: usize,
        faults: &Faults,
    ) -> Result<(), ExecError> {
        let op = fold_code(kind);
        for chunk in more.chunks(MAX_ARITY) {
            self.dispatch(dtype, op, chunk, dst, n, true, faults)?;
        }
        Ok(())
    }

    /// `dst = fold(kind, ins)`: one dispatch per [`MAX_ARITY`] operands.
    pub fn fold(
        self: &Arc<Self>,
        dtype: DType,
        kind: ElementwiseOp,
        ins: &[&VkBuf],
        dst: &VkBuf,
        n: usize,
        faults: &Faults,
    ) -> Result<(), ExecError> {
        let op = fold_code(kind);
        let (head, mut rest) = ins.split_at(ins.len().min(MAX_ARITY));
        self.dispatch(dtype, op, head, dst, n, false, faults)?;
        // Longer folds continue from the partial result in a scratch buffer.
        while !rest.is_empty() {
            let take = rest.len().min(MAX_ARITY - 1);
            let acc = self.alloc(dst.len, faults)?;
            self.copy_regions(
                "copy",
                &[Region {
                    operand: 0,
                    src: 0,
                    dst: 0,
                    len: dst.len,
                }],
                &[dst],
                &acc,
                faults,
            )?;
            let mut chunk: Vec<&VkBuf> = vec![&acc];
            chunk.extend_from_slice(&rest[..take]);
            self.dispatch(dtype, op, &chunk, dst, n, false, faults)?;
            rest = &rest[take..];
        }
        Ok(())
    }

    /// `dst = src / by` (`div.wgsl`): integers toward zero, floats the
    /// exact quotient rounded once.
    pub fn div(
        &self,
        dtype: DType,
        by: u64,
        src: &VkBuf,
        dst: &VkBuf,
        n: usize,
        faults: &Faults,
    ) -> Result<(), ExecError> {
        self.check_div(dtype, by)?;
        let code = cast_code(dtype).ok_or_else(|| self.unsupported(dtype))?;
        let elems = self.elems32(n, "div")?;
        // 16-bit elements are divided two to a word.
        let units = if dtype.size_bytes() == 2 {
            n.div_ceil(2)
        } else {
            n
        };
        // `by` fits in 32 bits (checked above).
        let by = by as u32;
        self.dispatch_on(
            self.divide.pipeline,
            code,
            elems,
            by,
            &[src],
            dst,
            units,
            false,
            faults,
        )
    }

    /// Whether `div {by}` on `dtype` can run here: the kernel takes a
    /// 32-bit divisor. `compile` asks, so the refusal comes before any run.
    pub fn check_div(&self, dtype: DType, by: u64) -> Result<(), ExecError> {
        if by > u64::from(u32::MAX) {
            let fix = if dtype.is_float() {
                "place this div on a CPU or CUDA device"
            } else {
                "divide in two steps whose divisors multiply to it (integer division toward zero composes), or place this div on a CPU or CUDA device"
            };
            return Err(ExecError::UnsupportedKernel {
                op: format!("div {{by={by}}}"),
                device: self.device,
                reason: format!("the Vulkan kernel takes divisors up to {}", u32::MAX),
                fix: fix.into(),
            });
        }
        Ok(())
    }
}

impl VkDev {
    /// `dst = src` converted from `from` to `to` elements, integer
    /// arithmetic only: the transport casts (f32 to bf16 or f16 and back)
    /// by their own kernel (`transport_cast.rs`), every other pair by
    /// [`VkDev::cast_generic`]. Both give the same bits.
    pub fn cast(
        &self,
        from: DType,
        to: DType,
        src: &VkBuf,
        dst: &VkBuf,
        n: usize,
        faults: &Faults,
    ) -> Result<(), ExecError> {
        match self.transport_cast(from, to) {
            Some(pipe) => self.cast_transport(pipe, src, dst, n, faults),
            None => self.cast_generic(from, to, src, dst, n, faults),
        }
    }

    /// [`VkDev::cast`] through the generic kernel (`cast.wgsl`, integer
    /// arithmetic only), whatever the pair: every other cast runs here,
    /// and the tests and the bench compare the transport kernel with it.
    /// Both dtypes are ones the device holds (`supports`), which are
    /// exactly those the kernel converts.
    pub fn cast_generic(
        &self,
        from: DType,
        to: DType,
        src: &VkBuf,
        dst: &VkBuf,
        n: usize,
        faults: &Faults,
    ) -> Result<(), ExecError> {
        let (Some(f), Some(t)) = (cast_code(from), cast_code(to)) else {
            let dtype = if cast_code(from).is_none() { from } else { to };
            return Err(self.unsupported(dtype));
        };
        let elems = self.elems32(n, "cast")?;
        // 16-bit results (f16, bf16) are written two to a word.
        let units = if to.size_bytes() == 2 {
            n.div_ceil(2)
        } else {
            n
        };
        self.dispatch_on(
            self.cast.pipeline,
            f,
            t,
            elems,
            &[src],
            dst,
            units,
            false,
            faults,
        )
    }
}

/// The `cast.wgsl` code of a dtype the Vulkan backend holds.
fn cast_code(dtype: DType) -> Option<u32> {
    Some(match dtype {
        DType::F32 => 0,
        DType::F16 => 1,
        DType::F64 => 2,
        DType::I32 => 3,
        DType::U32 => 4,
        DType::I64 => 5,
        DType::U64 => 6,
        DType::BF16 => 7,
        _ => return None,
    })
}

/// The kernel's `op` code of an element-wise fold (`elementwise.wgsl`).
pub(super) fn fold_code(kind: ElementwiseOp) -> u32 {
    match kind {
        ElementwiseOp::Add => 0,
        ElementwiseOp::Mul => 1,
        ElementwiseOp::Max => 2,
        ElementwiseOp::Min => 3,
        ElementwiseOp::Eq => 4,
    }
}

pub(super) fn make_pipeline(
    dev: &ash::Device,
    layout: vk::PipelineLayout,
    spv: &[u8],
) -> Result<Pipeline, String> {
    make_pipeline_at(dev, layout, spv, c"main")
}

/// A pipeline of the entry point `entry` of `spv` (a module of several,
/// as `transport_cast.wgsl` is, is made once per pipeline).
pub(super) fn make_pipeline_at(
    dev: &ash::Device,
    layout: vk::PipelineLayout,
    spv: &[u8],
    entry: &std::ffi::CStr,
) -> Result<Pipeline, String> {
    let words = ash::util::read_spv(&mut std::io::Cursor::new(spv))
        .map_err(|e| format!("embedded SPIR-V is malformed: {e}"))?;
    // SAFETY: valid SPIR-V, produced and validated by naga (in build.rs,
    // or at registration for an extern kernel's WGSL); SPIR-V registered as
    // such is the caller's promise.
    let module = unsafe {
        dev.create_shader_module(&vk::ShaderModuleCreateInfo::default().code(&words), None)
    }
    .map_err(vk_err("vkCreateShaderModule"))?;
    let stage = vk::PipelineShaderStageCreateInfo::default()
        .stage(vk::ShaderStageFlags::COMPUTE)
        .module(module)
        .name(entry);
    let ci = [vk::ComputePipelineCreateInfo::default()
        .stage(stage)
        .layout(layout)];
    // SAFETY: live module and layout.
    let made = unsafe { dev.create_compute_pipelines(vk::PipelineCache::null(), &ci, None) };
    match made {
        Ok(p) => match p.first() {
            Some(&pipeline) => Ok(Pipeline { pipeline, module }),
            None => {
                // SAFETY: unused module.
                unsafe { dev.destroy_shader_module(module, None) };
                Err("vkCreateComputePipelines returned nothing".into())
            }
        },
        Err((_, e)) => {
            // SAFETY: unused module.
            unsafe { dev.destroy_shader_module(module, None) };
            Err(format!("vkCreateComputePipelines failed: {e}"))
        }
    }
}
