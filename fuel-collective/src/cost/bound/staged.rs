//! The host-memory term of [`super::bound`]: the bytes every schedule
//! reads or writes in host memory, counted as the cost model counts them
//! (`cost::placement`), over twice the host-to-host figure.
//!
//! Three counts, and the term is the largest (the first with an
//! all-to-all's own pieces added, `own_pieces`: a rank in host memory
//! whose result takes pieces from two ranks or more copies its own piece
//! into it, a copy that crosses no island's border):
//!
//! - **Staged bytes**, in any group of a few devices ([`ENUMERATE_MAX`] or
//!   fewer). Split the group's GPUs into *islands*: the CUDA devices
//!   joined by peer links (all of them where the CUDA driver serves them:
//!   it reaches every one), each Vulkan device alone. No direct link joins
//!   two islands ([`Topology::link_class`]: a GPU's other links all go to
//!   a CPU), so every byte an island sends out is a copy into a CPU, and
//!   every byte it takes in is a copy out of one. What the rest of the
//!   group needs from the island (the demand of the cut around it) leaves
//!   it that way: a real copy writes each byte into host memory (and
//!   reads it there too where the island's memory is the host's: `1 + h`
//!   bytes per byte, `h` being 1 for a `host-memory` kind); a copy
//!   deferred into a host fold writes it once and the fold reads it once
//!   (2), except from a `host-memory` island, whose mapped buffer the fold
//!   reads where it lies: 1, and the fold writes its result, at least the
//!   most bytes it takes from one island (a reduction's bytes out of such
//!   islands cost their count plus the largest island's; copying them out
//!   costs as much: 2 each). A copy into a CPU is never shared or imported (only host arenas
//!   share, only Vulkan imports). What the island needs from the rest
//!   comes in by copies out of a CPU: a CUDA device reads each byte from
//!   host memory (`1 + h`), while a Vulkan device may import the host's
//!   buffer or take it deferred into its fold and count nothing. In a
//!   reduction whose every rank outside the island keeps its data in host
//!   memory, the island reads its part of each outside CPU's shard, not
//!   only of their sum: a host fold that sums them first reads and writes
//!   host memory itself (`unfolded_intake`). Distinct
//!   islands' copies are distinct steps (a copy out has its source in the
//!   island, a copy in has a CPU for source), so the counts add up.
//! - **Folds and results in host memory**, where every device keeps its
//!   data there and no collective driver serves them (the CPU driver's
//!   own case is [`super::bound`]'s): a reduction's folds read every
//!   shard and write the result once (`n + 1` shards' bytes); a Vulkan
//!   island's bytes out add nothing, since a host fold reads its mapped
//!   buffer where it lies (that read is among the folds'). An all-gather's
//!   result is written once (by a concat or a copy, which reads as much:
//!   twice its bytes) and shared by the other CPUs; an all-to-all's result
//!   of each rank that takes pieces from two ranks or more is written
//!   once in host memory (by a concat or region copies on its device, or
//!   on another and imported: a `host-memory` Vulkan device's result is
//!   host memory too), reading as much; a broadcast's result is shared or
//!   imported (nothing).
//! - **An all-gather's result on the group's CPUs**, in any group with a
//!   CPU: the CPUs share one result buffer, and a copy into a CPU is never
//!   shared or imported, so its bytes are written there at least once
//!   (whichever step writes them: a concat, a copy, a GPU's copy out). The
//!   reads of the staged count still happen, since no write stands in for
//!   them: a host-memory island's copies out, and a CUDA island's copies
//!   in, or the CPUs' own shards if they are more (each is read at least
//!   once, by a copy into the result or by one that takes it to a GPU
//!   that writes it back). On `[cuda:0, vulkan:0, cpu:0]` that is 3 + 2
//!   shards where the staged count has 4.
//!
//! Host outputs share one buffer (`plan::Options::share_host_outputs`), so
//! a result that reaches another CPU by a copy costs nothing: no count
//! above includes such copies.

use super::terms::Demand;
use super::{Collective, Network, ENUMERATE_MAX};
use fuel_graph_ext::{Device, DeviceKind};

/// The GPU islands of a network's first `k` nodes (see the module's doc):
/// each a list of nodes. Empty for a group over [`ENUMERATE_MAX`] nodes,
/// whose staged count is not worked out (a looser bound, still a bound).
pub(super) fn islands(
    devices: &[Device],
    k: usize,
    peer_nodes: &[Vec<usize>],
    drivers: &[DeviceKind],
) -> Vec<Vec<usize>> {
    if k > ENUMERATE_MAX {
        return Vec::new();
    }
    // Union-find over the GPUs: peers join, a driver's kind is one island.
    let mut parent: Vec<usize> = (0..k).collect();
    fn root(parent: &mut [usize], mut v: usize) -> usize {
        while parent[v] != v {
            parent[v] = parent[parent[v]];
            v = parent[v];
        }
        v
    }
    let join = |parent: &mut Vec<usize>, a: usize, b: usize| {
        let (ra, rb) = (root(parent, a), root(parent, b));
        if ra != rb {
            parent[ra.max(rb)] = ra.min(rb);
        }
    };
    for (u, peers) in peer_nodes.iter().enumerate().take(k) {
        for v in peers.iter().copied().filter(|v| *v < k) {
            join(&mut parent, u, v);
        }
    }
    for kind in drivers.iter().filter(|kind| **kind != DeviceKind::Cpu) {
        let mut first = None;
        for v in (0..k).filter(|v| devices[*v].kind == *kind) {
            match first {
                None => first = Some(v),
                Some(f) => join(&mut parent, f, v),
            }
        }
    }
    let mut out: Vec<Vec<usize>> = Vec::new();
    let mut slot: Vec<Option<usize>> = vec![None; k];
    for v in (0..k).filter(|v| !devices[*v].is_cpu()) {
        let r = root(&mut parent, v);
        match slot[r] {
            Some(i) => out[i].push(v),
            None => {
                slot[r] = Some(out.len());
                out.push(vec![v]);
            }
        }
    }
    out
}

/// Bytes each island must send out and take in: `(out, in, host, vulkan)`
/// per island, `host` whether its memory is the host's, `vulkan` whether
/// it is a Vulkan device (which takes bytes in for free).
fn crossings(net: &Network, demand: &Demand) -> Vec<(f64, f64, bool, bool)> {
    let n = net.devices.len();
    let k = net.nodes();
    net.islands
        .iter()
        .map(|island| {
            let mut inside = vec![false; n];
            island.iter().for_each(|v| inside[*v] = true);
            let host = island.iter().all(|v| net.hmem[*v]);
            let vulkan = island
                .iter()
                .all(|v| net.devices[*v].kind == DeviceKind::Vulkan);
            let taken = match unfolded_intake(net, demand, &inside) {
                Some(t) if !vulkan => t.max(demand.need(&inside)),
                _ => demand.need(&inside),
            };
            let mut rest = vec![false; n];
            (0..k).for_each(|v| rest[v] = !inside[v]);
            let sent = demand.need(&rest);
            (sent, taken, host, vulkan)
        })
        .collect()
}

/// What a reduction's island `inside` must read out of host memory to take
/// in its part of the other ranks' shards, where every node outside it
/// keeps its data in host memory (so any fold there reads and writes host
/// memory too); `None` elsewhere, or for a collective that folds nothing.
///
/// Per byte of the island's part (`p`, [`Demand::per_contributor`]), each
/// outside CPU's shard costs one read, whether the copy into the island
/// reads it or a host fold does (a fold also writes its result, which the
/// copy then reads: folding CPU shards first never saves). The
/// `host-memory` GPUs' shards cost 1 together: the staged count already
/// charges their reads where they lie and the write of the host fold (or
/// copy) that takes them, whose result the copy in then reads once.
/// Where the host driver serves the CPUs, it folds their shards into one
/// with no traffic the model counts, so the CPUs cost 1 together.
fn unfolded_intake(net: &Network, demand: &Demand, inside: &[bool]) -> Option<f64> {
    let p = demand.per_contributor(inside)?;
    let outside = || (0..net.nodes()).filter(|v| !inside[*v]);
    if !outside().all(|v| net.hmem[v]) {
        return None;
    }
    let cpus = outside().filter(|v| net.devices[*v].is_cpu()).count();
    let others = outside().count() - cpus;
    let cpus = if net.cpus_driven { cpus.min(1) } else { cpus };
    Some(p * (cpus + others.min(1)) as f64)
}

/// Bytes `c` reads or writes in host memory under any schedule on `net`
/// (the module's doc); 0 where nothing is sure to.
pub(super) fn host_bytes(net: &Network, c: &Collective, group: &[Device], demand: &Demand) -> f64 {
    if group.len() < 2 {
        return 0.0;
    }
    let cross = crossings(net, demand);
    let taken_in = |(_, taken, host, vulkan): &(f64, f64, bool, bool)| {
        if *vulkan {
            0.0
        } else {
            taken * (1.0 + f64::from(u8::from(*host)))
        }
    };
    // What leaves an island, per byte: a write into host memory, and a
    // read too where the island's memory is the host's. But a reduction's
    // bytes may go into a host fold that reads them where they lie (a
    // mapped `host-memory` buffer): 1 per byte, and that fold writes its
    // result, at least as many bytes as the most it reads of one island
    // (`hmem_fold`; copying them out instead costs that much more too).
    let folds = c.fold_bytes(group.len()) > 0.0;
    let sent_out = |(sent, _, host, _): &(f64, f64, bool, bool)| match (host, folds) {
        (true, false) => 2.0 * sent,
        _ => *sent,
    };
    let hmem_fold = if folds {
        cross
            .iter()
            .filter(|x| x.2)
            .map(|x| x.0)
            .fold(0.0, f64::max)
    } else {
        0.0
    };
    let staged: f64 = hmem_fold + cross.iter().map(|x| sent_out(x) + taken_in(x)).sum::<f64>();
    let staged = staged.max(gathered_on_cpus(c, group, &cross)) + own_pieces(net, c, group);
    if !(net.host_only || net.cpu_driver) {
        return staged;
    }
    let folded = match folds_and_results(net, c, group) {
        Some(b) if folds => b + cross.iter().map(taken_in).sum::<f64>(),
        Some(b) => b,
        None => 0.0,
    };
    staged.max(folded)
}

/// The third count of the module's doc: an all-gather's result on the
/// group's CPUs, for any network; 0 for other collectives and groups with
/// no CPU.
fn gathered_on_cpus(c: &Collective, group: &[Device], cross: &[(f64, f64, bool, bool)]) -> f64 {
    let Collective::AllGather { shards } = c else {
        return 0.0;
    };
    if !group.iter().any(|d| d.is_cpu()) {
        return 0.0;
    }
    let total: usize = shards.iter().sum();
    let on_cpus: usize = shards
        .iter()
        .zip(group)
        .filter(|(_, d)| d.is_cpu())
        .map(|(b, _)| *b)
        .sum();
    // Reads that no write stands in for: what a host-memory island's
    // copies out read there, and what a CUDA island takes out of host
    // memory, or the CPUs' own shards if more (a CPU's shard may reach the
    // result by way of a GPU, read once by the copy that takes it there).
    let (mut sent_reads, mut taken_reads) = (0.0, 0.0);
    for (sent, taken, host, vulkan) in cross {
        let h = f64::from(u8::from(*host));
        sent_reads += sent * h;
        if !vulkan {
            taken_reads += taken * (1.0 + h);
        }
    }
    total as f64 + sent_reads + taken_reads.max(on_cpus as f64)
}

/// What an all-to-all's ranks in host memory copy of their own pieces:
/// a rank that takes pieces from two ranks or more has a result of its
/// own, which some step writes there with its own piece too (read where
/// it lies, in host memory), and that piece crosses no island's border,
/// so no other count has it: twice its bytes. 0 for other collectives.
fn own_pieces(net: &Network, c: &Collective, group: &[Device]) -> f64 {
    let Collective::AllToAll { sends } = c else {
        return 0.0;
    };
    let n = group.len();
    let hmem = |d: &Device| {
        net.devices
            .iter()
            .position(|x| x == d)
            .is_some_and(|v| net.hmem[v])
    };
    (0..n)
        .filter(|j| hmem(&group[*j]))
        .filter(|j| (0..n).filter(|i| sends[i * n + j] > 0).count() >= 2)
        .map(|j| 2.0 * sends[j * n + j] as f64)
        .sum()
}

/// The second count of the module's doc, for a network whose every node
/// keeps its data in host memory.
fn folds_and_results(net: &Network, c: &Collective, group: &[Device]) -> Option<f64> {
    let n = group.len() as f64;
    match c {
        Collective::AllReduce { bytes }
        | Collective::Reduce { bytes, .. }
        | Collective::ReduceScatter { bytes, .. } => Some((n + 1.0) * *bytes as f64),
        Collective::Broadcast { .. } => None,
        Collective::AllGather { shards } => {
            let total: usize = shards.iter().sum();
            let any_cpu = cpu_nodes(net).next().is_some();
            Some(if any_cpu { 2.0 * total as f64 } else { 0.0 })
        }
        Collective::AllToAll { sends } => {
            let k = group.len();
            let received = |j: usize| (0..k).map(|i| sends[i * k + j]).sum::<usize>();
            let pieces = |j: usize| (0..k).filter(|i| sends[i * k + j] > 0).count();
            // Per node in host memory, the largest result of a rank on it
            // that must be written (pieces from two ranks or more): by a
            // concat or region copies there, or on another node in host
            // memory and imported (a Vulkan device's `host-memory` arena
            // is host memory as much as a CPU's).
            let per_node = hmem_nodes(net).map(|d| {
                (0..k)
                    .filter(|j| group[*j] == *d && pieces(*j) >= 2)
                    .map(received)
                    .max()
                    .unwrap_or(0)
            });
            Some(2.0 * per_node.sum::<usize>() as f64)
        }
    }
    .filter(|b| *b > 0.0)
}

/// The CPUs among the group's devices (the relay aside).
fn cpu_nodes(net: &Network) -> impl Iterator<Item = &Device> {
    net.devices[..net.nodes()].iter().filter(|d| d.is_cpu())
}

/// The group's devices that keep their data in host memory (the relay
/// aside): the CPUs and any `host-memory` kind.
fn hmem_nodes(net: &Network) -> impl Iterator<Item = &Device> {
    net.devices[..net.nodes()]
        .iter()
        .zip(&net.hmem)
        .filter(|(_, h)| **h)
        .map(|(d, _)| d)
}
