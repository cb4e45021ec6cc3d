//! The Copy arm: how bytes move between two devices.
//!
//! [`copy`] is one exhaustive `match` on (source kind, destination kind)
//! with no wildcard, so adding a backend fails to compile until every pair is
//! decided. Host arenas copy with memcpy; host and CUDA use the driver's
//! copies (pinned staging for large transfers); CUDA to CUDA is a device or
//! peer copy; host and Vulkan go through a host-visible staging buffer;
//! Vulkan to Vulkan works only within one `VkDevice`. Every other pair is an
//! error that names the pass which stages it through the host,
//! `split-cross-vendor-copies`. A `move` is a copy whose source the runner
//! frees as soon as the copy finishes.

use crate::exec::backend::{Buf, Ctx};
use crate::exec::cpu;
use crate::exec::error::ExecError;
use crate::exec::fault::{Event, Faults};
use crate::exec::plan::Region;

/// Copies `bytes` of `src` into a new buffer on `dst`.
pub fn copy(src: &Buf, dst: &Ctx, bytes: usize, faults: &Faults) -> Result<Buf, ExecError> {
    let mut out = dst.alloc(bytes, faults)?;
    if faults.check(Event::Copy) {
        return Err(ExecError::Injected {
            device: dst.device(),
            op: "copy".into(),
        });
    }
    let whole = [Region {
        operand: 0,
        src: 0,
        dst: 0,
        len: bytes,
    }];
    match (src, &mut out) {
        (Buf::Cpu(s), Buf::Cpu(d)) => cpu::memcpy(&s.bytes()[..bytes], d),
        (Buf::Cpu(s), Buf::Cuda(d)) => d.dev().clone().upload(&s.bytes()[..bytes], d)?,
        (Buf::Cuda(s), Buf::Cpu(d)) => s.dev().download(s, &mut d.bytes_mut()[..bytes])?,
        // Same context: a device copy; two contexts: cudarc issues a peer copy.
        (Buf::Cuda(s), Buf::Cuda(d)) => d.dev().clone().copy_regions("copy", &whole, &[s], d)?,
        (Buf::Cpu(s), Buf::Vulkan(d)) => d.dev().upload(&s.bytes()[..bytes], d)?,
        (Buf::Vulkan(s), Buf::Cpu(d)) => s.dev().download(s, &mut d.bytes_mut()[..bytes])?,
        (Buf::Vulkan(s), Buf::Vulkan(d)) => {
            if !s.dev().same_device(d.dev()) {
                return Err(ExecError::NoDirectCopy {
                    src: s.dev().device,
                    dst: d.dev().device,
                });
            }
            d.dev().copy_regions("copy", &whole, &[s], d)?
        }
        (Buf::Cuda(s), Buf::Vulkan(d)) => {
            return Err(ExecError::NoDirectCopy {
                src: s.dev().device,
                dst: d.dev().device,
            })
        }
        (Buf::Vulkan(s), Buf::Cuda(d)) => {
            return Err(ExecError::NoDirectCopy {
                src: s.dev().device,
                dst: d.dev().device,
            })
        }
    }
    Ok(out)
}
