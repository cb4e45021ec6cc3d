//! Passes: the `Pass` trait, the registry that maps names to passes, pipeline
//! strings, and the manager that runs a pipeline with verification and dumps.
//!
//! A pipeline is written like `insert-cross-device-copies,cse,dce` with
//! per-pass options as `name{key=value, key2=value2}`. Other crates add their
//! passes to a [`PassRegistry`] (this is how `fuel-collective` plugs in
//! `lower-collectives`), so every driver enables every pass by name.

mod debug;
mod manager;
mod pipeline;

pub use debug::{DebugOptions, PrintAfter};
pub use manager::{Observed, PassManager, PipelineReport};
pub use pipeline::{parse_pipeline, PipelineEntry};

use crate::graph::Graph;
use crate::text::excerpt;
use crate::topology::Topology;
use std::collections::BTreeMap;
use std::sync::Arc;

/// Whether a pass changed the graph.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Changed {
    /// The graph is different.
    Yes,
    /// The graph is untouched.
    No,
}

impl Changed {
    /// `Yes` if `b`.
    pub fn from_bool(b: bool) -> Changed {
        if b {
            Changed::Yes
        } else {
            Changed::No
        }
    }
}

/// A pass failure or a pipeline error.
#[derive(Clone, PartialEq, Eq, thiserror::Error)]
pub enum PassError {
    /// The pipeline text is malformed.
    #[error("bad pipeline `{}`: {}", excerpt::excerpt(.pipeline, excerpt::LINE_CHARS), excerpt::excerpt(.message, excerpt::LINE_CHARS))]
    Pipeline { pipeline: String, message: String },
    /// No pass of that name is registered.
    #[error("unknown pass `{}`; known passes: {known}", excerpt::token(.name))]
    UnknownPass { name: String, known: String },
    /// The pass has no such option.
    #[error("unknown option `{}` for pass `{pass}`; known options: {known}", excerpt::token(.option))]
    UnknownOption {
        pass: String,
        option: String,
        known: String,
    },
    /// An option's value is not acceptable.
    #[error("pass `{pass}`: option `{option}`: {}", excerpt::excerpt(.message, excerpt::LINE_CHARS))]
    BadOption {
        pass: String,
        option: String,
        message: String,
    },
    /// The pass could not transform the graph.
    #[error("pass `{pass}` failed: {message}")]
    Failed { pass: String, message: String },
    /// The graph did not verify after a pass (or at the pipeline's ends);
    /// `stage` says where: "the pipeline's input", "after pass `cse`", ...
    #[error("{stage}: {errors}")]
    Verify {
        stage: String,
        errors: crate::verify::VerifyErrors,
    },
    /// Writing a dump failed.
    #[error("cannot write dump `{path}`: {message}")]
    Io { path: String, message: String },
    /// A pass broke one of its own invariants: a bug in the pass, not bad
    /// input. The message says where.
    #[error("pass `{pass}` broke an invariant: {message}; this is a bug in the pass, please report it with the input graph")]
    Internal { pass: String, message: String },
    /// A variable [`DebugOptions::from_env`] reads is not UTF-8.
    #[error(transparent)]
    Env(#[from] crate::env::EnvError),
    /// `FUEL_PRINT_AFTER` names a pass that is not registered.
    #[error("FUEL_PRINT_AFTER names an unknown pass `{}`; known passes: {known}; give `all` or a comma list of them", excerpt::token(.name))]
    UnknownPrintAfter { name: String, known: String },
}

impl PassError {
    /// An internal error of pass `pass` ([`PassError::Internal`]).
    pub fn internal(pass: &str, message: impl Into<String>) -> PassError {
        PassError::Internal {
            pass: pass.to_string(),
            message: message.into(),
        }
    }
}

/// A transformation of a graph with a kebab-case name. A pass may keep what
/// it found during a run (such as `lower-collectives`' decisions) for the
/// caller to read from [`PassManager::passes_of`] afterwards.
pub trait Pass: std::any::Any {
    /// The name used in pipelines, such as `insert-cross-device-copies`.
    fn name(&self) -> &'static str;
    /// Transforms `g` in place.
    fn run(&mut self, g: &mut Graph) -> Result<Changed, PassError>;
}

/// Options given to a pass in a pipeline (`name{key=value}`), by key.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PassOptions {
    /// The pass these options are for (used in error messages).
    pub pass: String,
    /// Raw values by key.
    pub values: BTreeMap<String, String>,
}

impl PassOptions {
    /// The raw value of `key`.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.values.get(key).map(String::as_str)
    }

    /// Parses the value of `key`, if present, naming the option on failure.
    pub fn parse<T: std::str::FromStr>(&self, key: &str) -> Result<Option<T>, PassError>
    where
        T::Err: std::fmt::Display,
    {
        match self.get(key) {
            None => Ok(None),
            Some(v) => v
                .parse()
                .map(Some)
                .map_err(|e: T::Err| PassError::BadOption {
                    pass: self.pass.clone(),
                    option: key.to_string(),
                    message: format!("cannot use `{v}`: {e}"),
                }),
        }
    }
}

/// What every pass constructor can see.
#[derive(Clone, Debug, Default)]
pub struct PassContext {
    /// Device connectivity and link costs.
    pub topology: Arc<Topology>,
}

/// Builds a pass from its options.
pub type PassCtor = fn(&PassOptions, &PassContext) -> Result<Box<dyn Pass>, PassError>;

/// A registered pass.
#[derive(Clone)]
pub struct PassInfo {
    /// The kebab-case name.
    pub name: &'static str,
    /// One sentence on what it does.
    pub summary: &'static str,
    /// Accepted options with a short description each.
    pub options: &'static [(&'static str, &'static str)],
    /// The constructor.
    pub ctor: PassCtor,
}

/// Maps pass names to constructors.
#[derive(Clone, Default)]
pub struct PassRegistry {
    passes: BTreeMap<&'static str, PassInfo>,
}

impl PassRegistry {
    /// An empty registry.
    pub fn new() -> PassRegistry {
        PassRegistry::default()
    }

    /// A registry with this crate's generic passes.
    pub fn with_builtin() -> PassRegistry {
        let mut r = PassRegistry::new();
        crate::passes::register(&mut r);
        r
    }

    /// Adds (or replaces) a pass.
    pub fn register(&mut self, info: PassInfo) {
        self.passes.insert(info.name, info);
    }

    /// The registered passes, sorted by name.
    pub fn passes(&self) -> impl Iterator<Item = &PassInfo> {
        self.passes.values()
    }

    /// Looks a pass up.
    pub fn get(&self, name: &str) -> Option<&PassInfo> {
        self.passes.get(name)
    }

    fn known(&self) -> String {
        self.passes.keys().copied().collect::<Vec<_>>().join(", ")
    }

    /// Builds one pass, checking its name and option names.
    pub fn build(
        &self,
        entry: &PipelineEntry,
        cx: &PassContext,
    ) -> Result<Box<dyn Pass>, PassError> {
        let info = self
            .passes
            .get(entry.name.as_str())
            .ok_or_else(|| PassError::UnknownPass {
                name: entry.name.clone(),
                known: self.known(),
            })?;
        for key in entry.options.keys() {
            if !info.options.iter().any(|(k, _)| k == key) {
                let known = if info.options.is_empty() {
                    "none".to_string()
                } else {
                    info.options
                        .iter()
                        .map(|(k, _)| *k)
                        .collect::<Vec<_>>()
                        .join(", ")
                };
                return Err(PassError::UnknownOption {
                    pass: entry.name.clone(),
                    option: key.clone(),
                    known,
                });
            }
        }
        let opts = PassOptions {
            pass: entry.name.clone(),
            values: entry.options.clone(),
        };
        (info.ctor)(&opts, cx)
    }
}
