//! The Vulkan backend: logical devices, buffers, copies and compute kernels.
//!
//! The loader is opened at run time (ash's `loaded` feature), so a machine
//! without Vulkan builds and runs everything else. Each `vulkan:N` is its own
//! `VkDevice` with its own queue, command buffer and memory; several of them
//! may sit on one adapter (see [`devices_per_adapter`]). Where the device has
//! a memory type that is device-local, host-visible, coherent and cached
//! (lavapipe, integrated GPUs), storage buffers live there, mapped for as
//! long as they exist, and host data moves with a memcpy ([`HostAccess`]);
//! otherwise it moves through a host-visible staging buffer and
//! `vkCmdCopyBuffer`. Slices,
//! concats and same-device copies are `vkCmdCopyBuffer` regions; the n-ary
//! element-wise ops and div run one WGSL compute shader per element type,
//! compiled to SPIR-V by naga in `build.rs`. Every submit waits on its fence,
//! so a step is complete when its call returns.
//!
//! A wait that fails (`vkWaitForFences`, or resetting the fence after it)
//! leaves the submission possibly still running, so the device is then
//! *lost* for good ([`VkDev::lost`]): its fence, command buffer and
//! descriptor pool are never reset or reused, every buffer freed from then
//! on is parked instead of pooled or destroyed, and every later call
//! (alloc, transfers, kernels, mapped reads) fails with
//! [`ExecError::DeviceLost`]; the parked buffers are destroyed when the
//! device is dropped, after `vkDeviceWaitIdle`. Kernels and region copies
//! check that every buffer they bind belongs to their own `VkDevice`.
//!
//! One file per concern: `instance` (loader, instance, adapters), `vkdev`
//! (creating and destroying a `VkDevice`), `memory` (memory types, the
//! buffer pool, the staging buffer), `submit` (command buffers and fences),
//! `buffer` ([`VkBuf`] and host transfers), `kernels` (pipelines, dispatch,
//! fold, div, cast, region copies), `transport_cast` (the f32/bf16/f16
//! casts' own kernel). This file holds [`VkDev`] itself.

mod buffer;
mod extern_pipelines;
mod import;
mod instance;
mod kernels;
mod memory;
mod submit;
mod transport_cast;
mod vkdev;

pub use buffer::VkBuf;
pub use import::{import_setting, IMPORT_VAR};
pub use instance::{view_align, AdapterInfo, Instance};
pub use memory::POOL_MAX_BYTES;

use kernels::Pipeline;
use memory::{BufPool, KeptStaging};
use submit::Submitter;

use crate::backend::alloc::{AllocCounter, MemStats};
use crate::backend::fault::{Event, Faults};
use crate::backend::Region;
use crate::error::ExecError;
use ash::vk;
use fuel_graph_ext::device::Device;
use fuel_graph_ext::dtype::DType;
use fuel_graph_ext::limits::Capacity;
use fuel_graph_ext::op::ElementwiseOp;
use std::sync::{Arc, Mutex};

/// Operands one dispatch can read; longer folds are chained.
pub const MAX_ARITY: usize = 8;
const WORKGROUP: u32 = 256;
const MAX_GROUPS_X: u32 = 32768;

/// The hint printed whenever Vulkan is missing.
pub const INSTALL_HINT: &str =
    "`apt-get install mesa-vulkan-drivers libvulkan1` gives a software device (lavapipe)";

/// The most logical devices `FUEL_VULKAN_DEVICES` may ask for per adapter.
pub const MAX_DEVICES_PER_ADAPTER: u32 = 16;

/// How many logical devices to open on each adapter: `FUEL_VULKAN_DEVICES`,
/// 1 to [`MAX_DEVICES_PER_ADAPTER`], default 2, so that `vulkan:0` and
/// `vulkan:1` exist on a one-adapter machine (lavapipe) and the two-device
/// paths are exercised there. Any other value is an error that names the
/// variable.
pub fn devices_per_adapter() -> Result<u32, fuel_graph_ext::env::EnvError> {
    let n = fuel_graph_ext::env::integer(
        "FUEL_VULKAN_DEVICES",
        1..=u64::from(MAX_DEVICES_PER_ADAPTER),
        2,
        "logical devices per Vulkan adapter",
    )?;
    // In range, so it fits.
    Ok(u32::try_from(n).unwrap_or(MAX_DEVICES_PER_ADAPTER))
}

/// How the executor opens a Vulkan device: the logical devices per
/// adapter (its index's adapter is `index / per_adapter`), how host bytes
/// reach its buffers, and whether it may import host-arena buffers (and
/// read callers' inputs in place).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OpenOptions {
    /// Logical devices per adapter, 1 to [`MAX_DEVICES_PER_ADAPTER`].
    pub per_adapter: u32,
    /// Mapped or staged.
    pub access: HostAccess,
    /// Whether it may import host memory.
    pub import: bool,
}

/// How host bytes reach a device's storage buffers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HostAccess {
    /// Storage buffers in a memory type that is `DEVICE_LOCAL |
    /// HOST_VISIBLE | HOST_COHERENT | HOST_CACHED`, mapped persistently, so
    /// `upload`/`download` are a memcpy with no command buffer or fence;
    /// the staging path where no such type exists or an allocation there
    /// fails. `HOST_CACHED` is required because host reads of uncached
    /// memory (a discrete GPU's BAR, an APU's write-combined type) are far
    /// slower than a staged copy.
    Mapped,
    /// Always through the device's staging buffer and `vkCmdCopyBuffer`.
    Staging,
}

impl HostAccess {
    /// `Mapped`, unless `FUEL_VULKAN_MAPPED=0` asks for `Staging`; a value
    /// other than `0` or `1` is an error that names the variable.
    pub fn from_env() -> Result<HostAccess, fuel_graph_ext::env::EnvError> {
        let mapped = fuel_graph_ext::env::flag(
            "FUEL_VULKAN_MAPPED",
            true,
            "1 keeps storage buffers in mapped memory where the device allows, 0 moves host data through the staging buffer",
        )?;
        Ok(if mapped {
            HostAccess::Mapped
        } else {
            HostAccess::Staging
        })
    }
}

/// Why Vulkan cannot be used: a reason and a hint.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unavailable {
    /// What went wrong.
    pub reason: String,
    /// How to fix it.
    pub hint: String,
}

/// One logical Vulkan device.
pub struct VkDev {
    /// Its name.
    pub device: Device,
    /// True if f16 kernels are available.
    pub f16: bool,
    /// True if f64 kernels are available.
    pub f64: bool,
    /// True if i64 kernels are available.
    pub i64: bool,
    instance: Arc<Instance>,
    dev: ash::Device,
    queue: vk::Queue,
    memory: vk::PhysicalDeviceMemoryProperties,
    /// The memory type storage buffers are allocated in and mapped, if any
    /// (see [`HostAccess::Mapped`]).
    mapped_type: Option<u32>,
    /// What fits, as the device reports it.
    capacity: Capacity,
    /// The byte multiple a view's offset into its buffer must be (the
    /// device's `minStorageBufferOffsetAlignment`, at least 4).
    view_align: u64,
    /// The compute lane: kernels and region copies within the device.
    submit: Mutex<Submitter>,
    /// The copy lane: uploads and downloads, on a second queue of the
    /// compute family where the adapter has one (else on the same queue,
    /// each submit under `queue_shared`), so a copy runs beside a kernel.
    copy_submit: Mutex<Submitter>,
    /// The copy lane's queue (`queue` itself on a one-queue family).
    copy_queue: vk::Queue,
    /// Taken around a submit when both lanes share one queue (a queue is
    /// externally synchronised).
    queue_shared: Mutex<()>,
    set_layout: vk::DescriptorSetLayout,
    layout: vk::PipelineLayout,
    /// One element-wise pipeline per dtype the device can run.
    pipes: Vec<(DType, Pipeline)>,
    /// The `cast` kernel (integer arithmetic, any device).
    cast: Pipeline,
    /// The transport casts' kernels, one per pair of `transport_cast::PAIRS`.
    transport_casts: Vec<Pipeline>,
    /// The `div` kernel (integer arithmetic, any device).
    divide: Pipeline,
    counter: AllocCounter,
    staging: Mutex<Option<KeptStaging>>,
    pool: Mutex<BufPool>,
    /// Set once, when a wait for submitted work failed: the operation
    /// whose wait failed, and how.
    lost: std::sync::OnceLock<(String, String)>,
    /// How host-arena buffers are imported (`VK_EXT_external_memory_host`),
    /// or why they are not.
    import: Result<import::Importer, String>,
    /// Buffers freed after the device was lost: work still in flight may
    /// use them, so they are destroyed only when the device is dropped.
    parked: Mutex<Vec<memory::Pooled>>,
    /// The pipelines of `extern` kernels, made on first use, by name.
    externs: Mutex<std::collections::HashMap<String, Pipeline>>,
}

/// Which of a device's two submitters a command runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Lane {
    /// Kernels, and region copies within the device.
    Compute,
    /// Uploads and downloads.
    Copy,
}

fn vk_err(what: &str) -> impl Fn(vk::Result) -> String + '_ {
    move |e| format!("{what} failed: {e}")
}

impl VkDev {
    /// Allocator numbers.
    pub fn stats(&self) -> MemStats {
        self.counter.stats()
    }

    /// What fits: the largest allocation (`maxMemoryAllocationSize`, and
    /// the heap), the largest buffer a kernel binds (`maxStorageBufferRange`)
    /// and the heap storage buffers live in.
    pub fn capacity(&self) -> Capacity {
        self.capacity.clone()
    }

    /// The byte multiple a slice's view must start at in its buffer
    /// (`minStorageBufferOffsetAlignment`, at least 4).
    pub fn view_align(&self) -> u64 {
        self.view_align
    }

    /// Whether new storage buffers are host-mapped ([`HostAccess::Mapped`]
    /// and the device has a fitting memory type).
    pub fn host_mapped(&self) -> bool {
        self.mapped_type.is_some()
    }

    /// Bytes held in the pool of freed buffers (not counted in `stats`).
    pub fn pooled_bytes(&self) -> usize {
        self.pool.lock().map(|p| p.bytes).unwrap_or(0)
    }

    /// Whether kernels on `dtype` can run here (copies, slices and concats
    /// are byte moves, but a value of an unsupported dtype is refused anyway
    /// so that the rule is one line in the docs).
    pub fn supports(&self, dtype: DType) -> Result<(), String> {
        match dtype {
            DType::F32 | DType::I32 | DType::U32 => Ok(()),
            DType::F16 if self.f16 => Ok(()),
            DType::F16 => Err("the device lacks shaderFloat16 or 16-bit storage".into()),
            DType::F64 if self.f64 => Ok(()),
            DType::F64 => Err("the device lacks shaderFloat64".into()),
            DType::I64 | DType::U64 if self.i64 => Ok(()),
            DType::I64 | DType::U64 => Err("the device lacks shaderInt64".into()),
            // Stored as halves of 32-bit words and computed in f32 with
            // integer rounding (`elementwise_bf16.wgsl`): no feature needed.
            DType::BF16 => Ok(()),
            DType::U8 | DType::I8 | DType::Bool => Err(format!(
                "WGSL has no 8-bit type and no {dtype} kernel is written"
            )),
            DType::I16 | DType::U16 => Err(format!(
                "WGSL has no 16-bit integer type and no {dtype} kernel is written"
            )),
        }
    }

    fn err(&self, op: &str, e: vk::Result) -> ExecError {
        match e {
            vk::Result::ERROR_DEVICE_LOST => ExecError::DeviceLost {
                device: self.device,
                op: op.into(),
                reason: e.to_string(),
            },
            vk::Result::ERROR_OUT_OF_DEVICE_MEMORY | vk::Result::ERROR_OUT_OF_HOST_MEMORY => {
                ExecError::OutOfMemory {
                    device: self.device,
                    bytes: 0,
                    reason: format!("{op}: {e}"),
                }
            }
            _ => ExecError::Device {
                device: self.device,
                op: op.into(),
                reason: e.to_string(),
            },
        }
    }

    /// The same `VkDevice`?
    pub fn same_device(&self, other: &VkDev) -> bool {
        self.dev.handle() == other.dev.handle()
    }

    /// Why the device is lost, if it is: a wait for its work failed, so
    /// that work may still be running and the device runs nothing more.
    pub fn lost(&self) -> Option<&str> {
        self.lost.get().map(|(_, why)| why.as_str())
    }

    /// Bytes of buffers freed after the device was lost, kept until it is
    /// dropped (not counted in `stats`).
    pub fn parked_bytes(&self) -> usize {
        self.parked
            .lock()
            .map_or(0, |p| p.iter().map(|b| b.len).sum())
    }

    /// `Err` (the device is lost) before `op` touches anything, when it is.
    pub(super) fn check_alive(&self, op: &str) -> Result<(), ExecError> {
        match self.lost.get() {
            None => Ok(()),
            Some((when, why)) => Err(ExecError::DeviceLost {
                device: self.device,
                op: when.clone(),
                reason: format!(
                    "{why}; the device runs nothing more, since that work may still be running, and refused `{op}`"
                ),
            }),
        }
    }

    /// Marks the device lost after a failed wait in `op` (the first one
    /// stays) and gives the error for it.
    pub(super) fn mark_lost(&self, op: &str, why: String) -> ExecError {
        let _ = self.lost.set((op.to_string(), why.clone()));
        ExecError::DeviceLost {
            device: self.device,
            op: op.into(),
            reason: why,
        }
    }

    /// `Err` unless every buffer in `bufs` is one of this `VkDevice`'s: a
    /// command may name only its own device's objects.
    pub(super) fn check_own(&self, op: &str, bufs: &[&VkBuf]) -> Result<(), ExecError> {
        match bufs.iter().find(|b| !b.dev.same_device(self)) {
            None => Ok(()),
            Some(b) => Err(ExecError::Internal(format!(
                "`{op}` on {} got a buffer of {}, another VkDevice; a step's operands must be on its device (copy them there first)",
                self.device, b.dev.device
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(super) fn instance_or_skip(test: &str) -> Option<Arc<Instance>> {
        match Instance::open() {
            Ok(i) => Some(i),
            Err(u) => {
                fuel_test_support::skip(test, fuel_test_support::Backend::Vulkan, &u.reason);
                None
            }
        }
    }

    fn i32_bytes(v: impl Iterator<Item = u32>) -> Vec<u8> {
        v.flat_map(u32::to_le_bytes).collect()
    }

    /// Operand `k` of round `round`: every byte varies, so a byte dropped or
    /// shifted anywhere shows.
    fn operand(i: usize, k: usize, round: u32) -> u32 {
        (i as u32)
            .wrapping_mul(2_654_435_761)
            .wrapping_add((k as u32 + 1).wrapping_mul(0x9e37_79b9))
            .wrapping_add(round.wrapping_mul(0x85eb_ca6b))
    }

    /// Round trips, a fold longer than one dispatch (its scratch
    /// accumulator comes from and goes back to the pool) and pooled buffers
    /// reused with new data, in `access`; returns whether buffers were mapped.
    fn transfers_and_folds(access: HostAccess) -> bool {
        let Some(inst) = instance_or_skip("transfers_and_folds") else {
            return false;
        };
        let on_lavapipe = inst
            .adapters()
            .first()
            .is_some_and(|a| a.name.contains("llvmpipe"));
        let dev = inst.open_device_with(Device::vulkan(0), access).unwrap();
        let faults = Faults::new(None);
        // Over 1 MiB, and operands enough for two chained dispatches.
        let n = 300_000usize;
        let ops = MAX_ARITY + 2;
        for round in 0..3u32 {
            let mut ins = Vec::new();
            for k in 0..ops {
                let data = i32_bytes((0..n).map(|i| operand(i, k, round)));
                let mut b = dev.alloc(data.len(), &faults).unwrap();
                dev.upload(&data, &mut b).unwrap();
                let mut back = vec![0u8; data.len()];
                dev.download(&b, &mut back).unwrap();
                assert_eq!(back, data, "round {round}: operand {k} round trip");
                ins.push(b);
            }
            assert_eq!(dev.stats().current, ops * n * 4);
            let out = dev.alloc(n * 4, &faults).unwrap();
            let refs: Vec<&VkBuf> = ins.iter().collect();
            dev.fold(DType::I32, ElementwiseOp::Add, &refs, &out, n, &faults)
                .unwrap();
            let mut got = vec![0u8; n * 4];
            dev.download(&out, &mut got).unwrap();
            let want = i32_bytes(
                (0..n).map(|i| (0..ops).fold(0u32, |a, k| a.wrapping_add(operand(i, k, round)))),
            );
            assert!(
                got == want,
                "round {round}: fold of {ops} operands is wrong"
            );
            for b in ins.iter().chain([&out]) {
                assert_eq!(b.is_mapped(), dev.host_mapped());
            }
            drop(refs);
            drop((ins, out));
            assert_eq!(dev.stats().current, 0, "round {round}: bytes still counted");
            assert_eq!(dev.stats().live_buffers, 0);
            // Every buffer went back to the pool: the operands, the output
            // and the accumulator of the chained dispatch.
            assert_eq!(dev.pooled_bytes(), (ops + 2) * n * 4, "round {round}");
        }
        if access == HostAccess::Staging {
            assert!(!dev.host_mapped());
        } else if on_lavapipe {
            assert!(
                dev.host_mapped(),
                "lavapipe has a DEVICE_LOCAL | HOST_VISIBLE | HOST_COHERENT | HOST_CACHED type"
            );
        }
        dev.host_mapped()
    }

    #[test]
    fn mapped_buffers_compute_right_and_return_to_the_pool() {
        transfers_and_folds(HostAccess::Mapped);
    }

    #[test]
    fn staging_fallback_computes_right_and_returns_to_the_pool() {
        transfers_and_folds(HostAccess::Staging);
    }

    fn i32s(bytes: &[u8]) -> Vec<u32> {
        bytes
            .chunks(4)
            .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect()
    }

    #[test]
    fn fold_onto_reads_its_destination_through_its_own_binding() {
        let Some(inst) =
            instance_or_skip("fold_onto_reads_its_destination_through_its_own_binding")
        else {
            return;
        };
        let dev = inst.open_device(Device::vulkan(0)).unwrap();
        let faults = Faults::new(None);
        let n = 1000;
        // Past MAX_ARITY, so it takes two dispatches onto the destination.
        let more: Vec<VkBuf> = (0..MAX_ARITY + 3)
            .map(|k| {
                let mut b = dev.alloc(n * 4, &faults).unwrap();
                dev.upload(&i32_bytes((0..n).map(|i| operand(i, k, 7))), &mut b)
                    .unwrap();
                b
            })
            .collect();
        let mut acc = dev.alloc(n * 4, &faults).unwrap();
        dev.upload(&i32_bytes((0..n).map(|i| i as u32)), &mut acc)
            .unwrap();
        let refs: Vec<&VkBuf> = more.iter().collect();
        dev.fold_onto(DType::I32, ElementwiseOp::Add, &acc, &refs, n, &faults)
            .unwrap();
        let mut got = vec![0u8; n * 4];
        dev.download(&acc, &mut got).unwrap();
        let want: Vec<u32> = (0..n)
            .map(|i| (0..more.len()).fold(i as u32, |a, k| a.wrapping_add(operand(i, k, 7))))
            .collect();
        assert!(i32s(&got) == want, "fold onto the destination is wrong");
        // A dispatch that binds its destination as an operand too is refused.
        let e = dev
            .dispatch(DType::I32, 0, &[&acc, refs[0]], &acc, n, false, &faults)
            .unwrap_err()
            .to_string();
        assert!(e.contains("bound its destination as an operand"), "{e}");
    }

    /// Uploads (copy lane) and kernels (compute lane) from two threads at
    /// once, many times, give the right bytes; says whether the lanes have
    /// queues of their own on this adapter.
    #[test]
    fn the_copy_lane_runs_beside_the_compute_lane() {
        let Some(inst) = instance_or_skip("the_copy_lane_runs_beside_the_compute_lane") else {
            return;
        };
        let d = inst.open_device(Device::vulkan(0)).unwrap();
        println!(
            "vulkan:0: the copy lane {}",
            if d.copy_queue == d.queue {
                "shares the compute queue"
            } else {
                "has a queue of its own"
            }
        );
        let faults = Faults::new(None);
        let n = 1 << 12;
        let ones: Vec<u8> = (0..n).flat_map(|_| 1.0f32.to_le_bytes()).collect();
        let mut a = d.alloc(4 * n, &faults).unwrap();
        d.upload(&ones, &mut a).unwrap();
        std::thread::scope(|s| {
            let folds = s.spawn(|| {
                for _ in 0..50 {
                    let out = d.alloc(4 * n, &faults).unwrap();
                    d.fold(DType::F32, ElementwiseOp::Add, &[&a, &a], &out, n, &faults)
                        .unwrap();
                    let mut back = vec![0u8; 4 * n];
                    d.download(&out, &mut back).unwrap();
                    assert!(back.chunks_exact(4).all(|c| c == 2.0f32.to_le_bytes()));
                }
            });
            for k in 0..50u32 {
                let bytes: Vec<u8> = (0..n).flat_map(|_| (k as f32).to_le_bytes()).collect();
                let mut b = d.alloc(4 * n, &faults).unwrap();
                d.upload(&bytes, &mut b).unwrap();
                let mut back = vec![0u8; 4 * n];
                d.download(&b, &mut back).unwrap();
                assert_eq!(back, bytes);
            }
            folds.join().unwrap();
        });
    }

    #[test]
    fn kernels_refuse_buffers_of_another_vkdevice() {
        let Some(inst) = instance_or_skip("kernels_refuse_buffers_of_another_vkdevice") else {
            return;
        };
        let (d0, d1) = (
            inst.open_device(Device::vulkan(0)).unwrap(),
            inst.open_device(Device::vulkan(1)).unwrap(),
        );
        let faults = Faults::new(None);
        let (a, b) = (
            d0.alloc(64, &faults).unwrap(),
            d0.alloc(64, &faults).unwrap(),
        );
        let other = d1.alloc(64, &faults).unwrap();
        let named = |e: ExecError| {
            let e = e.to_string();
            assert!(
                e.contains("vulkan:0") && e.contains("vulkan:1") && e.contains("another VkDevice"),
                "{e}"
            );
        };
        named(
            d0.fold(
                DType::F32,
                ElementwiseOp::Add,
                &[&a, &other],
                &b,
                16,
                &faults,
            )
            .unwrap_err(),
        );
        named(
            d0.fold(
                DType::F32,
                ElementwiseOp::Add,
                &[&a, &b],
                &other,
                16,
                &faults,
            )
            .unwrap_err(),
        );
        named(
            d0.fold_onto(DType::F32, ElementwiseOp::Max, &a, &[&other], 16, &faults)
                .unwrap_err(),
        );
        named(d0.div(DType::F32, 2, &other, &a, 16, &faults).unwrap_err());
        let whole = [Region {
            operand: 0,
            src: 0,
            dst: 0,
            len: 64,
        }];
        named(
            d0.copy_regions("copy", &whole, &[&a], &other, &faults)
                .unwrap_err(),
        );
        drop((a, b, other));
        assert_eq!(d0.stats().current, 0);
        assert_eq!(d1.stats().current, 0);
    }

    #[test]
    fn a_failed_wait_loses_the_device_and_parks_what_it_may_touch() {
        let Some(inst) =
            instance_or_skip("a_failed_wait_loses_the_device_and_parks_what_it_may_touch")
        else {
            return;
        };
        for access in [HostAccess::Mapped, HostAccess::Staging] {
            let dev = inst.open_device_with(Device::vulkan(0), access).unwrap();
            let ok = Faults::new(None);
            let n = 1 << 16;
            let mut a = dev.alloc(n * 4, &ok).unwrap();
            dev.upload(&i32_bytes((0..n).map(|i| i as u32)), &mut a)
                .unwrap();
            let out = dev.alloc(n * 4, &ok).unwrap();
            let pooled = dev.pooled_bytes();
            // The wait after the fold's submit fails: its work may still run.
            let faults = Faults::new(Some(crate::backend::fault::FaultPoint::Wait { nth: 0 }));
            let e = dev
                .fold(DType::I32, ElementwiseOp::Add, &[&a, &a], &out, n, &faults)
                .unwrap_err();
            assert_eq!(
                e.to_string(),
                "vulkan:0 was lost during `dispatch`: vkWaitForFences failed: ERROR_DEVICE_LOST (injected by `Executable::inject_fault`); reopen the device (compile again)"
            );
            assert!(dev.lost().is_some());
            // Its buffers are parked, not pooled or destroyed, and no longer
            // counted as live.
            drop((a, out));
            assert_eq!(dev.stats().current, 0);
            assert_eq!(dev.pooled_bytes(), pooled);
            assert_eq!(dev.parked_bytes(), 2 * n * 4);
            // Everything after that says the device is lost.
            let later = dev.alloc(64, &ok).map(|_| ()).unwrap_err().to_string();
            assert!(
                later.starts_with("vulkan:0 was lost during `dispatch`")
                    && later.contains("refused `alloc`"),
                "{later}"
            );
            assert_eq!(dev.parked_bytes(), 2 * n * 4);
            // Dropping the device waits for it and frees what was parked.
            drop(dev);
        }
    }

    #[test]
    fn transfers_past_the_buffer_are_refused() {
        let Some(inst) = instance_or_skip("transfers_past_the_buffer_are_refused") else {
            return;
        };
        for access in [HostAccess::Mapped, HostAccess::Staging] {
            let dev = inst.open_device_with(Device::vulkan(0), access).unwrap();
            let faults = Faults::new(None);
            let mut b = dev.alloc(16, &faults).unwrap();
            let e = dev.upload(&[0u8; 32], &mut b).unwrap_err().to_string();
            assert!(e.contains("upload of 32 bytes into a 16-byte"), "{e}");
            let e = dev.download(&b, &mut [0u8; 32]).unwrap_err().to_string();
            assert!(e.contains("download of 32 bytes from a 16-byte"), "{e}");
            drop(b);
            assert_eq!(dev.stats().current, 0);
        }
    }
}
