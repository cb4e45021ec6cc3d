//! Host-arena blocks page-locked for CUDA (`cuMemHostRegister`), so that a
//! transfer between a CUDA GPU and a host arena is one DMA straight into or
//! out of the arena's bytes.
//!
//! Without it a large transfer goes through a pinned staging buffer made
//! for the call: the GPU's DMA into the staging buffer, then a memcpy into
//! the arena (the other way round for an upload). A host arena's
//! [`PageBlock`] of at least [`PINNED_MIN`] bytes is instead registered
//! once, `CU_MEMHOSTREGISTER_PORTABLE` (pinned for every CUDA context), and
//! the registration is attached to the block as a [`HostView`]: a pooled
//! block keeps it for the next run, and it is undone before the block's
//! memory is freed. A block a Vulkan device imported can be registered
//! too, so a staged `cuda:0 -> cpu:0 -> vulkan:0` hop writes the bytes
//! once, into memory the Vulkan step reads where it lies.
//!
//! Transfers run on the device's copy stream. Every CUDA call here
//! synchronises its stream before returning, so no DMA is in flight when a
//! block is released. `FUEL_CUDA_PIN=0` turns pinning
//! off (the staging path, for comparison); a driver that refuses a
//! registration turns it off for that device, and [`CudaDev::pin_status`]
//! says why.

use super::{guarded, CudaDev, Lane, PINNED_MIN};
use crate::backend::cpu::CpuBuf;
use crate::backend::pages::{HostView, PageBlock};
use crate::error::ExecError;
use cudarc::driver::{sys, CudaContext};
use std::sync::Arc;

/// The variable that turns pinning off.
pub const PIN_VAR: &str = "FUEL_CUDA_PIN";

/// `FUEL_CUDA_PIN`: unset, empty or `1` pins host-arena blocks, `0` stages
/// through a buffer per call; anything else is an error naming the variable.
pub fn pin_setting() -> Result<bool, String> {
    pin_flag().map_err(|e| e.to_string())
}

/// [`pin_setting`] with the variable's own error.
pub fn pin_flag() -> Result<bool, fuel_graph_ext::env::EnvError> {
    fuel_graph_ext::env::flag(
        PIN_VAR,
        true,
        "1 page-locks host-arena buffers for CUDA, 0 stages through a pinned buffer per transfer",
    )
}

/// Whether pinning is on, from the setting: `Err` says why it is off.
pub fn pin_decision(setting: Result<bool, String>) -> Result<(), String> {
    match setting {
        Ok(true) => Ok(()),
        Ok(false) => Err(format!("{PIN_VAR}=0")),
        Err(e) => Err(e),
    }
}

/// The owner every CUDA registration has: a portable registration serves
/// every context, so one per block is enough. The address of a static, so
/// it never equals a Vulkan device's handle.
fn owner() -> u64 {
    static OWNER: u8 = 0;
    std::ptr::addr_of!(OWNER) as u64
}

/// One block's registration, undone when the block is freed.
struct Registered {
    ctx: Arc<CudaContext>,
    ptr: usize,
}

impl HostView for Registered {
    fn owner(&self) -> u64 {
        owner()
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }

    fn release(&self) -> bool {
        let ptr = self.ptr as *mut std::ffi::c_void;
        // A failure leaves the pages locked but no DMA pending (every call
        // synchronised its stream), so the memory may still be freed.
        let _ = guarded(|| {
            self.ctx.bind_to_thread()?;
            // SAFETY: `ptr` was registered by `pin` below and is registered
            // once; nothing reads it through CUDA any more.
            unsafe { sys::cuMemHostUnregister(ptr) }.result()
        });
        true
    }
}

/// Whether `block` is registered with CUDA.
pub fn is_pinned(block: &PageBlock) -> bool {
    block.with_views(|views| views.iter().any(|v| v.owner() == owner()))
}

impl CudaDev {
    /// Whether this device page-locks host-arena buffers, or why not.
    pub fn pin_status(&self) -> Result<(), String> {
        self.pin.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Registers `block` (once) and says whether it is pinned; `false`, and
    /// the caller stages, when pinning is off or the driver refuses (which
    /// turns pinning off for this device, with the reason).
    fn pin(&self, block: &PageBlock) -> bool {
        if self.pin_status().is_err() {
            return false;
        }
        let refused = block.with_views(|views| {
            if views.iter().any(|v| v.owner() == owner()) {
                return None;
            }
            let ptr = block.ptr();
            let made = guarded(|| {
                self.ctx.bind_to_thread()?;
                // SAFETY: the block's memory is live, `cap` bytes long and
                // freed only after this registration is released (it is
                // attached to the block below).
                unsafe {
                    sys::cuMemHostRegister_v2(
                        ptr.cast(),
                        block.cap(),
                        sys::CU_MEMHOSTREGISTER_PORTABLE,
                    )
                }
                .result()
            });
            match made {
                Ok(Ok(())) => {
                    views.push(Box::new(Registered {
                        ctx: self.ctx.clone(),
                        ptr: ptr as usize,
                    }));
                    None
                }
                Ok(Err(e)) => Some(format!(
                    "cuMemHostRegister refused a {} byte block: {e}",
                    block.cap()
                )),
                Err(p) => Some(format!("cuMemHostRegister failed: {p}")),
            }
        });
        match refused {
            None => true,
            Some(why) => {
                tracing::warn!(device = %self.device, "{why}; host transfers stage through a pinned buffer from now on");
                *self.pin.lock().unwrap_or_else(|e| e.into_inner()) = Err(why);
                false
            }
        }
    }

    /// Whether a transfer of `len` bytes to or from `buf` may go straight
    /// to its bytes: a large one into a block that is (now) pinned.
    fn direct(&self, buf: &CpuBuf, len: usize) -> bool {
        len >= PINNED_MIN && buf.page_block().is_some_and(|b| self.pin(b))
    }

    /// The first `len` bytes of host-arena buffer `src` into `dst`, on the
    /// copy stream: one DMA from the arena when its block is pinned, else
    /// [`CudaDev::upload`].
    pub fn upload_from(
        &self,
        src: &CpuBuf,
        len: usize,
        dst: &mut super::CudaBuf,
    ) -> Result<(), ExecError> {
        let bytes = &src.bytes()[..len];
        if !self.direct(src, len) {
            return self.upload(bytes, dst);
        }
        let slice = dst.slice_mut()?;
        self.call(Lane::Copy, "upload", |s| {
            s.memcpy_htod(bytes, &mut slice.slice_mut(..len))
        })
    }

    /// The first `len` bytes of `src` into host-arena buffer `dst`, on the
    /// copy stream: one DMA into the arena when its block is pinned, else
    /// [`CudaDev::download`].
    pub fn download_into(
        &self,
        src: &super::CudaBuf,
        dst: &mut CpuBuf,
        len: usize,
    ) -> Result<(), ExecError> {
        if !self.direct(dst, len) {
            return self.download(src, &mut dst.bytes_mut()[..len]);
        }
        let slice = src.slice()?;
        let out = &mut dst.bytes_mut()[..len];
        self.call(Lane::Copy, "download", |s| {
            s.memcpy_dtoh(&slice.slice(..len), out)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_setting_turns_pinning_off_and_says_why() {
        assert_eq!(pin_decision(Ok(true)), Ok(()));
        assert_eq!(pin_decision(Ok(false)), Err("FUEL_CUDA_PIN=0".into()));
        assert_eq!(pin_decision(Err("bad".into())), Err("bad".into()));
    }

    #[test]
    fn a_cuda_registration_is_told_apart_from_vulkan_imports() {
        // A view owned by something else (a Vulkan device handle) does not
        // count as a CUDA registration.
        struct Other;
        impl HostView for Other {
            fn owner(&self) -> u64 {
                0x1000
            }
            fn as_any(&self) -> &dyn std::any::Any {
                self
            }
            fn release(&self) -> bool {
                true
            }
        }
        let block = PageBlock::new(PINNED_MIN).unwrap();
        assert!(!is_pinned(&block));
        block.with_views(|v| v.push(Box::new(Other)));
        assert!(!is_pinned(&block));
        assert_ne!(owner(), 0);
        assert_ne!(owner(), 0x1000);
    }
}
