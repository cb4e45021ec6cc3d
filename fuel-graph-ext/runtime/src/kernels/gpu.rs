//! Extern kernels for GPU backends: SPIR-V for Vulkan devices, registered
//! as such or as WGSL that naga compiles at registration (feature
//! `vulkan`), and PTX for CUDA devices, each with the function that gives a
//! dispatch its two parameter words from the op and its operand types.
//! On CUDA the entry takes one pointer per operand, the result's pointer,
//! the two words (u32) and the element count (u64), one thread per
//! element. One invocation runs per
//! element of the result; the shader sees the backend's shared layout
//! (operands at bindings 0 to 7, the result at binding 8, the parameter
//! block `{n, row_stride, count, op, by, onto}`, the kernel's parameters
//! in `op` and `by`).

use fuel_graph_ext::dtype::TensorType;
use fuel_graph_ext::op::ExternOp;
use std::sync::Arc;

/// The parameter words of one dispatch, or why the op cannot run (a dtype
/// or shape the shader does not take): checked at compile time too.
pub trait ParamsFn:
    Fn(&ExternOp, &[&TensorType]) -> Result<[u32; 2], String> + Send + Sync
{
}
impl<F: Fn(&ExternOp, &[&TensorType]) -> Result<[u32; 2], String> + Send + Sync> ParamsFn for F {}

/// A registered Vulkan kernel.
#[derive(Clone)]
pub struct VulkanKernel {
    /// Its SPIR-V, as bytes.
    pub spirv: Arc<[u8]>,
    /// Its parameters.
    pub params: Arc<dyn ParamsFn>,
}

/// A registered CUDA kernel: PTX text and its entry's name.
#[derive(Clone)]
pub struct CudaKernel {
    /// The PTX module.
    pub ptx: Arc<str>,
    /// The entry to launch.
    pub entry: String,
    /// Its parameters.
    pub params: Arc<dyn ParamsFn>,
}

/// `wgsl` compiled to SPIR-V by naga (as bytes), or naga's message.
#[cfg(feature = "vulkan")]
pub fn wgsl_to_spirv(name: &str, wgsl: &str) -> Result<Vec<u8>, String> {
    let words = super::wgsl::wgsl_words(name, wgsl)?;
    Ok(words.iter().flat_map(|w| w.to_le_bytes()).collect())
}

/// The shipped `matmul` shader's parameters: k and n, for f32 matrices.
pub fn matmul_params(x: &ExternOp, tys: &[&TensorType]) -> Result<[u32; 2], String> {
    let [a, b] = tys else {
        return Err(format!("matmul takes two operands, found {}", tys.len()));
    };
    let (_, k, n) = fuel_graph_ext::interp::matmul_shape(x, a, b)?;
    if x.ty.dtype != fuel_graph_ext::DType::F32 {
        return Err(format!(
            "the GPU matmul kernels take f32, found {}; place an f64 matmul on a CPU device",
            x.ty.dtype
        ));
    }
    let word =
        |v: usize| u32::try_from(v).map_err(|_| format!("{v} is past one dispatch's 2^32-1"));
    Ok([word(k)?, word(n)?])
}

#[cfg(test)]
mod tests {
    use super::super::MATMUL_PTX;

    /// ptxas refuses any byte past ASCII, comments included; the entry the
    /// table registers is in the module.
    #[test]
    fn the_shipped_ptx_is_ascii_and_has_its_entry() {
        assert!(MATMUL_PTX.is_ascii());
        assert!(MATMUL_PTX.contains(".visible .entry matmul_f32("));
    }

    /// The shipped shader compiles, and a broken one is refused with
    /// naga's message.
    #[cfg(feature = "vulkan")]
    #[test]
    fn the_shipped_wgsl_compiles_and_a_broken_one_is_refused() {
        let spirv = super::wgsl_to_spirv("matmul", super::super::MATMUL_WGSL).unwrap();
        assert_eq!(spirv.len() % 4, 0);
        let e = super::wgsl_to_spirv("bad", "fn main( {").unwrap_err();
        assert!(e.starts_with("the WGSL of `bad` does not parse"), "{e}");
    }
}
