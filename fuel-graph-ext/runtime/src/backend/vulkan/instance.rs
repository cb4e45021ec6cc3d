//! The Vulkan loader, the instance and its adapters: what discovery
//! reports, and where `vulkan:N` is opened (adapter `N / per_adapter`).

use super::*;
use fuel_graph_ext::limits::Limit;

/// A loaded loader and an instance, shared by the devices opened on it.
pub struct Instance {
    // Kept alive: the instance's function pointers come from it.
    pub(super) _entry: ash::Entry,
    pub(super) instance: ash::Instance,
    pub(super) adapters: Vec<vk::PhysicalDevice>,
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
    /// The driver and its version, as it reports them (`Mesa 22.3.6`), or
    /// the raw driver and API versions on Vulkan before 1.2.
    pub driver: String,
    /// True if the adapter has the memory type mapped storage buffers use
    /// ([`HostAccess::Mapped`]).
    pub mappable: bool,
    /// True if its memory is the host's: a CPU device (lavapipe) or an
    /// integrated GPU.
    pub host_memory: bool,
    /// True if it is a CPU device (lavapipe): its kernels run on the
    /// host's cores, each dispatch spread over all of them.
    pub cpu_device: bool,
    /// The offset multiple at which a kernel binds a view of a buffer
    /// ([`view_align`]).
    pub view_align: u64,
}

/// The offset multiple at which a device with `limits` binds a view of a
/// storage buffer: its `minStorageBufferOffsetAlignment`, and at least one
/// 4-byte word (the kernels' unit).
pub fn view_align(limits: &vk::PhysicalDeviceLimits) -> u64 {
    limits.min_storage_buffer_offset_alignment.max(4)
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
                // SAFETY: a physical device of this live instance.
                let memory = unsafe { self.instance.get_physical_device_memory_properties(*pd) };
                AdapterInfo {
                    name,
                    f16: self.f16_support(*pd),
                    f64: self.core_features(*pd).shader_float64 == vk::TRUE,
                    i64: self.core_features(*pd).shader_int64 == vk::TRUE,
                    driver: self.driver(*pd, &props),
                    mappable: memory::mapped_memory_type(&memory).is_some(),
                    host_memory: matches!(
                        props.device_type,
                        vk::PhysicalDeviceType::CPU | vk::PhysicalDeviceType::INTEGRATED_GPU
                    ),
                    cpu_device: props.device_type == vk::PhysicalDeviceType::CPU,
                    view_align: view_align(&props.limits),
                }
            })
            .collect()
    }

    /// What fits on a device of adapter `pd` whose storage buffers live in
    /// `mapped_type` (or, without one, the largest device-local heap).
    pub(super) fn capacity(
        &self,
        pd: vk::PhysicalDevice,
        memory: &vk::PhysicalDeviceMemoryProperties,
        mapped_type: Option<u32>,
    ) -> Capacity {
        let mut m3 = vk::PhysicalDeviceMaintenance3Properties::default();
        let mut p2 = vk::PhysicalDeviceProperties2::default().push_next(&mut m3);
        // SAFETY: a physical device of this live instance (API 1.2, where
        // properties2 is core); the chain lives across the call.
        unsafe { self.instance.get_physical_device_properties2(pd, &mut p2) };
        let range = p2.properties.limits.max_storage_buffer_range as usize;
        let heaps = &memory.memory_heaps
            [..(memory.memory_heap_count as usize).min(memory.memory_heaps.len())];
        let heap = match mapped_type.and_then(|t| memory.memory_types.get(t as usize)) {
            Some(t) => heaps.get(t.heap_index as usize).map_or(0, |h| h.size),
            None => heaps
                .iter()
                .filter(|h| h.flags.contains(vk::MemoryHeapFlags::DEVICE_LOCAL))
                .map(|h| h.size)
                .max()
                .unwrap_or(0),
        };
        let heap = usize::try_from(heap).unwrap_or(usize::MAX);
        // A 1.0 device leaves maintenance3's figure at 0: the heap bounds it.
        let alloc = match usize::try_from(m3.max_memory_allocation_size) {
            Ok(0) | Err(_) => heap,
            Ok(a) => a.min(heap),
        };
        let limit = |bytes: usize, what: &str| Limit {
            bytes,
            what: what.into(),
        };
        Capacity {
            buffer: if alloc < heap {
                limit(alloc, "maxMemoryAllocationSize")
            } else {
                limit(heap, "its memory heap")
            },
            kernel_buffer: limit(range.min(alloc), "maxStorageBufferRange"),
            total: limit(heap, "its memory heap"),
        }
    }

    /// `driverName driverInfo` on Vulkan 1.2 and later, else the raw
    /// versions.
    fn driver(&self, pd: vk::PhysicalDevice, props: &vk::PhysicalDeviceProperties) -> String {
        let raw = format!(
            "driver version {:#x}, Vulkan {}.{}.{}",
            props.driver_version,
            vk::api_version_major(props.api_version),
            vk::api_version_minor(props.api_version),
            vk::api_version_patch(props.api_version)
        );
        if props.api_version < vk::API_VERSION_1_2 {
            return raw;
        }
        let mut driver = vk::PhysicalDeviceDriverProperties::default();
        let mut p2 = vk::PhysicalDeviceProperties2::default().push_next(&mut driver);
        // SAFETY: the chain is well formed and lives across the call.
        unsafe { self.instance.get_physical_device_properties2(pd, &mut p2) };
        let name = driver
            .driver_name_as_c_str()
            .map(|c| c.to_string_lossy().into_owned())
            .unwrap_or_default();
        let info = driver
            .driver_info_as_c_str()
            .map(|c| c.to_string_lossy().into_owned())
            .unwrap_or_default();
        match (name.is_empty(), info.is_empty()) {
            (true, true) => raw,
            _ => format!("{name} {info}").trim().to_string(),
        }
    }

    pub(super) fn core_features(&self, pd: vk::PhysicalDevice) -> vk::PhysicalDeviceFeatures {
        // SAFETY: a physical device of this live instance.
        unsafe { self.instance.get_physical_device_features(pd) }
    }

    pub(super) fn f16_support(&self, pd: vk::PhysicalDevice) -> bool {
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
        self.open_device_with(device, HostAccess::from_env()?)
    }

    /// Opens `vulkan:N` with `access`, and `FUEL_VULKAN_DEVICES` and
    /// `FUEL_VULKAN_IMPORT` as the environment sets them.
    pub fn open_device_with(
        self: &Arc<Self>,
        device: Device,
        access: HostAccess,
    ) -> Result<Arc<VkDev>, ExecError> {
        let per = devices_per_adapter()?;
        let import = super::import::import_setting().map_err(|e| ExecError::DeviceUnavailable {
            device: device.to_string(),
            reason: e,
            hint: "`fuel-opt devices` shows whether import is on".into(),
        })?;
        self.open_device_as(
            device,
            OpenOptions {
                per_adapter: per,
                access,
                import,
            },
        )
    }

    /// Opens `vulkan:N` as `opts` says: adapter `N / opts.per_adapter`,
    /// its own `VkDevice`. Reads no environment variable.
    pub fn open_device_as(
        self: &Arc<Self>,
        device: Device,
        opts: OpenOptions,
    ) -> Result<Arc<VkDev>, ExecError> {
        let per = opts.per_adapter;
        let unavailable = |reason: String, hint: String| ExecError::DeviceUnavailable {
            device: device.to_string(),
            reason,
            hint,
        };
        if !(1..=MAX_DEVICES_PER_ADAPTER).contains(&per) {
            return Err(unavailable(
                format!("{per} logical devices per adapter were asked for"),
                format!("ask for 1 to {MAX_DEVICES_PER_ADAPTER} (FUEL_VULKAN_DEVICES)"),
            ));
        }
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
        VkDev::create(self.clone(), pd, device, (opts.access, opts.import))
            .map_err(|e| unavailable(e, "run `fuel-opt devices` to see what is available".into()))
    }
}
