//! Running a pipeline: verification around every pass, tracing spans,
//! `FUEL_PRINT_AFTER` printing and `FUEL_DUMP_DIR` dumps.

use super::{parse_pipeline, Changed, Pass, PassContext, PassError, PassRegistry};
use crate::graph::Graph;
use crate::verify::{verify, Level};
use std::path::PathBuf;

/// Which passes print the IR after they run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PrintAfter {
    /// Every pass.
    All,
    /// Only passes with these names.
    Passes(Vec<String>),
}

impl PrintAfter {
    /// Reads `FUEL_PRINT_AFTER` (`all` or a comma list of pass names).
    pub fn from_env() -> Option<PrintAfter> {
        let v = std::env::var("FUEL_PRINT_AFTER").ok()?;
        match v.trim() {
            "" => None,
            "all" => Some(PrintAfter::All),
            list => Some(PrintAfter::Passes(
                list.split(',').map(|s| s.trim().to_string()).collect(),
            )),
        }
    }
    fn wants(&self, pass: &str) -> bool {
        match self {
            PrintAfter::All => true,
            PrintAfter::Passes(p) => p.iter().any(|x| x == pass),
        }
    }
}

/// What a pipeline run did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PipelineReport {
    /// (pass name, whether it changed the graph), in order.
    pub passes: Vec<(String, bool)>,
    /// Files written under the dump directory.
    pub dumped: Vec<PathBuf>,
}

/// Runs a sequence of passes.
pub struct PassManager {
    passes: Vec<Box<dyn Pass>>,
    context: PassContext,
    /// Verify (structurally) after every pass; on by default in debug builds.
    pub verify_each: bool,
    /// Print the IR to stderr after these passes.
    pub print_after: Option<PrintAfter>,
    /// Write `NN-<pass>.fir` and `.dot` here for the input and after each pass.
    pub dump_dir: Option<PathBuf>,
}

impl PassManager {
    /// Builds the pipeline `pipeline` from `registry`. Printing and dumping
    /// start from `FUEL_PRINT_AFTER` and `FUEL_DUMP_DIR`.
    pub fn new(
        registry: &PassRegistry,
        pipeline: &str,
        context: PassContext,
    ) -> Result<PassManager, PassError> {
        let passes = parse_pipeline(pipeline)?
            .iter()
            .map(|e| registry.build(e, &context))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(PassManager {
            passes,
            context,
            verify_each: cfg!(debug_assertions),
            print_after: PrintAfter::from_env(),
            dump_dir: std::env::var_os("FUEL_DUMP_DIR")
                .filter(|v| !v.is_empty())
                .map(PathBuf::from),
        })
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
        let Some(dir) = &self.dump_dir else {
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
            std::fs::write(&path, text).map_err(|e| io(&path, e))?;
            report.dumped.push(path);
        }
        Ok(())
    }

    /// Runs every pass on `g`. The input must verify structurally and the
    /// output must also pass the placement rules.
    pub fn run(&mut self, g: &mut Graph) -> Result<PipelineReport, PassError> {
        let topo = self.context.topology.clone();
        let mut report = PipelineReport::default();
        verify(g, Level::Structural, &topo).map_err(|errors| PassError::Verify {
            stage: "the pipeline's input".into(),
            errors,
        })?;
        self.dump(0, "input", g, &mut report)?;
        for i in 0..self.passes.len() {
            let name = self.passes[i].name();
            let changed = {
                let span = tracing::info_span!("pass", name);
                let _enter = span.enter();
                let start = std::time::Instant::now();
                let changed = self.passes[i].run(g)?;
                tracing::debug!(
                    changed = (changed == Changed::Yes),
                    elapsed_us = start.elapsed().as_micros() as u64,
                    "pass done"
                );
                changed
            };
            report
                .passes
                .push((name.to_string(), changed == Changed::Yes));
            if self.verify_each {
                verify(g, Level::Structural, &topo).map_err(|errors| PassError::Verify {
                    stage: format!("after pass `{name}`"),
                    errors,
                })?;
            }
            if self.print_after.as_ref().is_some_and(|p| p.wants(name)) {
                eprintln!("// *** IR after {name} ***\n{}", crate::text::print(g));
            }
            self.dump(i + 1, name, g, &mut report)?;
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
