//! What a run leaves behind and may hold: the allocator counters back at
//! zero, the bound on what a graph can place on a device, and the
//! process's resident memory.

use fuel_graph_ext::{Device, Graph};
use fuel_runtime::exec::Executable;

/// Asserts every opened device holds no buffer.
pub fn assert_no_leaks(exe: &Executable) {
    for d in exe.devices() {
        let m = exe.memory(d).unwrap();
        assert_eq!(m.current, 0, "{d} still holds {} bytes", m.current);
        assert_eq!(m.live_buffers, 0, "{d} still holds buffers");
    }
}

/// Bytes of every value `g` places on `device`: no schedule can hold more
/// at once, so it bounds the allocator's peak.
pub fn all_values_bytes(g: &Graph, device: Device) -> usize {
    g.node_ids()
        .map(|id| g.node(id).unwrap())
        .filter(|n| n.op.device() == Some(device))
        .map(|n| n.ty.size_bytes() * n.num_results())
        .sum()
}

/// Resident set size of this process in bytes (Linux `/proc/self/statm`).
pub fn rss_bytes() -> usize {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap();
    let pages: usize = statm.split_whitespace().nth(1).unwrap().parse().unwrap();
    // The page size is 4 KiB on every Linux target we run on.
    pages * 4096
}
