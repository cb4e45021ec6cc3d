//! The text IR: a public format that prints and parses byte-identically.
//!
//! `print` numbers values densely in the graph's deterministic topological
//! order; `parse` accepts the same grammar (see `docs/text-ir.md`) with forward
//! references, and reports errors as `line:column: expected ...`.

mod cursor;
pub mod excerpt;
mod invisible;
mod op_line;
mod parse;
mod print;

pub use cursor::ParseError;
pub use parse::parse;
pub(crate) use print::push_backslashed;
pub use print::{print, print_lines, Numbering};
