//! The executor's error type: every failure names the problem and the fix.

use fuel_graph_ext::device::Device;
use fuel_graph_ext::dtype::{DType, TensorType};
use fuel_graph_ext::limits::Bytes;

/// Why compiling or running a graph failed.
#[derive(Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExecError {
    /// The graph breaks a verifier rule (the text has every error under its line).
    #[error("the graph does not verify at placement level:\n{0}")]
    Verify(String),
    /// A collective op is still in the graph.
    #[error("`{op}` is a collective, which the executor does not run; run the `lower-collectives` pass first")]
    Collective {
        /// The op's mnemonic.
        op: String,
    },
    /// A `driver_all_reduce` that cannot run (refused at compile time, or
    /// its collective driver failed).
    #[error("`{op}` on {device}: {reason}")]
    DriverAllReduce {
        /// The op's mnemonic.
        op: String,
        /// Where it was placed.
        device: Device,
        /// Why, and what to do instead.
        reason: String,
    },
    /// An SPMD `comm.*` node that cannot run: no communicator handed to
    /// compile, one of the wrong kind, or its driver failed.
    #[error("`{op}` on {device}: {reason}")]
    Spmd {
        /// The op's mnemonic.
        op: String,
        /// Where it was placed.
        device: Device,
        /// Why, and what to do instead.
        reason: String,
    },
    /// The graph uses a device the caller did not list.
    #[error(
        "the graph uses {device}, which is not in the device list {listed}; add it to the list"
    )]
    DeviceNotListed {
        /// The missing device.
        device: Device,
        /// The list given.
        listed: String,
    },
    /// A device could not be opened.
    #[error("cannot open {device}: {reason}; {hint}")]
    DeviceUnavailable {
        /// The device.
        device: String,
        /// What went wrong.
        reason: String,
        /// How to fix it.
        hint: String,
    },
    /// The backend cannot hold or compute this dtype.
    #[error("dtype {dtype} is not supported on {device} ({reason}); place this value on a backend that supports it (see docs/backends.md)")]
    Unsupported {
        /// The dtype.
        dtype: DType,
        /// The device.
        device: Device,
        /// Why.
        reason: String,
    },
    /// The backend has the dtype but not this form of the op.
    #[error("`{op}` is not supported on {device} ({reason}); {fix}")]
    UnsupportedKernel {
        /// The op as written (`div {by=4294967296}`).
        op: String,
        /// The device.
        device: Device,
        /// Why.
        reason: String,
        /// What to do instead.
        fix: String,
    },
    /// A copy that needs staging through the host was handed to the executor.
    #[error("no direct copy from {src} to {dst}: run the `split-cross-vendor-copies` pass to stage it through the host")]
    NoDirectCopy {
        /// Source device.
        src: Device,
        /// Destination device.
        dst: Device,
    },
    /// No tensor was given for an input.
    #[error("no data for input \"{0}\"; pass one tensor per input name")]
    MissingInput(String),
    /// A tensor was given for a name that is not one of the graph's inputs.
    #[error("the graph has no input named \"{name}\" (its inputs: {known}); fix the name, or leave that tensor out")]
    UnknownInput {
        /// The name given.
        name: String,
        /// The graph's input names, quoted (the first few).
        known: String,
    },
    /// A result looked up in a lazy graph's outputs that is not there
    /// (`LazyGraph::results`, `Outputs::get`, `Outputs::named`).
    #[error(transparent)]
    Output(#[from] fuel_graph_ext::outputs::OutputError),
    /// Typed data read or written as the wrong Rust type.
    #[error(transparent)]
    Elem(#[from] fuel_graph_ext::elem::ElemError),
    /// An input tensor has the wrong type.
    #[error("input \"{name}\" is declared {want} but the data is {got}; pass a tensor of the declared type")]
    InputType {
        /// The input.
        name: String,
        /// Declared type.
        want: TensorType,
        /// Given type.
        got: TensorType,
    },
    /// An input tensor's bytes do not fill its type (a hand-built tensor).
    #[error("input \"{name}\" is declared {ty}, which takes {want} bytes, but the data has {got}; give one value per element")]
    InputSize {
        /// The input.
        name: String,
        /// Its type.
        ty: TensorType,
        /// Bytes the type takes.
        want: usize,
        /// Bytes given.
        got: usize,
    },
    /// A value larger than its device can hold in one buffer (checked at
    /// compile time against what the device reports).
    #[error("{value} (`{op}`, {ty}) needs {} on {device}, but {device} holds at most {} in {what}; use smaller tensors, or place the value on a device with room for it", Bytes(*.bytes), Bytes(*.limit))]
    TooLarge {
        /// The value, as the printer names it (`%3`).
        value: String,
        /// Its op's mnemonic.
        op: String,
        /// Its type.
        ty: Box<TensorType>,
        /// Where it is placed.
        device: Device,
        /// Its bytes.
        bytes: usize,
        /// The most the device takes.
        limit: usize,
        /// Which buffer, and what sets the limit.
        what: String,
    },
    /// More bytes held at once than a device (or the host, for host
    /// arenas together) has (checked at compile time).
    #[error("the graph holds at least {} at once on {place} when its steps run one by one, but {place} has {} ({what}); use smaller tensors, or spread the work over more devices", Bytes(*.need), Bytes(*.limit))]
    NotEnoughMemory {
        /// A device, or `the host (cpu:0, cpu:1)`.
        place: String,
        /// The step-by-step peak.
        need: usize,
        /// What the place has.
        limit: usize,
        /// What sets the limit.
        what: String,
    },
    /// An allocation failed.
    #[error("out of memory on {device}: cannot allocate {bytes} bytes ({reason})")]
    OutOfMemory {
        /// The device.
        device: Device,
        /// The request.
        bytes: usize,
        /// The driver's words.
        reason: String,
    },
    /// A kernel or copy failed on the device.
    #[error("`{op}` failed on {device}: {reason}")]
    Device {
        /// The device.
        device: Device,
        /// The operation.
        op: String,
        /// The driver's words.
        reason: String,
    },
    /// A device was lost; the run stopped.
    #[error("{device} was lost during `{op}`: {reason}; reopen the device (compile again)")]
    DeviceLost {
        /// The device.
        device: Device,
        /// The operation.
        op: String,
        /// The driver's words.
        reason: String,
    },
    /// An `extern` op with no kernel registered for its device's backend.
    #[error("`extern \"{name}\"` on {device} has no kernel for that device; {fix}")]
    NoExternKernel {
        /// The kernel's name.
        name: String,
        /// The op's device.
        device: Device,
        /// How to register one.
        fix: String,
    },
    /// An `extern` op's kernel returned an error.
    #[error("`extern \"{name}\"` on {device} failed: {reason}; the run's buffers were released and the next run may try again")]
    ExternFailed {
        /// The kernel's name.
        name: String,
        /// The op's device.
        device: Device,
        /// What the kernel said.
        reason: String,
    },
    /// An `extern` op's kernel wrote another number of bytes than its
    /// result holds.
    #[error("`extern \"{name}\"` on {device} wrote {wrote} bytes, but its result {ty} holds {want}; fix the kernel to fill the whole result, or declare the type it computes")]
    ExternBytes {
        /// The kernel's name.
        name: String,
        /// The op's device.
        device: Device,
        /// Bytes it said it wrote.
        wrote: usize,
        /// Bytes the result holds.
        want: usize,
        /// The result's type.
        ty: Box<TensorType>,
    },
    /// An `extern` op's kernel panicked.
    #[error("`extern \"{name}\"` on {device} panicked: {message}; the run's buffers were released and the next run may try again")]
    ExternPanicked {
        /// The kernel's name.
        name: String,
        /// The op's device.
        device: Device,
        /// The panic's message.
        message: String,
    },
    /// An injected fault fired (see `Executable::inject_fault`).
    #[error("injected fault in `{op}` on {device} (armed by `Executable::inject_fault`; the next run is unaffected)")]
    Injected {
        /// The device.
        device: Device,
        /// The operation.
        op: String,
    },
    /// A thread the executor needs could not start.
    #[error("cannot start {what}: {reason}; {limit}")]
    Thread {
        /// Which thread (`the worker thread for vulkan:0`).
        what: String,
        /// The operating system's words.
        reason: String,
        /// The limit it most likely hit, with its value, and the fix.
        limit: String,
    },
    /// An environment variable the executor reads has a bad value.
    #[error(transparent)]
    Env(#[from] fuel_graph_ext::env::EnvError),
    /// A bug in the executor.
    #[error("internal executor error: {0}; please report it")]
    Internal(String),
}

/// The fix for a backend or driver this build left out: its cargo
/// feature, named on the dependency a user's own crate declares (a
/// `--features` flag only reaches the package being built, not one it
/// depends on).
pub fn feature_hint(feature: &str) -> String {
    format!(
        "turn on the `{feature}` feature of the dependency: `fuel-collective = {{ version = \"0.1\", features = [\"{feature}\"] }}` in your Cargo.toml (or the same feature of `fuel-runtime`, if you depend on the runtime alone)"
    )
}

impl ExecError {
    /// [`ExecError::UnknownInput`] for `name`, listing the first few of the
    /// graph's `known` names (each quoted and cut as messages quote input).
    pub(crate) fn unknown_input(
        name: &str,
        known: &std::collections::BTreeSet<String>,
    ) -> ExecError {
        const SHOWN: usize = 8;
        let mut list: Vec<String> = known
            .iter()
            .take(SHOWN)
            .map(|k| format!("\"{}\"", fuel_graph_ext::text::excerpt::token(k)))
            .collect();
        if known.len() > SHOWN {
            list.push(format!("and {} more", known.len() - SHOWN));
        }
        if list.is_empty() {
            list.push("none".into());
        }
        ExecError::UnknownInput {
            name: fuel_graph_ext::text::excerpt::token(name),
            known: list.join(", "),
        }
    }
}

impl From<fuel_graph_ext::PlanError> for ExecError {
    /// A plan error is the executor error of the same name and words.
    fn from(e: fuel_graph_ext::PlanError) -> Self {
        use fuel_graph_ext::PlanError as P;
        match e {
            P::Collective { op } => ExecError::Collective { op },
            P::OutOfMemory {
                device,
                bytes,
                reason,
            } => ExecError::OutOfMemory {
                device,
                bytes,
                reason,
            },
            P::Internal(m) => ExecError::Internal(m),
        }
    }
}
