//! The one place numeric flags get their ranges, and flags that a mode
//! does not use are refused.
//!
//! [`bounded`] walks the command line's definition and gives every count
//! flag of [`BOUNDS`] a range-checked parser and its range in `--help`, so
//! `--iters 1000000000` is refused by name before anything runs, instead of
//! running for days or overflowing a loop bound. A unit test fails for a
//! numeric flag missing from the table. Sizes and lists (`--sizes`,
//! `--processes`, `--max-input-size`) are read by their own parsers, which
//! bound them the same way and name the flag.
//!
//! [`refuse_unused`] is the other half: a flag given on the command line in
//! a mode that would not read it (`demo --world --algorithm ring`, `bench
//! --calibrate --sizes 1M`) is an error naming the flag and the mode,
//! never silently ignored. [`MODES`] says which flags each mode reads.

use crate::Failure;
use clap::builder::RangedU64ValueParser;
use clap::parser::ValueSource;
use clap::{ArgMatches, Command};

/// A count flag's range: `sub` is the subcommand (`""` for the top level).
pub struct Bound {
    /// The subcommand.
    pub sub: &'static str,
    /// The flag's id (its long name with `_` for `-`).
    pub id: &'static str,
    /// The smallest value.
    pub min: u64,
    /// The largest value.
    pub max: u64,
}

const fn b(sub: &'static str, id: &'static str, min: u64, max: u64) -> Bound {
    Bound { sub, id, min, max }
}

/// The most seconds a world waits for a rank: a day.
pub const MAX_WORLD_TIMEOUT_S: u64 = 86_400;

/// Every count flag and its range. The ranges keep each command's work
/// bounded: a calibration runs at most 20 passes of 1100 runs per graph,
/// a bench size at most 20 000 runs.
pub const BOUNDS: &[Bound] = &[
    b(
        "demo",
        "elements",
        1,
        fuel_graph_ext::dtype::MAX_TENSOR_BYTES as u64,
    ),
    b("demo", "runs", 0, 10_000),
    b("demo", "world_timeout", 1, MAX_WORLD_TIMEOUT_S),
    b("bench", "iters", 1, 10_000),
    b("bench", "warmup", 0, 10_000),
    b("bench", "count", 1, 10_000),
    b("bench", "world_timeout", 1, MAX_WORLD_TIMEOUT_S),
    b("bench", "layers", 1, 256),
    b("bench", "width", 1, 8192),
    b("bench", "batch", 1, 65_536),
    b("calibrate", "iters", 1, 1000),
    b("calibrate", "warmup", 0, 100),
    b("calibrate", "passes", 1, 20),
];

/// `cmd` with every flag of [`BOUNDS`] range-checked and its range added
/// to its help.
pub fn bounded(mut cmd: Command) -> Command {
    for bound in BOUNDS {
        let set = |a: clap::Arg| {
            let help = a.get_help().map(ToString::to_string).unwrap_or_default();
            a.value_parser(RangedU64ValueParser::<usize>::new().range(bound.min..=bound.max))
                .help(format!("{help} [{}..={}]", bound.min, bound.max))
        };
        cmd = if bound.sub.is_empty() {
            cmd.mut_arg(bound.id, set)
        } else {
            cmd.mut_subcommand(bound.sub, |s| s.mut_arg(bound.id, set))
        };
    }
    cmd
}

/// A mode of a command and the flags it reads: the mode holds when its
/// `when` flag is set (`""`: always, the last mode of a command).
pub struct Mode {
    /// The subcommand (`""` for the top level).
    pub sub: &'static str,
    /// The flag that selects the mode.
    pub when: &'static str,
    /// How messages name the mode.
    pub name: &'static str,
    /// The flags it reads, in lists; any other given is refused.
    pub reads: &'static [&'static [&'static str]],
    /// Why the others are not read.
    pub why: &'static str,
}

/// The flags every mode of `demo` reads.
const DEMO: &[&str] = &["devices", "elements", "dtype", "op", "out", "runs"];

/// The flags `bench` reads when it times the lowered collectives, with
/// or without `--plot`.
const BENCH: &[&str] = &[
    "devices",
    "op",
    "dtype",
    "sizes",
    "iters",
    "warmup",
    "csv",
    "topology",
    "collective",
    "count",
    "combine",
    "combine_threshold",
    "transport",
    "chunks",
    "copy_slices",
];

/// The flags `fuel-opt FILE` reads, with or without `--passes`.
const FILE: &[&str] = &[
    "file",
    "emit",
    "dump_html",
    "topology",
    "interpret",
    "run",
    "devices",
    "max_input_size",
];

/// The modes, in the order a command picks them (the first whose flag is
/// set). A flag every mode of a command reads need not be listed as
/// `when`.
pub const MODES: &[Mode] = &[
    Mode {
        sub: "demo",
        when: "world",
        name: "demo --world",
        reads: &[DEMO, &["world", "world_timeout"]],
        why: "it lowers with the world lowering's own choice",
    },
    Mode {
        sub: "demo",
        when: "",
        name: "demo",
        reads: &[DEMO, &["algorithm"]],
        why: "--world-timeout is for demo --world",
    },
    Mode {
        sub: "bench",
        when: "world",
        name: "bench --world",
        reads: &[&[
            "devices",
            "dtype",
            "sizes",
            "iters",
            "warmup",
            "topology",
            "world",
            "world_timeout",
            "csv",
        ]],
        why: "it times the world all_reduce.sum as the world lowering records it",
    },
    Mode {
        sub: "bench",
        when: "step",
        name: "bench --step",
        reads: &[&[
            "devices", "iters", "warmup", "topology", "step", "layers", "width", "batch",
        ]],
        why: "it times a training step of f32 matmuls and all_reduce.mean under three schedules",
    },
    Mode {
        sub: "bench",
        when: "eager",
        name: "bench --eager",
        reads: &[&["devices", "op", "sizes", "iters", "warmup", "eager"]],
        why: "it times the eager all_reduce of f32 as DeviceGroup lowers it, beside a plain loop",
    },
    Mode {
        sub: "bench",
        when: "calibrate",
        name: "bench --calibrate",
        reads: &[&["devices", "iters", "warmup", "topology", "calibrate", "out"]],
        why: "it times the calibration graphs, not a collective",
    },
    Mode {
        sub: "bench",
        when: "validate",
        name: "bench --validate",
        reads: &[&[
            "devices", "dtype", "op", "sizes", "iters", "warmup", "topology", "validate", "csv",
        ]],
        why: "it times every fixed algorithm of one all_reduce",
    },
    Mode {
        sub: "bench",
        when: "plot",
        name: "bench --plot",
        reads: &[BENCH, &["plot"]],
        why: "it draws every fixed algorithm",
    },
    Mode {
        sub: "bench",
        when: "",
        name: "bench",
        reads: &[BENCH, &["algorithm"]],
        why: "--out is where --calibrate writes, and --world-timeout is for --world",
    },
    Mode {
        sub: "",
        when: "passes",
        name: "fuel-opt FILE --passes",
        reads: &[FILE, &["passes", "print_after_all", "dump_dir"]],
        why: "",
    },
    Mode {
        sub: "",
        when: "",
        name: "fuel-opt FILE without --passes",
        reads: &[FILE],
        why: "--print-after-all and --dump-dir show passes, and none run",
    },
];

/// A flag that a value of another makes unread: `bench --combine off
/// --combine-threshold 8M` takes the pass whose threshold it is out.
pub struct Unread {
    /// The subcommand.
    pub sub: &'static str,
    /// The flag refused.
    pub id: &'static str,
    /// The other flag, and the value of it that leaves `id` unread.
    pub when: (&'static str, &'static str),
    /// Why, for the message.
    pub why: &'static str,
}

/// The flags another's value leaves unread.
pub const UNREAD: &[Unread] = &[Unread {
    sub: "bench",
    id: "combine_threshold",
    when: ("combine", "off"),
    why: "--combine off takes combine-collectives, whose threshold it is, out of the pipeline",
}];

/// Whether `m` has `id` set: given on the command line, or a flag on.
fn set(m: &ArgMatches, id: &str) -> bool {
    m.value_source(id) == Some(ValueSource::CommandLine)
}

/// Refuses a flag given on the command line that its mode does not read,
/// naming the flag and the mode. `--devices` without `--run` is refused at
/// the top level too.
pub fn refuse_unused(m: &ArgMatches) -> Result<(), Failure> {
    let (sub, m) = m.subcommand().unwrap_or(("", m));
    let Some(mode) = MODES
        .iter()
        .find(|md| md.sub == sub && (md.when.is_empty() || set(m, md.when)))
    else {
        return Ok(());
    };
    // The matches also hold the argument groups clap makes of each
    // struct of flags: only flags are looked at.
    let cmd = <crate::Cli as clap::CommandFactory>::command();
    let cmd = cmd.find_subcommand(sub).unwrap_or(&cmd);
    let flag = |id: &&str| cmd.get_arguments().any(|a| a.get_id() == *id);
    let given = m
        .ids()
        .map(|id| id.as_str())
        .filter(|id| flag(id) && set(m, id));
    for id in given {
        let top_devices = sub.is_empty() && id == "devices" && !set(m, "run");
        if !mode.reads.iter().any(|r| r.contains(&id)) || top_devices {
            let flag = format!("--{}", id.replace('_', "-"));
            let why = if top_devices {
                "--devices chooses the devices --run opens; add --run or leave it out".to_string()
            } else {
                format!("{}; leave it out", mode.why)
            };
            return Err(Failure::input(format!(
                "{} does not use {flag}: {why}",
                mode.name
            )));
        }
        let unread = UNREAD.iter().find(|u| {
            u.sub == sub
                && u.id == id
                && m.get_raw(u.when.0)
                    .and_then(|mut v| v.next())
                    .is_some_and(|v| v == u.when.1)
        });
        if let Some(u) = unread {
            return Err(Failure::input(format!(
                "--{} {} does not use --{}: {}; leave it out",
                u.when.0.replace('_', "-"),
                u.when.1,
                id.replace('_', "-"),
                u.why
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    /// Whether `a` takes a number (its parser gives an integer type).
    fn numeric(a: &clap::Arg) -> bool {
        use std::any::TypeId;
        let t = a.get_value_parser().type_id();
        a.get_action().takes_values()
            && [
                TypeId::of::<usize>(),
                TypeId::of::<u64>(),
                TypeId::of::<u32>(),
                TypeId::of::<u16>(),
                TypeId::of::<u8>(),
                TypeId::of::<isize>(),
                TypeId::of::<i64>(),
                TypeId::of::<i32>(),
                TypeId::of::<f64>(),
                TypeId::of::<f32>(),
            ]
            .iter()
            .any(|n| t == *n)
    }

    #[test]
    fn every_numeric_flag_has_a_range_in_its_help_and_is_refused_past_it() {
        let cmd = bounded(crate::Cli::command());
        let mut subs: Vec<(&str, &Command)> = vec![("", &cmd)];
        subs.extend(cmd.get_subcommands().map(|s| (s.get_name(), s)));
        let mut checked = 0;
        for (sub, c) in subs {
            for a in c.get_arguments().filter(|a| numeric(a)) {
                let id = a.get_id().as_str();
                let bound = BOUNDS.iter().find(|x| x.sub == sub && x.id == id);
                let bound = bound.unwrap_or_else(|| {
                    panic!("{sub} --{id} is numeric and has no range in flags::BOUNDS")
                });
                let help = a.get_help().map(ToString::to_string).unwrap_or_default();
                assert!(
                    help.ends_with(&format!("[{}..={}]", bound.min, bound.max)),
                    "{sub} --{id}: {help}"
                );
                checked += 1;
            }
        }
        assert_eq!(
            checked,
            BOUNDS.len(),
            "every row of BOUNDS is a numeric flag"
        );
        for bound in BOUNDS {
            let flag = format!("--{}", bound.id.replace('_', "-"));
            let parse = |v: u64| {
                cmd.clone()
                    .try_get_matches_from(["fuel-opt", bound.sub, &flag, &v.to_string()])
            };
            assert!(
                parse(bound.max).is_ok(),
                "{} {flag} {}",
                bound.sub,
                bound.max
            );
            let past = parse(bound.max + 1).unwrap_err().to_string();
            assert!(
                past.contains(&format!("is not in {}..={}", bound.min, bound.max)),
                "{past}"
            );
            if bound.min > 0 {
                assert!(parse(bound.min - 1).is_err(), "{} {flag}", bound.sub);
            }
        }
    }

    #[test]
    fn every_mode_names_flags_that_exist() {
        let cmd = crate::Cli::command();
        for mode in MODES {
            let c = if mode.sub.is_empty() {
                &cmd
            } else {
                cmd.find_subcommand(mode.sub).unwrap()
            };
            for id in mode
                .reads
                .iter()
                .copied()
                .flatten()
                .chain([mode.when].iter().filter(|w| !w.is_empty()))
            {
                assert!(
                    c.get_arguments().any(|a| a.get_id() == *id),
                    "{}: --{id}",
                    mode.name
                );
            }
        }
        for u in UNREAD {
            let c = cmd.find_subcommand(u.sub).unwrap();
            for id in [u.id, u.when.0] {
                assert!(c.get_arguments().any(|a| a.get_id() == id), "{id}");
            }
        }
    }
}
