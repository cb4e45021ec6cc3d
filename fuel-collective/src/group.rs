//! `DeviceGroup`: collectives for one process that drives several devices.
//!
//! A group is an ordered list of devices; rank `i` is device `i` and rank 0 is
//! the leader. Every method checks its shards, then records exactly one
//! collective node (`all_reduce`, `reduce`, `broadcast`, `all_gather` or
//! `reduce_scatter`) into the shards' lazy graph and hands back one lazy
//! tensor per result. Nothing moves when a method returns: the
//! `lower-collectives` pass later turns the node into copies and element-wise
//! ops, and an executor runs that.
//!
//! A group takes exactly one shard per rank, shard `i` resident on device `i`.
//! Fewer shards than devices is an error just like more: a rank without a
//! shard cannot take part, and quietly skipping it would, among other things,
//! change the divisor of a `Mean`. Build a smaller group instead. A device may
//! appear more than once (two shards on one device is legal; the copies
//! between them vanish when lowered).

use fuel_graph_ext::lazy::BuildError;
use fuel_graph_ext::op::DeviceList;
use fuel_graph_ext::op::{scatter_extents, TypeError};
use fuel_graph_ext::{Device, LazyTensor, Op, ReduceOp, TensorType};

/// Why a collective call was refused. Each message names the fix.
#[derive(Clone, PartialEq, Eq, thiserror::Error)]
pub enum CollectiveError {
    /// `DeviceGroup::new` got no devices.
    #[error("a device group needs at least one device; pass e.g. [cpu:0]")]
    EmptyGroup,
    /// A collective got an empty shard list.
    #[error("`{op}` got no shards; pass one shard per device of the group ({size} device(s))")]
    NoShards { op: &'static str, size: usize },
    /// The shard count is not the group size.
    #[error("`{op}` got {shards} shard(s) for a group of {size} device(s); pass exactly one shard per device, or build a DeviceGroup of the devices that hold shards")]
    ShardCount {
        op: &'static str,
        shards: usize,
        size: usize,
    },
    /// Shards come from different lazy graphs.
    // The graph ids are process-wide counters, so the message leaves them out.
    #[error("shard {index} belongs to a different LazyGraph than shard 0; record every shard of one collective in the same LazyGraph")]
    MixedGraphs {
        index: usize,
        first: u64,
        other: u64,
    },
    /// Element types differ.
    #[error("shard {index} is {found} but shard 0 is {expected}; every shard must have one dtype (convert it before the collective)")]
    DTypeMismatch {
        index: usize,
        found: TensorType,
        expected: TensorType,
    },
    /// Shapes differ.
    #[error("shard {index} has type {found} but shard 0 has {expected}; every shard must have one shape (pad or reshape it first)")]
    ShapeMismatch {
        index: usize,
        found: TensorType,
        expected: TensorType,
    },
    /// `all_gather` or `all_to_all` shards that differ outside the axis.
    #[error("shard {index} has type {found} but shard 0 has {expected}; the shards of `{op}` may differ only along axis {axis} (pad or reshape the other dims first)")]
    GatherShapeMismatch {
        op: &'static str,
        index: usize,
        found: Box<TensorType>,
        expected: Box<TensorType>,
        axis: usize,
    },
    /// A shard lives on another device than its rank's.
    #[error("shard {index} is on {found} but rank {index} of the group is {expected}; call .copy_to({expected}) on it first, or list the devices in shard order")]
    WrongDevice {
        index: usize,
        found: String,
        expected: Device,
    },
    /// `root` is not a rank.
    #[error("root {root} is out of range for a group of {size} device(s); use a rank from 0 to {}", size.saturating_sub(1))]
    RootOutOfRange { root: usize, size: usize },
    /// `axis` is not an axis of the shards.
    #[error("axis {axis} is out of range for {ty} (rank {rank}); use an axis below {rank}")]
    AxisOutOfRange {
        axis: usize,
        ty: TensorType,
        rank: usize,
    },
    /// `reduce_scatter` cannot split the axis evenly.
    #[error("reduce_scatter axis {axis} has extent {extent}, which {size} ranks cannot split evenly; pad it to a multiple of {size}, or give each rank's extent with a split")]
    NotDivisible {
        axis: usize,
        extent: usize,
        size: usize,
    },
    /// A `reduce_scatter` split with another count than the group size.
    #[error("reduce_scatter split has {found} extent(s) for a group of {size} device(s); give one extent per rank")]
    SplitCount { found: usize, size: usize },
    /// A `reduce_scatter` split that does not add up to the axis extent.
    #[error("reduce_scatter split adds up to {sum} but axis {axis} has extent {extent}; make the extents add up to {extent}")]
    SplitSum {
        sum: usize,
        axis: usize,
        extent: usize,
    },
    /// An `all_to_all` split without N×N extents.
    #[error("all_to_all split has {found} extent(s) for a group of {size} device(s); give {want}, rank i's piece for rank j at i*{size}+j")]
    AllToAllSplitCount {
        found: usize,
        size: usize,
        want: usize,
    },
    /// An `all_to_all` split row that does not add up to its shard.
    #[error("all_to_all split row {rank} adds up to {sum} but shard {rank} has extent {extent} along axis {axis}; make row {rank} add up to {extent}")]
    AllToAllSplitSum {
        rank: usize,
        sum: usize,
        extent: usize,
        axis: usize,
    },
    /// The processes of a `WorldGroup` bring different numbers of local
    /// devices (`crate::world`).
    #[error("process {process} has {mine} local device(s) but process {peer} has {theirs}; every process of a world group must bring the same number of devices")]
    WorldDeviceCount {
        process: usize,
        mine: usize,
        peer: usize,
        theirs: usize,
    },
    /// The processes of a `WorldGroup` bring different topologies, so
    /// they would lower and schedule their graphs differently
    /// (`crate::world_agree`).
    /// `mine` and `theirs` are the two topologies' fingerprints
    /// (`crate::world_agree::topology_fingerprint`).
    #[error("process {process} plans from another topology than process {peer} (their topologies' fingerprints differ), so the two would lower and schedule their graphs differently; give every process the same topology file (or the same calibration cache)")]
    WorldTopology {
        process: usize,
        mine: u64,
        peer: usize,
        theirs: u64,
    },
    /// A `WorldProcess` was given a process index past its world
    /// (`crate::world`).
    #[error("process {process} is out of range for a world of {processes} process(es); number the processes 0 to P - 1, with P at least 1")]
    WorldProcessOutOfRange { process: usize, processes: usize },
    /// A collective driver refused or failed (see [`crate::driver::DriverError`]).
    #[error("collective driver: {0}")]
    Driver(String),
    /// The graph refused the node (should not happen after the checks above).
    #[error(transparent)]
    Build(#[from] BuildError),
}

impl CollectiveError {
    /// The catalogue's code (E04), where one entry covers the error.
    pub fn code(&self) -> Option<&'static str> {
        use CollectiveError as E;
        Some(match self {
            E::EmptyGroup => "E0401",
            E::NoShards { .. } => "E0402",
            E::ShardCount { .. } => "E0403",
            E::MixedGraphs { .. } => "E0404",
            E::DTypeMismatch { .. } => "E0405",
            E::ShapeMismatch { .. } => "E0406",
            E::WrongDevice { .. } => "E0407",
            E::RootOutOfRange { .. } => "E0408",
            E::AxisOutOfRange { .. } => "E0409",
            E::NotDivisible { .. } => "E0410",
            E::GatherShapeMismatch { .. } => "E0411",
            E::SplitCount { .. } => "E0412",
            E::SplitSum { .. } => "E0413",
            E::AllToAllSplitCount { .. } => "E0414",
            E::AllToAllSplitSum { .. } => "E0415",
            E::WorldDeviceCount { .. } => "E0440",
            E::WorldProcessOutOfRange { .. } => "E0441",
            E::WorldTopology { .. } => "E0442",
            E::Build(e) => return e.code(),
            E::Driver(_) => return None,
        })
    }
}
fuel_graph_ext::debug_as_message!(CollectiveError);

/// An ordered set of devices taking part in single-process collectives.
///
/// Recording, lowering and running, in full (the lazy path):
///
/// ```
/// use fuel_collective::{DeviceGroup, DEFAULT_PIPELINE};
/// use fuel_graph_ext::{DType, Device, LazyGraph, ReduceOp, Tensor, TensorType, Topology};
/// use fuel_runtime::exec;
/// use std::collections::BTreeMap;
/// use std::sync::Arc;
///
/// let group = DeviceGroup::new([Device::cpu(0), Device::cpu(1)])?;
/// let graph = LazyGraph::new("step");
/// let ty = TensorType::new(DType::F32, &[2]);
/// let shards: Vec<_> = group.devices().iter().enumerate()
///     .map(|(i, d)| graph.input(&format!("g{i}"), *d, ty.clone()))
///     .collect();
/// let sums = group.all_reduce(&shards, ReduceOp::Sum)?;   // records; nothing runs
/// for s in &sums { graph.output(s)?; }
///
/// let mut g = graph.snapshot();
/// fuel_collective::run_pipeline(&mut g, DEFAULT_PIPELINE, Arc::new(Topology::default()), Default::default())?;
/// let exe = exec::compile(&g, &[])?;                     // once
/// let inputs = BTreeMap::from([
///     ("g0".to_string(), Tensor::from_slice(&[2], &[1.0f32, 2.0])?),
///     ("g1".to_string(), Tensor::from_slice(&[2], &[10.0f32, 20.0])?),
/// ]);
/// let out = graph.results(exe.run(&inputs)?)?;           // as often as needed
/// assert_eq!(out.vec::<f32>(&sums[1])?, [11.0, 22.0]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// The eager shortcut, [`DeviceGroup::all_reduce_now`], does all of that in
/// one call and compiles once per shape.
#[derive(Clone, Debug)]
pub struct DeviceGroup {
    devices: Vec<Device>,
    /// Executables of the eager calls (`*_now`), shared by clones.
    #[cfg(feature = "runtime")]
    pub(crate) eager: std::sync::Arc<crate::eager::Cache>,
}

impl PartialEq for DeviceGroup {
    /// Groups of the same devices in the same order are equal (their
    /// eager caches are not compared).
    fn eq(&self, other: &DeviceGroup) -> bool {
        self.devices == other.devices
    }
}

impl Eq for DeviceGroup {}

impl DeviceGroup {
    /// A group of `devices` in rank order; the first is the leader. Devices
    /// may repeat. An empty list is an error.
    pub fn new(devices: impl IntoIterator<Item = Device>) -> Result<DeviceGroup, CollectiveError> {
        let devices: Vec<Device> = devices.into_iter().collect();
        if devices.is_empty() {
            return Err(CollectiveError::EmptyGroup);
        }
        Ok(DeviceGroup {
            devices,
            #[cfg(feature = "runtime")]
            eager: Default::default(),
        })
    }

    /// The number of ranks.
    pub fn size(&self) -> usize {
        self.devices.len()
    }

    /// Rank 0's device.
    pub fn leader(&self) -> Device {
        // `new` refuses an empty list, so there is always a first device.
        self.devices.first().copied().unwrap_or(Device::cpu(0))
    }

    /// The devices in rank order.
    pub fn devices(&self) -> &[Device] {
        &self.devices
    }

    /// Every rank gets the reduction of all shards, on its own device.
    ///
    /// ```
    /// use fuel_collective::DeviceGroup;
    /// use fuel_graph_ext::{DType, Device, LazyGraph, ReduceOp, TensorType};
    ///
    /// let group = DeviceGroup::new([Device::cpu(0), Device::cpu(1)])?;
    /// let graph = LazyGraph::new("g");
    /// let ty = TensorType::new(DType::F32, &[4]);
    /// let shards = [graph.input("a", Device::cpu(0), ty.clone()), graph.input("b", Device::cpu(1), ty)];
    /// let sums = group.all_reduce(&shards, ReduceOp::Sum)?;
    /// assert_eq!(sums.len(), 2);
    /// assert_eq!(sums[1].device(), Some(Device::cpu(1)));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn all_reduce(
        &self,
        shards: &[LazyTensor],
        op: ReduceOp,
    ) -> Result<Vec<LazyTensor>, CollectiveError> {
        self.check_shards("all_reduce", shards)?;
        record(shards, Op::AllReduce { op })
    }

    /// The reduction of all shards, on rank `root`'s device.
    ///
    /// ```
    /// use fuel_collective::DeviceGroup;
    /// use fuel_graph_ext::{DType, Device, LazyGraph, ReduceOp, TensorType};
    ///
    /// let group = DeviceGroup::new([Device::cpu(0), Device::cpu(1)])?;
    /// let graph = LazyGraph::new("g");
    /// let ty = TensorType::new(DType::F32, &[4]);
    /// let shards = [graph.input("a", Device::cpu(0), ty.clone()), graph.input("b", Device::cpu(1), ty)];
    /// let max = group.reduce(&shards, ReduceOp::Max, 1)?; // on rank 1 only
    /// assert_eq!(max.device(), Some(Device::cpu(1)));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn reduce(
        &self,
        shards: &[LazyTensor],
        op: ReduceOp,
        root: usize,
    ) -> Result<LazyTensor, CollectiveError> {
        self.check_shards("reduce", shards)?;
        let mut out = record(shards, Op::Reduce { op, root })?;
        out.pop().ok_or(CollectiveError::Build(BuildError::Broken(
            "`reduce` produced no result",
        )))
    }

    /// `tensor`, which must live on rank `root`'s device, on every rank.
    ///
    /// ```
    /// use fuel_collective::DeviceGroup;
    /// use fuel_graph_ext::{DType, Device, LazyGraph, ReduceOp, TensorType};
    ///
    /// let group = DeviceGroup::new([Device::cpu(0), Device::cpu(1)])?;
    /// let graph = LazyGraph::new("g");
    /// let ty = TensorType::new(DType::F32, &[4]);
    /// let shards = [graph.input("a", Device::cpu(0), ty.clone()), graph.input("b", Device::cpu(1), ty)];
    /// let copies = group.broadcast(&shards[0], 0)?; // rank 0's tensor everywhere
    /// assert_eq!(copies[1].ty(), TensorType::new(DType::F32, &[4]));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn broadcast(
        &self,
        tensor: &LazyTensor,
        root: usize,
    ) -> Result<Vec<LazyTensor>, CollectiveError> {
        check_root(root, self.size())?;
        let expected = self.devices.get(root).copied().unwrap_or(self.leader());
        let found = tensor.device();
        if found != Some(expected) {
            return Err(CollectiveError::WrongDevice {
                index: root,
                found: found.map_or_else(|| "no device".to_string(), |d| d.to_string()),
                expected,
            });
        }
        let to: DeviceList = self.devices.iter().copied().collect();
        record(std::slice::from_ref(tensor), Op::Broadcast { to })
    }

    /// Every rank gets all shards joined along `axis`, in rank order. The
    /// shards may differ in extent along `axis` (a zero extent too), and
    /// nowhere else.
    ///
    /// ```
    /// use fuel_collective::DeviceGroup;
    /// use fuel_graph_ext::{DType, Device, LazyGraph, ReduceOp, TensorType};
    ///
    /// let group = DeviceGroup::new([Device::cpu(0), Device::cpu(1)])?;
    /// let graph = LazyGraph::new("g");
    /// let ty = TensorType::new(DType::F32, &[4]);
    /// let shards = [graph.input("a", Device::cpu(0), ty.clone()), graph.input("b", Device::cpu(1), ty)];
    /// let all = group.all_gather(&shards, 0)?;
    /// assert_eq!(all[0].ty(), TensorType::new(DType::F32, &[8]));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn all_gather(
        &self,
        shards: &[LazyTensor],
        axis: usize,
    ) -> Result<Vec<LazyTensor>, CollectiveError> {
        self.check_shards_along("all_gather", shards, Some(axis))?;
        record(shards, Op::AllGather { axis })
    }

    /// Rank i's shard is cut along `axis` into one piece per rank, piece j
    /// goes to rank j, and rank j gets what it receives joined in rank
    /// order. `split` has N×N extents (entry `i*N + j`: what rank i sends
    /// to rank j; zeros are legal), each row adding up to its shard's
    /// extent; without one each shard is cut as `reduce_scatter` cuts.
    /// Shards may differ along `axis` only.
    ///
    /// ```
    /// use fuel_collective::DeviceGroup;
    /// use fuel_graph_ext::{DType, Device, LazyGraph, ReduceOp, TensorType};
    ///
    /// let group = DeviceGroup::new([Device::cpu(0), Device::cpu(1)])?;
    /// let graph = LazyGraph::new("g");
    /// let ty = TensorType::new(DType::F32, &[4]);
    /// let shards = [graph.input("a", Device::cpu(0), ty.clone()), graph.input("b", Device::cpu(1), ty)];
    /// let swapped = group.all_to_all(&shards, 0, None)?; // two halves each way
    /// assert_eq!(swapped[1].ty(), TensorType::new(DType::F32, &[4]));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn all_to_all(
        &self,
        shards: &[LazyTensor],
        axis: usize,
        split: Option<&[usize]>,
    ) -> Result<Vec<LazyTensor>, CollectiveError> {
        self.check_shards_along("all_to_all", shards, Some(axis))?;
        let split = split.map(<[usize]>::to_vec);
        record(shards, Op::AllToAll { axis, split })
    }

    /// Rank `i` gets the `i`-th slice along `axis` of the reduction: equal
    /// slices, or where the group size does not divide the extent, `extent
    /// / N` each and the remainder on the last rank.
    ///
    /// ```
    /// use fuel_collective::DeviceGroup;
    /// use fuel_graph_ext::{DType, Device, LazyGraph, ReduceOp, TensorType};
    ///
    /// let group = DeviceGroup::new([Device::cpu(0), Device::cpu(1)])?;
    /// let graph = LazyGraph::new("g");
    /// let ty = TensorType::new(DType::F32, &[4]);
    /// let shards = [graph.input("a", Device::cpu(0), ty.clone()), graph.input("b", Device::cpu(1), ty)];
    /// let halves = group.reduce_scatter(&shards, ReduceOp::Sum, 0)?;
    /// assert_eq!(halves[1].ty(), TensorType::new(DType::F32, &[2]));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn reduce_scatter(
        &self,
        shards: &[LazyTensor],
        op: ReduceOp,
        axis: usize,
    ) -> Result<Vec<LazyTensor>, CollectiveError> {
        self.reduce_scatter_with(shards, op, axis, None)
    }

    /// Rank `i` gets `split[i]` entries along `axis` of the reduction, in
    /// rank order (a zero among them is legal). `split` needs one extent per
    /// rank, adding up to the axis extent. A split equal to the default
    /// partition is recorded as none, so it prints as a plain
    /// `reduce_scatter`.
    pub fn reduce_scatter_split(
        &self,
        shards: &[LazyTensor],
        op: ReduceOp,
        axis: usize,
        split: &[usize],
    ) -> Result<Vec<LazyTensor>, CollectiveError> {
        self.reduce_scatter_with(shards, op, axis, Some(split))
    }

    fn reduce_scatter_with(
        &self,
        shards: &[LazyTensor],
        op: ReduceOp,
        axis: usize,
        split: Option<&[usize]>,
    ) -> Result<Vec<LazyTensor>, CollectiveError> {
        let ty = self.check_shards("reduce_scatter", shards)?;
        // `infer_type` gives each rank an empty slice of an empty axis; a
        // group refuses to scatter nothing.
        if ty.shape.get(axis) == Some(&0) {
            return Err(CollectiveError::NotDivisible {
                axis,
                extent: 0,
                size: self.size(),
            });
        }
        let split = match (split, ty.shape.get(axis)) {
            (Some(s), Some(extent)) => {
                let default = scatter_extents(None, axis, *extent, self.size())?;
                (s != default.as_slice()).then(|| s.to_vec())
            }
            (s, _) => s.map(<[usize]>::to_vec),
        };
        record(shards, Op::ReduceScatter { op, axis, split })
    }

    /// Checks count, graph, dtype, shape and placement; returns the shard type.
    fn check_shards(
        &self,
        op: &'static str,
        shards: &[LazyTensor],
    ) -> Result<TensorType, CollectiveError> {
        self.check_shards_along(op, shards, None)
    }

    /// [`DeviceGroup::check_shards`], where shapes may differ along `along`
    /// (which must be an axis of shard 0).
    fn check_shards_along(
        &self,
        op: &'static str,
        shards: &[LazyTensor],
        along: Option<usize>,
    ) -> Result<TensorType, CollectiveError> {
        let first = shards.first().ok_or(CollectiveError::NoShards {
            op,
            size: self.size(),
        })?;
        if shards.len() != self.size() {
            return Err(CollectiveError::ShardCount {
                op,
                shards: shards.len(),
                size: self.size(),
            });
        }
        let graph = first.graph().id();
        for (index, s) in shards.iter().enumerate() {
            if s.graph().id() != graph {
                return Err(CollectiveError::MixedGraphs {
                    index,
                    first: graph,
                    other: s.graph().id(),
                });
            }
        }
        let expected = first.ty();
        if let Some(axis) = along.filter(|a| *a >= expected.rank()) {
            return Err(CollectiveError::AxisOutOfRange {
                axis,
                rank: expected.rank(),
                ty: expected,
            });
        }
        for (index, (s, want)) in shards.iter().zip(&self.devices).enumerate() {
            let found = s.ty();
            if found.dtype != expected.dtype {
                return Err(CollectiveError::DTypeMismatch {
                    index,
                    found,
                    expected,
                });
            }
            if let Some(axis) = along {
                let same_other_axes = found.rank() == expected.rank()
                    && (0..found.rank()).all(|a| a == axis || found.shape[a] == expected.shape[a]);
                if !same_other_axes {
                    return Err(CollectiveError::GatherShapeMismatch {
                        op,
                        index,
                        found: Box::new(found),
                        expected: Box::new(expected),
                        axis,
                    });
                }
            } else if found != expected {
                return Err(CollectiveError::ShapeMismatch {
                    index,
                    found,
                    expected,
                });
            }
            let dev = s.device();
            if dev != Some(*want) {
                return Err(CollectiveError::WrongDevice {
                    index,
                    found: dev.map_or_else(|| "no device".to_string(), |d| d.to_string()),
                    expected: *want,
                });
            }
        }
        Ok(expected)
    }
}

/// Records `op` over `shards`; the typing rule's refusals (root, axis,
/// divisibility) come back as the group's own errors.
fn record(shards: &[LazyTensor], op: Op) -> Result<Vec<LazyTensor>, CollectiveError> {
    let Some(first) = shards.first() else {
        return Err(CollectiveError::Build(BuildError::Empty(op.mnemonic())));
    };
    let refs: Vec<&LazyTensor> = shards.iter().collect();
    first.graph().record(op, &refs).map_err(|e| match e {
        BuildError::Type(t) => CollectiveError::from(t),
        other => CollectiveError::Build(other),
    })
}

impl From<TypeError> for CollectiveError {
    /// The typing rule's verdict in a group's words: a root or axis out of
    /// range, an axis the ranks cannot split. Anything else is a builder
    /// error (the shard checks run first, so a group call cannot reach it).
    fn from(e: TypeError) -> CollectiveError {
        match e {
            TypeError::AxisOutOfRange { axis, ty, rank } => {
                CollectiveError::AxisOutOfRange { axis, ty, rank }
            }
            TypeError::RootOutOfRange { root, shards: size }
            | TypeError::RootOutOfRanks { root, ranks: size } => {
                CollectiveError::RootOutOfRange { root, size }
            }
            TypeError::NotDivisible {
                axis,
                extent,
                ranks,
            } => CollectiveError::NotDivisible {
                axis,
                extent,
                size: ranks,
            },
            TypeError::SplitCount { found, ranks } => {
                CollectiveError::SplitCount { found, size: ranks }
            }
            TypeError::SplitSum { sum, axis, extent } => {
                CollectiveError::SplitSum { sum, axis, extent }
            }
            TypeError::AllToAllSplitCount { found, ranks, want } => {
                CollectiveError::AllToAllSplitCount {
                    found,
                    size: ranks,
                    want,
                }
            }
            TypeError::AllToAllSplitSum {
                rank,
                sum,
                extent,
                axis,
            } => CollectiveError::AllToAllSplitSum {
                rank,
                sum,
                extent,
                axis,
            },
            other => CollectiveError::Build(BuildError::Type(other)),
        }
    }
}

/// Refuses a root outside a group of `size` ranks.
pub(crate) fn check_root(root: usize, size: usize) -> Result<(), CollectiveError> {
    if root >= size {
        return Err(CollectiveError::RootOutOfRange { root, size });
    }
    Ok(())
}
