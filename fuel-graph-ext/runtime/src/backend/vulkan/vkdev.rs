//! Creating and destroying a logical device: two queues of its compute
//! family (one where the family has one), a submitter per lane (command
//! pool, fence, descriptor pool; `submit.rs`), the descriptor layouts and
//! one pipeline per dtype it can run. A failure half way destroys what was
//! made ([`Partial`]).

use super::kernels::{
    make_pipeline, make_pipeline_at, Params, Pipeline, SPV_BF16, SPV_CAST, SPV_DIV, SPV_F16,
    SPV_F32, SPV_F64, SPV_I32, SPV_I64, SPV_U32, SPV_U64,
};
use super::memory::{mapped_memory_type, BufPool};
use super::submit::Submitter;
use super::transport_cast::{PAIRS, SPV_TRANSPORT_CAST};
use super::*;

impl VkDev {
    pub(super) fn create(
        instance: Arc<Instance>,
        pd: vk::PhysicalDevice,
        device: Device,
        (access, import): (HostAccess, bool),
    ) -> Result<Arc<VkDev>, String> {
        let vi = &instance.instance;
        // SAFETY: `pd` belongs to this live instance.
        let families = unsafe { vi.get_physical_device_queue_family_properties(pd) };
        let family = families
            .iter()
            .position(|f| f.queue_flags.contains(vk::QueueFlags::COMPUTE))
            .ok_or("the adapter has no compute queue")? as u32;
        let f16 = instance.f16_support(pd);
        let core = instance.core_features(pd);
        let f64 = core.shader_float64 == vk::TRUE;
        let i64 = core.shader_int64 == vk::TRUE;
        let enabled = vk::PhysicalDeviceFeatures::default()
            .shader_float64(f64)
            .shader_int64(i64);
        // Two queues of the compute family where it has them: the second
        // is the copy lane's (`submit.rs`).
        let queues = families
            .get(family as usize)
            .map_or(1, |f| f.queue_count.clamp(1, 2));
        let prio = [1.0f32, 1.0];
        let qci = [vk::DeviceQueueCreateInfo::default()
            .queue_family_index(family)
            .queue_priorities(&prio[..queues as usize])];
        let mut v11 = vk::PhysicalDeviceVulkan11Features::default()
            .storage_buffer16_bit_access(f16)
            .uniform_and_storage_buffer16_bit_access(f16);
        let mut v12 = vk::PhysicalDeviceVulkan12Features::default().shader_float16(f16);
        let import = super::import::import_decision(import, instance.host_import_alignment(pd));
        let exts = [ash::ext::external_memory_host::NAME.as_ptr()];
        let mut ci = vk::DeviceCreateInfo::default()
            .queue_create_infos(&qci)
            .enabled_features(&enabled);
        if import.is_ok() {
            ci = ci.enabled_extension_names(&exts);
        }
        if f16 {
            ci = ci.push_next(&mut v11).push_next(&mut v12);
        }
        // SAFETY: valid create info; the feature chain lives across the call.
        let dev = unsafe { vi.create_device(pd, &ci, None) }.map_err(vk_err("vkCreateDevice"))?;
        // SAFETY: as above.
        let memory = unsafe { vi.get_physical_device_memory_properties(pd) };
        let mapped_type = match access {
            HostAccess::Mapped => mapped_memory_type(&memory),
            HostAccess::Staging => None,
        };
        let capacity = instance.capacity(pd, &memory, mapped_type);
        // SAFETY: `pd` belongs to this live instance.
        let props = unsafe { vi.get_physical_device_properties(pd) };
        let limits = props.limits;
        let host_memory = matches!(
            props.device_type,
            vk::PhysicalDeviceType::CPU | vk::PhysicalDeviceType::INTEGRATED_GPU
        );
        let view_align = view_align(&limits);
        // SAFETY: queues 0 and `queues - 1` of a family we asked `queues` of.
        let (queue, copy_queue) = unsafe {
            (
                dev.get_device_queue(family, 0),
                dev.get_device_queue(family, queues - 1),
            )
        };
        // From here on, a failure must destroy what was made; `Partial`
        // does that on drop unless disarmed.
        let mut partial = Partial::default();
        partial.dev = Some(dev.clone());
        // SAFETY: `dev` is live; `partial` destroys what they make if a
        // later step fails.
        let compute = unsafe { new_submitter(&dev, family, &mut partial)? };
        let copy = unsafe { new_submitter(&dev, family, &mut partial)? };
        let (set_layout, layout) = partial.layouts()?;
        let (pipes, (cast, transport_casts), divide) =
            partial.pipelines(layout, (f16, f64, i64))?;
        partial.dev = None;
        let import = import.map(|align| super::import::Importer {
            ext: ash::ext::external_memory_host::Device::new(vi, &dev),
            align,
            host_memory,
        });
        Ok(Arc::new(VkDev {
            import,
            device,
            f16,
            f64,
            i64,
            instance,
            dev,
            queue,
            memory,
            mapped_type,
            capacity,
            view_align,
            submit: Mutex::new(compute),
            copy_submit: Mutex::new(copy),
            copy_queue,
            queue_shared: Mutex::new(()),
            set_layout,
            layout,
            pipes,
            cast,
            transport_casts,
            divide,
            counter: AllocCounter::default(),
            staging: Mutex::new(None),
            pool: Mutex::new(BufPool::default()),
            lost: std::sync::OnceLock::new(),
            parked: Mutex::new(Vec::new()),
            externs: Mutex::new(Default::default()),
        }))
    }
}

impl Drop for VkDev {
    fn drop(&mut self) {
        // SAFETY: every buffer holds an Arc to this device, so none is alive.
        // Every submit was waited on, except the one whose wait failed on a
        // lost device: `vkDeviceWaitIdle` waits for it (on a device that is
        // really lost it returns in finite time, and destroying objects is
        // then allowed). Destroy children before the device.
        unsafe {
            let _ = self.dev.device_wait_idle();
            if let Ok(mut parked) = self.parked.lock() {
                for b in std::mem::take(&mut *parked) {
                    self.destroy_storage(b);
                }
            }
            if let Some(k) = self.staging.lock().ok().and_then(|mut k| k.take()) {
                self.destroy_staging(k);
            }
            if let Ok(mut p) = self.pool.lock() {
                for b in std::mem::take(&mut p.by_len).into_values().flatten() {
                    self.destroy_storage(b);
                }
            }
            for lane in [&self.submit, &self.copy_submit] {
                if let Ok(s) = lane.lock() {
                    self.dev.destroy_fence(s.fence, None);
                    self.dev.destroy_command_pool(s.pool, None);
                    self.dev.destroy_descriptor_pool(s.descriptors, None);
                }
            }
            self.destroy_externs();
            for p in self
                .pipes
                .iter()
                .map(|(_, p)| p)
                .chain([&self.cast, &self.divide])
                .chain(&self.transport_casts)
            {
                self.dev.destroy_pipeline(p.pipeline, None);
                self.dev.destroy_shader_module(p.module, None);
            }
            self.dev.destroy_pipeline_layout(self.layout, None);
            self.dev
                .destroy_descriptor_set_layout(self.set_layout, None);
            self.dev.destroy_device(None);
        }
        let _ = &self.instance;
    }
}

/// A submitter on `family`: a command pool and its one command buffer, a
/// fence and a descriptor pool of one set, each recorded in `partial` as it
/// is made.
///
/// # Safety
/// `dev` is live.
unsafe fn new_submitter(
    dev: &ash::Device,
    family: u32,
    partial: &mut Partial,
) -> Result<Submitter, String> {
    // SAFETY: the caller's contract; every create info is valid for the
    // duration of its call.
    unsafe {
        let pool = dev
            .create_command_pool(
                &vk::CommandPoolCreateInfo::default()
                    .queue_family_index(family)
                    .flags(vk::CommandPoolCreateFlags::RESET_COMMAND_BUFFER),
                None,
            )
            .map_err(vk_err("vkCreateCommandPool"))?;
        partial
            .lanes
            .push((pool, vk::Fence::null(), vk::DescriptorPool::null()));
        let made = partial.lanes.len() - 1;
        let cmd = dev
            .allocate_command_buffers(
                &vk::CommandBufferAllocateInfo::default()
                    .command_pool(pool)
                    .level(vk::CommandBufferLevel::PRIMARY)
                    .command_buffer_count(1),
            )
            .map_err(vk_err("vkAllocateCommandBuffers"))?
            .first()
            .copied()
            .ok_or("no command buffer")?;
        let fence = dev
            .create_fence(&vk::FenceCreateInfo::default(), None)
            .map_err(vk_err("vkCreateFence"))?;
        partial.lanes[made].1 = fence;
        let sizes = [vk::DescriptorPoolSize::default()
            .ty(vk::DescriptorType::STORAGE_BUFFER)
            .descriptor_count(MAX_ARITY as u32 + 1)];
        let descriptors = dev
            .create_descriptor_pool(
                &vk::DescriptorPoolCreateInfo::default()
                    .max_sets(1)
                    .pool_sizes(&sizes),
                None,
            )
            .map_err(vk_err("vkCreateDescriptorPool"))?;
        partial.lanes[made].2 = descriptors;
        Ok(Submitter {
            pool,
            cmd,
            fence,
            descriptors,
        })
    }
}

/// Destroys what a failed [`VkDev::create`] made.
#[derive(Default)]
pub(super) struct Partial {
    pub(super) dev: Option<ash::Device>,
    /// Each submitter's command pool, fence and descriptor pool.
    pub(super) lanes: Vec<(vk::CommandPool, vk::Fence, vk::DescriptorPool)>,
    pub(super) set_layout: vk::DescriptorSetLayout,
    pub(super) layout: vk::PipelineLayout,
    pub(super) pipes: Vec<vk::Pipeline>,
    pub(super) modules: Vec<vk::ShaderModule>,
}

impl Partial {
    /// The set layout (one storage buffer per operand and the result) and
    /// the pipeline layout (it and the push constants) every kernel uses,
    /// kept for destruction on failure.
    fn layouts(&mut self) -> Result<(vk::DescriptorSetLayout, vk::PipelineLayout), String> {
        let dev = self.dev.clone().ok_or("no device")?;
        // SAFETY: `dev` is live and every create info is valid for the
        // duration of its call.
        unsafe {
            let bindings: Vec<_> = (0..=MAX_ARITY as u32)
                .map(|b| {
                    vk::DescriptorSetLayoutBinding::default()
                        .binding(b)
                        .descriptor_type(vk::DescriptorType::STORAGE_BUFFER)
                        .descriptor_count(1)
                        .stage_flags(vk::ShaderStageFlags::COMPUTE)
                })
                .collect();
            let set_layout = dev
                .create_descriptor_set_layout(
                    &vk::DescriptorSetLayoutCreateInfo::default().bindings(&bindings),
                    None,
                )
                .map_err(vk_err("vkCreateDescriptorSetLayout"))?;
            self.set_layout = set_layout;
            let ranges = [vk::PushConstantRange::default()
                .stage_flags(vk::ShaderStageFlags::COMPUTE)
                .size(std::mem::size_of::<Params>() as u32)];
            let layouts = [set_layout];
            let layout = dev
                .create_pipeline_layout(
                    &vk::PipelineLayoutCreateInfo::default()
                        .set_layouts(&layouts)
                        .push_constant_ranges(&ranges),
                    None,
                )
                .map_err(vk_err("vkCreatePipelineLayout"))?;
            self.layout = layout;
            Ok((set_layout, layout))
        }
    }

    /// One element-wise pipeline per dtype the device can run (f16, f64
    /// and 64-bit integers only where it has them), then `cast` with the
    /// transport casts' pipelines, and `div`, kept for destruction on
    /// failure.
    #[allow(clippy::type_complexity)]
    fn pipelines(
        &mut self,
        layout: vk::PipelineLayout,
        (f16, f64, i64): (bool, bool, bool),
    ) -> Result<(Vec<(DType, Pipeline)>, (Pipeline, Vec<Pipeline>), Pipeline), String> {
        let dev = self.dev.clone().ok_or("no device")?;
        let mut keep = |p: Pipeline| {
            self.pipes.push(p.pipeline);
            self.modules.push(p.module);
            p
        };
        let mut pipes = Vec::new();
        for (dtype, spv, wanted) in [
            (DType::F32, SPV_F32, true),
            (DType::I32, SPV_I32, true),
            (DType::F16, SPV_F16, f16),
            (DType::F64, SPV_F64, f64),
            (DType::I64, SPV_I64, i64),
            (DType::U32, SPV_U32, true),
            (DType::U64, SPV_U64, i64),
            (DType::BF16, SPV_BF16, true),
        ] {
            if wanted {
                pipes.push((dtype, keep(make_pipeline(&dev, layout, spv)?)));
            }
        }
        let cast = keep(make_pipeline(&dev, layout, SPV_CAST)?);
        let mut transport = Vec::new();
        for (_, _, entry) in PAIRS {
            let p = make_pipeline_at(&dev, layout, SPV_TRANSPORT_CAST, entry)?;
            transport.push(keep(p));
        }
        let divide = keep(make_pipeline(&dev, layout, SPV_DIV)?);
        Ok((pipes, (cast, transport), divide))
    }
}

impl Drop for Partial {
    fn drop(&mut self) {
        let Some(dev) = &self.dev else { return };
        // SAFETY: these handles were made on `dev` and nothing uses them;
        // destroying a null handle is a no-op.
        unsafe {
            for p in &self.pipes {
                dev.destroy_pipeline(*p, None);
            }
            for m in &self.modules {
                dev.destroy_shader_module(*m, None);
            }
            dev.destroy_pipeline_layout(self.layout, None);
            dev.destroy_descriptor_set_layout(self.set_layout, None);
            for (pool, fence, descriptors) in &self.lanes {
                dev.destroy_descriptor_pool(*descriptors, None);
                dev.destroy_fence(*fence, None);
                dev.destroy_command_pool(*pool, None);
            }
            dev.destroy_device(None);
        }
    }
}
