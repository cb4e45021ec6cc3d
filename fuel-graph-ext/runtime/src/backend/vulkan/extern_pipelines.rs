//! `extern` ops on a Vulkan device: the SPIR-V the caller registered
//! (`crate::kernels::register_wgsl`, `register_spirv`) made into a pipeline
//! on first use, kept per device by name, and dispatched over the result's
//! elements with the layout every kernel of the backend shares (operands at
//! bindings 0 to 7, the result at 8, the 24-byte parameter block, whose
//! `op` and `by` words carry the kernel's two parameters).

use super::kernels::make_pipeline;
use super::*;

impl VkDev {
    /// Runs the extern kernel `name` (SPIR-V `spirv`) over `ins` into
    /// `dst`: one invocation per element of its `n`, with `params` in the
    /// parameter block's `op` and `by` words.
    #[allow(clippy::too_many_arguments)] // one per piece of the dispatch
    pub fn run_extern(
        &self,
        name: &str,
        spirv: &[u8],
        params: [u32; 2],
        ins: &[&VkBuf],
        dst: &VkBuf,
        n: usize,
        faults: &Faults,
    ) -> Result<(), ExecError> {
        let pipe = {
            let mut made = self.externs.lock().map_err(|_| {
                ExecError::Internal("the extern pipelines' lock is poisoned".into())
            })?;
            match made.get(name) {
                Some(p) => p.pipeline,
                None => {
                    let p = make_pipeline(&self.dev, self.layout, spirv).map_err(|reason| {
                        ExecError::Device {
                            device: self.device,
                            op: format!("extern \"{name}\""),
                            reason,
                        }
                    })?;
                    let pipeline = p.pipeline;
                    made.insert(name.to_string(), p);
                    pipeline
                }
            }
        };
        let [op, by] = params;
        self.dispatch_on(pipe, ins.len() as u32, op, by, ins, dst, n, false, faults)
    }

    /// Destroys the extern pipelines (the device's drop, before the device).
    pub(super) fn destroy_externs(&self) {
        if let Ok(mut made) = self.externs.lock() {
            for (_, p) in made.drain() {
                // SAFETY: the device is idle (its drop waited) and nothing
                // else holds these handles.
                unsafe {
                    self.dev.destroy_pipeline(p.pipeline, None);
                    self.dev.destroy_shader_module(p.module, None);
                }
            }
        }
    }
}
