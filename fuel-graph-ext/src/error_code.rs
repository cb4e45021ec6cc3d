//! Error codes: the `E0xxx` id under which `docs/errors.md` lists an error,
//! and the `Debug` form every user-facing error type shares.
//!
//! `fn main() -> Result<(), E>` prints a returned error with `Debug`, so
//! a derived `Debug` (a dump of the enum's fields) hid the message and its
//! fix from anyone who used `?` at the top, as the README does. The
//! error types of this workspace implement `Debug` with
//! `debug_as_message!`: the `Display` message, then the catalogue's code
//! in brackets where one entry of it covers the error
//! (`... pass exactly one shard per device [E0403]`). Each type has a
//! `code` method that says which; an error that several entries share
//! (a driver's own words, an internal error) has none, and prints its
//! message alone.

/// Implements `Debug` for an error type as its `Display` message followed
/// by ` [E0xxx]` where the type's `code()` gives a code (see the module
/// documentation).
#[macro_export]
macro_rules! debug_as_message {
    ($t:ty) => {
        impl ::std::fmt::Debug for $t {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                match self.code() {
                    Some(code) => write!(f, "{self} [{code}]"),
                    None => write!(f, "{self}"),
                }
            }
        }
    };
}

/// The code of a bad environment variable, by the variable (the
/// catalogue has one entry per variable the libraries read; `fuel-opt`'s
/// own are E0808's).
pub fn env_code(name: &str) -> Option<&'static str> {
    Some(match name {
        "FUEL_VULKAN_IMPORT" => "E0505",
        "FUEL_CUDA_PIN" => "E0506",
        "FUEL_SPIN_US" => "E0507",
        "FUEL_JOIN_TIMEOUT_MS" | "FUEL_COLLECTIVE_TIMEOUT_MS" => "E0908",
        _ => return None,
    })
}

impl crate::env::EnvError {
    /// The catalogue's code for this variable, where it has one.
    pub fn code(&self) -> Option<&'static str> {
        env_code(&self.name)
    }
}
debug_as_message!(crate::env::EnvError);

impl crate::elem::ElemError {
    /// The catalogue's code (E0715, E0716).
    pub fn code(&self) -> Option<&'static str> {
        use crate::elem::ElemError as E;
        match self {
            E::WrongType { .. } => Some("E0715"),
            E::Length { .. } => Some("E0716"),
            E::Bytes { .. } => None,
        }
    }
}
debug_as_message!(crate::elem::ElemError);

impl crate::outputs::OutputError {
    /// The catalogue's code (E0751 to E0754, typed data's E0715/E0716).
    pub fn code(&self) -> Option<&'static str> {
        use crate::outputs::OutputError as E;
        match self {
            E::ResultCount { .. } => Some("E0751"),
            E::ResultOfAnotherGraph => Some("E0752"),
            E::NotAnOutput { .. } => Some("E0753"),
            E::UnknownOutput { .. } => Some("E0754"),
            E::Elem(e) => e.code(),
        }
    }
}
debug_as_message!(crate::outputs::OutputError);

impl crate::pass::PassError {
    /// The catalogue's code (E03), where one entry covers the error.
    pub fn code(&self) -> Option<&'static str> {
        use crate::pass::PassError as E;
        match self {
            E::UnknownPass { .. } => Some("E0301"),
            E::UnknownOption { .. } => Some("E0302"),
            E::Pipeline { .. } => Some("E0306"),
            E::Verify { .. } => Some("E0307"),
            E::Internal { .. } => Some("E0309"),
            E::UnknownPrintAfter { .. } => Some("E0807"),
            E::Env(e) => e.code(),
            _ => None,
        }
    }
}
debug_as_message!(crate::pass::PassError);

impl crate::lazy::BuildError {
    /// The catalogue's code (E0450), where one entry covers the error.
    pub fn code(&self) -> Option<&'static str> {
        match self {
            crate::lazy::BuildError::OutputNameTaken(_) => Some("E0450"),
            _ => None,
        }
    }
}
debug_as_message!(crate::lazy::BuildError);

impl crate::interp::InterpError {
    /// The catalogue's code (E0709, E0712, E0722), where one entry covers
    /// the error.
    pub fn code(&self) -> Option<&'static str> {
        use crate::interp::InterpError as E;
        match self {
            E::InputLength { .. } => Some("E0709"),
            E::WorldMismatch(_) => Some("E0712"),
            E::OutOfMemory { .. } => Some("E0722"),
            _ => None,
        }
    }
}
debug_as_message!(crate::interp::InterpError);
