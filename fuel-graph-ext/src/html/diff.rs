//! The text IR of one step against the step before, line by line: what
//! the viewer's diff pane shows. Patience diff (fast on the long, mostly
//! unique lines of a printed graph) with no time limit, so the result is
//! the same on every machine.

use similar::{Algorithm, DiffOp};

/// How a line of a diff reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mark {
    /// In both.
    Same,
    /// Only in the step before.
    Removed,
    /// Only in this step.
    Added,
    /// A line of the step before that this step changed.
    ChangedFrom,
    /// What this step changed it to.
    ChangedTo,
}

impl Mark {
    /// The one-character tag the page reads.
    pub fn tag(self) -> &'static str {
        match self {
            Mark::Same => " ",
            Mark::Removed => "-",
            Mark::Added => "+",
            Mark::ChangedFrom => "<",
            Mark::ChangedTo => ">",
        }
    }
}

/// The diff of `new` against `old`: every line of both, in reading order,
/// each with its mark.
pub fn diff<'a>(old: &[&'a str], new: &[&'a str]) -> Vec<(Mark, &'a str)> {
    let ops = similar::capture_diff_slices(Algorithm::Patience, old, new);
    let mut out = Vec::with_capacity(new.len().max(old.len()));
    let line = |v: &[&'a str], i: usize| v.get(i).copied().unwrap_or("");
    for op in ops {
        match op {
            DiffOp::Equal { new_index, len, .. } => {
                out.extend((new_index..new_index + len).map(|i| (Mark::Same, line(new, i))));
            }
            DiffOp::Delete {
                old_index, old_len, ..
            } => {
                out.extend((old_index..old_index + old_len).map(|i| (Mark::Removed, line(old, i))))
            }
            DiffOp::Insert {
                new_index, new_len, ..
            } => out.extend((new_index..new_index + new_len).map(|i| (Mark::Added, line(new, i)))),
            DiffOp::Replace {
                old_index,
                old_len,
                new_index,
                new_len,
            } => {
                out.extend(
                    (old_index..old_index + old_len).map(|i| (Mark::ChangedFrom, line(old, i))),
                );
                out.extend(
                    (new_index..new_index + new_len).map(|i| (Mark::ChangedTo, line(new, i))),
                );
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marks_added_removed_and_changed_lines() {
        let d = diff(&["a", "b", "c"], &["a", "B", "c", "d"]);
        let tags: String = d.iter().map(|(m, _)| m.tag()).collect();
        assert_eq!(tags, " <> +");
        assert_eq!(d[2].1, "B");
    }
}
