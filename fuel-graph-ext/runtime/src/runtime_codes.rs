//! The runtime's error codes: which `docs/errors.md` entry covers an
//! [`ExecError`], a [`CacheError`] or a [`DriverError`], and their `Debug`
//! form, the message and that code (see `fuel_graph_ext::error_code`).

use crate::calibration::CacheError;
use crate::driver::DriverError;
use crate::error::ExecError;
use fuel_graph_ext::debug_as_message;
use fuel_graph_ext::{DType, DeviceKind};

impl ExecError {
    /// The catalogue's code (E05 to E07), where one entry covers the error;
    /// `None` for a driver's or device's own words and for internal errors.
    pub fn code(&self) -> Option<&'static str> {
        use ExecError as E;
        Some(match self {
            E::Collective { .. } => "E0701",
            E::DeviceNotListed { .. } => "E0501",
            E::DeviceUnavailable { device, .. } if device.starts_with("cuda") => "E0504",
            E::Unsupported {
                dtype: DType::U8, ..
            } => "E0601",
            E::Unsupported {
                dtype: DType::I16 | DType::U16,
                ..
            } => "E0602",
            E::UnsupportedKernel { device, .. } if device.kind == DeviceKind::Cuda => "E0604",
            E::NoDirectCopy { .. } => "E0702",
            E::MissingInput(_) => "E0706",
            E::UnknownInput { .. } => "E0750",
            E::Output(e) => return e.code(),
            E::Elem(e) => return e.code(),
            E::InputType { .. } => "E0707",
            E::InputSize { .. } => "E0708",
            E::TooLarge { what, .. } if what.starts_with(crate::exec::capacity::KERNEL_BUFFER) => {
                "E0720"
            }
            E::TooLarge { .. } => "E0718",
            E::NotEnoughMemory { .. } => "E0719",
            E::OutOfMemory { reason, .. }
                if reason.starts_with(fuel_graph_ext::plan::NO_REGION_LIST) =>
            {
                "E0723"
            }
            E::OutOfMemory { .. } => "E0705",
            E::Injected { op, .. } if op == "copy" || op == "move" => "E0703",
            E::Injected { .. } => "E0704",
            E::Thread { .. } => "E0721",
            E::NoExternKernel { .. } => "E0730",
            E::ExternFailed { .. } => "E0731",
            E::ExternBytes { .. } => "E0732",
            E::ExternPanicked { .. } => "E0733",
            E::Env(e) => return e.code(),
            _ => return None,
        })
    }
}
debug_as_message!(ExecError);

impl CacheError {
    /// The catalogue's code (E0314 to E0317).
    pub fn code(&self) -> Option<&'static str> {
        Some(match self {
            CacheError::Unreadable { .. } => "E0314",
            CacheError::Bad { .. } => "E0315",
            CacheError::Stale { .. } => "E0316",
            CacheError::Write { .. } => "E0317",
        })
    }
}
debug_as_message!(CacheError);

impl DriverError {
    /// The catalogue's code (E09), where one entry covers the error.
    pub fn code(&self) -> Option<&'static str> {
        use DriverError as E;
        Some(match self {
            E::Env(e) => return e.code(),
            E::JoinTimeout { .. } => "E0901",
            E::BadRank { .. } => "E0902",
            E::UnsupportedElem { .. } => "E0903",
            E::PartialElement { .. } => "E0904",
            E::Mismatch { .. } => "E0905",
            E::PeerGone { .. } => "E0906",
            E::LibraryMissing { .. } => "E0907",
            E::SplitMismatch { .. } => "E0960",
            E::SplitDisagree { .. } => "E0961",
            _ => return None,
        })
    }
}
debug_as_message!(DriverError);
