//! `fuel-opt`: the opt-style driver. It reads text IR, runs a pass pipeline,
//! verifies, and prints text or DOT; `--interpret` evaluates the result with
//! the reference interpreter, and `--run` executes it on real devices.
//!
//! Exit codes: 0 success, 1 a result mismatch, 2 bad input (parse, verify,
//! pipeline or usage errors, a bad environment variable, input too large,
//! output that cannot be written). A reader that closes the output pipe
//! early ends it as `SIGPIPE` ends other Unix tools (status 141 in a
//! shell), quietly.

mod bench;
mod calibrate;
mod demo;
mod flags;
mod group_plan;
mod input;
mod outdir;
mod output;
mod run;
mod setup;
mod sizes;
mod timeline;
mod world_run;
// The world commands' watchdog; its pure parts are tested without MPI.
#[cfg(any(feature = "mpi", test))]
mod world_guard;
mod world_plan;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand, ValueEnum};
use fuel_graph_ext::html::{Recording, Step};
use fuel_graph_ext::interp::{interpret, try_deterministic_inputs};
use fuel_graph_ext::pass::{DebugOptions, PassContext, PassManager, PrintAfter};
use fuel_graph_ext::topology::Source;
use fuel_graph_ext::verify::{verify, Level};
use fuel_graph_ext::{text, Device, Op, Topology};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use tracing_subscriber::Layer as _;

#[derive(Parser, Debug)]
#[command(
    name = "fuel-opt",
    version,
    about = "Run fuel graph passes on text IR",
    args_conflicts_with_subcommands = true
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    opt: OptArgs,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// List the devices this machine can open, and why others cannot be.
    Devices,
    /// List the registered passes and their options.
    Passes,
    /// Find devices, lower an all-reduce over them, run it, check it and
    /// report (the README's main command).
    Demo(demo::DemoArgs),
    /// Benchmark all_reduce over a size sweep, nccl-tests style.
    Bench(bench::BenchArgs),
    /// Measure this machine's cost figures for a group of devices and keep
    /// them in the calibration cache, where lowering finds them.
    Calibrate(calibrate::CalibrateArgs),
    /// Estimate a world all_reduce (P processes x local devices) against a
    /// flat ring, or with --collective one process's collective against its
    /// lower bound, by the cost model alone: no device opened, no MPI.
    Plan(world_plan::PlanArgs),
}

#[derive(clap::Args, Debug)]
struct OptArgs {
    /// A `.fir` file, or `-` for standard input.
    file: Option<String>,
    /// The pipeline, e.g. `insert-cross-device-copies,cse,dce`.
    #[arg(long)]
    passes: Option<String>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Emit::Text)]
    emit: Emit,
    /// Print the IR to stderr after every pass.
    #[arg(long)]
    print_after_all: bool,
    /// Write `NN-<pass>.fir` and `.dot` for the input and after every pass.
    #[arg(long)]
    dump_dir: Option<PathBuf>,
    /// Write the pass viewer, one offline HTML file stepping through the
    /// pipeline (index, pictures, IR, diffs, decisions; docs/viewer.md).
    #[arg(long, value_name = "FILE")]
    dump_html: Option<PathBuf>,
    /// A topology file (peers, staging CPU, link costs).
    #[arg(long)]
    topology: Option<PathBuf>,
    /// Evaluate the result with the reference interpreter on deterministic inputs.
    #[arg(long)]
    interpret: bool,
    /// Execute the result on real devices and compare with the interpreter.
    #[arg(long)]
    run: bool,
    /// Devices to open for `--run` (default: those the graph uses).
    #[arg(long)]
    devices: Option<String>,
    /// The largest input (and topology) file to read, e.g. `1G`.
    #[arg(long, default_value = "256M")]
    max_input_size: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Emit {
    /// The text IR.
    Text,
    /// A DOT picture.
    Dot,
    /// The execution plan: one line per step with its device, work, bytes
    /// and slots, as the executor would run it (no device is opened: the
    /// devices' capabilities are assumed from the topology); under it, the
    /// cost model's estimate of one run, step by step, and what binds it.
    Plan,
}

/// A failure with the exit code it maps to.
#[derive(Debug)]
pub struct Failure {
    code: u8,
    message: String,
}

impl Failure {
    /// Bad input: exit 2.
    pub fn input(message: impl Into<String>) -> Failure {
        Failure {
            code: 2,
            message: message.into(),
        }
    }
    /// Wrong results: exit 1.
    pub fn mismatch(message: impl Into<String>) -> Failure {
        Failure {
            code: 1,
            message: message.into(),
        }
    }
}

fn main() -> ExitCode {
    output::default_sigpipe();
    // Counts get their ranges in one place (`flags`), and the matches say
    // which flags were given, so a flag a mode does not read is refused.
    let parsed = flags::bounded(Cli::command())
        .try_get_matches()
        .and_then(|m| Cli::from_arg_matches(&m).map(|cli| (cli, m)));
    let (cli, matches) = match parsed {
        Ok(both) => both,
        // Usage errors quote the command line: shown as every message that
        // quotes input is (escaped, long lines cut), with clap's status 2.
        Err(e) if e.use_stderr() => {
            let text = e.render().to_string();
            for line in text.lines() {
                output::err(format_args!(
                    "{}\n",
                    fuel_graph_ext::text::excerpt::excerpt(
                        line,
                        fuel_graph_ext::text::excerpt::LINE_CHARS
                    )
                ));
            }
            return ExitCode::from(2);
        }
        // --help and --version.
        Err(e) => {
            return match e.print() {
                Ok(()) => ExitCode::SUCCESS,
                Err(_) => ExitCode::from(2),
            };
        }
    };
    let res = flags::refuse_unused(&matches)
        .and_then(|()| logging())
        .and_then(|()| check_env())
        .and_then(|()| match cli.command {
            Some(Command::Devices) => run::devices(),
            Some(Command::Demo(a)) if a.world => world_run::demo(&a),
            Some(Command::Demo(a)) => demo::demo(&a),
            Some(Command::Bench(a)) => bench::bench(&a),
            Some(Command::Calibrate(a)) => calibrate::calibrate(&a),
            Some(Command::Plan(a)) => world_plan::plan(&a),
            Some(Command::Passes) => list_passes(),
            None => opt(&cli.opt),
        })
        .and_then(|()| output::flush());
    match res {
        Ok(()) => ExitCode::SUCCESS,
        Err(f) => {
            output::err(format_args!("fuel-opt: {}\n", f.message));
            ExitCode::from(f.code)
        }
    }
}

/// Sends tracing to standard error, filtered by `FUEL_LOG` (tracing's
/// directives: `warn`, `fuel_graph_ext=debug`); a value that does not
/// parse is an error naming the variable.
fn logging() -> Result<(), Failure> {
    let accepts = "tracing directives such as `warn` or `fuel_graph_ext=debug`";
    let filter = match fuel_graph_ext::env::text("FUEL_LOG", accepts).map_err(env_failure)? {
        None => tracing_subscriber::EnvFilter::default(),
        Some(v) => tracing_subscriber::EnvFilter::builder()
            .parse(&v)
            .map_err(|e| {
                env_failure(fuel_graph_ext::env::EnvError {
                    name: "FUEL_LOG".into(),
                    value: v.clone(),
                    accepts: format!("{accepts} ({e})"),
                })
            })?,
    };
    // Colours only for a terminal: piped or captured logs get plain text,
    // never raw escape sequences.
    // Beside the log, the layer that catches the executor's step trace
    // for the pass viewer's timeline (off outside `timeline::capture`).
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    let log = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_filter(filter);
    tracing_subscriber::registry()
        .with(log)
        .with(timeline::layer())
        .init();
    Ok(())
}

fn env_failure(e: fuel_graph_ext::env::EnvError) -> Failure {
    Failure::input(e.to_string())
}

/// Every variable the runtime reads, checked once before any work: a bad
/// value is an error naming the variable and what it accepts, whichever
/// subcommand runs (`FUEL_PRINT_AFTER` and `FUEL_DUMP_DIR` are checked
/// where a pipeline is built).
fn check_env() -> Result<(), Failure> {
    fuel_runtime::backend::vulkan::devices_per_adapter().map_err(env_failure)?;
    fuel_runtime::backend::vulkan::HostAccess::from_env().map_err(env_failure)?;
    fuel_runtime::exec::vulkan_import_setting().map_err(Failure::input)?;
    fuel_runtime::exec::cuda_pin_setting().map_err(Failure::input)?;
    fuel_runtime::backend::worker::spin_setting().map_err(env_failure)?;
    fuel_runtime::exec::Dispatch::from_env().map_err(|e| Failure::input(e.to_string()))?;
    #[cfg(feature = "mpi")]
    fuel_runtime::driver::mpi::keep_freed::keep_freed_setting().map_err(env_failure)?;
    fuel_runtime::driver::JoinOptions::from_env().map_err(|e| Failure::input(e.to_string()))?;
    Ok(())
}

fn list_passes() -> Result<(), Failure> {
    for p in fuel_collective::registry().passes() {
        outln!("{:<28} {}", p.name, p.summary)?;
        for (k, doc) in p.options {
            outln!("{:<28}   {k}: {doc}", "")?;
        }
    }
    Ok(())
}

/// `--max-input-size` as bytes.
pub fn input_limit(text: &str) -> Result<usize, Failure> {
    sizes::parse_size(text).map_err(|e| Failure::input(format!("--max-input-size: {e}")))
}

/// The topology file at `path` (as [`load_topology`] reads it), or the
/// default figures without one: for the commands that price with fixed
/// figures rather than this machine's calibration.
pub fn file_topology(path: Option<&PathBuf>, devices: &[Device]) -> Result<Topology, Failure> {
    match path {
        Some(_) => load_topology(path, devices, input::DEFAULT_MAX_INPUT),
        None => Ok(Topology::default()),
    }
}

/// The topology for `devices`: the `--topology` file (at most `limit`
/// bytes) if one is given, else this machine's calibration cache for them,
/// else the defaults (`fuel_runtime::calibration::topology_for`). A damaged or stale cache
/// is an error.
pub fn load_topology(
    path: Option<&PathBuf>,
    devices: &[Device],
    limit: usize,
) -> Result<Topology, Failure> {
    match path {
        None => fuel_runtime::calibration::topology_for(devices)
            .map_err(|e| Failure::input(e.to_string())),
        Some(p) => {
            let shown = p.to_string_lossy();
            let text = input::read_text(&shown, "topology ", limit)?;
            let name = p
                .file_name()
                .map_or_else(|| shown.to_string(), |n| n.to_string_lossy().into_owned());
            Topology::parse(&text)
                .map(|t| t.with_source(Source::File(Some(name))))
                .map_err(|e| {
                    Failure::input(format!(
                        "{}: {e}",
                        fuel_graph_ext::text::excerpt::token(&shown)
                    ))
                })
        }
    }
}

/// Every device `g` places a value on, sorted.
fn graph_devices(g: &fuel_graph_ext::Graph) -> Vec<Device> {
    let mut devs: std::collections::BTreeSet<Device> = std::collections::BTreeSet::new();
    for id in g.node_ids() {
        if let Some(n) = g.node(id) {
            devs.extend(n.op.device());
            if let Op::Broadcast { to } = &n.op {
                devs.extend(to.iter().copied());
            }
        }
    }
    devs.into_iter().collect()
}

/// `--emit plan`: the plan of a lowered, placed graph, built with the
/// capabilities the cost model assumes from `topo`.
fn plan_text(g: &fuel_graph_ext::Graph, topo: &Topology, shown: &str) -> Result<String, Failure> {
    verify(g, Level::Placement, topo).map_err(|e| {
        Failure::input(format!(
            "{shown}: --emit plan needs a placed graph; lower it first \
             (e.g. --passes lower-collectives,insert-cross-device-copies,split-cross-vendor-copies): {e}"
        ))
    })?;
    // The whole plan, region lists included, as the executor builds it.
    let options = fuel_graph_ext::plan::Options::default();
    let mut plan = fuel_graph_ext::Schedule::new_with(g, &options)
        .map_err(|e| Failure::input(format!("{shown}: {e}")))?;
    plan.fit_to_devices(&options, |d| fuel_graph_ext::plan::Caps::assumed(d, topo));
    let mut text = fuel_graph_ext::plan::listing::print(
        &plan,
        g,
        "assumed from the topology (no device opened)",
    );
    // What the cost model makes of the same plan, step by step.
    text.push_str(&fuel_collective::cost::priced_run::priced_run(&plan, topo).render());
    Ok(text)
}

/// Writes the pass viewer page to `path`.
fn write_html(rec: &Recording, path: &std::path::Path) -> Result<(), Failure> {
    rec.write(path).map_err(|e| {
        Failure::input(format!(
            "--dump-html: cannot write {}: {e}",
            fuel_graph_ext::text::excerpt::token(&path.display().to_string())
        ))
    })
}

fn opt(a: &OptArgs) -> Result<(), Failure> {
    let file = a.file.as_deref().ok_or_else(|| {
        Failure::input(
            "no input: give a .fir file or `-` for standard input (see `fuel-opt --help`)",
        )
    })?;
    let limit = input_limit(&a.max_input_size)?;
    let src = input::read_text(file, "", limit)?;
    let shown = fuel_graph_ext::text::excerpt::token(file);
    let original = text::parse(&src).map_err(|e| Failure::input(format!("{shown}:{e}")))?;
    let topo = Arc::new(load_topology(
        a.topology.as_ref(),
        &graph_devices(&original),
        limit,
    )?);
    let mut g = original.clone();
    let mut recording = None;
    match &a.passes {
        None => {
            verify(&g, Level::Structural, &topo)
                .map_err(|e| Failure::input(format!("{shown}: {e}")))?;
        }
        Some(p) => {
            let mut debug = DebugOptions::from_env(&fuel_collective::registry())
                .map_err(|e| Failure::input(e.to_string()))?;
            debug.verify_each = true;
            if a.print_after_all {
                debug.print_after = Some(PrintAfter::All);
            }
            if let Some(d) = &a.dump_dir {
                debug.dump_dir = Some(d.clone());
            }
            match &a.dump_html {
                None => {
                    fuel_collective::run_pipeline(&mut g, p, topo.clone(), debug)
                        .map_err(|e| Failure::input(e.to_string()))?;
                }
                Some(path) => {
                    let cx = PassContext {
                        topology: topo.clone(),
                    };
                    let mut pm = PassManager::new(&fuel_collective::registry(), p, cx, debug)
                        .map_err(|e| Failure::input(e.to_string()))?;
                    let rec = fuel_collective::viewer::record_with(&mut pm, &mut g, p)
                        .map_err(|e| Failure::input(e.to_string()))?;
                    recording = Some((rec, path));
                }
            }
        }
    }
    if let (None, Some(path)) = (&a.passes, &a.dump_html) {
        let mut rec = Recording::new(g.name.clone(), "");
        rec.steps.push(Step {
            name: "input".into(),
            changed: false,
            elapsed: std::time::Duration::ZERO,
            graph: g.clone(),
        });
        recording = Some((rec, path));
    }
    match a.emit {
        Emit::Text => out!("{}", text::print(&g))?,
        Emit::Dot => out!("{}", fuel_graph_ext::dot::to_dot(&g))?,
        Emit::Plan => out!("{}", plan_text(&g, &topo, &shown)?)?,
    }
    if a.interpret {
        let inputs = try_deterministic_inputs(&g).map_err(|e| Failure::input(e.to_string()))?;
        let outs = interpret(&g, &inputs).map_err(|e| Failure::input(e.to_string()))?;
        for (k, (v, t)) in g.outputs().iter().zip(&outs).enumerate() {
            let dev = g
                .value_device(*v)
                .map_or("?".to_string(), |d| d.to_string());
            outln!("result {k} : {} @{dev} {}", t.ty, t.digest())?;
        }
    }
    let mut ran = Ok(());
    if a.run {
        let run = || run::run_and_check(&original, &g, a.devices.as_deref(), &topo);
        ran = match &mut recording {
            Some((rec, _)) => {
                let (ran, t) = timeline::capture(&g, &topo, "the --run", run);
                rec.timeline = Some(t);
                ran
            }
            None => run(),
        };
    }
    // Written even when the run's results are wrong: the page helps find why.
    if let Some((rec, path)) = &recording {
        write_html(rec, path)?;
    }
    ran
}
