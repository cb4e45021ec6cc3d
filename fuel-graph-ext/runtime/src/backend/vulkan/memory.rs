//! Device memory: memory types, raw buffers, the mapped memory type, the
//! pool of freed storage buffers and the kept staging buffer.

use super::*;
use std::collections::BTreeMap;
use std::ptr::NonNull;

impl VkDev {
    pub(super) fn memory_type(&self, bits: u32, want: vk::MemoryPropertyFlags) -> Option<u32> {
        (0..self.memory.memory_type_count).find(|&i| {
            bits & (1 << i) != 0
                && self.memory.memory_types[i as usize]
                    .property_flags
                    .contains(want)
        })
    }

    pub(super) fn raw_buffer(
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
    pub(super) fn raw_buffer_in(
        &self,
        bytes: usize,
        usage: vk::BufferUsageFlags,
        pick: impl FnOnce(u32) -> Option<u32>,
    ) -> Result<(vk::Buffer, vk::DeviceMemory), ExecError> {
        // Whole 32-bit words: the cast kernel reads and writes 16-bit
        // elements two to a word.
        let size = bytes.max(4).next_multiple_of(4) as u64;
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

    /// A fresh storage buffer: in the mapped type, mapped, when the device
    /// has one and the allocation there succeeds (a small BAR heap may
    /// refuse it), else device-local and unmapped.
    pub(super) fn new_storage(&self, bytes: usize) -> Result<Pooled, ExecError> {
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
                            len: bytes,
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
            len: bytes,
        })
    }

    /// Runs `f` with this device's staging buffer, at least `bytes` long,
    /// host-visible and mapped. It is kept between transfers (and grown when
    /// a larger one comes): allocating and mapping a fresh one per transfer
    /// cost more than the copy itself on lavapipe.
    pub(super) fn with_staging<R>(
        &self,
        bytes: usize,
        f: impl FnOnce(&KeptStaging) -> Result<R, ExecError>,
    ) -> Result<R, ExecError> {
        let mut kept = self
            .staging
            .lock()
            .map_err(|_| ExecError::Internal("Vulkan staging lock poisoned".into()))?;
        // A lost device's last transfer may still use the staging buffer:
        // neither grow (destroy) it nor use it.
        self.check_alive("staging")?;
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

    pub(super) fn destroy_staging(&self, k: KeptStaging) {
        // SAFETY: every transfer that used it was waited on (a lost device
        // keeps it until it is dropped, after `vkDeviceWaitIdle`).
        unsafe {
            self.dev.unmap_memory(k.memory);
            self.dev.destroy_buffer(k.buffer, None);
            self.dev.free_memory(k.memory, None);
        }
    }

    /// Unmaps (if mapped) and frees a storage buffer of this device.
    pub(super) fn destroy_storage(&self, b: Pooled) {
        // SAFETY: the handles belong to this device and nothing uses them:
        // the buffer that held them is gone or being dropped, and every
        // submit that used it was waited on (buffers freed after a failed
        // wait are parked instead, and destroyed when the device is dropped,
        // after `vkDeviceWaitIdle`).
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
pub(super) fn mapped_memory_type(memory: &vk::PhysicalDeviceMemoryProperties) -> Option<u32> {
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
pub(super) struct Mapping(pub(super) NonNull<u8>);

// SAFETY: the pointer is only an address of device memory that stays mapped
// while the owning buffer (or its pool or parked entry) lives; `upload`
// writes through it only with `&mut VkBuf`; `download` and `with_mapped`
// read with `&VkBuf`, and their callers read a buffer only after the
// command that wrote it was waited on (`VkDev::download`); all three
// refuse once the device is lost (GPU work may then still use its own
// buffers). So moving or sharing the address between threads adds no
// access the executor's order does not already order.
unsafe impl Send for Mapping {}
// SAFETY: as for `Send`.
unsafe impl Sync for Mapping {}

/// A storage buffer that is not handed out: its handles, mapping and
/// length.
pub(super) struct Pooled {
    pub(super) buffer: vk::Buffer,
    pub(super) memory: vk::DeviceMemory,
    pub(super) map: Option<Mapping>,
    pub(super) len: usize,
}

/// The most bytes a Vulkan device keeps in its pool of freed buffers.
pub const POOL_MAX_BYTES: usize = 1 << 30;

/// Freed device buffers by length: a compiled executable allocates the same
/// sizes every run, and `vkAllocateMemory` per step cost more than the
/// work on lavapipe. Pooled buffers are not live: they do not count in
/// `current`.
#[derive(Default)]
pub(super) struct BufPool {
    pub(super) by_len: BTreeMap<usize, Vec<Pooled>>,
    pub(super) bytes: usize,
}

/// A device's host-visible staging buffer, mapped for as long as it lives.
pub(super) struct KeptStaging {
    pub(super) buffer: vk::Buffer,
    pub(super) memory: vk::DeviceMemory,
    pub(super) len: usize,
    pub(super) ptr: *mut u8,
}

// SAFETY: `ptr` is a mapping of `memory`, used only while holding the owning
// device's `staging` lock.
unsafe impl Send for KeptStaging {}
