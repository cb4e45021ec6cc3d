//! Running a pipeline: verification around every pass, tracing spans, and
//! the printing and dumps its [`DebugOptions`] ask for.

use super::{parse_pipeline, Changed, DebugOptions, Pass, PassContext, PassError, PassRegistry};
use crate::dtype::TensorType;
use crate::graph::Graph;
use crate::verify::{verify, Level};
use std::io::Write;
use std::path::PathBuf;

/// What a pipeline run did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PipelineReport {
    /// (pass name, whether it changed the graph), in order.
    pub passes: Vec<(String, bool)>,
    /// Files written under the dump directory.
    pub dumped: Vec<PathBuf>,
}

/// One step of a pipeline run, as [`PassManager::run_observed`] shows it:
/// the input (`pass` is `None`) or a pass just run, with the graph after it.
pub struct Observed<'a> {
    /// 0 for the input, `k` after the `k`-th pass.
    pub step: usize,
    /// The pass that ran (`None` for the input): a caller reads what it
    /// kept from the run by downcasting, as [`PassManager::passes_of`] does.
    pub pass: Option<&'a dyn Pass>,
    /// Whether the pass changed the graph (`false` for the input).
    pub changed: bool,
    /// How long the pass took.
    pub elapsed: std::time::Duration,
    /// The graph after the step.
    pub graph: &'a Graph,
}

/// Runs a sequence of passes.
pub struct PassManager {
    passes: Vec<Box<dyn Pass>>,
    context: PassContext,
    debug: DebugOptions,
}

impl PassManager {
    /// Builds the pipeline `pipeline` from `registry`; `debug` says whether
    /// to verify after each pass and what to print and dump.
    ///
    /// A pipeline is a comma list of pass names, each with options in
    /// braces if it has any (`fuel-opt passes` lists them):
    ///
    /// ```
    /// use fuel_graph_ext::{text, DebugOptions, PassContext, PassManager, PassRegistry};
    ///
    /// let mut g = text::parse(
    ///     "graph @g {\n  %0 = input \"a\" @cpu:0 : f32[4]\n  %1 = add %0, %0 @cpu:0 : f32[4]\n  %2 = add %0, %0 @cpu:0 : f32[4]\n  return %1, %2\n}\n",
    /// )?;
    /// let registry = PassRegistry::with_builtin();
    /// let mut pm = PassManager::new(&registry, "cse,dce", PassContext::default(), DebugOptions::default())?;
    /// pm.run(&mut g)?;
    /// assert_eq!(text::print(&g).matches("= add").count(), 1); // cse merged the two adds
    /// assert!(PassManager::new(&registry, "cse,dcee", PassContext::default(), DebugOptions::default()).is_err());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn new(
        registry: &PassRegistry,
        pipeline: &str,
        context: PassContext,
        debug: DebugOptions,
    ) -> Result<PassManager, PassError> {
        let passes = parse_pipeline(pipeline)?
            .iter()
            .map(|e| registry.build(e, &context))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(PassManager {
            passes,
            context,
            debug,
        })
    }

    /// How this pipeline verifies, prints and dumps.
    pub fn debug_options(&self) -> &DebugOptions {
        &self.debug
    }

    /// The passes of type `T` in the pipeline, in order: how a caller reads
    /// what a pass kept from its last run.
    pub fn passes_of<T: Pass>(&self) -> impl Iterator<Item = &T> {
        self.passes
            .iter()
            .filter_map(|p| (p.as_ref() as &dyn std::any::Any).downcast_ref::<T>())
    }

    /// The names of the passes, in order.
    pub fn pass_names(&self) -> Vec<&'static str> {
        self.passes.iter().map(|p| p.name()).collect()
    }

    fn dump(
        &self,
        step: usize,
        name: &str,
        g: &Graph,
        report: &mut PipelineReport,
    ) -> Result<(), PassError> {
        let Some(dir) = &self.debug.dump_dir else {
            return Ok(());
        };
        let io = |path: &PathBuf, e: std::io::Error| PassError::Io {
            path: path.display().to_string(),
            message: e.to_string(),
        };
        std::fs::create_dir_all(dir).map_err(|e| io(dir, e))?;
        for (ext, text) in [
            ("fir", crate::text::print(g)),
            ("dot", crate::dot::to_dot(g)),
        ] {
            let path = dir.join(format!("{step:02}-{name}.{ext}"));
            write_fresh(&path, &text).map_err(|e| io(&path, e))?;
            report.dumped.push(path);
        }
        Ok(())
    }

    /// Runs every pass on `g`. The input must verify structurally and the
    /// output must also pass the placement rules.
    pub fn run(&mut self, g: &mut Graph) -> Result<PipelineReport, PassError> {
        self.run_observed(g, &mut |_| {})
    }

    /// [`PassManager::run`], calling `observe` with the input and after each
    /// pass (once it verified): how a viewer records every step
    /// (`fuel_graph_ext::html`).
    pub fn run_observed(
        &mut self,
        g: &mut Graph,
        observe: &mut dyn FnMut(&Observed<'_>),
    ) -> Result<PipelineReport, PassError> {
        let topo = self.context.topology.clone();
        let mut report = PipelineReport::default();
        verify(g, Level::Structural, &topo).map_err(|errors| PassError::Verify {
            stage: "the pipeline's input".into(),
            errors,
        })?;
        self.dump(0, "input", g, &mut report)?;
        observe(&Observed {
            step: 0,
            pass: None,
            changed: false,
            elapsed: std::time::Duration::ZERO,
            graph: g,
        });
        for i in 0..self.passes.len() {
            let name = self.passes[i].name();
            let declared = result_types(g);
            let (changed, elapsed) = {
                let span = tracing::info_span!("pass", name);
                let _enter = span.enter();
                let start = std::time::Instant::now();
                let changed = self.passes[i].run(g)?;
                let elapsed = start.elapsed();
                tracing::debug!(
                    changed = (changed == Changed::Yes),
                    elapsed_us = elapsed.as_micros() as u64,
                    "pass done"
                );
                (changed, elapsed)
            };
            same_result_types(g, &declared, name)?;
            report
                .passes
                .push((name.to_string(), changed == Changed::Yes));
            if self.debug.verify_each {
                verify(g, Level::Structural, &topo).map_err(|errors| PassError::Verify {
                    stage: format!("after pass `{name}`"),
                    errors,
                })?;
            }
            if self
                .debug
                .print_after
                .as_ref()
                .is_some_and(|p| p.wants(name))
            {
                // Diagnostics only: a closed standard error must not stop
                // (or panic) the pipeline.
                let _ = writeln!(
                    std::io::stderr().lock(),
                    "// *** IR after {name} ***\n{}",
                    crate::text::print(g)
                );
            }
            self.dump(i + 1, name, g, &mut report)?;
            observe(&Observed {
                step: i + 1,
                pass: self.passes.get(i).map(|p| p.as_ref()),
                changed: changed == Changed::Yes,
                elapsed,
                graph: g,
            });
        }
        if !self.passes.is_empty() {
            let last = self.passes.last().map_or("input", |p| p.name());
            verify(g, Level::Placement, &topo).map_err(|errors| PassError::Verify {
                stage: format!("the pipeline's output (after `{last}`)"),
                errors,
            })?;
        }
        Ok(report)
    }
}

/// The type of each result of `g`, in return order.
fn result_types(g: &Graph) -> Vec<Option<TensorType>> {
    g.outputs()
        .iter()
        .map(|v| g.value_type(*v).cloned())
        .collect()
}

/// The graph's results still have the types they had before pass `name`:
/// a pass rewrites how values are computed, never what a graph returns. A
/// result's type is read by no node, so the verifier cannot see a pass
/// change it; checked after every pass, whatever `verify_each` says.
fn same_result_types(
    g: &Graph,
    before: &[Option<TensorType>],
    name: &str,
) -> Result<(), PassError> {
    let after = result_types(g);
    let show = |t: &Option<TensorType>| t.as_ref().map_or("no type".into(), |t| t.to_string());
    if after.len() != before.len() {
        return Err(PassError::internal(
            name,
            format!(
                "the graph returned {} result(s) before the pass and {} after it",
                before.len(),
                after.len()
            ),
        ));
    }
    for (k, (b, a)) in before.iter().zip(&after).enumerate() {
        if a != b {
            return Err(PassError::internal(
                name,
                format!(
                    "the graph's result {k} was {} before the pass and is {} after it",
                    show(b),
                    show(a)
                ),
            ));
        }
    }
    Ok(())
}

/// Writes `text` to `path` as a new file. A file or symlink already there
/// is removed first, never written through, so a dump cannot follow a
/// symlink out of its directory or write into a file it did not create.
fn write_fresh(path: &std::path::Path, text: &str) -> std::io::Result<()> {
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.is_dir() => {
            return Err(std::io::Error::other(
                "a directory of that name is in the way",
            ))
        }
        Ok(_) => std::fs::remove_file(path)?,
        Err(_) => {}
    }
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)?;
    f.write_all(text.as_bytes())?;
    f.flush()
}
