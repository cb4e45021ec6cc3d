//! `fuel-opt`: the opt-style driver. It reads text IR, runs a pass pipeline,
//! verifies, and prints text or DOT; `--interpret` evaluates the result with
//! the reference interpreter, and `--run` executes it on real devices.
//!
//! Exit codes: 0 success, 1 a result mismatch, 2 bad input (parse, verify,
//! pipeline or usage errors).

mod bench;
mod calibrate;
mod demo;
mod run;
mod scenario;
mod sizes;
mod validate;

use clap::{Parser, Subcommand, ValueEnum};
use fuel_graph_ext::interp::{deterministic_inputs, interpret};
use fuel_graph_ext::pass::{DebugOptions, PassContext, PassManager, PrintAfter};
use fuel_graph_ext::topology::Source;
use fuel_graph_ext::verify::{verify, Level};
use fuel_graph_ext::{text, Device, Op, Topology};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

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
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Emit {
    Text,
    Dot,
}

/// A failure with the exit code it maps to.
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
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_env("FUEL_LOG"))
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    let res = match cli.command {
        Some(Command::Devices) => run::devices(),
        Some(Command::Demo(a)) => demo::demo(&a),
        Some(Command::Bench(a)) => bench::bench(&a),
        Some(Command::Calibrate(a)) => calibrate::calibrate(&a),
        Some(Command::Passes) => {
            list_passes();
            Ok(())
        }
        None => opt(&cli.opt),
    };
    match res {
        Ok(()) => ExitCode::SUCCESS,
        Err(f) => {
            eprintln!("fuel-opt: {}", f.message);
            ExitCode::from(f.code)
        }
    }
}

fn list_passes() {
    for p in fuel_collective::registry().passes() {
        println!("{:<28} {}", p.name, p.summary);
        for (k, doc) in p.options {
            println!("{:<28}   {k}: {doc}", "");
        }
    }
}

fn read_input(file: &str) -> Result<String, Failure> {
    if file == "-" {
        let mut s = String::new();
        std::io::Read::read_to_string(&mut std::io::stdin(), &mut s)
            .map_err(|e| Failure::input(format!("cannot read standard input: {e}")))?;
        Ok(s)
    } else {
        std::fs::read_to_string(file)
            .map_err(|e| Failure::input(format!("cannot read `{file}`: {e}")))
    }
}

/// The topology for `devices`: the `--topology` file if one is given,
/// else this machine's calibration cache for them, else the defaults
/// ([`Topology::for_devices`]). A damaged or stale cache is an error.
pub fn load_topology(path: Option<&PathBuf>, devices: &[Device]) -> Result<Topology, Failure> {
    match path {
        None => Topology::for_devices(devices).map_err(|e| Failure::input(e.to_string())),
        Some(p) => {
            let text = std::fs::read_to_string(p).map_err(|e| {
                Failure::input(format!("cannot read topology `{}`: {e}", p.display()))
            })?;
            let name = p.file_name().map_or_else(
                || p.display().to_string(),
                |n| n.to_string_lossy().into_owned(),
            );
            Topology::parse(&text)
                .map(|t| t.with_source(Source::File(Some(name))))
                .map_err(|e| Failure::input(format!("{}: {e}", p.display())))
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

fn opt(a: &OptArgs) -> Result<(), Failure> {
    let file = a.file.as_deref().ok_or_else(|| {
        Failure::input(
            "no input: give a .fir file or `-` for standard input (see `fuel-opt --help`)",
        )
    })?;
    let src = read_input(file)?;
    let original = text::parse(&src).map_err(|e| Failure::input(format!("{file}:{e}")))?;
    let topo = Arc::new(load_topology(
        a.topology.as_ref(),
        &graph_devices(&original),
    )?);
    let mut g = original.clone();
    match &a.passes {
        None => {
            verify(&g, Level::Structural, &topo)
                .map_err(|e| Failure::input(format!("{file}: {e}")))?;
        }
        Some(p) => {
            let cx = PassContext {
                topology: topo.clone(),
            };
            let registry = fuel_collective::registry();
            let mut debug =
                DebugOptions::from_env(&registry).map_err(|e| Failure::input(e.to_string()))?;
            debug.verify_each = true;
            if a.print_after_all {
                debug.print_after = Some(PrintAfter::All);
            }
            if let Some(d) = &a.dump_dir {
                debug.dump_dir = Some(d.clone());
            }
            let mut pm = PassManager::new(&registry, p, cx, debug)
                .map_err(|e| Failure::input(e.to_string()))?;
            pm.run(&mut g).map_err(|e| Failure::input(e.to_string()))?;
        }
    }
    match a.emit {
        Emit::Text => print!("{}", text::print(&g)),
        Emit::Dot => print!("{}", fuel_graph_ext::dot::to_dot(&g)),
    }
    if a.interpret {
        let inputs = deterministic_inputs(&g);
        let outs = interpret(&g, &inputs).map_err(|e| Failure::input(e.to_string()))?;
        for (k, (v, t)) in g.outputs().iter().zip(&outs).enumerate() {
            let dev = g
                .value_device(*v)
                .map_or("?".to_string(), |d| d.to_string());
            println!("result {k} : {} @{dev} {}", t.ty, t.digest());
        }
    }
    if a.run {
        run::run_and_check(&original, &g, a.devices.as_deref(), &topo)?;
    }
    Ok(())
}
