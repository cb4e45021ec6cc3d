//! [`RuntimeOptions`]: the switches of the runtime that are not choices of
//! the plan (those are [`fuel_graph_ext::plan::Options`]): how long a
//! driver island waits for its ranks, how long a waiting runner thread
//! polls, how many logical devices a Vulkan adapter gives and whether they
//! map memory, whether CUDA page-locks host arenas, and the order the
//! threaded runner hands each lane its steps in. `compile` takes
//! them as a value and reads no environment variable; the CLI and the tests
//! build them with [`RuntimeOptions::from_env`], which reads each variable
//! where it always was, with its bounds.

use crate::driver::{DriverError, JoinOptions};
use crate::error::ExecError;
use std::time::Duration;

/// How the runtime opens devices, joins islands and waits; see the module.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RuntimeOptions {
    /// The timeouts of a `driver_all_reduce` island's join and calls
    /// (`FUEL_JOIN_TIMEOUT_MS`, `FUEL_COLLECTIVE_TIMEOUT_MS`).
    pub join: JoinOptions,
    /// How long a waiting thread of the threaded runner polls before it
    /// sleeps (`FUEL_SPIN_US`; default 50 µs).
    pub spin: Duration,
    /// Logical devices per Vulkan adapter (`FUEL_VULKAN_DEVICES`; default 2).
    pub vulkan_devices_per_adapter: u32,
    /// Vulkan storage buffers in mapped memory where the device allows
    /// (`FUEL_VULKAN_MAPPED`; default true), or always staged.
    pub vulkan_mapped: bool,
    /// CUDA devices page-lock host-arena buffers (`FUEL_CUDA_PIN`; default
    /// true), or stage each transfer.
    pub cuda_pin: bool,
    /// The order in which the threaded runner hands each lane its ready
    /// steps (`FUEL_DISPATCH`; default `Dispatch::Fifo`;
    /// `Dispatch::InOrder` runs the order `schedule-collectives` chose).
    pub dispatch: super::Dispatch,
}

impl Default for RuntimeOptions {
    fn default() -> Self {
        RuntimeOptions {
            join: JoinOptions::default(),
            spin: Duration::from_micros(crate::backend::worker::DEFAULT_SPIN_US),
            vulkan_devices_per_adapter: 2,
            vulkan_mapped: true,
            cuda_pin: true,
            dispatch: super::Dispatch::Fifo,
        }
    }
}

impl RuntimeOptions {
    /// The defaults, overridden by the variables named on each field; a
    /// value a variable does not accept is an error naming it.
    pub fn from_env() -> Result<RuntimeOptions, ExecError> {
        #[allow(unused_mut)] // nothing more to set in a build without GPUs
        let mut o = RuntimeOptions {
            join: JoinOptions::from_env().map_err(|e| match e {
                DriverError::Env(e) => ExecError::Env(e),
                e => ExecError::Internal(e.to_string()),
            })?,
            spin: crate::backend::worker::spin_setting()?,
            dispatch: super::Dispatch::from_env()?.unwrap_or_default(),
            ..RuntimeOptions::default()
        };
        #[cfg(feature = "vulkan")]
        {
            use crate::backend::vulkan::{devices_per_adapter, HostAccess};
            o.vulkan_devices_per_adapter = devices_per_adapter()?;
            o.vulkan_mapped = HostAccess::from_env()? == HostAccess::Mapped;
        }
        #[cfg(feature = "cuda")]
        {
            o.cuda_pin = crate::backend::cuda::pin::pin_flag()?;
        }
        Ok(o)
    }
}
