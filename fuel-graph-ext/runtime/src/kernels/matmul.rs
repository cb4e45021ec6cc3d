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

/// An element type `matrixmultiply` multiplies.
trait Gemm: Copy + Default {
    /// Bytes per element.
    const SIZE: usize;
    /// One element from its little-endian bytes.
    fn read(bytes: &[u8]) -> Self;
    /// Its little-endian bytes into `out`.
    fn write(self, out: &mut [u8]);
    /// `c = a · b` for row-major `a[m, k]`, `b[k, n]`, `c[m, n]`.
    fn gemm(m: usize, k: usize, n: usize, a: &[Self], b: &[Self], c: &mut [Self]);
}

/// `Gemm` for a float type, through the `matrixmultiply` call for it.
macro_rules! gemm_for {
    ($t:ty, $call:path) => {
        impl Gemm for $t {
            const SIZE: usize = std::mem::size_of::<$t>();
            fn read(bytes: &[u8]) -> Self {
                let mut w = [0u8; std::mem::size_of::<$t>()];
                w.copy_from_slice(bytes);
                <$t>::from_le_bytes(w)
            }
            fn write(self, out: &mut [u8]) {
                out.copy_from_slice(&self.to_le_bytes());
            }
            fn gemm(m: usize, k: usize, n: usize, a: &[Self], b: &[Self], c: &mut [Self]) {
                assert!(a.len() >= m * k && b.len() >= k * n && c.len() >= m * n);
                // SAFETY: the slices hold at least m×k, k×n and m×n
                // elements (asserted above), and the strides are those of
                // row-major matrices of those shapes, so every access is
                // in bounds.
                unsafe {
                    $call(
                        m,
                        k,
                        n,
                        1.0,
                        a.as_ptr(),
                        k as isize,
                        1,
                        b.as_ptr(),
                        n as isize,
                        1,
                        0.0,
                        c.as_mut_ptr(),
                        n as isize,
                        1,
                    );
                }
            }
        }
    };
}

gemm_for!(f32, matrixmultiply::sgemm);
gemm_for!(f64, matrixmultiply::dgemm);

/// `a · b` into `out`, elements of `T`; returns the bytes written. The
/// operands are copied out of their bytes (host buffers promise no
/// alignment for `T`; the copy is O(n²) beside the product's O(n³)).
fn product<T: Gemm>(m: usize, k: usize, n: usize, a: &[u8], b: &[u8], out: &mut [u8]) -> usize {
    let read = |bytes: &[u8]| -> Vec<T> { bytes.chunks_exact(T::SIZE).map(T::read).collect() };
    let (av, bv) = (read(a), read(b));
    let mut c = vec![T::default(); m * n];
    T::gemm(m, k, n, &av, &bv, &mut c);
    for (o, v) in out.chunks_exact_mut(T::SIZE).zip(&c) {
        v.write(o);
    }
    c.len() * T::SIZE
}

/// The CPU `matmul` kernel, registered as `extern "matmul"`.
pub fn matmul_cpu(x: &ExternOp, ins: &[Operand<'_>], out: &mut [u8]) -> Result<usize, String> {
    let [a, b] = ins else {
        return Err(format!("matmul takes two operands, found {}", ins.len()));
    };
    let (m, k, n) = matmul_shape(x, a.ty, b.ty)?;
    match x.ty.dtype {
        DType::F32 => Ok(product::<f32>(m, k, n, a.bytes, b.bytes, out)),
        DType::F64 => Ok(product::<f64>(m, k, n, a.bytes, b.bytes, out)),
        d => Err(format!("the CPU matmul kernel takes f32 or f64, found {d}")),
    }
}
