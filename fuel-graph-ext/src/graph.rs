//! The graph: nodes, values, operand order and the edit API every pass uses.
//!
//! Storage is a petgraph [`StableGraph`], so a [`NodeId`] stays valid while
//! other nodes are removed. Each node keeps its operands as an ordered list of
//! [`ValueId`]s (petgraph iterates incoming edges newest first, so edge order
//! cannot carry operand order); the petgraph edges mirror that list and give
//! fast "who uses this value" queries. Only the methods here mutate the
//! graph, which keeps the two views in step.
//!
//! The petgraph nodes carry no weight: each [`Node`] lives in a side store
//! indexed by the petgraph node index, in chunks of a fixed number of nodes.
//! A graph that grows never copies its nodes to a bigger array, and no
//! single allocation grows with the graph: a lowered graph of 300 000 nodes
//! held them in one 53 MB array, which glibc maps fresh (and the kernel
//! faults in page by page) on every build, since it is above malloc's
//! largest mmap threshold (32 MiB). That made lowering 20 000 collectives
//! take 2.4x the time of 10 000 (see docs/performance.md).
//!
//! A node has one result, or one per rank for the multi-result collectives
//! (see [`Op::is_multi_result`]); all results of a node share one type.

use crate::device::Device;
use crate::dtype::TensorType;
use crate::op::{Op, ResultPlace};
use petgraph::stable_graph::{EdgeIndex, NodeIndex, StableGraph};
use petgraph::visit::EdgeRef;
use petgraph::Direction;
use smallvec::SmallVec;
use std::cmp::Reverse;
use std::collections::{BTreeSet, BinaryHeap};

/// A node's identity; stable across removals of other nodes. It has no
/// `Display`: its index is not the `%N` a user sees in the printed IR, so
/// text for users names values through [`crate::text::Numbering`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct NodeId(pub NodeIndex<u32>);

/// One result of one node: `%N` or `%N#i` in the text IR.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ValueId {
    /// The producing node.
    pub node: NodeId,
    /// Which of its results.
    pub result: u32,
}

/// An edge weight: consumer operand slot `slot` reads producer result `result`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Use {
    /// The producer's result index.
    pub result: u32,
    /// The consumer's operand slot.
    pub slot: u32,
}

/// One operation with its ordered operands and its result type.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Node {
    /// What the node does.
    pub op: Op,
    /// Operands in order.
    pub operands: SmallVec<[ValueId; 4]>,
    /// The type of every result (of result 0 where they differ).
    pub ty: TensorType,
    /// Each result's type where they differ (an uneven `reduce_scatter`);
    /// empty when every result is `ty`. Set by [`Graph::set_result_types`].
    pub result_tys: Vec<TensorType>,
}

impl Node {
    /// How many results the node has.
    pub fn num_results(&self) -> usize {
        self.op.num_results(self.operands.len())
    }
}

/// log2 of the nodes per [`NodeStore`] chunk (4096 nodes, about 0.5 MB).
const CHUNK_BITS: usize = 12;
const CHUNK: usize = 1 << CHUNK_BITS;

/// Node payloads by node index, in chunks of [`CHUNK`] slots that never
/// move once allocated (see the module docs for why not one `Vec`).
#[derive(Clone, Debug, Default)]
struct NodeStore {
    chunks: Vec<Vec<Option<Node>>>,
}

impl NodeStore {
    fn get(&self, i: usize) -> Option<&Node> {
        self.chunks
            .get(i >> CHUNK_BITS)?
            .get(i & (CHUNK - 1))?
            .as_ref()
    }

    fn get_mut(&mut self, i: usize) -> Option<&mut Node> {
        self.chunks
            .get_mut(i >> CHUNK_BITS)?
            .get_mut(i & (CHUNK - 1))?
            .as_mut()
    }

    /// Stores `node` at index `i`, growing the store as needed. The first
    /// chunk grows by doubling, so that small graphs (the cost model's
    /// scratch graphs, one per collective) stay small; later chunks are
    /// allocated whole. No chunk grows past [`CHUNK`] slots.
    fn put(&mut self, i: usize, node: Node) {
        let (c, slot) = (i >> CHUNK_BITS, i & (CHUNK - 1));
        while self.chunks.len() <= c {
            let cap = if self.chunks.is_empty() { 0 } else { CHUNK };
            self.chunks.push(Vec::with_capacity(cap));
        }
        let Some(chunk) = self.chunks.get_mut(c) else {
            return;
        };
        if chunk.len() <= slot {
            if chunk.capacity() <= slot {
                let want = (slot + 1).next_power_of_two().clamp(8, CHUNK);
                chunk.reserve_exact(want - chunk.len());
            }
            chunk.resize_with(slot + 1, || None);
        }
        if let Some(s) = chunk.get_mut(slot) {
            *s = Some(node);
        }
    }

    fn take(&mut self, i: usize) -> Option<Node> {
        self.chunks
            .get_mut(i >> CHUNK_BITS)?
            .get_mut(i & (CHUNK - 1))?
            .take()
    }
}

/// A lazy computation graph.
#[derive(Clone, Debug, Default)]
pub struct Graph {
    /// The name printed after `graph @`.
    pub name: String,
    g: StableGraph<(), Use, petgraph::Directed, u32>,
    /// Each live node's payload, by petgraph node index.
    nodes: NodeStore,
    outputs: Vec<ValueId>,
    notes: Vec<String>,
}

impl Graph {
    /// An empty graph.
    pub fn new(name: impl Into<String>) -> Graph {
        Graph {
            name: name.into(),
            ..Graph::default()
        }
    }

    /// Makes room for `nodes` more nodes and `edges` more operand uses, so
    /// that a caller that knows the size (the parser) does not regrow the
    /// storage.
    pub fn reserve(&mut self, nodes: usize, edges: usize) {
        self.g.reserve_nodes(nodes);
        self.g.reserve_edges(edges);
    }

    /// Adds a node. Operands must name existing nodes; types are not checked
    /// here (the verifier does that), so passes and the parser can build any
    /// graph and get a full error report.
    pub fn add_node(&mut self, op: Op, operands: &[ValueId], ty: TensorType) -> NodeId {
        let id = NodeId(self.g.add_node(()));
        self.nodes.put(
            id.0.index(),
            Node {
                op,
                operands: operands.into(),
                ty,
                result_tys: Vec::new(),
            },
        );
        for (slot, v) in operands.iter().enumerate() {
            self.link(*v, id, slot);
        }
        id
    }

    /// Adds a single-result node and returns its value.
    pub fn add_value(&mut self, op: Op, operands: &[ValueId], ty: TensorType) -> ValueId {
        ValueId {
            node: self.add_node(op, operands, ty),
            result: 0,
        }
    }

    /// The node, if it exists.
    pub fn node(&self, id: NodeId) -> Option<&Node> {
        // The store holds a payload exactly for the live petgraph nodes.
        self.nodes.get(id.0.index())
    }

    /// Mutable access to a node's op and type (operands change only through
    /// [`Graph::set_operand`]).
    pub fn set_op(&mut self, id: NodeId, op: Op, ty: TensorType) {
        if let Some(n) = self.node_mut(id) {
            n.op = op;
            n.ty = ty;
            n.result_tys.clear();
        }
    }

    /// Gives node `id` one type per result (`tys[i]` for result i); where
    /// they are all one type, that is its `ty` and nothing more is kept.
    pub fn set_result_types(&mut self, id: NodeId, tys: Vec<TensorType>) {
        if let Some(n) = self.node_mut(id) {
            if let Some(first) = tys.first() {
                n.ty = first.clone();
            }
            n.result_tys = if tys.iter().all(|t| *t == n.ty) {
                Vec::new()
            } else {
                tys
            };
        }
    }

    /// True if `id` names a live node.
    pub fn contains(&self, id: NodeId) -> bool {
        self.g.contains_node(id.0)
    }

    /// True if `v` names an existing result.
    pub fn contains_value(&self, v: ValueId) -> bool {
        self.node(v.node)
            .is_some_and(|n| (v.result as usize) < n.num_results())
    }

    /// Number of live nodes.
    pub fn node_count(&self) -> usize {
        self.g.node_count()
    }

    /// Live node ids in index order.
    pub fn node_ids(&self) -> impl Iterator<Item = NodeId> + '_ {
        self.g.node_indices().map(NodeId)
    }

    /// The type of a value.
    pub fn value_type(&self, v: ValueId) -> Option<&TensorType> {
        self.node(v.node)
            .map(|n| n.result_tys.get(v.result as usize).unwrap_or(&n.ty))
    }

    /// The device a value lives on: operand i's device for result i of a
    /// collective, the i-th target of a broadcast, the root's device for a
    /// reduce, and the op's own device otherwise. `None` for a dangling value
    /// or an ill-formed collective.
    pub fn value_device(&self, v: ValueId) -> Option<Device> {
        // Collectives take their placement from operands, so follow them.
        // A chain without a cycle visits each node at most once; past that
        // many hops it is a cycle of collectives, which has no device.
        let mut v = v;
        for _ in 0..=self.node_count() {
            let n = self.node(v.node)?;
            match n.op.result_place(v.result) {
                ResultPlace::Operand(k) => v = *n.operands.get(k)?,
                ResultPlace::Device(d) => return d,
            }
        }
        None
    }

    /// Every (consumer, slot) reading `v`, sorted.
    pub fn users(&self, v: ValueId) -> Vec<(NodeId, u32)> {
        let mut out: Vec<(NodeId, u32)> = self
            .g
            .edges_directed(v.node.0, Direction::Outgoing)
            .filter(|e| e.weight().result == v.result)
            .map(|e| (NodeId(e.target()), e.weight().slot))
            .collect();
        out.sort_unstable();
        out
    }

    /// Number of uses of `v`, counting graph outputs.
    pub fn use_count(&self, v: ValueId) -> usize {
        self.users(v).len() + self.outputs.iter().filter(|o| **o == v).count()
    }

    /// Consumers of any result of `id`, deduplicated and sorted.
    pub fn consumers(&self, id: NodeId) -> BTreeSet<NodeId> {
        self.g
            .neighbors_directed(id.0, Direction::Outgoing)
            .map(NodeId)
            .collect()
    }

    /// Replaces all operands of `node` at once.
    pub fn set_operands(&mut self, node: NodeId, operands: &[ValueId]) {
        let old: Vec<EdgeIndex<u32>> = self
            .g
            .edges_directed(node.0, Direction::Incoming)
            .map(|e| e.id())
            .collect();
        for e in old {
            self.g.remove_edge(e);
        }
        let Some(n) = self.node_mut(node) else {
            return;
        };
        n.operands = operands.into();
        for (slot, v) in operands.iter().enumerate() {
            self.link(*v, node, slot);
        }
    }

    /// Records that operand `slot` of `node` reads `v` (an edge from its
    /// producer), when the producer is in the graph.
    fn link(&mut self, v: ValueId, node: NodeId, slot: usize) {
        if self.g.contains_node(v.node.0) {
            let edge = Use {
                result: v.result,
                slot: slot as u32,
            };
            self.g.add_edge(v.node.0, node.0, edge);
        }
    }

    /// Replaces operand `slot` of `node` with `v`.
    pub fn set_operand(&mut self, node: NodeId, slot: usize, v: ValueId) {
        let Some(n) = self.node_mut(node) else {
            return;
        };
        let Some(old) = n.operands.get_mut(slot) else {
            return;
        };
        *old = v;
        let edge: Option<EdgeIndex<u32>> = self
            .g
            .edges_directed(node.0, Direction::Incoming)
            .find(|e| e.weight().slot as usize == slot)
            .map(|e| e.id());
        if let Some(e) = edge {
            self.g.remove_edge(e);
        }
        self.link(v, node, slot);
    }

    /// Points every use of `old` (operands and outputs) at `new`.
    pub fn replace_all_uses(&mut self, old: ValueId, new: ValueId) {
        for (user, slot) in self.users(old) {
            self.set_operand(user, slot as usize, new);
        }
        for o in &mut self.outputs {
            if *o == old {
                *o = new;
            }
        }
    }

    /// Removes a node and its edges. Callers make sure nothing still uses it
    /// (the verifier reports dangling operands otherwise).
    pub fn remove_node(&mut self, id: NodeId) -> Option<Node> {
        self.g.remove_node(id.0)?;
        self.nodes.take(id.0.index())
    }

    /// The payload of a live node, for the edit methods above.
    fn node_mut(&mut self, id: NodeId) -> Option<&mut Node> {
        self.nodes.get_mut(id.0.index())
    }

    /// The returned values, in order.
    pub fn outputs(&self) -> &[ValueId] {
        &self.outputs
    }

    /// Sets the returned values.
    pub fn set_outputs(&mut self, outputs: Vec<ValueId>) {
        self.outputs = outputs;
    }

    /// Appends one returned value.
    pub fn push_output(&mut self, v: ValueId) {
        self.outputs.push(v);
    }

    /// Free-text notes printed as `//` lines at the top of the body; passes
    /// use them to say why they chose what they did.
    pub fn notes(&self) -> &[String] {
        &self.notes
    }

    /// Adds a note (one line; newlines are replaced by spaces).
    pub fn add_note(&mut self, note: impl AsRef<str>) {
        let note = note.as_ref();
        // Most notes are one line already; those skip `replace`'s char by
        // char rebuild (10% of lowering's instructions on a chain of
        // collectives), and `contains` finds a line break a word at a time
        // where a byte-by-byte scan took 4%. An exact-size copy rather than
        // the caller's string (whose capacity can be near twice its length)
        // keeps many notes compact: keeping the originals raised lowering's
        // page faults from 62k to 107k over 7 runs each of 10k and 20k
        // collectives.
        if note.contains('\n') || note.contains('\r') {
            self.notes.push(note.replace(['\n', '\r'], " "));
        } else {
            self.notes.push(note.to_owned());
        }
    }

    /// Inputs by name, in index order.
    pub fn inputs(&self) -> Vec<(NodeId, &str)> {
        self.node_ids()
            .filter_map(|id| match &self.node(id)?.op {
                Op::Input { name, .. } => Some((id, name.as_str())),
                _ => None,
            })
            .collect()
    }

    /// A deterministic topological order: Kahn's algorithm, always taking the
    /// ready node with the smallest index. Nodes on a cycle (which the
    /// verifier rejects) are appended in index order, so printing never fails.
    pub fn topo_order(&self) -> Vec<NodeId> {
        self.topo_order_acyclic().0
    }

    /// [`Graph::topo_order`], and whether every node was ordered by Kahn's
    /// algorithm, i.e. whether the graph is acyclic (one pass for callers
    /// such as the verifier that need both).
    pub fn topo_order_acyclic(&self) -> (Vec<NodeId>, bool) {
        if let Some(order) = self.index_order_if_topological() {
            return (order, true);
        }
        // In-degrees indexed by node index; `usize::MAX` marks a free slot.
        let bound = petgraph::visit::NodeIndexable::node_bound(&self.g);
        let mut indeg: Vec<usize> = vec![usize::MAX; bound];
        // A min-heap pops the smallest ready index, as a sorted set would;
        // each node becomes ready once, so there are no duplicates.
        let mut ready: BinaryHeap<Reverse<u32>> = BinaryHeap::new();
        for id in self.g.node_indices() {
            let d = self.nodes.get(id.index()).map_or(0, |n| {
                n.operands.iter().filter(|v| self.contains(v.node)).count()
            });
            if d == 0 {
                ready.push(Reverse(id.index() as u32));
            }
            if let Some(slot) = indeg.get_mut(id.index()) {
                *slot = d;
            }
        }
        let mut order = Vec::with_capacity(self.node_count());
        while let Some(Reverse(i)) = ready.pop() {
            let id = NodeIndex::new(i as usize);
            order.push(NodeId(id));
            for e in self.g.edges_directed(id, Direction::Outgoing) {
                let t = e.target();
                if let Some(d) = indeg.get_mut(t.index()) {
                    if *d != usize::MAX && *d > 0 {
                        *d -= 1;
                        if *d == 0 {
                            ready.push(Reverse(t.index() as u32));
                        }
                    }
                }
            }
        }
        let acyclic = order.len() >= self.node_count();
        if !acyclic {
            let mut seen = vec![false; bound];
            for id in &order {
                if let Some(s) = seen.get_mut(id.0.index()) {
                    *s = true;
                }
            }
            order.extend(
                self.node_ids()
                    .filter(|id| !seen.get(id.0.index()).copied().unwrap_or(false)),
            );
        }
        (order, acyclic)
    }

    /// The live nodes in index order, when every operand of every node has
    /// a smaller index than the node. Then a node is ready as soon as every
    /// smaller one is taken, so this is the order Kahn's algorithm with the
    /// smallest ready index first gives, found in one pass in memory order
    /// with no heap. It holds for a graph as parsed, recorded, rebuilt
    /// ([`Graph::rebuilt_in`]) or lowered (`lower-collectives` appends what
    /// it emits); `None` otherwise, and the caller runs Kahn's algorithm.
    fn index_order_if_topological(&self) -> Option<Vec<NodeId>> {
        let mut order = Vec::with_capacity(self.node_count());
        for id in self.g.node_indices() {
            let n = self.nodes.get(id.index())?;
            if n.operands.iter().any(|v| v.node.0 >= id) {
                return None;
            }
            order.push(NodeId(id));
        }
        Some(order)
    }

    /// True if the operands form no cycle. Kahn's algorithm, as
    /// [`Graph::topo_order_acyclic`]: no walk here recurses, so a graph of
    /// any depth is checked on any stack (petgraph's `is_cyclic_directed`
    /// is a recursive DFS, which overflowed an 8 MiB stack at about 50 000
    /// chained nodes).
    pub fn is_acyclic(&self) -> bool {
        self.topo_order_acyclic().1
    }

    /// The petgraph storage, read-only, for algorithms: node indices and the
    /// use edges (node payloads are reached through [`Graph::node`]).
    pub fn petgraph(&self) -> &StableGraph<(), Use, petgraph::Directed, u32> {
        &self.g
    }

    /// The same graph (nodes, operands, outputs, notes) rebuilt with its
    /// nodes created in `order`, so that [`Graph::topo_order`], the printed
    /// IR and every schedule built from it follow `order`. `None` unless
    /// `order` names every node exactly once, each after its operands.
    pub fn rebuilt_in(&self, order: &[NodeId]) -> Option<Graph> {
        if order.len() != self.node_count() {
            return None;
        }
        let mut new_of: rustc_hash::FxHashMap<NodeId, NodeId> = Default::default();
        let mut out = Graph::new(self.name.clone());
        out.reserve(order.len(), self.g.edge_count());
        let map = |new_of: &rustc_hash::FxHashMap<NodeId, NodeId>, v: &ValueId| {
            new_of.get(&v.node).map(|&node| ValueId {
                node,
                result: v.result,
            })
        };
        for id in order {
            let n = self.node(*id)?;
            let operands: Option<SmallVec<[ValueId; 4]>> =
                n.operands.iter().map(|v| map(&new_of, v)).collect();
            let new = out.add_node(n.op.clone(), &operands?, n.ty.clone());
            if !n.result_tys.is_empty() {
                out.set_result_types(new, n.result_tys.clone());
            }
            if new_of.insert(*id, new).is_some() {
                return None;
            }
        }
        let outputs: Option<Vec<ValueId>> = self.outputs.iter().map(|v| map(&new_of, v)).collect();
        out.outputs = outputs?;
        out.notes = self.notes.clone();
        Some(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dtype::DType;
    use crate::op::ElementwiseOp;

    #[test]
    fn node_store_across_chunks_clones_and_removals() {
        let t = TensorType::new(DType::F32, &[1]);
        let mut g = Graph::new("big");
        let input = |i: usize| Op::Input {
            name: format!("x{i}"),
            device: Device::cpu(0),
        };
        let n = CHUNK * 2 + 5;
        let ids: Vec<NodeId> = (0..n)
            .map(|i| g.add_node(input(i), &[], t.clone()))
            .collect();
        // Freed slots (in both chunks) are reused by petgraph and refilled.
        let gone = [ids[3], ids[CHUNK + 1]];
        for id in gone {
            assert!(g.remove_node(id).is_some());
            assert!(g.node(id).is_none());
        }
        let mut c = g.clone();
        let a = c.add_node(input(n), &[], t.clone());
        let b = c.add_node(input(n + 1), &[], t.clone());
        let fresh = c.add_node(input(n + 2), &[], t);
        assert_eq!(c.node_count(), n + 1);
        assert!(gone.contains(&a) && gone.contains(&b));
        for (id, name) in [(a, n), (b, n + 1), (fresh, n + 2), (ids[n - 1], n - 1)] {
            assert_eq!(c.node(id).map(|x| &x.op), Some(&input(name)));
        }
        // The original is untouched by edits to its clone.
        assert_eq!(g.node_count(), n - 2);
        assert!(g.node(ids[3]).is_none());
    }

    #[test]
    fn operand_order_and_rewiring() {
        let t = TensorType::new(DType::F32, &[4]);
        let mut g = Graph::new("t");
        let a = g.add_value(
            Op::Input {
                name: "a".into(),
                device: Device::cpu(0),
            },
            &[],
            t.clone(),
        );
        let b = g.add_value(
            Op::Input {
                name: "b".into(),
                device: Device::cpu(0),
            },
            &[],
            t.clone(),
        );
        let add = Op::Elementwise {
            kind: ElementwiseOp::Add,
            device: Device::cpu(0),
        };
        let s = g.add_value(add, &[b, a, b], t.clone());
        g.push_output(s);
        assert_eq!(g.node(s.node).unwrap().operands.as_slice(), &[b, a, b]);
        assert_eq!(g.users(b), vec![(s.node, 0), (s.node, 2)]);
        let c = g.add_value(Op::Copy { to: Device::cpu(1) }, &[a], t);
        g.replace_all_uses(b, c);
        assert_eq!(g.node(s.node).unwrap().operands.as_slice(), &[c, a, c]);
        assert!(g.users(b).is_empty());
        assert_eq!(g.use_count(s), 1);
        let order = g.topo_order();
        let pos = |id| order.iter().position(|x| *x == id).unwrap();
        assert!(pos(c.node) < pos(s.node));
    }

    /// Kahn's algorithm taking the smallest ready index first, written the
    /// slow and obvious way: the order `topo_order` must give.
    fn smallest_ready_first(g: &Graph) -> Vec<NodeId> {
        let mut left: Vec<NodeId> = g.node_ids().collect();
        let mut done = BTreeSet::new();
        let mut out = Vec::new();
        while let Some(i) = left.iter().position(|id| {
            g.node(*id).is_some_and(|n| {
                n.operands
                    .iter()
                    .all(|v| !g.contains(v.node) || done.contains(&v.node))
            })
        }) {
            let id = left.remove(i);
            done.insert(id);
            out.push(id);
        }
        out.extend(left);
        out
    }

    /// A node that refills a freed slot below its operand: index order is
    /// no longer topological, the fast path declines, and Kahn's algorithm
    /// puts the operand first.
    #[test]
    fn a_refilled_slot_below_its_operand_is_ordered_after_it() {
        let t = TensorType::new(DType::F32, &[1]);
        let mut g = Graph::new("t");
        let input = |name: &str| Op::Input {
            name: name.into(),
            device: Device::cpu(0),
        };
        let a = g.add_value(input("a"), &[], t.clone());
        let b = g.add_value(input("b"), &[], t.clone());
        assert_eq!(g.index_order_if_topological(), Some(vec![a.node, b.node]));
        g.remove_node(a.node);
        let add = Op::Elementwise {
            kind: ElementwiseOp::Add,
            device: Device::cpu(0),
        };
        let c = g.add_value(add, &[b, b], t);
        assert_eq!(c.node, a.node, "the graph refills the freed slot");
        assert_eq!(g.index_order_if_topological(), None);
        assert_eq!(g.topo_order_acyclic(), (vec![b.node, c.node], true));
    }

    proptest::proptest! {
        /// On graphs grown and pruned at random (a pruned node's slot is
        /// refilled by later nodes), the topological order is Kahn's with
        /// the smallest ready index first, whether or not index order is
        /// topological.
        #[test]
        fn topo_order_takes_the_smallest_ready_index(
            steps in proptest::collection::vec(
                (proptest::bool::weighted(0.3), proptest::collection::vec(0usize..64, 0..3)),
                1..80,
            )
        ) {
            let t = TensorType::new(DType::F32, &[1]);
            let mut g = Graph::new("p");
            for (prune, picks) in &steps {
                let live: Vec<NodeId> = g.node_ids().collect();
                let pick = |p: &usize| live[p % live.len()];
                if *prune && !live.is_empty() {
                    // Only a node nothing reads, so no operand dangles.
                    let id = picks.first().map_or(live[0], pick);
                    if g.petgraph().edges_directed(id.0, Direction::Outgoing).next().is_none() {
                        g.remove_node(id);
                    }
                    continue;
                }
                let operands: Vec<ValueId> = if live.is_empty() {
                    Vec::new()
                } else {
                    picks.iter().map(|p| ValueId { node: pick(p), result: 0 }).collect()
                };
                let op = if operands.is_empty() {
                    Op::Input { name: "x".into(), device: Device::cpu(0) }
                } else {
                    Op::Elementwise { kind: ElementwiseOp::Add, device: Device::cpu(0) }
                };
                g.add_node(op, &operands, t.clone());
            }
            proptest::prop_assert_eq!(g.topo_order_acyclic(), (smallest_ready_first(&g), true));
        }
    }
}
