//! Which MPI calls carry a reduction of a given element type and reduce
//! op, chosen so that every rank gets bit-identical results: pure, no MPI.
//!
//! - Integers and bool reduce with `MPI_Allreduce` and MPI's own type and
//!   op. Their arithmetic is exact (sums and products wrap), so whatever
//!   order MPI folds in, every rank holds the same bits.
//! - Floats (f32, f64, f16, bf16) reduce round a ring of `MPI_Sendrecv`
//!   calls (`ring`): each run of elements is folded along the ring, ends
//!   on exactly one rank, and the others receive a copy of its bits. A
//!   float `MPI_Allreduce` may fold in a different order on different
//!   ranks (recursive doubling does), and a float sum depends on the
//!   order. The bytes moved are those of a ring all-reduce.
//! - `Mean` widens to the dtype's mean accumulator
//!   (`DType::mean_accumulator`: f16 → f32, bf16 → f64, small integers →
//!   64-bit), sums there by the rule above, divides by the group size and
//!   narrows: the interpreter's definition.
//! - f16 and bf16 have no MPI type: they travel as 16-bit words. The ring
//!   folds them itself; `reduce` and `reduce_scatter` reduce them with a
//!   user op (`MPI_Op_create`) whose body is the CPU backend's fold. If MPI
//!   cannot make the op, and only then, the driver gathers every rank's
//!   bytes and folds them in rank order (counted by
//!   `MpiDriver::fallback_folds`).

use fuel_graph_ext::dtype::DType;
use fuel_graph_ext::op::ReduceOp;

/// How MPI reduces a dtype itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Wire {
    /// MPI's own datatype and op.
    Native,
    /// A user op over 16-bit words (f16, bf16).
    User,
}

/// The route of an all-reduce.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Route {
    /// `MPI_Allreduce`: exact arithmetic.
    Allreduce(Wire),
    /// The ring of `MPI_Sendrecv` calls (`ring`): one owner per element.
    Ring,
    /// Widen to `acc` (the same dtype when it is its own accumulator), sum
    /// by `acc`'s route, divide, narrow.
    Mean {
        /// The accumulator.
        acc: DType,
    },
}

/// How `dtype` reduces inside MPI.
pub(crate) fn wire(dtype: DType) -> Wire {
    match dtype {
        DType::F16 | DType::BF16 => Wire::User,
        _ => Wire::Native,
    }
}

/// Whether `dtype`'s reductions are exact (the same bits in any order).
pub(crate) fn exact(dtype: DType) -> bool {
    !matches!(dtype, DType::F32 | DType::F64 | DType::F16 | DType::BF16)
}

/// The route of an all-reduce of `dtype` with `op`.
pub(crate) fn all_reduce(dtype: DType, op: ReduceOp) -> Route {
    if op == ReduceOp::Mean {
        return Route::Mean {
            acc: dtype.mean_accumulator(),
        };
    }
    if exact(dtype) {
        Route::Allreduce(wire(dtype))
    } else {
        Route::Ring
    }
}

/// `count` elements cut into `ranks` runs, in rank order: `count / ranks`
/// each, one more for the first `count % ranks` ranks.
pub(crate) fn split(count: usize, ranks: usize) -> Vec<usize> {
    let ranks = ranks.max(1);
    (0..ranks)
        .map(|r| count / ranks + usize::from(r < count % ranks))
        .collect()
}

/// Where each run of `counts` starts.
pub(crate) fn offsets(counts: &[usize]) -> Vec<usize> {
    counts
        .iter()
        .scan(0usize, |at, c| {
            let here = *at;
            *at += c;
            Some(here)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats_go_through_one_owner_and_integers_through_allreduce() {
        for d in DType::ALL {
            for op in [
                ReduceOp::Sum,
                ReduceOp::Product,
                ReduceOp::Max,
                ReduceOp::Min,
            ] {
                let r = all_reduce(d, op);
                match d {
                    DType::F32 | DType::F64 | DType::F16 | DType::BF16 => {
                        assert_eq!(r, Route::Ring)
                    }
                    _ => assert_eq!(r, Route::Allreduce(Wire::Native), "{d}"),
                }
            }
            assert_eq!(
                all_reduce(d, ReduceOp::Mean),
                Route::Mean {
                    acc: d.mean_accumulator()
                }
            );
            // The accumulator of a mean never needs a user op.
            assert_eq!(wire(d.mean_accumulator()), Wire::Native, "{d}");
        }
    }

    #[test]
    fn split_covers_every_element_once() {
        for count in [0, 1, 5, 12, 13] {
            for ranks in 1..6 {
                let c = split(count, ranks);
                assert_eq!(c.iter().sum::<usize>(), count);
                assert!(c.iter().max().unwrap_or(&0) - c.iter().min().unwrap_or(&0) <= 1);
                let o = offsets(&c);
                assert_eq!(o[0], 0);
                for r in 1..ranks {
                    assert_eq!(o[r], o[r - 1] + c[r - 1]);
                }
            }
        }
    }
}
