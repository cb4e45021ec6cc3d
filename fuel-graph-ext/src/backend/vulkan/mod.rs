//! The Vulkan backend: logical devices, buffers, copies and compute kernels.
//!
//! The loader is opened at run time (ash's `loaded` feature), so a machine
//! without Vulkan builds and runs everything else. Each `vulkan:N` is its own
//! `VkDevice` with its own queue, command buffer and memory; several of them
//! may sit on one adapter (see [`devices_per_adapter`]). Where the device has
//! a memory type that is device-local, host-visible, coherent and cached
//! (lavapipe, integrated GPUs), storage buffers live there, mapped for as
//! long as they exist, and host data moves with a memcpy ([`HostAccess`]);
//! otherwise it moves through a host-visible staging buffer and
//! `vkCmdCopyBuffer`. Slices,
//! concats and same-device copies are `vkCmdCopyBuffer` regions; the n-ary
//! element-wise ops and div run one WGSL compute shader per element type,
//! compiled to SPIR-V by naga in `build.rs`. Every submit waits on its fence,
//! so a step is complete when its call returns.

use crate::backend::alloc::{AllocCounter, MemStats};
use crate::backend::fault::{Event, Faults};
use crate::backend::Region;
use crate::device::Device;
use crate::dtype::DType;
use crate::exec::error::ExecError;
use crate::op::ElementwiseOp;
use ash::vk;
use std::collections::BTreeMap;
use std::ptr::NonNull;
use std::sync::{Arc, Mutex};

const SPV_F32: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/elementwise_f32.spv"));
const SPV_I32: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/elementwise_i32.spv"));
const SPV_F16: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/elementwise_f16.spv"));
const SPV_F64: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/elementwise_f64.spv"));
const SPV_I64: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/elementwise_i64.spv"));

/// Operands one dispatch can read; longer folds are chained.
pub const MAX_ARITY: usize = 8;
const WORKGROUP: u32 = 256;
const MAX_GROUPS_X: u32 = 32768;

/// The hint printed whenever Vulkan is missing.
pub const INSTALL_HINT: &str =
    "`apt-get install mesa-vulkan-drivers libvulkan1` gives a software device (lavapipe)";

/// How many logical devices to open on each adapter: `FUEL_VULKAN_DEVICES`,
/// default 2, so that `vulkan:0` and `vulkan:1` exist on a one-adapter
/// machine (lavapipe) and the two-device paths are exercised there.
pub fn devices_per_adapter() -> u32 {
    std::env::var("FUEL_VULKAN_DEVICES")
        .ok()
        .and_then(|s| s.trim().parse::<u32>().ok())
        .filter(|n| *n >= 1)
        .unwrap_or(2)
}

/// How host bytes reach a device's storage buffers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HostAccess {
    /// Storage buffers in a memory type that is `DEVICE_LOCAL |
    /// HOST_VISIBLE | HOST_COHERENT | HOST_CACHED`, mapped persistently, so
    /// `upload`/`download` are a memcpy with no command buffer or fence;
    /// the staging path where no such type exists or an allocation there
    /// fails. `HOST_CACHED` is required because host reads of uncached
    /// memory (a discrete GPU's BAR, an APU's write-combined type) are far
    /// slower than a staged copy.
    Mapped,
    /// Always through the device's staging buffer and `vkCmdCopyBuffer`.
    Staging,
}

impl HostAccess {
    /// `Mapped`, unless `FUEL_VULKAN_MAPPED=0` asks for `Staging`.
    pub fn from_env() -> HostAccess {
        match std::env::var("FUEL_VULKAN_MAPPED")
            .as_deref()
            .map(str::trim)
        {
            Ok("0") => HostAccess::Staging,
            _ => HostAccess::Mapped,
        }
    }
}

/// Why Vulkan cannot be used: a reason and a hint.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unavailable {
    /// What went wrong.
    pub reason: String,
    /// How to fix it.
    pub hint: String,
}

/// A loaded loader and an instance, shared by the devices opened on it.
pub struct Instance {
    // Kept alive: the instance's function pointers come from it.
    _entry: ash::Entry,
    instance: ash::Instance,
    adapters: Vec<vk::PhysicalDevice>,
}

impl Drop for Instance {
    fn drop(&mut self) {
        // SAFETY: every device made from this instance holds an Arc to it, so
        // none is alive any more.
        unsafe { self.instance.destroy_instance(None) };
    }
}

/// One adapter as discovery reports it.
#[derive(Clone, Debug)]
pub struct AdapterInfo {
    /// The driver's device name.
    pub name: String,
    /// True if f16 kernels can run.
    pub f16: bool,
    /// True if f64 kernels can run.
    pub f64: bool,
    /// True if i64 kernels can run.
    pub i64: bool,
}

impl Instance {
    /// Loads the loader and creates an instance with at least one adapter.
    pub fn open() -> Result<Arc<Instance>, Unavailable> {
        // SAFETY: loading the system loader runs its initialisers; that is
        // the documented way to use ash's `loaded` feature.
        let entry = unsafe { ash::Entry::load() }.map_err(|e| Unavailable {
            reason: format!("no Vulkan loader ({e})"),
            hint: INSTALL_HINT.into(),
        })?;
        let app = vk::ApplicationInfo::default()
            .application_name(c"fuel")
            .api_version(vk::API_VERSION_1_2);
        let ci = vk::InstanceCreateInfo::default().application_info(&app);
        // SAFETY: the create info is valid and lives across the call.
        let instance = unsafe { entry.create_instance(&ci, None) }.map_err(|e| Unavailable {
            reason: if e == vk::Result::ERROR_INCOMPATIBLE_DRIVER {
                "the Vulkan loader found no driver (ERROR_INCOMPATIBLE_DRIVER)".into()
            } else {
                format!("vkCreateInstance failed: {e}")
            },
            hint: format!(
                "check VK_ICD_FILENAMES / VK_DRIVER_FILES point at an installed ICD json (or unset them); {INSTALL_HINT}"
            ),
        })?;
        // SAFETY: a live instance.
        let adapters = match unsafe { instance.enumerate_physical_devices() } {
            Ok(a) if !a.is_empty() => a,
            other => {
                // SAFETY: nothing was created from it.
                unsafe { instance.destroy_instance(None) };
                return Err(Unavailable {
                    reason: match other {
                        Err(e) => format!("vkEnumeratePhysicalDevices failed: {e}"),
                        Ok(_) => "the Vulkan driver reports no physical device".into(),
                    },
                    hint: INSTALL_HINT.into(),
                });
            }
        };
        Ok(Arc::new(Instance {
            _entry: entry,
            instance,
            adapters,
        }))
    }

    /// Describes each adapter.
    pub fn adapters(&self) -> Vec<AdapterInfo> {
        self.adapters
            .iter()
            .map(|pd| {
                // SAFETY: a physical device of this live instance.
                let props = unsafe { self.instance.get_physical_device_properties(*pd) };
                let name = props
                    .device_name_as_c_str()
                    .map(|c| c.to_string_lossy().into_owned())
                    .unwrap_or_else(|_| "unknown".into());
                AdapterInfo {
                    name,
                    f16: self.f16_support(*pd),
                    f64: self.core_features(*pd).shader_float64 == vk::TRUE,
                    i64: self.core_features(*pd).shader_int64 == vk::TRUE,
                }
            })
            .collect()
    }

    fn core_features(&self, pd: vk::PhysicalDevice) -> vk::PhysicalDeviceFeatures {
        // SAFETY: a physical device of this live instance.
        unsafe { self.instance.get_physical_device_features(pd) }
    }

    fn f16_support(&self, pd: vk::PhysicalDevice) -> bool {
        // SAFETY: a physical device of this live instance.
        let props = unsafe { self.instance.get_physical_device_properties(pd) };
        if props.api_version < vk::API_VERSION_1_2 {
            return false;
        }
        let mut v11 = vk::PhysicalDeviceVulkan11Features::default();
        let mut v12 = vk::PhysicalDeviceVulkan12Features::default();
        let mut f2 = vk::PhysicalDeviceFeatures2::default()
            .push_next(&mut v11)
            .push_next(&mut v12);
        // SAFETY: the chain is well formed and lives across the call.
        unsafe { self.instance.get_physical_device_features2(pd, &mut f2) };
        v12.shader_float16 == vk::TRUE
            && v11.storage_buffer16_bit_access == vk::TRUE
            && v11.uniform_and_storage_buffer16_bit_access == vk::TRUE
    }

    /// Opens `vulkan:N` with [`HostAccess::from_env`].
    pub fn open_device(self: &Arc<Self>, device: Device) -> Result<Arc<VkDev>, ExecError> {
        self.open_device_with(device, HostAccess::from_env())
    }

    /// Opens `vulkan:N`: adapter `N / per_adapter`, its own `VkDevice`.
    pub fn open_device_with(
        self: &Arc<Self>,
        device: Device,
        access: HostAccess,
    ) -> Result<Arc<VkDev>, ExecError> {
        let per = devices_per_adapter();
        let unavailable = |reason: String, hint: String| ExecError::DeviceUnavailable {
            device: device.to_string(),
            reason,
            hint,
        };
        let adapter = (device.index / per) as usize;
        let pd = *self.adapters.get(adapter).ok_or_else(|| {
            unavailable(
                format!(
                    "there are {} adapter(s) with {per} logical device(s) each, so vulkan:0..vulkan:{} exist",
                    self.adapters.len(),
                    self.adapters.len() as u32 * per - 1
                ),
                "raise FUEL_VULKAN_DEVICES to open more logical devices per adapter".into(),
            )
        })?;
        VkDev::create(self.clone(), pd, device, access)
            .map_err(|e| unavailable(e, "run `fuel-opt devices` to see what is available".into()))
    }
}

struct Submitter {
    pool: vk::CommandPool,
    cmd: vk::CommandBuffer,
    fence: vk::Fence,
    descriptors: vk::DescriptorPool,
}

struct Pipeline {
    pipeline: vk::Pipeline,
    module: vk::ShaderModule,
}

/// One logical Vulkan device.
pub struct VkDev {
    /// Its name.
    pub device: Device,
    /// True if f16 kernels are available.
    pub f16: bool,
    /// True if f64 kernels are available.
    pub f64: bool,
    /// True if i64 kernels are available.
    pub i64: bool,
    instance: Arc<Instance>,
    dev: ash::Device,
    queue: vk::Queue,
    memory: vk::PhysicalDeviceMemoryProperties,
    /// The memory type storage buffers are allocated in and mapped, if any
    /// (see [`HostAccess::Mapped`]).
    mapped_type: Option<u32>,
    submit: Mutex<Submitter>,
    set_layout: vk::DescriptorSetLayout,
    layout: vk::PipelineLayout,
    /// One element-wise pipeline per dtype the device can run.
    pipes: Vec<(DType, Pipeline)>,
    counter: AllocCounter,
    staging: Mutex<Option<KeptStaging>>,
    pool: Mutex<BufPool>,
}

#[repr(C)]
#[derive(Clone, Copy)]
struct Params {
    n: u32,
    row_stride: u32,
    count: u32,
    op: u32,
    by: u32,
}

impl Params {
    fn bytes(&self) -> [u8; 20] {
        let mut b = [0u8; 20];
        for (i, w) in [self.n, self.row_stride, self.count, self.op, self.by]
            .iter()
            .enumerate()
        {
            b[i * 4..i * 4 + 4].copy_from_slice(&w.to_le_bytes());
        }
        b
    }
}

fn vk_err(what: &str) -> impl Fn(vk::Result) -> String + '_ {
    move |e| format!("{what} failed: {e}")
}

impl VkDev {
    fn create(
        instance: Arc<Instance>,
        pd: vk::PhysicalDevice,
        device: Device,
        access: HostAccess,
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
        let prio = [1.0f32];
        let qci = [vk::DeviceQueueCreateInfo::default()
            .queue_family_index(family)
            .queue_priorities(&prio)];
        let mut v11 = vk::PhysicalDeviceVulkan11Features::default()
            .storage_buffer16_bit_access(f16)
            .uniform_and_storage_buffer16_bit_access(f16);
        let mut v12 = vk::PhysicalDeviceVulkan12Features::default().shader_float16(f16);
        let mut ci = vk::DeviceCreateInfo::default()
            .queue_create_infos(&qci)
            .enabled_features(&enabled);
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
        // SAFETY: queue 0 of a family we asked for.
        let queue = unsafe { dev.get_device_queue(family, 0) };
        // From here on, a failure must destroy what was made; `Partial`
        // does that on drop unless disarmed.
        let mut partial = Partial::default();
        partial.dev = Some(dev.clone());
        // SAFETY (for the creation calls below): `dev` is live and every create
        // info is valid for the duration of its call.
        unsafe {
            let pool = dev
                .create_command_pool(
                    &vk::CommandPoolCreateInfo::default()
                        .queue_family_index(family)
                        .flags(vk::CommandPoolCreateFlags::RESET_COMMAND_BUFFER),
                    None,
                )
                .map_err(vk_err("vkCreateCommandPool"))?;
            partial.pool = pool;
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
            partial.fence = fence;
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
            partial.descriptors = descriptors;
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
            partial.set_layout = set_layout;
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
            partial.layout = layout;
            let mut pipes = Vec::new();
            for (dtype, spv, wanted) in [
                (DType::F32, SPV_F32, true),
                (DType::I32, SPV_I32, true),
                (DType::F16, SPV_F16, f16),
                (DType::F64, SPV_F64, f64),
                (DType::I64, SPV_I64, i64),
            ] {
                if wanted {
                    let p = make_pipeline(&dev, layout, spv)?;
                    partial.pipes.push(p.pipeline);
                    partial.modules.push(p.module);
                    pipes.push((dtype, p));
                }
            }
            partial.dev = None;
            Ok(Arc::new(VkDev {
                device,
                f16,
                f64,
                i64,
                instance,
                dev,
                queue,
                memory,
                mapped_type,
                submit: Mutex::new(Submitter {
                    pool,
                    cmd,
                    fence,
                    descriptors,
                }),
                set_layout,
                layout,
                pipes,
                counter: AllocCounter::default(),
                staging: Mutex::new(None),
                pool: Mutex::new(BufPool::default()),
            }))
        }
    }

    /// Allocator numbers.
    pub fn stats(&self) -> MemStats {
        self.counter.stats()
    }

    /// Whether new storage buffers are host-mapped ([`HostAccess::Mapped`]
    /// and the device has a fitting memory type).
    pub fn host_mapped(&self) -> bool {
        self.mapped_type.is_some()
    }

    /// Bytes held in the pool of freed buffers (not counted in `stats`).
    pub fn pooled_bytes(&self) -> usize {
        self.pool.lock().map(|p| p.bytes).unwrap_or(0)
    }

    /// Whether kernels on `dtype` can run here (copies, slices and concats
    /// are byte moves, but a value of an unsupported dtype is refused anyway
    /// so that the rule is one line in the docs).
    pub fn supports(&self, dtype: DType) -> Result<(), String> {
        match dtype {
            DType::F32 | DType::I32 => Ok(()),
            DType::F16 if self.f16 => Ok(()),
            DType::F16 => Err("the device lacks shaderFloat16 or 16-bit storage".into()),
            DType::F64 if self.f64 => Ok(()),
            DType::F64 => Err("the device lacks shaderFloat64".into()),
            DType::I64 if self.i64 => Ok(()),
            DType::I64 => Err("the device lacks shaderInt64".into()),
            DType::BF16 => Err("WGSL has no bf16 type and no bf16 kernel is written".into()),
            DType::U8 => Err("WGSL has no 8-bit type and no u8 kernel is written".into()),
        }
    }

    fn err(&self, op: &str, e: vk::Result) -> ExecError {
        match e {
            vk::Result::ERROR_DEVICE_LOST => ExecError::DeviceLost {
                device: self.device,
                op: op.into(),
                reason: e.to_string(),
            },
            vk::Result::ERROR_OUT_OF_DEVICE_MEMORY | vk::Result::ERROR_OUT_OF_HOST_MEMORY => {
                ExecError::OutOfMemory {
                    device: self.device,
                    bytes: 0,
                    reason: format!("{op}: {e}"),
                }
            }
            _ => ExecError::Device {
                device: self.device,
                op: op.into(),
                reason: e.to_string(),
            },
        }
    }

    fn memory_type(&self, bits: u32, want: vk::MemoryPropertyFlags) -> Option<u32> {
        (0..self.memory.memory_type_count).find(|&i| {
            bits & (1 << i) != 0
                && self.memory.memory_types[i as usize]
                    .property_flags
                    .contains(want)
        })
    }

    fn raw_buffer(
        &self,
        bytes: usize,
        usage: vk::BufferUsageFlags,
        want: vk::MemoryPropertyFlags,
    ) -> Result<(vk::Buffer, vk::DeviceMemory), ExecError> {
        self.raw_buffer_in(bytes, usage, |bits| {
            self.memory_type(bits, want)
                .or_else(|| self.memory_type(bits, vk::MemoryPropertyFlags::empty()))
        })
    }

    /// A buffer bound to fresh memory of the type `pick` chooses from the
    /// buffer's allowed type bits.
    fn raw_buffer_in(
        &self,
        bytes: usize,
        usage: vk::BufferUsageFlags,
        pick: impl FnOnce(u32) -> Option<u32>,
    ) -> Result<(vk::Buffer, vk::DeviceMemory), ExecError> {
        let size = bytes.max(4) as u64;
        // SAFETY: live device, valid create info.
        let buffer = unsafe {
            self.dev.create_buffer(
                &vk::BufferCreateInfo::default()
                    .size(size)
                    .usage(usage)
                    .sharing_mode(vk::SharingMode::EXCLUSIVE),
                None,
            )
        }
        .map_err(|e| self.err("vkCreateBuffer", e))?;
        // SAFETY: `buffer` was just created on this device.
        let req = unsafe { self.dev.get_buffer_memory_requirements(buffer) };
        let Some(ty) = pick(req.memory_type_bits) else {
            // SAFETY: unused buffer of this device.
            unsafe { self.dev.destroy_buffer(buffer, None) };
            return Err(ExecError::OutOfMemory {
                device: self.device,
                bytes,
                reason: "no memory type fits the buffer".into(),
            });
        };
        // SAFETY: valid allocate info.
        let mem = unsafe {
            self.dev.allocate_memory(
                &vk::MemoryAllocateInfo::default()
                    .allocation_size(req.size)
                    .memory_type_index(ty),
                None,
            )
        };
        let mem = match mem {
            Ok(m) => m,
            Err(e) => {
                // SAFETY: unused buffer of this device.
                unsafe { self.dev.destroy_buffer(buffer, None) };
                return Err(ExecError::OutOfMemory {
                    device: self.device,
                    bytes,
                    reason: e.to_string(),
                });
            }
        };
        // SAFETY: fresh buffer and memory of this device, offset 0 fits `req`.
        if let Err(e) = unsafe { self.dev.bind_buffer_memory(buffer, mem, 0) } {
            // SAFETY: both unused.
            unsafe {
                self.dev.destroy_buffer(buffer, None);
                self.dev.free_memory(mem, None);
            }
            return Err(self.err("vkBindBufferMemory", e));
        }
        Ok((buffer, mem))
    }

    /// A device-local storage buffer of `bytes`.
    pub fn alloc(self: &Arc<Self>, bytes: usize, faults: &Faults) -> Result<VkBuf, ExecError> {
        if faults.check(Event::Alloc) {
            return Err(ExecError::OutOfMemory {
                device: self.device,
                bytes,
                reason: "injected allocation failure".into(),
            });
        }
        let pooled = self.pool.lock().ok().and_then(|mut p| {
            let b = p.by_len.get_mut(&bytes).and_then(Vec::pop);
            if b.is_some() {
                p.bytes -= bytes;
            }
            b
        });
        let b = match pooled {
            Some(b) => b,
            None => self.new_storage(bytes)?,
        };
        self.counter.add(bytes);
        Ok(VkBuf {
            buffer: b.buffer,
            memory: b.memory,
            map: b.map,
            len: bytes,
            dev: self.clone(),
        })
    }

    /// A fresh storage buffer: in the mapped type, mapped, when the device
    /// has one and the allocation there succeeds (a small BAR heap may
    /// refuse it), else device-local and unmapped.
    fn new_storage(&self, bytes: usize) -> Result<Pooled, ExecError> {
        let usage = vk::BufferUsageFlags::STORAGE_BUFFER
            | vk::BufferUsageFlags::TRANSFER_SRC
            | vk::BufferUsageFlags::TRANSFER_DST;
        if let Some(ty) = self.mapped_type {
            let made =
                self.raw_buffer_in(bytes, usage, |bits| (bits & (1 << ty) != 0).then_some(ty));
            if let Ok((buffer, memory)) = made {
                // SAFETY: host-visible memory of this device, not mapped yet;
                // it stays mapped until the buffer is destroyed.
                let mapped = unsafe {
                    self.dev
                        .map_memory(memory, 0, vk::WHOLE_SIZE, vk::MemoryMapFlags::empty())
                };
                match mapped.ok().and_then(|p| NonNull::new(p.cast::<u8>())) {
                    Some(p) => {
                        return Ok(Pooled {
                            buffer,
                            memory,
                            map: Some(Mapping(p)),
                        })
                    }
                    // SAFETY: unused buffer and memory of this device (a
                    // failed map leaves nothing mapped).
                    None => unsafe {
                        self.dev.destroy_buffer(buffer, None);
                        self.dev.free_memory(memory, None);
                    },
                }
            }
        }
        let (buffer, memory) =
            self.raw_buffer(bytes, usage, vk::MemoryPropertyFlags::DEVICE_LOCAL)?;
        Ok(Pooled {
            buffer,
            memory,
            map: None,
        })
    }

    /// Runs `f` with this device's staging buffer, at least `bytes` long,
    /// host-visible and mapped. It is kept between transfers (and grown when
    /// a larger one comes): allocating and mapping a fresh one per transfer
    /// cost more than the copy itself on lavapipe.
    fn with_staging<R>(
        &self,
        bytes: usize,
        f: impl FnOnce(&KeptStaging) -> Result<R, ExecError>,
    ) -> Result<R, ExecError> {
        let mut kept = self
            .staging
            .lock()
            .map_err(|_| ExecError::Internal("Vulkan staging lock poisoned".into()))?;
        if kept.as_ref().is_none_or(|k| k.len < bytes) {
            if let Some(old) = kept.take() {
                self.destroy_staging(old);
            }
            let (buffer, memory) = self.raw_buffer(
                bytes,
                vk::BufferUsageFlags::TRANSFER_SRC | vk::BufferUsageFlags::TRANSFER_DST,
                vk::MemoryPropertyFlags::HOST_VISIBLE | vk::MemoryPropertyFlags::HOST_COHERENT,
            )?;
            // SAFETY: host-visible memory of this device, mapped once.
            let mapped = unsafe {
                self.dev
                    .map_memory(memory, 0, bytes as u64, vk::MemoryMapFlags::empty())
            };
            match mapped {
                Ok(p) => {
                    *kept = Some(KeptStaging {
                        buffer,
                        memory,
                        len: bytes,
                        ptr: p.cast::<u8>(),
                    })
                }
                Err(e) => {
                    // SAFETY: unused.
                    unsafe {
                        self.dev.destroy_buffer(buffer, None);
                        self.dev.free_memory(memory, None);
                    }
                    return Err(self.err("vkMapMemory", e));
                }
            }
        }
        let k = kept
            .as_ref()
            .ok_or_else(|| ExecError::Internal("no staging buffer".into()))?;
        f(k)
    }

    fn destroy_staging(&self, k: KeptStaging) {
        // SAFETY: every transfer that used it was waited on.
        unsafe {
            self.dev.unmap_memory(k.memory);
            self.dev.destroy_buffer(k.buffer, None);
            self.dev.free_memory(k.memory, None);
        }
    }

    /// Records commands with `record`, submits them and waits.
    fn run(
        &self,
        op: &str,
        record: impl FnOnce(vk::CommandBuffer, vk::DescriptorPool) -> Result<(), ExecError>,
    ) -> Result<(), ExecError> {
        let s = self
            .submit
            .lock()
            .map_err(|_| ExecError::Internal("Vulkan submit lock poisoned".into()))?;
        // SAFETY: the lock gives exclusive use of the command buffer, fence and
        // descriptor pool; every submit waits on the fence before returning, so
        // nothing recorded is still in flight.
        unsafe {
            self.dev
                .reset_command_buffer(s.cmd, vk::CommandBufferResetFlags::empty())
                .map_err(|e| self.err(op, e))?;
            self.dev
                .reset_descriptor_pool(s.descriptors, vk::DescriptorPoolResetFlags::empty())
                .map_err(|e| self.err(op, e))?;
            self.dev
                .begin_command_buffer(
                    s.cmd,
                    &vk::CommandBufferBeginInfo::default()
                        .flags(vk::CommandBufferUsageFlags::ONE_TIME_SUBMIT),
                )
                .map_err(|e| self.err(op, e))?;
            // Earlier submits' writes (this queue, submission order) are made
            // visible to these commands, and these commands' writes to the
            // host once the fence is waited on: the host reads storage
            // buffers directly when they are mapped, and the staging buffer
            // otherwise. Host writes need nothing: they precede the submit,
            // which orders them, and the memory is coherent.
            self.barrier(
                s.cmd,
                vk::PipelineStageFlags::ALL_COMMANDS,
                vk::AccessFlags::MEMORY_READ | vk::AccessFlags::MEMORY_WRITE,
            );
            let recorded = record(s.cmd, s.descriptors);
            self.barrier(
                s.cmd,
                vk::PipelineStageFlags::HOST,
                vk::AccessFlags::HOST_READ,
            );
            self.dev
                .end_command_buffer(s.cmd)
                .map_err(|e| self.err(op, e))?;
            recorded?;
            let cmds = [s.cmd];
            let submit = [vk::SubmitInfo::default().command_buffers(&cmds)];
            self.dev
                .queue_submit(self.queue, &submit, s.fence)
                .map_err(|e| self.err(op, e))?;
            let waited = self.dev.wait_for_fences(&[s.fence], true, u64::MAX);
            self.dev
                .reset_fences(&[s.fence])
                .map_err(|e| self.err(op, e))?;
            waited.map_err(|e| self.err(op, e))?;
        }
        let _ = &s.pool;
        Ok(())
    }

    /// A global memory barrier after every write of earlier commands.
    ///
    /// # Safety
    /// `cmd` is recording and belongs to this device.
    unsafe fn barrier(
        &self,
        cmd: vk::CommandBuffer,
        dst_stage: vk::PipelineStageFlags,
        dst_access: vk::AccessFlags,
    ) {
        let b = [vk::MemoryBarrier::default()
            .src_access_mask(vk::AccessFlags::MEMORY_WRITE)
            .dst_access_mask(dst_access)];
        // SAFETY: the caller's contract; a global barrier names no handle.
        unsafe {
            self.dev.cmd_pipeline_barrier(
                cmd,
                vk::PipelineStageFlags::ALL_COMMANDS,
                dst_stage,
                vk::DependencyFlags::empty(),
                &b,
                &[],
                &[],
            )
        };
    }

    /// Host bytes into `dst`: a memcpy into its mapping when it has one
    /// (no command buffer, no fence), else through the staging buffer.
    ///
    /// The memcpy runs on the calling thread: rayon's pool measured no
    /// faster on the 2-core VM, since the executor's per-device workers
    /// already copy side by side (`docs/performance.md`).
    pub fn upload(&self, src: &[u8], dst: &mut VkBuf) -> Result<(), ExecError> {
        if src.is_empty() {
            return Ok(());
        }
        if src.len() > dst.len {
            return Err(ExecError::Internal(format!(
                "upload of {} bytes into a {}-byte Vulkan buffer",
                src.len(),
                dst.len
            )));
        }
        if let Some(m) = dst.map {
            // SAFETY: `m` maps all of `dst`'s memory, at least `dst.len` >=
            // `src.len()` bytes, for as long as `dst` lives. No GPU work
            // touches it now: `&mut dst` excludes every other reference to
            // the buffer, and every command that used it before was waited
            // on (`run` returns after its fence). Host writes before a later
            // submit are visible to it (coherent memory, submit order).
            let out = unsafe { std::slice::from_raw_parts_mut(m.0.as_ptr(), src.len()) };
            out.copy_from_slice(src);
            return Ok(());
        }
        self.with_staging(src.len(), |k| {
            // SAFETY: the mapping is `k.len` >= src.len() bytes; coherent memory.
            unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), k.ptr, src.len()) };
            self.run("upload", |cmd, _| {
                let r = [vk::BufferCopy::default().size(src.len() as u64)];
                // SAFETY: both buffers are live and at least `src.len()` bytes.
                unsafe { self.dev.cmd_copy_buffer(cmd, k.buffer, dst.buffer, &r) };
                Ok(())
            })
        })
    }

    /// `src` into host bytes: a memcpy out of its mapping when it has one
    /// (no command buffer, no fence), else through the staging buffer.
    pub fn download(&self, src: &VkBuf, dst: &mut [u8]) -> Result<(), ExecError> {
        if dst.is_empty() {
            return Ok(());
        }
        if dst.len() > src.len {
            return Err(ExecError::Internal(format!(
                "download of {} bytes from a {}-byte Vulkan buffer",
                dst.len(),
                src.len
            )));
        }
        if let Some(m) = src.map {
            // Holding the buffer's device's submit lock keeps GPU commands
            // out while the host reads: each one runs and is waited on under
            // that lock.
            let _gpu = src
                .dev
                .submit
                .lock()
                .map_err(|_| ExecError::Internal("Vulkan submit lock poisoned".into()))?;
            // SAFETY: `m` maps at least `src.len` >= `dst.len()` bytes for as
            // long as `src` lives. Nothing writes them meanwhile: host writes
            // need `&mut VkBuf` (excluded by `&src`), and GPU commands run only
            // under the lock held here and finish (fence waited) before
            // releasing it; their writes were made visible to host reads by
            // the barrier that ends every command buffer (`run`).
            let from = unsafe { std::slice::from_raw_parts(m.0.as_ptr(), dst.len()) };
            dst.copy_from_slice(from);
            return Ok(());
        }
        self.with_staging(dst.len(), |k| {
            self.run("download", |cmd, _| {
                let r = [vk::BufferCopy::default().size(dst.len() as u64)];
                // SAFETY: both buffers are live and at least `dst.len()` bytes.
                unsafe { self.dev.cmd_copy_buffer(cmd, src.buffer, k.buffer, &r) };
                Ok(())
            })?;
            // SAFETY: as in `upload`; the download was waited on.
            unsafe { std::ptr::copy_nonoverlapping(k.ptr, dst.as_mut_ptr(), dst.len()) };
            Ok(())
        })
    }

    /// Copies byte regions of `srcs` (all on this device) into `dst`.
    pub fn copy_regions(
        &self,
        op: &str,
        regions: &[Region],
        srcs: &[&VkBuf],
        dst: &VkBuf,
    ) -> Result<(), ExecError> {
        for s in srcs {
            if s.dev.dev.handle() != self.dev.handle() {
                return Err(ExecError::NoDirectCopy {
                    src: s.dev.device,
                    dst: self.device,
                });
            }
        }
        self.run(op, |cmd, _| {
            for (k, s) in srcs.iter().enumerate() {
                let rs: Vec<vk::BufferCopy> = regions
                    .iter()
                    .filter(|r| r.operand == k && r.len > 0)
                    .map(|r| {
                        vk::BufferCopy::default()
                            .src_offset(r.src as u64)
                            .dst_offset(r.dst as u64)
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

    fn pipeline(&self, dtype: DType) -> Result<&Pipeline, ExecError> {
        self.pipes
            .iter()
            .find(|(d, _)| *d == dtype)
            .map(|(_, p)| p)
            .ok_or_else(|| self.unsupported(dtype))
    }

    fn unsupported(&self, dtype: DType) -> ExecError {
        ExecError::Unsupported {
            dtype,
            device: self.device,
            reason: self.supports(dtype).err().unwrap_or_default(),
        }
    }

    /// One dispatch of the element-wise shader.
    fn dispatch(
        &self,
        dtype: DType,
        op: u32,
        by: u32,
        ins: &[&VkBuf],
        dst: &VkBuf,
        n: usize,
    ) -> Result<(), ExecError> {
        let pipe = self.pipeline(dtype)?.pipeline;
        let first = ins
            .first()
            .ok_or_else(|| ExecError::Internal("dispatch without operands".into()))?;
        let n32 = u32::try_from(n).map_err(|_| ExecError::Device {
            device: self.device,
            op: "dispatch".into(),
            reason: format!("{n} elements exceed one dispatch (2^32-1)"),
        })?;
        let groups = n32.div_ceil(WORKGROUP).max(1);
        let gx = groups.min(MAX_GROUPS_X);
        let gy = groups.div_ceil(gx);
        let params = Params {
            n: n32,
            row_stride: gx * WORKGROUP,
            count: ins.len() as u32,
            op,
            by,
        };
        self.run("dispatch", |cmd, pool| {
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
                        .offset(0)
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

    /// `dst = fold(kind, [dst] ++ more)`, in place: `dst` is bound as the
    /// first operand and as the result of each dispatch. Every invocation
    /// reads its own element of each operand before writing that element of
    /// the result, and no invocation touches another's element, so the
    /// aliasing is safe; no accumulator copy is needed.
    pub fn fold_onto(
        &self,
        dtype: DType,
        kind: ElementwiseOp,
        dst: &VkBuf,
        more: &[&VkBuf],
        n: usize,
    ) -> Result<(), ExecError> {
        let op = fold_code(kind);
        for chunk in more.chunks(MAX_ARITY - 1) {
            let mut ins: Vec<&VkBuf> = Vec::with_capacity(chunk.len() + 1);
            ins.push(dst);
            ins.extend_from_slice(chunk);
            self.dispatch(dtype, op, 0, &ins, dst, n)?;
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
        self.dispatch(dtype, op, 0, head, dst, n)?;
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
            )?;
            let mut chunk: Vec<&VkBuf> = vec![&acc];
            chunk.extend_from_slice(&rest[..take]);
            self.dispatch(dtype, op, 0, &chunk, dst, n)?;
            rest = &rest[take..];
        }
        Ok(())
    }

    /// `dst = src / by`.
    pub fn div(
        &self,
        dtype: DType,
        by: u64,
        src: &VkBuf,
        dst: &VkBuf,
        n: usize,
    ) -> Result<(), ExecError> {
        let by = u32::try_from(by).map_err(|_| ExecError::Unsupported {
            dtype,
            device: self.device,
            reason: format!("div {{by={by}}} exceeds the 32-bit divisor of the Vulkan kernel"),
        })?;
        self.dispatch(dtype, 4, by, &[src], dst, n)
    }

    /// The same `VkDevice`?
    pub fn same_device(&self, other: &VkDev) -> bool {
        self.dev.handle() == other.dev.handle()
    }
}

impl Drop for VkDev {
    fn drop(&mut self) {
        // SAFETY: every buffer holds an Arc to this device, so none is alive;
        // every submit was waited on. Destroy children before the device.
        unsafe {
            let _ = self.dev.device_wait_idle();
            if let Some(k) = self.staging.lock().ok().and_then(|mut k| k.take()) {
                self.destroy_staging(k);
            }
            if let Ok(mut p) = self.pool.lock() {
                for b in std::mem::take(&mut p.by_len).into_values().flatten() {
                    self.destroy_storage(b);
                }
            }
            if let Ok(s) = self.submit.lock() {
                self.dev.destroy_fence(s.fence, None);
                self.dev.destroy_command_pool(s.pool, None);
                self.dev.destroy_descriptor_pool(s.descriptors, None);
            }
            for (_, p) in &self.pipes {
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

/// Destroys what a failed [`VkDev::create`] made.
#[derive(Default)]
struct Partial {
    dev: Option<ash::Device>,
    pool: vk::CommandPool,
    fence: vk::Fence,
    descriptors: vk::DescriptorPool,
    set_layout: vk::DescriptorSetLayout,
    layout: vk::PipelineLayout,
    pipes: Vec<vk::Pipeline>,
    modules: Vec<vk::ShaderModule>,
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
            dev.destroy_descriptor_pool(self.descriptors, None);
            dev.destroy_fence(self.fence, None);
            dev.destroy_command_pool(self.pool, None);
            dev.destroy_device(None);
        }
    }
}

/// The kernel's `op` code of an element-wise fold (`elementwise.wgsl`).
fn fold_code(kind: ElementwiseOp) -> u32 {
    match kind {
        ElementwiseOp::Add => 0,
        ElementwiseOp::Mul => 1,
        ElementwiseOp::Max => 2,
        ElementwiseOp::Min => 3,
    }
}

fn make_pipeline(
    dev: &ash::Device,
    layout: vk::PipelineLayout,
    spv: &[u8],
) -> Result<Pipeline, String> {
    let words = ash::util::read_spv(&mut std::io::Cursor::new(spv))
        .map_err(|e| format!("embedded SPIR-V is malformed: {e}"))?;
    // SAFETY: valid SPIR-V produced and validated by naga in build.rs.
    let module = unsafe {
        dev.create_shader_module(&vk::ShaderModuleCreateInfo::default().code(&words), None)
    }
    .map_err(vk_err("vkCreateShaderModule"))?;
    let stage = vk::PipelineShaderStageCreateInfo::default()
        .stage(vk::ShaderStageFlags::COMPUTE)
        .module(module)
        .name(c"main");
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

/// A device-local buffer; dropping it returns it to the device's pool (or
/// frees it) and updates the counter.
pub struct VkBuf {
    buffer: vk::Buffer,
    memory: vk::DeviceMemory,
    /// The persistent mapping of `memory`, in the mapped path.
    map: Option<Mapping>,
    len: usize,
    dev: Arc<VkDev>,
}

impl VkBuf {
    /// Its device.
    pub fn dev(&self) -> &Arc<VkDev> {
        &self.dev
    }

    /// Whether the host reaches it through a persistent mapping.
    pub fn is_mapped(&self) -> bool {
        self.map.is_some()
    }

    /// Runs `f` on the buffer's bytes where they lie when it is mapped
    /// ([`HostAccess::Mapped`]), holding its device's submit lock for the
    /// call as [`VkDev::download`] does; `None` when it is not mapped. Lets
    /// a host kernel read a Vulkan operand without downloading it first.
    /// `f` must not submit work to this buffer's device (the lock is held).
    pub fn with_mapped<R>(&self, f: impl FnOnce(&[u8]) -> R) -> Option<Result<R, ExecError>> {
        let m = self.map.as_ref()?;
        let Ok(_gpu) = self.dev.submit.lock() else {
            return Some(Err(ExecError::Internal(
                "Vulkan submit lock poisoned".into(),
            )));
        };
        // SAFETY: as in `VkDev::download`: `m` maps at least `self.len` bytes
        // while `self` lives; host writes need `&mut VkBuf`, excluded by
        // `&self`; GPU commands run only under the lock held here and were
        // waited on (and made visible to the host) before it was released.
        let bytes = unsafe { std::slice::from_raw_parts(m.0.as_ptr(), self.len) };
        Some(Ok(f(bytes)))
    }
}

impl Drop for VkBuf {
    fn drop(&mut self) {
        self.dev.counter.sub(self.len);
        // Back to the device's pool while it has room (no submit that uses
        // the buffer is in flight: each is waited on).
        if let Ok(mut p) = self.dev.pool.lock() {
            if p.bytes + self.len <= POOL_MAX_BYTES {
                p.bytes += self.len;
                p.by_len.entry(self.len).or_default().push(Pooled {
                    buffer: self.buffer,
                    memory: self.memory,
                    map: self.map,
                });
                return;
            }
        }
        self.dev.destroy_storage(Pooled {
            buffer: self.buffer,
            memory: self.memory,
            map: self.map,
        });
    }
}

impl VkDev {
    /// Unmaps (if mapped) and frees a storage buffer of this device.
    fn destroy_storage(&self, b: Pooled) {
        // SAFETY: the handles belong to this device and nothing uses them:
        // the buffer that held them is gone or being dropped, and every
        // submit that used it was waited on.
        unsafe {
            if b.map.is_some() {
                self.dev.unmap_memory(b.memory);
            }
            self.dev.destroy_buffer(b.buffer, None);
            self.dev.free_memory(b.memory, None);
        }
    }
}

/// The first memory type that is device-local, host-visible, coherent and
/// cached ([`HostAccess::Mapped`]).
fn mapped_memory_type(memory: &vk::PhysicalDeviceMemoryProperties) -> Option<u32> {
    let want = vk::MemoryPropertyFlags::DEVICE_LOCAL
        | vk::MemoryPropertyFlags::HOST_VISIBLE
        | vk::MemoryPropertyFlags::HOST_COHERENT
        | vk::MemoryPropertyFlags::HOST_CACHED;
    (0..memory.memory_type_count).find(|&i| {
        memory
            .memory_types
            .get(i as usize)
            .is_some_and(|t| t.property_flags.contains(want))
    })
}

/// A persistent host mapping of a storage buffer's memory.
#[derive(Clone, Copy)]
struct Mapping(NonNull<u8>);

// SAFETY: the pointer is only an address of device memory that stays mapped
// while the owning buffer (or its pool entry) lives; `upload` writes through
// it only with `&mut VkBuf`, `download` reads with `&VkBuf` under the
// device's submit lock, so moving or sharing the address between threads
// adds no unsynchronised access.
unsafe impl Send for Mapping {}
// SAFETY: as for `Send`.
unsafe impl Sync for Mapping {}

/// A storage buffer that is not handed out: its handles and mapping.
struct Pooled {
    buffer: vk::Buffer,
    memory: vk::DeviceMemory,
    map: Option<Mapping>,
}

/// The most bytes a Vulkan device keeps in its pool of freed buffers.
pub const POOL_MAX_BYTES: usize = 1 << 30;

/// Freed device buffers by length: a compiled executable allocates the same
/// sizes every run, and `vkAllocateMemory` per step cost more than the
/// work on lavapipe. Pooled buffers are not live: they do not count in
/// `current`.
#[derive(Default)]
struct BufPool {
    by_len: BTreeMap<usize, Vec<Pooled>>,
    bytes: usize,
}

/// A device's host-visible staging buffer, mapped for as long as it lives.
struct KeptStaging {
    buffer: vk::Buffer,
    memory: vk::DeviceMemory,
    len: usize,
    ptr: *mut u8,
}

// SAFETY: `ptr` is a mapping of `memory`, used only while holding the owning
// device's `staging` lock.
unsafe impl Send for KeptStaging {}

#[cfg(test)]
mod tests {
    use super::*;

    fn instance_or_skip(test: &str) -> Option<Arc<Instance>> {
        match Instance::open() {
            Ok(i) => Some(i),
            Err(u) => {
                assert!(
                    std::env::var("FUEL_REQUIRE_VULKAN").as_deref() != Ok("1"),
                    "{}",
                    u.reason
                );
                println!("SKIP: {test}: {}", u.reason);
                None
            }
        }
    }

    fn i32_bytes(v: impl Iterator<Item = u32>) -> Vec<u8> {
        v.flat_map(u32::to_le_bytes).collect()
    }

    /// Operand `k` of round `round`: every byte varies, so a byte dropped or
    /// shifted anywhere shows.
    fn operand(i: usize, k: usize, round: u32) -> u32 {
        (i as u32)
            .wrapping_mul(2_654_435_761)
            .wrapping_add((k as u32 + 1).wrapping_mul(0x9e37_79b9))
            .wrapping_add(round.wrapping_mul(0x85eb_ca6b))
    }

    /// Round trips, a fold longer than one dispatch (its scratch
    /// accumulator comes from and goes back to the pool) and pooled buffers
    /// reused with new data, in `access`; returns whether buffers were mapped.
    fn transfers_and_folds(access: HostAccess) -> bool {
        let Some(inst) = instance_or_skip("transfers_and_folds") else {
            return false;
        };
        let on_lavapipe = inst
            .adapters()
            .first()
            .is_some_and(|a| a.name.contains("llvmpipe"));
        let dev = inst.open_device_with(Device::vulkan(0), access).unwrap();
        let faults = Faults::new(None);
        // Over 1 MiB, and operands enough for two chained dispatches.
        let n = 300_000usize;
        let ops = MAX_ARITY + 2;
        for round in 0..3u32 {
            let mut ins = Vec::new();
            for k in 0..ops {
                let data = i32_bytes((0..n).map(|i| operand(i, k, round)));
                let mut b = dev.alloc(data.len(), &faults).unwrap();
                dev.upload(&data, &mut b).unwrap();
                let mut back = vec![0u8; data.len()];
                dev.download(&b, &mut back).unwrap();
                assert_eq!(back, data, "round {round}: operand {k} round trip");
                ins.push(b);
            }
            assert_eq!(dev.stats().current, ops * n * 4);
            let out = dev.alloc(n * 4, &faults).unwrap();
            let refs: Vec<&VkBuf> = ins.iter().collect();
            dev.fold(DType::I32, ElementwiseOp::Add, &refs, &out, n, &faults)
                .unwrap();
            let mut got = vec![0u8; n * 4];
            dev.download(&out, &mut got).unwrap();
            let want = i32_bytes(
                (0..n).map(|i| (0..ops).fold(0u32, |a, k| a.wrapping_add(operand(i, k, round)))),
            );
            assert!(
                got == want,
                "round {round}: fold of {ops} operands is wrong"
            );
            for b in ins.iter().chain([&out]) {
                assert_eq!(b.is_mapped(), dev.host_mapped());
            }
            drop(refs);
            drop((ins, out));
            assert_eq!(dev.stats().current, 0, "round {round}: bytes still counted");
            assert_eq!(dev.stats().live_buffers, 0);
            // Every buffer went back to the pool: the operands, the output
            // and the accumulator of the chained dispatch.
            assert_eq!(dev.pooled_bytes(), (ops + 2) * n * 4, "round {round}");
        }
        if access == HostAccess::Staging {
            assert!(!dev.host_mapped());
        } else if on_lavapipe {
            assert!(
                dev.host_mapped(),
                "lavapipe has a DEVICE_LOCAL | HOST_VISIBLE | HOST_COHERENT | HOST_CACHED type"
            );
        }
        dev.host_mapped()
    }

    #[test]
    fn mapped_buffers_compute_right_and_return_to_the_pool() {
        transfers_and_folds(HostAccess::Mapped);
    }

    #[test]
    fn staging_fallback_computes_right_and_returns_to_the_pool() {
        transfers_and_folds(HostAccess::Staging);
    }

    #[test]
    fn transfers_past_the_buffer_are_refused() {
        let Some(inst) = instance_or_skip("transfers_past_the_buffer_are_refused") else {
            return;
        };
        for access in [HostAccess::Mapped, HostAccess::Staging] {
            let dev = inst.open_device_with(Device::vulkan(0), access).unwrap();
            let faults = Faults::new(None);
            let mut b = dev.alloc(16, &faults).unwrap();
            let e = dev.upload(&[0u8; 32], &mut b).unwrap_err().to_string();
            assert!(e.contains("upload of 32 bytes into a 16-byte"), "{e}");
            let e = dev.download(&b, &mut [0u8; 32]).unwrap_err().to_string();
            assert!(e.contains("download of 32 bytes from a 16-byte"), "{e}");
            drop(b);
            assert_eq!(dev.stats().current, 0);
        }
    }
}
