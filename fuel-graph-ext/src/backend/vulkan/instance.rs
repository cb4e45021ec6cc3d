//! The Vulkan loader, the instance and its adapters: what discovery
//! reports, and where `vulkan:N` is opened (adapter `N / per_adapter`).

use super::*;

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
        super::import::import_setting()
            .map_err(|e| unavailable(e, "`fuel-opt devices` shows whether import is on".into()))?;
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
