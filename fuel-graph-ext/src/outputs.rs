//! [`Outputs`]: a run's results, found by the handle or the name each
//! output was recorded with.
//!
//! The runtime's `Executable::run` returns the outputs in
//! return order, which is the order of the `LazyGraph::output` calls.
//! [`LazyGraph::results`](crate::LazyGraph::results) wraps that vector with
//! what the graph recorded, so a program asks for "the result of `y`" or
//! "the output called `sum`" instead of counting positions. Every lookup
//! that cannot succeed (a tensor that was never an output, one of another
//! graph, an unknown name, a wrong element type) is an [`OutputError`].

use crate::elem::Element;
use crate::graph::ValueId;
use crate::lazy::LazyTensor;
use crate::tensor::Tensor;
use std::collections::BTreeMap;

/// The results of one run, with the recorded outputs they belong to.
///
/// ```
/// use fuel_graph_ext::{Device, LazyGraph, Tensor};
/// use fuel_runtime::exec;
/// use std::collections::BTreeMap;
///
/// let graph = LazyGraph::new("double");
/// let x = graph.input("x", Device::cpu(0), fuel_graph_ext::TensorType::new(fuel_graph_ext::DType::F32, &[3]));
/// let y = x.add(&x)?;
/// graph.output_named("twice", &y)?;
///
/// let exe = exec::compile(&graph.snapshot(), &[])?;
/// let inputs = BTreeMap::from([("x".to_string(), Tensor::from_slice(&[3], &[1.0f32, 2.0, 3.5])?)]);
/// let out = graph.results(exe.run(&inputs)?)?;
/// assert_eq!(out.vec::<f32>(&y)?, [2.0, 4.0, 7.0]);           // by handle
/// assert_eq!(out.named("twice")?.to_vec::<f32>()?, [2.0, 4.0, 7.0]); // by name
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug)]
pub struct Outputs {
    graph: u64,
    values: Vec<ValueId>,
    names: BTreeMap<String, usize>,
    tensors: Vec<Tensor>,
}

impl Outputs {
    /// The results `tensors` of graph `graph`, whose outputs are `values`
    /// (return order) and `names` (name to position).
    pub(crate) fn new(
        graph: u64,
        values: Vec<ValueId>,
        names: BTreeMap<String, usize>,
        tensors: Vec<Tensor>,
    ) -> Result<Outputs, OutputError> {
        if values.len() != tensors.len() {
            return Err(OutputError::ResultCount {
                recorded: values.len(),
                given: tensors.len(),
            });
        }
        Ok(Outputs {
            graph,
            values,
            names,
            tensors,
        })
    }

    /// The result of the output recorded as `t` (the first, if `t` was
    /// recorded as an output more than once).
    pub fn get(&self, t: &LazyTensor) -> Result<&Tensor, OutputError> {
        if t.graph().id() != self.graph {
            return Err(OutputError::ResultOfAnotherGraph);
        }
        self.values
            .iter()
            .position(|v| *v == t.value())
            .and_then(|k| self.tensors.get(k))
            .ok_or_else(|| OutputError::NotAnOutput {
                value: match t.device() {
                    Some(d) => format!("{} on {d}", t.ty()),
                    None => t.ty().to_string(),
                },
            })
    }

    /// The elements of the output recorded as `t`, as `T` (which must be
    /// its dtype's element type).
    pub fn vec<T: Element>(&self, t: &LazyTensor) -> Result<Vec<T>, OutputError> {
        Ok(self.get(t)?.to_vec::<T>()?)
    }

    /// The result of the output named `name` by `LazyGraph::output_named`.
    pub fn named(&self, name: &str) -> Result<&Tensor, OutputError> {
        self.names
            .get(name)
            .and_then(|&k| self.tensors.get(k))
            .ok_or_else(|| {
                let mut known: Vec<String> = self
                    .names
                    .keys()
                    .take(8)
                    .map(|k| format!("\"{}\"", crate::text::excerpt::token(k)))
                    .collect();
                if self.names.len() > 8 {
                    known.push(format!("and {} more", self.names.len() - 8));
                }
                if known.is_empty() {
                    known.push("none".into());
                }
                OutputError::UnknownOutput {
                    name: crate::text::excerpt::token(name),
                    known: known.join(", "),
                }
            })
    }

    /// The results in return order.
    pub fn tensors(&self) -> &[Tensor] {
        &self.tensors
    }

    /// The results in return order, as the runtime's `Executable::run` gave them.
    pub fn into_tensors(self) -> Vec<Tensor> {
        self.tensors
    }
}

/// Why a result could not be found in a lazy graph's outputs; each names
/// the fix.
#[derive(Clone, PartialEq, Eq, thiserror::Error)]
pub enum OutputError {
    /// `LazyGraph::results` got another number of tensors than the graph
    /// records outputs.
    #[error("the graph records {recorded} output(s) but {given} result tensor(s) were given; pass what a run of this graph's snapshot returned, and record every output before taking the snapshot")]
    ResultCount {
        /// Outputs the lazy graph recorded.
        recorded: usize,
        /// Tensors given.
        given: usize,
    },
    /// `Outputs::get` was asked for a tensor of another lazy graph.
    #[error("the tensor belongs to another LazyGraph than these results; look it up in the results of its own graph")]
    ResultOfAnotherGraph,
    /// `Outputs::get` was asked for a tensor that was never an output.
    #[error("the tensor ({value}) was not recorded as an output; call graph.output(&t) on it before taking the snapshot")]
    NotAnOutput {
        /// Its type and device.
        value: String,
    },
    /// `Outputs::named` was asked for a name no output has.
    #[error("no output is named \"{name}\" (named outputs: {known}); name it with graph.output_named, or fix the name")]
    UnknownOutput {
        /// The name asked for.
        name: String,
        /// The output names, quoted (the first few).
        known: String,
    },
    /// Typed data read as the wrong Rust type.
    #[error(transparent)]
    Elem(#[from] crate::elem::ElemError),
}
