//! Page-aligned host blocks: the storage of every host-arena buffer of at
//! least [`HOST_PAGE`] bytes, so that a GPU backend can address the bytes
//! where they lie.
//!
//! A [`PageBlock`] starts on a [`HOST_PAGE`] boundary and its capacity is a
//! whole number of pages: what `VK_EXT_external_memory_host` asks of a host
//! pointer it imports (`minImportedHostPointerAlignment`, 4096 on lavapipe
//! and on NVIDIA's driver). A device that imported the block attaches a
//! [`HostView`] to it; the views live as long as the block (pooled blocks
//! keep theirs, so a block is imported once, not once per run) and are
//! released before the block's memory is freed. A view whose device may
//! still read the memory (a lost Vulkan device) refuses to be released, and
//! the block's memory is then never freed rather than freed under it.

use std::ptr::NonNull;
use std::sync::Mutex;

/// The alignment and granule of a [`PageBlock`]: the plan's host page.
pub use fuel_graph_ext::plan::HOST_PAGE;

/// A device's hold on a [`PageBlock`] (a Vulkan buffer over imported host
/// memory).
pub trait HostView: Send + Sync {
    /// Which device holds it (a `VkDevice` handle).
    fn owner(&self) -> u64;
    /// The view itself, for the backend that made it.
    fn as_any(&self) -> &dyn std::any::Any;
    /// Destroys the device's objects; `false` when the device may still
    /// read the memory, which must then never be freed.
    fn release(&self) -> bool;
}

/// Page-aligned, zero-initialised host memory of a whole number of pages.
pub struct PageBlock {
    ptr: NonNull<u8>,
    cap: usize,
    views: Mutex<Vec<Box<dyn HostView>>>,
}

// SAFETY: the block owns its memory exclusively; the bytes are reached only
// through a `CpuBuf` (whose `&`/`&mut` rules apply) or read by a device
// through a view while a `CpuBuf` holding the block is kept alive.
unsafe impl Send for PageBlock {}
// SAFETY: as for `Send`; the views are behind a mutex.
unsafe impl Sync for PageBlock {}

impl std::fmt::Debug for PageBlock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PageBlock")
            .field("cap", &self.cap)
            .finish_non_exhaustive()
    }
}

impl PageBlock {
    /// The capacity a block for `bytes` has: `bytes` rounded up to pages.
    pub fn capacity_for(bytes: usize) -> usize {
        bytes.div_ceil(HOST_PAGE).max(1) * HOST_PAGE
    }

    /// A zeroed block of [`capacity_for`](Self::capacity_for)`(bytes)`, or
    /// `None` when the host refuses the allocation.
    pub fn new(bytes: usize) -> Option<PageBlock> {
        let cap = Self::capacity_for(bytes);
        let layout = std::alloc::Layout::from_size_align(cap, HOST_PAGE).ok()?;
        // SAFETY: `layout` has a non-zero size.
        let p = unsafe { std::alloc::alloc_zeroed(layout) };
        Some(PageBlock {
            ptr: NonNull::new(p)?,
            cap,
            views: Mutex::new(Vec::new()),
        })
    }

    /// Its first byte (page-aligned).
    pub fn ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    /// Its capacity in bytes (a whole number of pages).
    pub fn cap(&self) -> usize {
        self.cap
    }

    /// Runs `f` on the views attached to the block, under its lock.
    pub fn with_views<R>(&self, f: impl FnOnce(&mut Vec<Box<dyn HostView>>) -> R) -> R {
        let mut v = self.views.lock().unwrap_or_else(|e| e.into_inner());
        f(&mut v)
    }
}

impl Drop for PageBlock {
    fn drop(&mut self) {
        let views = std::mem::take(self.views.get_mut().unwrap_or_else(|e| e.into_inner()));
        let mut free = true;
        for v in views {
            free &= v.release();
        }
        if !free {
            // A device may still read these bytes: never free them.
            return;
        }
        if let Ok(layout) = std::alloc::Layout::from_size_align(self.cap, HOST_PAGE) {
            // SAFETY: allocated in `new` with this very layout, and no view
            // reaches it any more.
            unsafe { std::alloc::dealloc(self.ptr.as_ptr(), layout) };
        }
    }
}
