//! `extern` ops on a CUDA device: the PTX the caller registered
//! (`crate::kernels::register_ptx`) loaded as a module on first use, its
//! entry kept per device by name, and launched with one thread per result
//! element and the signature every CUDA extern kernel has: one pointer per
//! operand, the result's pointer, the two parameter words, the element
//! count (u64).

use super::*;

impl CudaDev {
    /// Runs the extern kernel `name` (entry `entry` of `ptx`) over `ins`
    /// into `dst`, `n` elements, with `params`.
    #[allow(clippy::too_many_arguments)] // one per piece of the launch
    pub fn run_extern(
        &self,
        name: &str,
        ptx: &str,
        entry: &str,
        params: [u32; 2],
        ins: &[&CudaBuf],
        dst: &mut CudaBuf,
        n: usize,
    ) -> Result<(), ExecError> {
        let op = format!("extern \"{name}\"");
        let f = {
            let mut made = self
                .externs
                .lock()
                .map_err(|_| ExecError::Internal("the extern kernels' lock is poisoned".into()))?;
            match made.get(name) {
                Some(f) => f.clone(),
                None => {
                    let loaded = guarded(|| -> Result<CudaFunction, DriverError> {
                        let module = self
                            .ctx
                            .load_module(cudarc::nvrtc::Ptx::from_src(ptx.to_string()))?;
                        module.load_function(entry)
                    });
                    let f = match loaded {
                        Ok(Ok(f)) => f,
                        Ok(Err(e)) => return Err(self.err(&op, e)),
                        Err(p) => return Err(self.err(&op, p)),
                    };
                    made.insert(name.to_string(), f.clone());
                    f
                }
            }
        };
        let srcs = ins
            .iter()
            .map(|b| b.slice())
            .collect::<Result<Vec<_>, _>>()?;
        let out = dst.slice_mut()?;
        let n64 = n as u64;
        let [p0, p1] = params;
        self.call(Lane::Compute, &op, |s| {
            let mut b = s.launch_builder(&f);
            for s in &srcs {
                b.arg(*s);
            }
            b.arg(&mut *out).arg(&p0).arg(&p1).arg(&n64);
            // SAFETY: the registered PTX promises this signature (one
            // pointer per operand, the result, two u32 words, a u64
            // count), and every buffer holds its value's bytes.
            unsafe { b.launch(Self::config(n)) }.map(|_| ())
        })
    }
}
