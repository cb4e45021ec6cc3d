//! Lazy tensors: builder handles that record nodes into a shared graph.
//!
//! A [`LazyGraph`] is a graph behind a mutex with a process-unique id; a
//! [`LazyTensor`] is (graph, value). Builder methods check their operands
//! with the same typing rules as the verifier and return errors, never
//! panic; combining tensors of two different graphs is one such error.
//! Nothing runs: the graph is taken with [`LazyGraph::snapshot`] and handed to
//! a pass pipeline and an executor.

use crate::device::Device;
use crate::dtype::{DType, TensorType};
use crate::graph::{Graph, ValueId};
use crate::op::{infer_type, result_types, ElementwiseOp, Op, ResultPlace, TypeError};
use crate::outputs::OutputError;
use crate::outputs::Outputs;
use crate::tensor::Tensor;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

static NEXT_GRAPH_ID: AtomicU64 = AtomicU64::new(1);

/// Why a builder call was refused.
#[derive(Clone, PartialEq, Eq, thiserror::Error)]
pub enum BuildError {
    /// Tensors from two graphs were combined.
    #[error("operand {index} belongs to graph #{other}, not graph #{this}; build all tensors of one computation from the same LazyGraph")]
    MixedGraphs { index: usize, this: u64, other: u64 },
    /// Operand types do not fit the op.
    #[error(transparent)]
    Type(#[from] TypeError),
    /// A builder found a state it excludes: a bug, not bad input.
    #[error("{0}")]
    Broken(&'static str),
    /// An operand is on the wrong device for an op that needs it local.
    #[error(
        "operand {index} is on {found} but `{op}` runs on {want}; call .copy_to({want}) first"
    )]
    Placement {
        index: usize,
        op: String,
        found: Device,
        want: Device,
    },
    /// The op needs at least one operand.
    #[error("`{0}` needs at least one tensor")]
    Empty(String),
    /// Two outputs were given one name.
    #[error("an output is already named \"{0}\"; give each output its own name")]
    OutputNameTaken(String),
}

#[derive(Debug)]
struct Shared {
    id: u64,
    graph: Mutex<Graph>,
    /// Output names given by [`LazyGraph::output_named`]: name to the
    /// output's position in return order.
    names: Mutex<BTreeMap<String, usize>>,
}

/// A graph that lazy tensors record into. Cheap to clone (shared).
///
/// ```
/// use fuel_graph_ext::{text, DType, Device, LazyGraph, TensorType};
///
/// let graph = LazyGraph::new("scale");
/// let x = graph.input("x", Device::cpu(0), TensorType::new(DType::F32, &[4]));
/// let y = x.copy_to(Device::cpu(1))?;  // recorded, nothing moves
/// let z = y.add(&y)?.slice(0, 1, 2)?;  // types are checked as you go
/// assert_eq!(z.ty(), TensorType::new(DType::F32, &[2]));
/// graph.output(&z)?;
/// assert!(text::print(&graph.snapshot()).contains("slice"));
/// assert!(x.add(&y).is_err()); // cpu:0 and cpu:1: copy one first
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug)]
pub struct LazyGraph {
    inner: Arc<Shared>,
}

impl LazyGraph {
    /// A new empty graph called `name`.
    pub fn new(name: &str) -> LazyGraph {
        let id = NEXT_GRAPH_ID.fetch_add(1, Ordering::Relaxed);
        LazyGraph {
            inner: Arc::new(Shared {
                id,
                graph: Mutex::new(Graph::new(name)),
                names: Mutex::new(BTreeMap::new()),
            }),
        }
    }

    /// The process-unique id of this graph.
    pub fn id(&self) -> u64 {
        self.inner.id
    }

    fn lock(&self) -> MutexGuard<'_, Graph> {
        // A panic while holding the lock cannot leave the graph half-edited
        // in a way that matters here: every edit is a single add_node call.
        self.inner.graph.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Declares an input fed by `name` at run time.
    pub fn input(&self, name: &str, device: Device, ty: TensorType) -> LazyTensor {
        let v = self.lock().add_value(
            Op::Input {
                name: name.into(),
                device,
            },
            &[],
            ty.clone(),
        );
        LazyTensor {
            graph: self.clone(),
            value: v,
            device: Some(device),
            ty,
        }
    }

    /// Records `op` over `operands`, checking graph membership and types.
    /// Returns every result of the new node.
    pub fn record(&self, op: Op, operands: &[&LazyTensor]) -> Result<Vec<LazyTensor>, BuildError> {
        for (index, t) in operands.iter().enumerate() {
            if t.graph.id() != self.id() {
                return Err(BuildError::MixedGraphs {
                    index,
                    this: self.id(),
                    other: t.graph.id(),
                });
            }
        }
        let tys: Vec<&TensorType> = operands.iter().map(|t| &t.ty).collect();
        let ty = infer_type(&op, &tys).map_err(BuildError::Type)?;
        // One type per result where they differ (an uneven reduce_scatter).
        let each = result_types(&op, &tys).map_err(BuildError::Type)?;
        let values: Vec<ValueId> = operands.iter().map(|t| t.value).collect();
        // Each result's device, from the operands' known devices: asking
        // the graph would walk back through every collective before it,
        // which made recording a chain of collectives quadratic.
        let devices: Vec<Option<Device>> = (0..op.num_results(operands.len()) as u32)
            .map(|r| match op.result_place(r) {
                ResultPlace::Device(d) => d,
                ResultPlace::Operand(k) => operands.get(k).and_then(|t| t.device),
            })
            .collect();
        let id = {
            let mut g = self.lock();
            let id = g.add_node(op, &values, ty.clone());
            if let Some(each) = &each {
                g.set_result_types(id, each.clone());
            }
            id
        };
        Ok(devices
            .into_iter()
            .enumerate()
            .map(|(r, device)| LazyTensor {
                graph: self.clone(),
                value: ValueId {
                    node: id,
                    result: r as u32,
                },
                device,
                ty: each.as_ref().and_then(|e| e.get(r)).unwrap_or(&ty).clone(),
            })
            .collect())
    }

    /// Marks `t` as a returned value. A run's results are in the order of
    /// these calls; [`LazyGraph::results`] finds them by `t` instead.
    pub fn output(&self, t: &LazyTensor) -> Result<(), BuildError> {
        self.push_output(t).map(|_| ())
    }

    /// Marks `t` as a returned value called `name`, so that
    /// [`Outputs::named`] finds it. A name may be used once per graph.
    pub fn output_named(&self, name: &str, t: &LazyTensor) -> Result<(), BuildError> {
        let mut names = self.inner.names.lock().unwrap_or_else(|e| e.into_inner());
        if names.contains_key(name) {
            return Err(BuildError::OutputNameTaken(crate::text::excerpt::token(
                name,
            )));
        }
        let position = self.push_output(t)?;
        names.insert(name.to_string(), position);
        Ok(())
    }

    /// Pushes `t` to the outputs and returns its position.
    fn push_output(&self, t: &LazyTensor) -> Result<usize, BuildError> {
        if t.graph.id() != self.id() {
            return Err(BuildError::MixedGraphs {
                index: 0,
                this: self.id(),
                other: t.graph.id(),
            });
        }
        let mut g = self.lock();
        g.push_output(t.value);
        Ok(g.outputs().len() - 1)
    }

    /// The tensors a run of this graph returned (of an executable compiled
    /// from its lowered [`snapshot`](Self::snapshot)), to be found by the
    /// handle each output was recorded with ([`Outputs::get`]) or by its
    /// name ([`Outputs::named`]). Lowering keeps the outputs' order, so
    /// the k-th tensor is the k-th recorded output; a count that differs
    /// from the outputs recorded is an error.
    pub fn results(&self, tensors: Vec<Tensor>) -> Result<Outputs, OutputError> {
        let values = self.lock().outputs().to_vec();
        let names = self
            .inner
            .names
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        Outputs::new(self.id(), values, names, tensors)
    }

    /// A copy of the graph as recorded so far.
    pub fn snapshot(&self) -> Graph {
        self.lock().clone()
    }

    /// Runs `f` with the graph locked (for reading placement or types).
    pub fn with_graph<R>(&self, f: impl FnOnce(&Graph) -> R) -> R {
        f(&self.lock())
    }
}

/// A handle to one value of a lazy graph.
#[derive(Clone, Debug)]
pub struct LazyTensor {
    graph: LazyGraph,
    value: ValueId,
    /// Where it lives, fixed when it was recorded.
    device: Option<Device>,
    /// Its type, fixed when it was recorded (a lazy graph only grows).
    ty: TensorType,
}

impl LazyTensor {
    /// The graph this tensor belongs to.
    pub fn graph(&self) -> &LazyGraph {
        &self.graph
    }
    /// The value it names.
    pub fn value(&self) -> ValueId {
        self.value
    }
    /// Its type (known when it was recorded; the same as
    /// `Graph::value_type` of its value).
    pub fn ty(&self) -> TensorType {
        self.ty.clone()
    }
    /// The device it lives on (known when it was recorded; the same as
    /// `Graph::value_device` of its value).
    pub fn device(&self) -> Option<Device> {
        self.device
    }

    fn single(&self, op: Op, operands: &[&LazyTensor]) -> Result<LazyTensor, BuildError> {
        let mut r = self.graph.record(op, operands)?;
        r.pop().ok_or(BuildError::Broken("op produced no result"))
    }

    fn local(&self, op: &str, operands: &[&LazyTensor]) -> Result<Device, BuildError> {
        let want = self
            .device()
            .ok_or(BuildError::Broken("tensor has no device"))?;
        for (index, t) in operands.iter().enumerate() {
            if t.graph.id() != self.graph.id() {
                return Err(BuildError::MixedGraphs {
                    index,
                    this: self.graph.id(),
                    other: t.graph.id(),
                });
            }
            if let Some(found) = t.device() {
                if found != want {
                    return Err(BuildError::Placement {
                        index,
                        op: op.into(),
                        found,
                        want,
                    });
                }
            }
        }
        Ok(want)
    }

    /// `kind` folded over `self` and `others`, on `self`'s device.
    pub fn elementwise(
        &self,
        kind: ElementwiseOp,
        others: &[&LazyTensor],
    ) -> Result<LazyTensor, BuildError> {
        let mut all = vec![self];
        all.extend_from_slice(others);
        let device = self.local(kind.as_str(), &all)?;
        self.single(Op::Elementwise { kind, device }, &all)
    }
    /// The host framework's kernel `op` (an `extern` op, `docs/extern.md`)
    /// over `self` and `others`, which must all live on `op.device`; its
    /// result has the type `op.ty` declares.
    pub fn call_extern(
        &self,
        op: crate::op::ExternOp,
        others: &[&LazyTensor],
    ) -> Result<LazyTensor, BuildError> {
        let mut all = vec![self];
        all.extend_from_slice(others);
        let device = self.local("extern", &all)?;
        if device != op.device {
            return Err(BuildError::Placement {
                index: 0,
                op: "extern".into(),
                found: device,
                want: op.device,
            });
        }
        self.single(Op::Extern(Box::new(op)), &all)
    }
    /// `self + other`.
    pub fn add(&self, other: &LazyTensor) -> Result<LazyTensor, BuildError> {
        self.elementwise(ElementwiseOp::Add, &[other])
    }
    /// `self * other`.
    pub fn mul(&self, other: &LazyTensor) -> Result<LazyTensor, BuildError> {
        self.elementwise(ElementwiseOp::Mul, &[other])
    }
    /// Element-wise maximum.
    pub fn max(&self, other: &LazyTensor) -> Result<LazyTensor, BuildError> {
        self.elementwise(ElementwiseOp::Max, &[other])
    }
    /// Element-wise minimum.
    pub fn min(&self, other: &LazyTensor) -> Result<LazyTensor, BuildError> {
        self.elementwise(ElementwiseOp::Min, &[other])
    }
    /// 1 where `self` equals `other`, else 0, in their dtype (`eq`: NaN
    /// equals nothing, -0 equals +0).
    pub fn equals(&self, other: &LazyTensor) -> Result<LazyTensor, BuildError> {
        self.elementwise(ElementwiseOp::Eq, &[other])
    }
    /// Division by a positive integer.
    pub fn div(&self, by: u64) -> Result<LazyTensor, BuildError> {
        let device = self.local("div", &[self])?;
        self.single(Op::Div { by, device }, &[self])
    }
    /// Each element converted to `to` (floats round to nearest even,
    /// integers wrap; see `op::cast_defined`).
    pub fn cast(&self, to: DType) -> Result<LazyTensor, BuildError> {
        let device = self.local("cast", &[self])?;
        self.single(Op::Cast { to, device }, &[self])
    }
    /// `len` entries of `axis` from `start`.
    pub fn slice(&self, axis: usize, start: usize, len: usize) -> Result<LazyTensor, BuildError> {
        let device = self.local("slice", &[self])?;
        self.single(
            Op::Slice {
                axis,
                start,
                len,
                device,
            },
            &[self],
        )
    }
    /// `self` followed by `others` along `axis`.
    pub fn concat(&self, others: &[&LazyTensor], axis: usize) -> Result<LazyTensor, BuildError> {
        let mut all = vec![self];
        all.extend_from_slice(others);
        let device = self.local("concat", &all)?;
        self.single(Op::Concat { axis, device }, &all)
    }
    /// A copy on `to`; `self` stays valid.
    pub fn copy_to(&self, to: Device) -> Result<LazyTensor, BuildError> {
        self.single(Op::Copy { to }, &[self])
    }
    /// Moves to `to`; `self` must not be used again.
    pub fn move_to(&self, to: Device) -> Result<LazyTensor, BuildError> {
        self.single(Op::Move { to }, &[self])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dtype::DType;

    #[test]
    fn builders_check_and_record() {
        let g = LazyGraph::new("b");
        let t = TensorType::new(DType::F32, &[4, 2]);
        let a = g.input("a", Device::cpu(0), t.clone());
        let b = g.input("b", Device::cpu(1), t.clone());
        let e = a.add(&b).unwrap_err();
        assert!(e.to_string().contains("call .copy_to(cpu:0) first"), "{e}");
        let b0 = b.copy_to(Device::cpu(0)).unwrap();
        let s = a.add(&b0).unwrap().slice(0, 1, 2).unwrap();
        assert_eq!(s.ty().to_string(), "f32[2,2]");
        g.output(&s).unwrap();
        assert_eq!(g.snapshot().node_count(), 5);

        let other = LazyGraph::new("o");
        let c = other.input("c", Device::cpu(0), t);
        let e = a.add(&c).unwrap_err();
        assert!(matches!(e, BuildError::MixedGraphs { .. }), "{e}");
        assert!(e.to_string().contains("same LazyGraph"));
        assert!(a
            .slice(5, 0, 1)
            .unwrap_err()
            .to_string()
            .contains("axis 5 is out of range"));
    }

    /// A tensor's device is fixed when it is recorded and agrees with the
    /// graph's placement rules, through chains of collectives too.
    #[test]
    fn recorded_devices_match_the_graph() {
        use crate::op::ReduceOp;
        let g = LazyGraph::new("d");
        let t = TensorType::new(DType::F32, &[4]);
        let devs = [Device::cpu(0), Device::vulkan(0), Device::cuda(1)];
        let mut vals: Vec<LazyTensor> = devs
            .iter()
            .enumerate()
            .map(|(i, d)| g.input(&format!("s{i}"), *d, t.clone()))
            .collect();
        let mut all = vals.clone();
        for _ in 0..3 {
            let refs: Vec<&LazyTensor> = vals.iter().collect();
            vals = g
                .record(Op::AllReduce { op: ReduceOp::Sum }, &refs)
                .unwrap();
            all.extend(vals.iter().cloned());
        }
        let refs: Vec<&LazyTensor> = vals.iter().collect();
        all.extend(
            g.record(
                Op::Reduce {
                    op: ReduceOp::Max,
                    root: 2,
                },
                &refs,
            )
            .unwrap(),
        );
        let snap = g.snapshot();
        for v in &all {
            assert_eq!(v.device(), snap.value_device(v.value()), "{:?}", v.value());
        }
        assert_eq!(all[all.len() - 1].device(), Some(Device::cuda(1)));
        assert_eq!(all[4].device(), Some(Device::vulkan(0)));
    }
}
