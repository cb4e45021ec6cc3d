//! Submission: record a command buffer, submit it, wait on its fence. A
//! device has two lanes ([`Lane`]), each a submitter (command buffer,
//! fence, descriptor pool) under its own lock: kernels on the compute lane,
//! uploads and downloads on the copy lane, so one of each can be in flight
//! at once. Every GPU command runs under its lane's lock and is waited on
//! before the lock is released; if that wait fails, the device is marked
//! lost under the lock, so nothing that checks it afterwards can touch what
//! the command may still be using. A host read of a mapped buffer takes no
//! lock: like work on the other lane, it reads only what a command already
//! waited on wrote. Work on one lane that reads what the other
//! wrote was started after that write's fence was waited on (the runner
//! releases a step only when its operands are done), and both queues are
//! of one family, so no semaphore or ownership transfer is needed.

use super::*;

pub(super) struct Submitter {
    pub(super) pool: vk::CommandPool,
    pub(super) cmd: vk::CommandBuffer,
    pub(super) fence: vk::Fence,
    pub(super) descriptors: vk::DescriptorPool,
}

impl VkDev {
    /// Records commands with `record`, submits them and waits. A failed
    /// wait (a real one, or [`Event::Wait`] injected after the submit) marks
    /// the device lost: the fence, command buffer and descriptor pool are
    /// left as they are (the submission may still be pending), and this and
    /// every later call fails with `DeviceLost`.
    pub(super) fn run(
        &self,
        lane: Lane,
        op: &str,
        faults: &Faults,
        record: impl FnOnce(vk::CommandBuffer, vk::DescriptorPool) -> Result<(), ExecError>,
    ) -> Result<(), ExecError> {
        let (lock, queue) = match lane {
            Lane::Compute => (&self.submit, self.queue),
            Lane::Copy => (&self.copy_submit, self.copy_queue),
        };
        let s = lock
            .lock()
            .map_err(|_| ExecError::Internal("Vulkan submit lock poisoned".into()))?;
        self.check_alive(op)?;
        // SAFETY: the lock gives exclusive use of the command buffer, fence and
        // descriptor pool; every earlier submit was waited on before its call
        // returned, or its wait failed and the device is lost, which
        // `check_alive` refused above; so nothing recorded is still in flight.
        unsafe {
            self.dev
                .reset_command_buffer(s.cmd, vk::CommandBufferResetFlags::empty())
                .map_err(|e| self.err(op, e))?;
            self.dev
                .reset_descriptor_pool(s.descriptors, vk::DescriptorPoolResetFlags::empty())
                .map_err(|e| self.err(op, e))?;
            self.dev
                .begin_command_buffer(
                    s.cmd,
                    &vk::CommandBufferBeginInfo::default()
                        .flags(vk::CommandBufferUsageFlags::ONE_TIME_SUBMIT),
                )
                .map_err(|e| self.err(op, e))?;
            // Earlier submits' writes (this queue, submission order) are made
            // visible to these commands, and these commands' writes to the
            // host once the fence is waited on: the host reads storage
            // buffers directly when they are mapped, and the staging buffer
            // otherwise. Host writes need nothing: they precede the submit,
            // which orders them, and the memory is coherent.
            self.barrier(
                s.cmd,
                vk::PipelineStageFlags::ALL_COMMANDS,
                vk::AccessFlags::MEMORY_READ | vk::AccessFlags::MEMORY_WRITE,
            );
            let recorded = record(s.cmd, s.descriptors);
            self.barrier(
                s.cmd,
                vk::PipelineStageFlags::HOST,
                vk::AccessFlags::HOST_READ,
            );
            self.dev
                .end_command_buffer(s.cmd)
                .map_err(|e| self.err(op, e))?;
            recorded?;
            let cmds = [s.cmd];
            let submit = [vk::SubmitInfo::default().command_buffers(&cmds)];
            let submitted = {
                let _shared = (self.copy_queue == self.queue)
                    .then(|| self.queue_shared.lock())
                    .transpose()
                    .map_err(|_| ExecError::Internal("Vulkan queue lock poisoned".into()))?;
                self.dev.queue_submit(queue, &submit, s.fence)
            };
            if let Err(e) = submitted {
                // A failed submit leaves nothing pending, unless the device
                // is gone.
                if e == vk::Result::ERROR_DEVICE_LOST {
                    return Err(self.mark_lost(op, format!("vkQueueSubmit failed: {e:?}")));
                }
                return Err(self.err(op, e));
            }
            let waited = if faults.check(Event::Wait) {
                Err((
                    "vkWaitForFences",
                    vk::Result::ERROR_DEVICE_LOST,
                    " (injected by `Executable::inject_fault`)",
                ))
            } else {
                self.dev
                    .wait_for_fences(&[s.fence], true, u64::MAX)
                    .map_err(|e| ("vkWaitForFences", e, ""))
            };
            // Only a fence whose submission is done may be reset.
            let reset = waited.and_then(|()| {
                self.dev
                    .reset_fences(&[s.fence])
                    .map_err(|e| ("vkResetFences", e, ""))
            });
            if let Err((call, e, note)) = reset {
                return Err(self.mark_lost(op, format!("{call} failed: {e:?}{note}")));
            }
        }
        let _ = &s.pool;
        Ok(())
    }

    /// A global memory barrier after every write of earlier commands.
    ///
    /// # Safety
    /// `cmd` is recording and belongs to this device.
    pub(super) unsafe fn barrier(
        &self,
        cmd: vk::CommandBuffer,
        dst_stage: vk::PipelineStageFlags,
        dst_access: vk::AccessFlags,
    ) {
        let b = [vk::MemoryBarrier::default()
            .src_access_mask(vk::AccessFlags::MEMORY_WRITE)
            .dst_access_mask(dst_access)];
        // SAFETY: the caller's contract; a global barrier names no handle.
        unsafe {
            self.dev.cmd_pipeline_barrier(
                cmd,
                vk::PipelineStageFlags::ALL_COMMANDS,
                dst_stage,
                vk::DependencyFlags::empty(),
                &b,
                &[],
                &[],
            )
        };
    }
}
