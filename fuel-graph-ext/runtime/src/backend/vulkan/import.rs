//! Host memory imported as device memory (`VK_EXT_external_memory_host`):
//! a host-arena buffer read by a Vulkan step where it lies, with no copy.
//!
//! A device imports a host arena's [`PageBlock`] once: a `VkBuffer` bound to
//! `VkDeviceMemory` made from the block's pointer, attached to the block as
//! a [`HostView`] so that a pooled block keeps it for the next run. A step's
//! view ([`VkDev::view_of_host`]) is a [`VkBuf`] over that memory that holds
//! the host buffer alive, counts nothing on the device (the bytes are the
//! host arena's) and never goes to the pool. Only memory types that are
//! host-coherent are used, so host writes made before a submit are visible
//! to it with no flush, and a step's views are only read (the `Work::Share`
//! rules). Import is off when the device lacks the extension, when
//! `FUEL_VULKAN_IMPORT=0`, or when the device asks for an alignment that a
//! [`HOST_PAGE`] block does not meet; [`VkDev::import_status`] says which.

use super::memory::Mapping;
use super::*;
use crate::backend::pages::{HostView, HOST_PAGE};
use crate::backend::Buf;
use std::ptr::NonNull;

/// The variable that turns host import off.
pub use fuel_graph_ext::plan::IMPORT_VAR;

/// `FUEL_VULKAN_IMPORT`: unset, empty or `1` imports host buffers, `0`
/// copies them; anything else is an error naming the variable (read by
/// [`fuel_graph_ext::plan::Options::from_env`], the one place that reads it).
pub fn import_setting() -> Result<bool, String> {
    fuel_graph_ext::plan::Options::from_env()
        .map(|o| o.import_host_buffers)
        .map_err(|e| e.to_string())
}

/// What a device that imports host memory keeps.
pub(super) struct Importer {
    pub(super) ext: ash::ext::external_memory_host::Device,
    /// `minImportedHostPointerAlignment`.
    pub(super) align: u64,
    /// The adapter's memory is the host's (lavapipe, an integrated GPU),
    /// so a kernel reads imported memory as fast as its own: callers'
    /// inputs are read in place ([`VkDev::input_in_place`]).
    pub(super) host_memory: bool,
}

impl Instance {
    /// Whether adapter `pd` has `VK_EXT_external_memory_host`, and its
    /// `minImportedHostPointerAlignment`.
    pub(super) fn host_import_alignment(&self, pd: vk::PhysicalDevice) -> Option<u64> {
        // SAFETY: a physical device of this live instance.
        let exts = unsafe { self.instance.enumerate_device_extension_properties(pd) }.ok()?;
        let has = exts.iter().any(|e| {
            e.extension_name_as_c_str()
                .is_ok_and(|n| n == ash::ext::external_memory_host::NAME)
        });
        if !has {
            return None;
        }
        let mut host = vk::PhysicalDeviceExternalMemoryHostPropertiesEXT::default();
        let mut p2 = vk::PhysicalDeviceProperties2::default().push_next(&mut host);
        // SAFETY: the chain is well formed and lives across the call.
        unsafe { self.instance.get_physical_device_properties2(pd, &mut p2) };
        Some(host.min_imported_host_pointer_alignment)
    }

    /// Whether `vulkan:N` devices on adapter `pd` read host-arena buffers
    /// in place, or why not (what `fuel-opt devices` prints).
    pub fn host_import(&self, pd_index: usize) -> Result<u64, String> {
        let pd = *self
            .adapters
            .get(pd_index)
            .ok_or_else(|| "no such adapter".to_string())?;
        import_decision(import_setting()?, self.host_import_alignment(pd))
    }
}

/// On or off, from whether import is `allowed` (the plan's
/// `import_host_buffers`, which the CLI reads from `FUEL_VULKAN_IMPORT`)
/// and the adapter's alignment (`None`: no extension); `Err` says why off.
pub(super) fn import_decision(allowed: bool, align: Option<u64>) -> Result<u64, String> {
    if !allowed {
        return Err(format!("{IMPORT_VAR}=0"));
    }
    let align = align.ok_or("the driver lacks VK_EXT_external_memory_host")?;
    if align == 0 || !(HOST_PAGE as u64).is_multiple_of(align) {
        return Err(format!(
            "the driver asks for {align}-byte aligned host pointers, host arenas give {HOST_PAGE}"
        ));
    }
    Ok(align)
}

/// The pages to import for `len` bytes at address `at`: from `at` rounded
/// down to `align` to its end rounded up, and the bytes' offset into that
/// span, which a kernel binds and so must be a multiple of `view_align`;
/// `None` when it is not, or the end overflows.
fn import_span(
    at: usize,
    len: usize,
    align: usize,
    view_align: u64,
) -> Option<(usize, usize, u64)> {
    let start = at - at % align.max(1);
    let end = at
        .checked_add(len)?
        .checked_next_multiple_of(align.max(1))?;
    let offset = (at - start) as u64;
    offset
        .is_multiple_of(view_align)
        .then_some((start, end, offset))
}

/// One device's import of one host block.
struct Imported {
    buffer: vk::Buffer,
    memory: vk::DeviceMemory,
    dev: Arc<VkDev>,
}

impl HostView for Imported {
    fn owner(&self) -> u64 {
        use ash::vk::Handle;
        self.dev.dev.handle().as_raw()
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }

    fn release(&self) -> bool {
        if self.dev.lost().is_some() {
            // Work whose wait failed may still read the memory.
            return false;
        }
        // SAFETY: the block is being freed, so no view of it is alive and no
        // submit that used it is in flight (each was waited on).
        unsafe {
            self.dev.dev.destroy_buffer(self.buffer, None);
            self.dev.dev.free_memory(self.memory, None);
        }
        true
    }
}

impl VkDev {
    /// `Ok(alignment)` when this device reads host-arena buffers in place,
    /// else why not.
    pub fn import_status(&self) -> Result<u64, &str> {
        match &self.import {
            Ok(i) => Ok(i.align),
            Err(why) => Err(why),
        }
    }

    /// A view of host buffer `src` (operand `keep`, which it holds alive)
    /// on this device, importing its block the first time; `None` when the
    /// buffer cannot be imported (import off, no page block, or the driver
    /// refused), and the caller copies instead.
    pub fn view_of_host(
        self: &Arc<Self>,
        keep: &Arc<Buf>,
        bytes: usize,
    ) -> Result<Option<VkBuf>, ExecError> {
        self.check_alive("import")?;
        let Ok(imp) = &self.import else {
            return Ok(None);
        };
        let Some(block) = keep.as_cpu().and_then(|c| c.page_block()) else {
            return Ok(None);
        };
        let (ptr, cap) = (block.ptr(), block.cap());
        if bytes > cap
            || !(ptr as u64).is_multiple_of(imp.align)
            || !(cap as u64).is_multiple_of(imp.align)
        {
            return Ok(None);
        }
        use ash::vk::Handle;
        let me = self.dev.handle().as_raw();
        let found = block.with_views(|views| {
            let known = views.iter().find(|v| v.owner() == me).and_then(|v| {
                v.as_any()
                    .downcast_ref::<Imported>()
                    .map(|i| (i.buffer, i.memory))
            });
            if known.is_some() {
                return known;
            }
            let made = self.import_range(imp, block.ptr(), block.cap())?;
            views.push(Box::new(Imported {
                buffer: made.0,
                memory: made.1,
                dev: self.clone(),
            }));
            Some(made)
        });
        let Some((buffer, memory)) = found else {
            return Ok(None);
        };
        Ok(NonNull::new(ptr).map(|p| VkBuf {
            buffer,
            memory,
            map: Some(Mapping(p)),
            len: bytes,
            offset: 0,
            dev: self.clone(),
            view_of: Some(keep.clone()),
            caller: None,
        }))
    }

    /// Whether callers' inputs are read in place here: host import is on
    /// and the device's memory is the host's.
    pub fn reads_inputs_in_place(&self) -> bool {
        self.import.as_ref().is_ok_and(|i| i.host_memory)
    }

    /// The caller's input `data` as a buffer on this device that reads it
    /// where it lies: the host pages holding it are imported for the life
    /// of the returned buffer, which holds `data` alive, counts nothing on
    /// the device and is only read (an input is never written). `None`,
    /// and the caller uploads, when import is off, the device's memory is
    /// not the host's (a discrete GPU reads its own memory faster), its
    /// offset in its first page is not a multiple
    /// of the device's storage-buffer offset alignment, or the driver
    /// refuses.
    pub fn input_in_place(self: &Arc<Self>, data: &Arc<[u8]>) -> Result<Option<VkBuf>, ExecError> {
        self.check_alive("input")?;
        let Ok(imp) = &self.import else {
            return Ok(None);
        };
        if !imp.host_memory {
            return Ok(None);
        }

        let Ok(align) = usize::try_from(imp.align) else {
            return Ok(None);
        };
        let at = data.as_ptr() as usize;
        let Some((start, end, offset)) = import_span(at, data.len(), align, self.view_align) else {
            return Ok(None);
        };
        // The pages from `start` to `end` are mapped: each holds at least
        // one byte of `data`. Bytes of them outside `data` are never read
        // through this buffer (its offset and length cover `data` only).
        let Some((buffer, memory)) = self.import_range(imp, start as *mut u8, end - start) else {
            return Ok(None);
        };
        Ok(Some(VkBuf {
            buffer,
            memory,
            map: NonNull::new(data.as_ptr().cast_mut()).map(Mapping),
            len: data.len(),
            offset,
            dev: self.clone(),
            view_of: None,
            caller: Some(data.clone()),
        }))
    }

    /// A buffer over the `cap` bytes at `ptr` (both multiples of the
    /// import alignment), bound to memory imported from that pointer in a
    /// host-coherent type; `None` when the driver refuses.
    fn import_range(
        &self,
        imp: &Importer,
        ptr: *mut u8,
        cap: usize,
    ) -> Option<(vk::Buffer, vk::DeviceMemory)> {
        let kind = vk::ExternalMemoryHandleTypeFlags::HOST_ALLOCATION_EXT;
        let mut props = vk::MemoryHostPointerPropertiesEXT::default();
        // SAFETY: the pointer starts `cap` bytes of live, mapped host
        // memory; `props` is a valid output structure.
        let r = unsafe {
            (imp.ext.fp().get_memory_host_pointer_properties_ext)(
                self.dev.handle(),
                kind,
                ptr.cast_const().cast(),
                &mut props,
            )
        };
        if r != vk::Result::SUCCESS {
            return None;
        }
        let mut external = vk::ExternalMemoryBufferCreateInfo::default().handle_types(kind);
        let info = vk::BufferCreateInfo::default()
            .size(cap as u64)
            .usage(
                vk::BufferUsageFlags::STORAGE_BUFFER
                    | vk::BufferUsageFlags::TRANSFER_SRC
                    | vk::BufferUsageFlags::TRANSFER_DST,
            )
            .sharing_mode(vk::SharingMode::EXCLUSIVE)
            .push_next(&mut external);
        // SAFETY: live device, valid create info (the chain lives across the call).
        let buffer = unsafe { self.dev.create_buffer(&info, None) }.ok()?;
        // SAFETY: `buffer` was just created on this device.
        let req = unsafe { self.dev.get_buffer_memory_requirements(buffer) };
        let ty = self.memory_type(
            props.memory_type_bits & req.memory_type_bits,
            vk::MemoryPropertyFlags::HOST_VISIBLE | vk::MemoryPropertyFlags::HOST_COHERENT,
        );
        let destroy = || {
            // SAFETY: an unused buffer of this device.
            unsafe { self.dev.destroy_buffer(buffer, None) }
        };
        let Some(ty) = ty.filter(|_| req.size <= cap as u64) else {
            destroy();
            return None;
        };
        let mut from = vk::ImportMemoryHostPointerInfoEXT::default()
            .handle_type(kind)
            .host_pointer(ptr.cast());
        let alloc = vk::MemoryAllocateInfo::default()
            .allocation_size(cap as u64)
            .memory_type_index(ty)
            .push_next(&mut from);
        // SAFETY: valid allocate info; the host pointer and size are aligned
        // to `minImportedHostPointerAlignment` (checked by the caller) and
        // the caller keeps the host memory alive longer than the Vulkan
        // memory (a block releases its views first; a caller's input view
        // holds the input's bytes).
        let Ok(memory) = (unsafe { self.dev.allocate_memory(&alloc, None) }) else {
            destroy();
            return None;
        };
        // SAFETY: fresh buffer and memory of this device; offset 0 fits.
        if unsafe { self.dev.bind_buffer_memory(buffer, memory, 0) }.is_err() {
            destroy();
            // SAFETY: unused memory of this device.
            unsafe { self.dev.free_memory(memory, None) };
            return None;
        }
        Some((buffer, memory))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::cpu::Arena;
    use crate::backend::fault::Faults;
    use fuel_graph_ext::device::Device;

    /// A host buffer's block is imported once: a second view (a later run,
    /// after the block went back to the arena's pool and came out again)
    /// finds the import attached to it. Views count nothing on the device,
    /// read the host bytes bit for bit, and a small buffer (no page block)
    /// gets no view.
    /// vulkan:0, or `None` after printing why `test` skips.
    fn device_or_skip(test: &str) -> Option<Arc<VkDev>> {
        match Instance::open() {
            Ok(inst) => Some(inst.open_device(Device::vulkan(0)).unwrap()),
            Err(u) => {
                fuel_test_support::skip(test, fuel_test_support::Backend::Vulkan, &u.reason);
                None
            }
        }
    }

    /// `view`'s bytes as the GPU reads them: a region copy on the device
    /// into a buffer of its own, downloaded.
    fn gpu_copy_of(dev: &Arc<VkDev>, view: &VkBuf) -> Vec<u8> {
        let faults = Faults::new(None);
        let n = view.len();
        let out = dev.alloc(n, &faults).unwrap();
        let whole = [crate::backend::Region {
            operand: 0,
            src: 0,
            dst: 0,
            len: n,
        }];
        dev.copy_regions("copy", &whole, &[view], &out, &faults)
            .unwrap();
        let mut got = vec![0u8; n];
        dev.download(&out, &mut got).unwrap();
        got
    }

    #[test]
    fn a_block_is_imported_once_and_views_count_nothing() {
        let Some(dev) = device_or_skip("a_block_is_imported_once_and_views_count_nothing") else {
            return;
        };
        if dev.import_status().is_err() {
            // FUEL_VULKAN_IMPORT=0 or a driver without the extension.
            assert!(dev.import_status().is_err());
            return;
        }
        let arena = Arc::new(Arena::open(Device::cpu(0)));
        let faults = Faults::new(None);
        let n = 3 * HOST_PAGE + 8;
        let mut ptrs = Vec::new();
        for round in 0..3u8 {
            let mut h = arena.alloc(n, &faults).unwrap();
            for (i, b) in h.bytes_mut().iter_mut().enumerate() {
                *b = (i as u8).wrapping_mul(31).wrapping_add(round);
            }
            let want = h.bytes().to_vec();
            let block = h.page_block().unwrap();
            ptrs.push(block.ptr() as usize);
            let src = Arc::new(Buf::Cpu(h));
            let made = dev.stats().allocations;
            let view = dev.view_of_host(&src, n).unwrap().unwrap();
            assert!(view.is_host_view());
            assert_eq!(
                dev.stats().current,
                0,
                "round {round}: a view counts nothing"
            );
            assert_eq!(dev.stats().allocations, made);
            let got = gpu_copy_of(&dev, &view);
            assert!(got == want, "round {round}: the GPU read other bytes");
            let views = |s: &Arc<Buf>| {
                s.as_cpu()
                    .and_then(|c| c.page_block())
                    .map(|b| b.with_views(|v| v.len()))
            };
            assert_eq!(views(&src), Some(1), "round {round}: one import per block");
            drop(view);
            assert_eq!(arena.stats().current, n, "the source is still counted");
            drop(src);
            assert_eq!(arena.stats().current, 0);
            assert_eq!(dev.stats().current, 0);
        }
        // The pool handed the same block back every round.
        assert!(ptrs.windows(2).all(|w| w[0] == w[1]), "{ptrs:x?}");
        // Under a page: no page block, so no view.
        let small = Arc::new(Buf::Cpu(arena.alloc(64, &faults).unwrap()));
        assert!(dev.view_of_host(&small, 64).unwrap().is_none());
    }

    /// A caller's bytes read in place: the GPU copies exactly them out of
    /// the view (which starts inside its first imported page), the view
    /// counts nothing on the device, and dropping it frees the import
    /// while the caller's bytes live on. Bytes at a pointer whose offset
    /// into its page the device cannot bind are refused (the caller then
    /// uploads).
    #[test]
    fn an_input_is_read_where_the_caller_holds_it() {
        let Some(dev) = device_or_skip("an_input_is_read_where_the_caller_holds_it") else {
            return;
        };
        if !dev.reads_inputs_in_place() {
            // FUEL_VULKAN_IMPORT=0, a driver without the extension, or a
            // discrete GPU: no input is read in place.
            let data: Arc<[u8]> = vec![7u8; 2 * HOST_PAGE].into();
            assert!(dev.input_in_place(&data).unwrap().is_none());
            return;
        }
        let n = 5 * HOST_PAGE + 12;
        let data: Arc<[u8]> = (0..n)
            .map(|i| (i * 7 % 251) as u8)
            .collect::<Vec<_>>()
            .into();
        let before = dev.stats();
        let view = dev.input_in_place(&data).unwrap().unwrap();
        assert!(view.is_caller_view());
        assert_eq!(view.len(), n);
        assert_eq!(
            dev.stats().allocations,
            before.allocations,
            "a view makes no buffer"
        );
        assert_eq!(Arc::strong_count(&data), 2, "the view holds the bytes");
        let got = gpu_copy_of(&dev, &view);
        assert!(got[..] == data[..], "the GPU read other bytes");
        let mapped = view.with_mapped(|b| b == &data[..]).unwrap().unwrap();
        assert!(mapped, "the host reads other bytes through the view");
        drop(view);
        assert_eq!(Arc::strong_count(&data), 1, "the view let go of the bytes");
        assert_eq!(dev.stats().current, 0);
    }

    #[test]
    fn an_import_spans_whole_pages_and_binds_at_an_allowed_offset() {
        // 100 bytes 48 into a page: that one page, bound 48 bytes in.
        assert_eq!(
            import_span(4096 + 48, 100, 4096, 16),
            Some((4096, 8192, 48))
        );
        // Across a page boundary: both pages.
        assert_eq!(
            import_span(8192 - 16, 32, 4096, 16),
            Some((4096, 12288, 4080))
        );
        // Page-aligned bytes of whole pages: exactly them.
        assert_eq!(import_span(8192, 8192, 4096, 64), Some((8192, 16384, 0)));
        // An offset the device cannot bind (8 into a 16-byte rule): refused.
        assert_eq!(import_span(4096 + 8, 100, 4096, 16), None);
        // The end past the address space: refused, not wrapped.
        assert_eq!(import_span(usize::MAX - 10, 100, 4096, 4), None);
    }
}
