//! Storage buffers ([`VkBuf`]): allocation from the pool, host transfers
//! (a memcpy through the mapping, or the staging buffer) and release.

use super::memory::{Mapping, Pooled};
use super::*;

impl VkDev {
    /// A device-local storage buffer of `bytes`.
    pub fn alloc(self: &Arc<Self>, bytes: usize, faults: &Faults) -> Result<VkBuf, ExecError> {
        self.check_alive("alloc")?;
        if faults.check(Event::Alloc) {
            return Err(ExecError::OutOfMemory {
                device: self.device,
                bytes,
                reason: "injected allocation failure".into(),
            });
        }
        let pooled = self.pool.lock().ok().and_then(|mut p| {
            let b = p.by_len.get_mut(&bytes).and_then(Vec::pop);
            if b.is_some() {
                p.bytes -= bytes;
            }
            b
        });
        let b = match pooled {
            Some(b) => b,
            None => self.new_storage(bytes)?,
        };
        self.counter.add(bytes);
        Ok(VkBuf {
            buffer: b.buffer,
            memory: b.memory,
            map: b.map,
            len: bytes,
            offset: 0,
            dev: self.clone(),
            view_of: None,
            caller: None,
        })
    }

    /// Host bytes into `dst`: a memcpy into its mapping when it has one
    /// (no command buffer, no fence), else through the staging buffer.
    ///
    /// The memcpy runs on the calling thread: rayon's pool measured no
    /// faster on the 2-core VM, since the executor's per-device workers
    /// already copy side by side (`docs/performance.md`).
    pub fn upload(&self, src: &[u8], dst: &mut VkBuf) -> Result<(), ExecError> {
        self.check_own("upload", &[dst])?;
        self.check_alive("upload")?;
        if dst.view_of.is_some() || dst.caller.is_some() {
            return Err(ExecError::Internal(
                "upload into a view of host memory (views are only read)".into(),
            ));
        }
        if src.is_empty() {
            return Ok(());
        }
        if src.len() > dst.len {
            return Err(ExecError::Internal(format!(
                "upload of {} bytes into a {}-byte Vulkan buffer",
                src.len(),
                dst.len
            )));
        }
        if let Some(m) = dst.map {
            // SAFETY: `m` maps all of `dst`'s memory, at least `dst.len` >=
            // `src.len()` bytes, for as long as `dst` lives. No GPU work
            // touches it now: `&mut dst` excludes every other reference to
            // the buffer, and every command that used it before was waited
            // on (`run` returns after its fence; after a failed wait the
            // device is lost and `check_alive` above refused). Host writes
            // before a later submit are visible to it (coherent memory,
            // submit order).
            let out = unsafe { std::slice::from_raw_parts_mut(m.0.as_ptr(), src.len()) };
            out.copy_from_slice(src);
            return Ok(());
        }
        self.with_staging(src.len(), |k| {
            // SAFETY: the mapping is `k.len` >= src.len() bytes; coherent memory.
            unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), k.ptr, src.len()) };
            self.run(Lane::Copy, "upload", &Faults::default(), |cmd, _| {
                let r = [vk::BufferCopy::default()
                    .dst_offset(dst.offset)
                    .size(src.len() as u64)];
                // SAFETY: both buffers are live and at least `src.len()` bytes.
                unsafe { self.dev.cmd_copy_buffer(cmd, k.buffer, dst.buffer, &r) };
                Ok(())
            })
        })
    }

    /// `src` into host bytes: a memcpy out of its mapping when it has one
    /// (no command buffer, no fence), else through the staging buffer.
    pub fn download(&self, src: &VkBuf, dst: &mut [u8]) -> Result<(), ExecError> {
        self.check_own("download", &[src])?;
        if dst.is_empty() {
            return Ok(());
        }
        if dst.len() > src.len {
            return Err(ExecError::Internal(format!(
                "download of {} bytes from a {}-byte Vulkan buffer",
                dst.len(),
                src.len
            )));
        }
        if let Some(m) = src.map {
            self.check_alive("download")?;
            // SAFETY: `m` maps at least `src.len` >= `dst.len()` bytes for as
            // long as `src` lives (borrowed here), and every byte value is a
            // valid `u8`. The read takes no lock, so a kernel of this device
            // may run meanwhile; it writes only its own `dst`. Host writes
            // need `&mut VkBuf` (excluded by `&src`); a kernel writes its
            // `dst` through `&VkBuf`, and, as for work on the two lanes
            // (`submit.rs`), the caller reads a buffer only after the
            // command that wrote it was waited on (the runner hands a
            // step's result to its readers once the step has returned,
            // after its fence), its writes made visible to host reads by
            // the barrier that ends every command buffer.
            let from = unsafe { std::slice::from_raw_parts(m.0.as_ptr(), dst.len()) };
            dst.copy_from_slice(from);
            return Ok(());
        }
        self.with_staging(dst.len(), |k| {
            self.run(Lane::Copy, "download", &Faults::default(), |cmd, _| {
                let r = [vk::BufferCopy::default()
                    .src_offset(src.offset)
                    .size(dst.len() as u64)];
                // SAFETY: both buffers are live and at least `dst.len()` bytes.
                unsafe { self.dev.cmd_copy_buffer(cmd, src.buffer, k.buffer, &r) };
                Ok(())
            })?;
            // SAFETY: as in `upload`; the download was waited on.
            unsafe { std::ptr::copy_nonoverlapping(k.ptr, dst.as_mut_ptr(), dst.len()) };
            Ok(())
        })
    }
}

/// A device-local buffer; dropping it returns it to the device's pool (or
/// frees it) and updates the counter.
pub struct VkBuf {
    pub(super) buffer: vk::Buffer,
    pub(super) memory: vk::DeviceMemory,
    /// The persistent mapping of `memory`, in the mapped path.
    pub(super) map: Option<Mapping>,
    pub(super) len: usize,
    /// Where its bytes start in `buffer` (and `map`, which already points
    /// there): 0, except for a slice's view ([`VkBuf::view`]).
    pub(super) offset: u64,
    pub(super) dev: Arc<VkDev>,
    /// For a view ([`VkDev::view_of_host`], [`VkBuf::view`]): the buffer it
    /// reads, a host buffer of imported memory or another Vulkan buffer,
    /// kept alive (and counted, where it lives) while the view lives. The
    /// Vulkan buffer and memory belong to that buffer, not to this view.
    pub(super) view_of: Option<Arc<crate::backend::Buf>>,
    /// For a caller's input read in place ([`VkDev::input_in_place`]): the
    /// input's bytes, held alive while the buffer and memory imported from
    /// them (which this buffer owns, uncounted) live.
    pub(super) caller: Option<Arc<[u8]>>,
}

impl VkBuf {
    /// Its device.
    pub fn dev(&self) -> &Arc<VkDev> {
        &self.dev
    }

    /// The host buffer whose memory this buffer imports whole
    /// ([`VkDev::view_of_host`]), if it is such a view: its bytes are that
    /// buffer's.
    pub fn host_viewed(&self) -> Option<&Arc<crate::backend::Buf>> {
        self.view_of
            .as_ref()
            .filter(|h| self.offset == 0 && h.as_cpu().is_some())
    }

    /// The caller's bytes this buffer reads where they lie
    /// ([`VkDev::input_in_place`]), if it does: its bytes are those.
    pub fn caller_bytes(&self) -> Option<&Arc<[u8]>> {
        self.caller.as_ref()
    }

    /// Its length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True for a zero-byte buffer.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether it is a view of host-arena memory imported into the device
    /// (no bytes of its own).
    pub fn is_host_view(&self) -> bool {
        self.view_of
            .as_deref()
            .is_some_and(|b| matches!(b, crate::backend::Buf::Cpu(_)))
    }

    /// Whether it reads a caller's input where it lies
    /// ([`VkDev::input_in_place`]), or is a view of such a buffer.
    pub fn is_caller_view(&self) -> bool {
        self.caller.is_some()
            || matches!(self.view_of.as_deref(), Some(crate::backend::Buf::Vulkan(b)) if b.is_caller_view())
    }

    /// A view of `len` bytes of `of` (a Vulkan buffer) starting `at` bytes
    /// in, which holds `of` alive: what a `slice` of one contiguous run
    /// becomes (`Work::View`). Nothing is allocated or counted. `None` when
    /// `of` is not a Vulkan buffer, the run does not fit in it, or the
    /// offset is not a multiple of the device's storage-buffer offset
    /// alignment (the schedule only plans views that are), unless
    /// `host_only`: a view that only the host reads (through the mapping,
    /// or a transfer from its offset) and no kernel binds
    /// (`Schedule::read_on_host_only`), which may start anywhere.
    pub fn view(
        of: &Arc<crate::backend::Buf>,
        at: usize,
        len: usize,
        host_only: bool,
    ) -> Option<VkBuf> {
        let crate::backend::Buf::Vulkan(b) = &**of else {
            return None;
        };
        let end = at.checked_add(len)?;
        let offset = b.offset.checked_add(at as u64)?;
        if end > b.len || !(host_only || offset.is_multiple_of(b.dev.view_align)) {
            return None;
        }
        // SAFETY: `at + len <= b.len`, so the result stays inside the
        // mapping of `b`'s bytes, which lives as long as `b` (held).
        let map = b.map.map(|m| Mapping(unsafe { m.0.add(at) }));
        Some(VkBuf {
            buffer: b.buffer,
            memory: b.memory,
            map,
            len,
            offset,
            dev: b.dev.clone(),
            view_of: Some(of.clone()),
            caller: None,
        })
    }

    /// Whether the host reaches it through a persistent mapping.
    pub fn is_mapped(&self) -> bool {
        self.map.is_some()
    }

    /// Runs `f` on the buffer's bytes where they lie when it is mapped
    /// ([`HostAccess::Mapped`]), as [`VkDev::download`] reads them; `None`
    /// when it is not mapped. Lets a host kernel read a Vulkan operand
    /// without downloading it first.
    pub fn with_mapped<R>(&self, f: impl FnOnce(&[u8]) -> R) -> Option<Result<R, ExecError>> {
        VkBuf::with_all_mapped(&[self], |bytes| {
            f(bytes.first().copied().unwrap_or_default())
        })
    }

    /// [`VkBuf::with_mapped`] for several buffers at once: `f` gets each
    /// one's bytes where they lie, in `bufs`' order; `None` when one is not
    /// mapped. Lets a host fold read all its Vulkan operands in one pass,
    /// while the devices run other work.
    pub fn with_all_mapped<R>(
        bufs: &[&VkBuf],
        f: impl FnOnce(&[&[u8]]) -> R,
    ) -> Option<Result<R, ExecError>> {
        let mut maps = Vec::with_capacity(bufs.len());
        for b in bufs {
            maps.push((b.map?, b.len));
        }
        for b in bufs {
            if let Err(e) = b.dev.check_alive("read") {
                return Some(Err(e));
            }
        }
        // SAFETY: as in `VkDev::download`, for each buffer: its mapping
        // covers `len` bytes while it lives (borrowed here), and the caller
        // reads it only after the command that wrote it was waited on.
        let bytes: Vec<&[u8]> = maps
            .iter()
            .map(|(m, len)| unsafe { std::slice::from_raw_parts(m.0.as_ptr(), *len) })
            .collect();
        Some(Ok(f(&bytes)))
    }
}

impl Drop for VkBuf {
    fn drop(&mut self) {
        if self.view_of.is_some() {
            // The buffer belongs to what it views (an import stays with
            // its host block); dropping `view_of` releases that.
            return;
        }
        if let Some(bytes) = self.caller.take() {
            if self.dev.lost().is_some() {
                // Work whose wait failed may still read the memory: keep
                // the bytes and the import for the life of the process.
                std::mem::forget(bytes);
                return;
            }
            // SAFETY: the buffer and memory are this view's own, and no
            // submit that used them is in flight (each was waited on).
            unsafe {
                self.dev.dev.destroy_buffer(self.buffer, None);
                self.dev.dev.free_memory(self.memory, None);
            }
            return;
        }
        self.dev.counter.sub(self.len);
        let b = Pooled {
            buffer: self.buffer,
            memory: self.memory,
            map: self.map,
            len: self.len,
        };
        // On a lost device, work whose wait failed may still use the
        // buffer: park it until the device is dropped.
        if self.dev.lost().is_some() {
            let mut parked = self.dev.parked.lock().unwrap_or_else(|e| e.into_inner());
            parked.push(b);
            return;
        }
        // Back to the device's pool while it has room (no submit that uses
        // the buffer is in flight: each is waited on).
        if let Ok(mut p) = self.dev.pool.lock() {
            if p.bytes + self.len <= POOL_MAX_BYTES {
                p.bytes += self.len;
                p.by_len.entry(self.len).or_default().push(b);
                return;
            }
        }
        self.dev.destroy_storage(b);
    }
}
