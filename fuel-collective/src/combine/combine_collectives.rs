//! The `combine-collectives` pass: merge many small, independent
//! all-reduces into one.
//!
//! **Matches** every `all_reduce` node whose shards have an axis 0. Two
//! merge only when they have the same reduce op, the same devices in the
//! same order, the same dtype and the same shape outside axis 0 (every 1-D
//! gradient qualifies; the IR has no reshape, so shards are joined along
//! axis 0 rather than flattened), and when no path joins them, directly or
//! through other merged buckets (a collective that feeds another never
//! merges with it).
//!
//! **Produces**, per bucket: on every rank a `concat` of the members' shards
//! along axis 0, one `all_reduce` of the joined shards, and per member and
//! rank a `slice` of the result that takes the member's place (only where
//! the member's result is used). Element-wise reductions act on each element
//! alone, so the sliced values are bit for bit the members' own results.
//! One note per bucket says what merged and what the cost model expects it
//! to save, and one note says what was left alone and why.
//!
//! **Leaves alone** every other node, an all_reduce of no elements (or
//! with rows too large to price), and a collective that is larger than
//! the threshold, whose copies would cost more than the fixed part it
//! saves, or with no independent partner.
//!
//! **The threshold** (`threshold=`, bytes per rank, `K`/`M`/`G` suffixes
//! allowed) caps a bucket. By default the cost model sets it per group:
//! the size where one collective's fixed part is 1/16 of its time, at most
//! 64 MiB ([`plan::Model::default_threshold`]); whether an item merges at
//! all is the model's call too ([`plan::Model::worth`]), and a bucket is
//! kept only where the model expects it to save time. A given `threshold=`
//! is the whole rule: everything that fits merges, as in a framework's
//! fixed bucket size, whatever the model says. A bucket holds its
//! joined shards and its result at once, so the extra memory per rank is at
//! most twice the largest bucket. `model.rs` reads the model's figures off
//! lowered scratch graphs; `plan.rs` is the pure bucketing;
//! `surgery.rs` rewrites the graph.

use super::{model, plan, surgery};
use fuel_graph_ext::dot::human_bytes;
use fuel_graph_ext::graph::NodeId;
use fuel_graph_ext::pass::{Changed, Pass, PassError, PassOptions};
use fuel_graph_ext::{DType, Device, Graph, Op, ReduceOp, TensorType, Topology};
use rustc_hash::FxHashMap;
use std::collections::BTreeMap;
use std::fmt::Write;
use std::str::FromStr;
use std::sync::Arc;

/// The pass name.
pub const NAME: &str = "combine-collectives";

/// The options `combine-collectives` accepts.
pub const OPTIONS: &[(&str, &str)] = &[(
    "threshold",
    "largest bucket in bytes per rank, e.g. 4M (default: from the cost model, per group)",
)];

/// A byte count with an optional `K`, `M` or `G` suffix (powers of 1024).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bytes(pub usize);

impl FromStr for Bytes {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || {
            "expected bytes per rank: a whole number with an optional K, M or G suffix, such as 4194304 or 4M".to_string()
        };
        let (digits, shift) = match s.as_bytes().last() {
            Some(b'K' | b'k') => (&s[..s.len() - 1], 10),
            Some(b'M' | b'm') => (&s[..s.len() - 1], 20),
            Some(b'G' | b'g') => (&s[..s.len() - 1], 30),
            _ => (s, 0),
        };
        if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return Err(bad());
        }
        let n: usize = digits.parse().map_err(|_| bad())?;
        n.checked_mul(1usize << shift)
            .map(Bytes)
            .ok_or_else(|| format!("`{s}` is more bytes than this machine can address"))
    }
}

/// What the pass was asked to do.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CombineOptions {
    /// `threshold=`, or `None` for the cost model's.
    pub threshold: Option<usize>,
}

impl CombineOptions {
    /// Reads `threshold` from pipeline options.
    pub fn from_pass_options(o: &PassOptions) -> Result<CombineOptions, PassError> {
        Ok(CombineOptions {
            threshold: o.parse::<Bytes>("threshold")?.map(|b| b.0),
        })
    }
}

/// The pass object.
pub struct CombineCollectives {
    opts: CombineOptions,
    topo: Arc<Topology>,
}

impl CombineCollectives {
    /// With the given options and topology.
    pub fn new(opts: CombineOptions, topo: Arc<Topology>) -> CombineCollectives {
        CombineCollectives { opts, topo }
    }
}

/// What must match for two all-reduces to merge.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Key {
    pub op: ReduceOp,
    pub devices: Vec<Device>,
    pub dtype: DType,
    /// The shard shape past axis 0.
    pub rest: Vec<usize>,
}

impl Key {
    /// The type of `rows` entries along axis 0 of this key's shards.
    pub fn ty(&self, rows: usize) -> TensorType {
        let mut shape = vec![rows];
        shape.extend_from_slice(&self.rest);
        TensorType::new(self.dtype, &shape)
    }
}

/// One all-reduce the pass may merge.
pub(crate) struct Candidate {
    pub id: NodeId,
    pub key: Key,
    /// Entries along axis 0.
    pub rows: usize,
    pub bytes: usize,
    /// Some result is a graph output.
    pub output: bool,
}

/// The all-reduces that could merge, in topological order.
fn candidates(g: &Graph) -> Vec<Candidate> {
    let mut out = Vec::new();
    for id in g.topo_order() {
        let Some(n) = g.node(id) else { continue };
        let Op::AllReduce { op } = n.op else { continue };
        if n.ty.shape.is_empty() || n.operands.len() < 2 || !priceable(&n.ty) {
            continue;
        }
        let devices: Option<Vec<Device>> = n.operands.iter().map(|v| g.value_device(*v)).collect();
        let same_types = n.operands.iter().all(|v| g.value_type(*v) == Some(&n.ty));
        let (Some(devices), true) = (devices, same_types) else {
            continue;
        };
        out.push(Candidate {
            id,
            key: Key {
                op,
                devices,
                dtype: n.ty.dtype,
                rest: n.ty.shape[1..].to_vec(),
            },
            rows: n.ty.shape[0],
            bytes: n.ty.size_bytes(),
            output: g.outputs().iter().any(|v| v.node == id),
        });
    }
    out
}

/// Whether an all_reduce of `ty` is worth a look: it has elements (an
/// empty one moves nothing, so merging it saves nothing), and the model,
/// which prices a bucket of up to four of its rows (`model.rs`), gets
/// types that fit. A row of `f32[0, 2^60]` is 2^62 bytes: four of them
/// overflowed the model's byte count (found by the `lower` fuzzer once
/// it drew empty axes, issue 38).
fn priceable(ty: &fuel_graph_ext::TensorType) -> bool {
    let row: usize = ty.shape[1..].iter().product();
    let row = row.saturating_mul(ty.dtype.size_bytes());
    ty.num_elements() > 0
        && row
            .checked_mul(4)
            .is_some_and(|b| b <= fuel_graph_ext::dtype::MAX_TENSOR_BYTES)
}

/// Whether a path joins `from` to any of `to` once every planned bucket is
/// seen as one node (reaching one member reaches them all).
fn reaches(
    g: &Graph,
    from: &[NodeId],
    to: &[NodeId],
    bucket_of: &FxHashMap<NodeId, usize>,
    members: &[Vec<NodeId>],
) -> bool {
    let mut seen: rustc_hash::FxHashSet<NodeId> = from.iter().copied().collect();
    let mut expanded: rustc_hash::FxHashSet<usize> = from
        .iter()
        .filter_map(|n| bucket_of.get(n).copied())
        .collect();
    let mut stack: Vec<NodeId> = from.to_vec();
    while let Some(n) = stack.pop() {
        for c in g.consumers(n) {
            if to.contains(&c) {
                return true;
            }
            if !seen.insert(c) {
                continue;
            }
            stack.push(c);
            if let Some(&b) = bucket_of.get(&c) {
                if expanded.insert(b) {
                    for &m in &members[b] {
                        if to.contains(&m) {
                            return true;
                        }
                        if seen.insert(m) {
                            stack.push(m);
                        }
                    }
                }
            }
        }
    }
    false
}

impl Pass for CombineCollectives {
    fn name(&self) -> &'static str {
        NAME
    }

    fn run(&mut self, g: &mut Graph) -> Result<Changed, PassError> {
        let cands = candidates(g);
        if cands.len() < 2 {
            return Ok(Changed::No);
        }
        // The cost model's figures, once per key.
        let mut models: BTreeMap<Key, plan::Model> = BTreeMap::new();
        for c in &cands {
            if !models.contains_key(&c.key) {
                let m = model::model(&c.key, &self.topo)?;
                models.insert(c.key.clone(), m);
            }
        }
        let threshold_of = |k: &Key| {
            self.opts
                .threshold
                .unwrap_or_else(|| models[k].default_threshold())
        };
        // One plan over every key at once, so that the independence check
        // sees every bucket, whatever its key.
        let items: Vec<plan::Item<(Key, usize)>> = cands
            .iter()
            .map(|c| plan::Item {
                key: (c.key.clone(), threshold_of(&c.key)),
                bytes: c.bytes,
            })
            .collect();
        let ids: Vec<NodeId> = cands.iter().map(|c| c.id).collect();
        let plan = plan::buckets(
            &items,
            |k| k.1,
            |i| {
                self.opts.threshold.is_some()
                    || models[&cands[i].key].worth(cands[i].bytes, cands[i].output)
            },
            |open, b, i| {
                let members: Vec<Vec<NodeId>> = open
                    .iter()
                    .map(|m| m.iter().map(|&j| ids[j]).collect())
                    .collect();
                let mut bucket_of = FxHashMap::default();
                for (k, m) in members.iter().enumerate() {
                    for &n in m {
                        bucket_of.insert(n, k);
                    }
                }
                !reaches(g, &[ids[i]], &members[b], &bucket_of, &members)
                    && !reaches(g, &members[b], &[ids[i]], &bucket_of, &members)
            },
        )
        .keep_if(|b| {
            let key = &cands[b[0]].key;
            let items: Vec<(usize, bool)> = b
                .iter()
                .map(|&i| (cands[i].bytes, cands[i].output))
                .collect();
            self.opts.threshold.is_some() || models[key].saving_us(&items) > 0.0
        });
        if plan.buckets.is_empty() {
            g.add_note(alone_note(&plan));
            return Ok(Changed::No);
        }
        for bucket in &plan.buckets {
            let members: Vec<&Candidate> = bucket.iter().map(|&i| &cands[i]).collect();
            surgery::merge(g, &members).map_err(|m| PassError::internal(NAME, m))?;
            let key = &members[0].key;
            g.add_note(bucket_note(
                &members,
                &models[key],
                threshold_of(key),
                self.opts.threshold.is_some(),
            ));
        }
        if !plan.alone.is_empty() {
            g.add_note(alone_note(&plan));
        }
        Ok(Changed::Yes)
    }
}

fn bucket_note(
    members: &[&Candidate],
    model: &plan::Model,
    threshold: usize,
    given: bool,
) -> String {
    let key = &members[0].key;
    let sizes: Vec<usize> = members.iter().map(|c| c.bytes).collect();
    let total: usize = sizes.iter().sum();
    let (lo, hi) = (
        sizes.iter().min().copied().unwrap_or(0),
        sizes.iter().max().copied().unwrap_or(0),
    );
    let devices: Vec<String> = key.devices.iter().map(Device::to_string).collect();
    let mut s = format!(
        "{NAME}: merged {} all_reduce.{} of {} over [{}] ({} to {} per rank each) into one of {} per rank",
        members.len(),
        key.op,
        key.dtype,
        devices.join(", "),
        human_bytes(lo),
        human_bytes(hi),
        human_bytes(total),
    );
    let apart: f64 = sizes.iter().map(|b| model.collective.at(*b)).sum();
    let items: Vec<(usize, bool)> = members.iter().map(|c| (c.bytes, c.output)).collect();
    let outputs = items.iter().filter(|(_, out)| *out).count();
    let back = model.read_back;
    let read_back = if outputs > 0 && (back.fixed_us > 0.0 || back.per_byte_us > 0.0) {
        format!(
            ", read-back {:.2}us + {:.3}us/KiB per output item ({outputs} of them)",
            back.fixed_us,
            back.per_byte_us * 1024.0
        )
    } else {
        String::new()
    };
    let _ = write!(
        s,
        ": apart {:.1}us, merged {:.1}us by the cost model (fixed part {:.2}us each at the smallest, bucket {:.2}us, copies {:.2}us + {:.3}us/KiB per item{read_back}); threshold {} per rank ({})",
        apart,
        apart - model.saving_us(&items),
        model.collective.fixed_at(lo),
        model.bucket_us,
        model.per_item.fixed_us,
        model.per_item.per_byte_us * 1024.0,
        human_bytes(threshold),
        if given { "threshold=" } else { "default: the fixed part is 1/16 of a bucket's time" }
    );
    s
}

fn alone_note(plan: &plan::Plan) -> String {
    let count = |why: plan::Alone| plan.alone.iter().filter(|(_, a)| *a == why).count();
    format!(
        "{NAME}: left {} all_reduce alone: {} larger than the threshold, {} whose copies cost more than the fixed part they save, {} with no independent partner of the same group, op, dtype and shape",
        plan.alone.len(),
        count(plan::Alone::TooLarge),
        count(plan::Alone::NotWorth),
        count(plan::Alone::NoPartner),
    )
}
