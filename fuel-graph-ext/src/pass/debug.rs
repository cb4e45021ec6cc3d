//! What a pipeline run shows while it works: verification after each pass,
//! the IR printed after chosen passes, and dump files.
//!
//! The pass manager takes these as a [`DebugOptions`] value and reads no
//! environment variable itself, so a library or a test that builds a
//! pipeline gets exactly what it asked for. Binaries build the value from
//! their flags and, through [`DebugOptions::from_env`], from
//! `FUEL_PRINT_AFTER` and `FUEL_DUMP_DIR`; a pass name there that no pass
//! has is an error, not a silent no-op.

use super::{PassError, PassRegistry};
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
    /// Reads the value of `FUEL_PRINT_AFTER`: `all`, or a comma list of pass
    /// names that `registry` knows (`None` for an empty value). Empty items,
    /// as after a trailing comma, are skipped.
    pub fn parse(text: &str, registry: &PassRegistry) -> Result<Option<PrintAfter>, PassError> {
        match text.trim() {
            "" => Ok(None),
            "all" => Ok(Some(PrintAfter::All)),
            list => {
                let mut names = Vec::new();
                for name in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
                    if registry.get(name).is_none() {
                        return Err(PassError::UnknownPrintAfter {
                            name: name.to_string(),
                            known: registry.known(),
                        });
                    }
                    names.push(name.to_string());
                }
                Ok(Some(PrintAfter::Passes(names)))
            }
        }
    }

    /// True if the IR is printed after `pass`.
    pub fn wants(&self, pass: &str) -> bool {
        match self {
            PrintAfter::All => true,
            PrintAfter::Passes(p) => p.iter().any(|x| x == pass),
        }
    }
}

/// How a [`super::PassManager`] checks and shows its work.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DebugOptions {
    /// Verify (structurally) after every pass. The default is on in debug
    /// builds and off in release builds.
    pub verify_each: bool,
    /// Print the IR to stderr after these passes.
    pub print_after: Option<PrintAfter>,
    /// Write `NN-<pass>.fir` and `.dot` here for the input and after each pass.
    pub dump_dir: Option<PathBuf>,
}

impl Default for DebugOptions {
    /// Verification as the build profile says; nothing printed or dumped.
    fn default() -> Self {
        DebugOptions {
            verify_each: cfg!(debug_assertions),
            print_after: None,
            dump_dir: None,
        }
    }
}

impl DebugOptions {
    /// Verification after every pass, in any build; nothing printed or
    /// dumped. What tests and checking tools want.
    pub fn verifying() -> DebugOptions {
        DebugOptions {
            verify_each: true,
            ..DebugOptions::default()
        }
    }

    /// The defaults with `FUEL_PRINT_AFTER` (see [`PrintAfter::parse`]) and
    /// `FUEL_DUMP_DIR` (a directory; empty means none) applied. For
    /// binaries: nothing in the libraries calls it.
    pub fn from_env(registry: &PassRegistry) -> Result<DebugOptions, PassError> {
        let print_after =
            match crate::env::text("FUEL_PRINT_AFTER", "`all` or a comma list of pass names")? {
                Some(v) => PrintAfter::parse(&v, registry)?,
                None => None,
            };
        let dump_dir = std::env::var_os("FUEL_DUMP_DIR")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from);
        Ok(DebugOptions {
            print_after,
            dump_dir,
            ..DebugOptions::default()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn print_after_names_known_passes_only() {
        let r = PassRegistry::with_builtin();
        assert_eq!(PrintAfter::parse(" ", &r), Ok(None));
        assert_eq!(PrintAfter::parse("all", &r), Ok(Some(PrintAfter::All)));
        assert_eq!(
            PrintAfter::parse("cse, dce,", &r),
            Ok(Some(PrintAfter::Passes(vec!["cse".into(), "dce".into()])))
        );
        let e = PrintAfter::parse("cse,frob", &r).unwrap_err();
        assert!(
            matches!(&e, PassError::UnknownPrintAfter { name, .. } if name == "frob"),
            "{e}"
        );
        assert!(e.to_string().contains("known passes: cse, dce"), "{e}");
    }
}
