//! The Copy arm: how bytes move between two devices.
//!
//! [`copy`] is one exhaustive `match` on (source kind, destination kind)
//! with no wildcard, so adding a backend fails to compile until every pair is
//! decided. Host arenas copy with memcpy (a host copy that only feeds other
//! steps never gets here: the runner shares the source's buffer, see
//! `schedule::Work::Share`); host and CUDA use the driver's
//! copies (one DMA into or out of a page-locked arena block for large
//! transfers, else pinned staging; see `cuda::pin`); CUDA to CUDA is a device or
//! peer copy; every CUDA leg runs on a copy stream (`cuda::Lane::Copy`),
//! beside the device's kernels; host and Vulkan go through a host-visible staging buffer;
//! Vulkan to Vulkan works only within one `VkDevice`. Every other pair is an
//! error that names the pass which stages it through the host,
//! `split-cross-vendor-copies`. A `move` is a copy whose source the runner
//! frees as soon as the copy finishes. A backend compiled out (cargo
//! feature off) takes its arms with it; the match stays exhaustive.

use crate::backend::cpu;
#[cfg(feature = "cuda")]
use crate::backend::cuda::Lane;
use crate::backend::fault::{Event, Faults};
#[cfg(any(feature = "cuda", feature = "vulkan"))]
use crate::backend::Region;
use crate::backend::{Buf, Ctx};
use crate::error::ExecError;

/// Copies `bytes` of `src` into a new buffer on `dst` (into `reuse` when
/// `dst` is a host arena that can take it, see [`Ctx::alloc_reusing`]).
pub fn copy(
    src: &Buf,
    dst: &Ctx,
    bytes: usize,
    faults: &Faults,
    reuse: Option<std::sync::Arc<[u8]>>,
) -> Result<Buf, ExecError> {
    let mut out = alloc_dst(dst, bytes, faults, reuse)?;
    if faults.check(Event::Copy) {
        return Err(ExecError::Injected {
            device: dst.device(),
            op: "copy".into(),
        });
    }
    #[cfg(any(feature = "cuda", feature = "vulkan"))]
    let whole = [Region {
        operand: 0,
        src: 0,
        dst: 0,
        len: bytes,
    }];
    match (src, &mut out) {
        (Buf::Cpu(s), Buf::Cpu(d)) => cpu::memcpy(&s.bytes()[..bytes], d),
        #[cfg(feature = "cuda")]
        (Buf::Cpu(s), Buf::Cuda(d)) => d.dev().clone().upload_from(s, bytes, d)?,
        #[cfg(feature = "cuda")]
        (Buf::Cuda(s), Buf::Cpu(d)) => s.dev().download_into(s, d, bytes)?,
        // Same context: a device copy; two contexts: cudarc issues a peer copy.
        #[cfg(feature = "cuda")]
        (Buf::Cuda(s), Buf::Cuda(d)) => {
            d.dev()
                .clone()
                .copy_regions(Lane::Copy, "copy", &whole, &[s], d)?
        }
        #[cfg(feature = "vulkan")]
        (Buf::Cpu(s), Buf::Vulkan(d)) => d.dev().clone().upload(&s.bytes()[..bytes], d)?,
        #[cfg(feature = "vulkan")]
        (Buf::Vulkan(s), Buf::Cpu(d)) => s.dev().download(s, &mut d.bytes_mut()[..bytes])?,
        #[cfg(feature = "vulkan")]
        (Buf::Vulkan(s), Buf::Vulkan(d)) => {
            if !s.dev().same_device(d.dev()) {
                return Err(ExecError::NoDirectCopy {
                    src: s.dev().device,
                    dst: d.dev().device,
                });
            }
            d.dev().copy_regions("copy", &whole, &[s], d, faults)?
        }
        #[cfg(all(feature = "cuda", feature = "vulkan"))]
        (Buf::Cuda(s), Buf::Vulkan(d)) => {
            return Err(ExecError::NoDirectCopy {
                src: s.dev().device,
                dst: d.dev().device,
            })
        }
        #[cfg(all(feature = "cuda", feature = "vulkan"))]
        (Buf::Vulkan(s), Buf::Cuda(d)) => {
            return Err(ExecError::NoDirectCopy {
                src: s.dev().device,
                dst: d.dev().device,
            })
        }
    }
    Ok(out)
}

/// The copy's destination: on a CUDA device, made on its copy stream, so
/// that making it does not wait for a kernel on the compute stream.
fn alloc_dst(
    dst: &Ctx,
    bytes: usize,
    faults: &Faults,
    reuse: Option<std::sync::Arc<[u8]>>,
) -> Result<Buf, ExecError> {
    #[cfg(feature = "cuda")]
    if let Ctx::Cuda(c) = dst {
        return Ok(Buf::Cuda(c.alloc_on(Lane::Copy, bytes, faults)?));
    }
    dst.alloc_reusing(bytes, faults, reuse)
}

#[cfg(all(test, feature = "vulkan"))]
mod tests {
    use super::*;
    use crate::backend::vulkan::Instance;
    use fuel_graph_ext::device::Device;

    /// The arm itself refuses vulkan:0 -> vulkan:1 (two VkDevices), even when
    /// a graph slipped past the verifier, and releases what it allocated.
    #[test]
    fn the_arm_refuses_copies_between_two_vkdevices() {
        let inst = match Instance::open() {
            Ok(i) => i,
            Err(u) => {
                let test = "the_arm_refuses_copies_between_two_vkdevices";
                fuel_test_support::skip(test, fuel_test_support::Backend::Vulkan, &u.reason);
                return;
            }
        };
        let v0 = inst.open_device(Device::vulkan(0)).unwrap();
        let v1 = inst.open_device(Device::vulkan(1)).unwrap();
        let faults = Faults::new(None);
        let src = Buf::Vulkan(v0.alloc(64, &faults).unwrap());
        let e = copy(&src, &Ctx::Vulkan(v1.clone()), 64, &faults, None)
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("split-cross-vendor-copies"), "{e}");
        assert_eq!(v1.stats().current, 0);
        drop(src);
        assert_eq!(v0.stats().current, 0);
    }
}
