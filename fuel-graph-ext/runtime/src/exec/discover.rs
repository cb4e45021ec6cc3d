//! Device discovery: what this machine can open, and why the rest cannot be.
//!
//! Any `cpu:N` can be opened (discovery lists `cpu:0`). Each Vulkan adapter
//! gives `FUEL_VULKAN_DEVICES` logical devices (default 2), numbered adapter
//! by adapter. Each CUDA GPU is one `cuda:N`. A backend that cannot be used
//! is reported with the reason and a hint, never a panic: no Vulkan loader,
//! no ICD (`vkCreateInstance` gives `ERROR_INCOMPATIBLE_DRIVER`), no
//! physical device, no libcuda, no GPU. Each Vulkan device's line says
//! whether it reads host-arena buffers in place (host import, see
//! `backend::vulkan`) or why not; each CUDA device's line whether it
//! page-locks them (`backend::cuda::pin`).

#[cfg(feature = "cuda")]
use crate::backend::cuda;
#[cfg(feature = "vulkan")]
use crate::backend::vulkan;
use fuel_graph_ext::device::Device;

/// A backend that cannot be used here.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unavailable {
    /// `cuda` or `vulkan`.
    pub backend: String,
    /// What went wrong.
    pub reason: String,
    /// How to fix it.
    pub hint: String,
}

/// The result of [`discover`].
#[derive(Clone, Debug, Default)]
pub struct Discovery {
    /// Devices that can be opened, with a description each.
    pub available: Vec<(Device, String)>,
    /// Backends that cannot be used.
    pub unavailable: Vec<Unavailable>,
}

impl Discovery {
    /// True if `device` is listed as available (`cpu:N` always is).
    pub fn has(&self, device: Device) -> bool {
        device.is_cpu() || self.available.iter().any(|(d, _)| *d == device)
    }

    /// Why `device` is not available, if it is not.
    pub fn why_not(&self, device: Device) -> Option<String> {
        if self.has(device) {
            return None;
        }
        let backend = device.kind.as_str();
        Some(
            self.unavailable
                .iter()
                .find(|u| u.backend == backend)
                .map(|u| format!("{device} is unavailable: {}; {}", u.reason, u.hint))
                .unwrap_or_else(|| {
                    format!("{device} does not exist on this machine (see `fuel-opt devices`)")
                }),
        )
    }
}

/// Probes every backend.
pub fn discover() -> Discovery {
    let mut d = Discovery::default();
    d.available.push((
        Device::cpu(0),
        "host arena (any cpu:N can be opened)".into(),
    ));
    #[cfg(feature = "vulkan")]
    match vulkan::Instance::open().and_then(|inst| {
        let per = vulkan::devices_per_adapter().map_err(|e| vulkan::Unavailable {
            reason: e.to_string(),
            hint: "FUEL_VULKAN_DEVICES sets how many logical devices each adapter gives".into(),
        })?;
        Ok((inst, per))
    }) {
        Ok((inst, per)) => {
            for (a, info) in inst.adapters().iter().enumerate() {
                let import = match inst.host_import(a) {
                    Ok(align) if info.host_memory => {
                        format!("host import on ({align}-byte pointers; inputs read in place)")
                    }
                    Ok(align) => format!("host import on ({align}-byte pointers)"),
                    Err(why) => format!("host import off: {why}"),
                };
                for k in 0..per {
                    let dev = Device::vulkan(a as u32 * per + k);
                    let f16 = if info.f16 { ", f16" } else { "" };
                    d.available.push((
                        dev,
                        format!(
                            "{} (logical device {k} of {per} on adapter {a}{f16}; {import})",
                            info.name
                        ),
                    ));
                }
            }
        }
        Err(u) => d.unavailable.push(Unavailable {
            backend: "vulkan".into(),
            reason: u.reason,
            hint: u.hint,
        }),
    }
    #[cfg(feature = "cuda")]
    match cuda::device_count() {
        Ok(n) => {
            let pin = match cuda::pin::pin_decision(cuda::pin::pin_setting()) {
                Ok(()) => "host-arena buffers page-locked for one-DMA transfers".to_string(),
                Err(why) => format!("host-arena pinning off: {why}"),
            };
            for i in 0..n {
                d.available
                    .push((Device::cuda(i as u32), format!("CUDA GPU {i} ({pin})")));
            }
        }
        Err((reason, hint)) => d.unavailable.push(Unavailable {
            backend: "cuda".into(),
            reason,
            hint,
        }),
    }
    #[cfg(not(feature = "vulkan"))]
    d.unavailable.push(compiled_out("vulkan"));
    #[cfg(not(feature = "cuda"))]
    d.unavailable.push(compiled_out("cuda"));
    d
}

/// A backend this build left out.
#[allow(dead_code)] // unused when every backend is compiled in
fn compiled_out(backend: &str) -> Unavailable {
    Unavailable {
        backend: backend.into(),
        reason: format!("this build has no {backend} backend (cargo feature `{backend}` is off)"),
        hint: crate::error::feature_hint(backend),
    }
}
