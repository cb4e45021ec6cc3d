//! The shipped `matmul` kernel: `a[m, k] · b[k, n] -> [m, n]`, row-major,
//! f32 or f64, on CPU devices through the `matrixmultiply` crate's
//! blocked, vectorised `sgemm`/`dgemm`. The interpreter's reference
//! (`fuel_graph_ext::interp`) sums each entry in f64 and rounds once; on
//! inputs whose products and sums are exact in the dtype (the tests'
//! small integers) the two agree bit for bit.

use super::Operand;
use fuel_graph_ext::dtype::DType;
use fuel_graph_ext::interp::matmul_shape;
use fuel_graph_ext::op::ExternOp;

/// Little-endian bytes as `T`s (a copy: host buffers promise no alignment
/// for `T`, and the copy is O(n²) beside the product's O(n³)).
fn elems<T, const N: usize>(bytes: &[u8], from: fn([u8; N]) -> T) -> Vec<T> {
    bytes
        .chunks_exact(N)
        .map(|c| {
            let mut w = [0u8; N];
            w.copy_from_slice(c);
            from(w)
        })
        .collect()
}

/// The CPU `matmul` kernel, registered as `extern "matmul"`.
pub fn matmul_cpu(x: &ExternOp, ins: &[Operand<'_>], out: &mut [u8]) -> Result<usize, String> {
    let [a, b] = ins else {
        return Err(format!("matmul takes two operands, found {}", ins.len()));
    };
    let (m, k, n) = matmul_shape(x, a.ty, b.ty)?;
    let (rs_a, rs_b, rs_c) = (k as isize, n as isize, n as isize);
    match x.ty.dtype {
        DType::F32 => {
            let (av, bv) = (
                elems(a.bytes, f32::from_le_bytes),
                elems(b.bytes, f32::from_le_bytes),
            );
            let mut c = vec![0f32; m * n];
            // SAFETY: `matmul_shape` checked the operands are m×k and k×n
            // and the result m×n, and the slices hold that many elements;
            // the strides are those of row-major matrices of those shapes,
            // so every access is in bounds.
            unsafe {
                matrixmultiply::sgemm(
                    m,
                    k,
                    n,
                    1.0,
                    av.as_ptr(),
                    rs_a,
                    1,
                    bv.as_ptr(),
                    rs_b,
                    1,
                    0.0,
                    c.as_mut_ptr(),
                    rs_c,
                    1,
                );
            }
            for (o, v) in out.chunks_exact_mut(4).zip(&c) {
                o.copy_from_slice(&v.to_le_bytes());
            }
            Ok(c.len() * 4)
        }
        DType::F64 => {
            let (av, bv) = (
                elems(a.bytes, f64::from_le_bytes),
                elems(b.bytes, f64::from_le_bytes),
            );
            let mut c = vec![0f64; m * n];
            // SAFETY: as for f32 above.
            unsafe {
                matrixmultiply::dgemm(
                    m,
                    k,
                    n,
                    1.0,
                    av.as_ptr(),
                    rs_a,
                    1,
                    bv.as_ptr(),
                    rs_b,
                    1,
                    0.0,
                    c.as_mut_ptr(),
                    rs_c,
                    1,
                );
            }
            for (o, v) in out.chunks_exact_mut(8).zip(&c) {
                o.copy_from_slice(&v.to_le_bytes());
            }
            Ok(c.len() * 8)
        }
        d => Err(format!("the CPU matmul kernel takes f32 or f64, found {d}")),
    }
}
