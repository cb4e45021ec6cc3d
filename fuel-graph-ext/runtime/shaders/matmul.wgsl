// The shipped `extern "matmul"` kernel for Vulkan devices: c = a · b for
// row-major f32 matrices a[m, k] (binding 0), b[k, n] (binding 1), c[m, n]
// (binding 8), the layout every kernel of the backend shares. Invocation
// `i` writes c's element i; `p.op` carries k and `p.by` carries n (the
// two values the registry's parameter function gives an extern shader).
// Each sum runs in f32 in k order, as the CPU kernel's does for the
// tests' small integer inputs, which every order adds exactly.

struct Params { n: u32, row_stride: u32, count: u32, op: u32, by: u32, onto: u32 }

@group(0) @binding(0) var<storage, read> a: array<f32>;
@group(0) @binding(1) var<storage, read> b: array<f32>;
@group(0) @binding(8) var<storage, read_write> c: array<f32>;
var<immediate> p: Params;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x + gid.y * p.row_stride;
    if (i >= p.n) {
        return;
    }
    let k = p.op;
    let n = p.by;
    let row = i / n;
    let col = i % n;
    var acc = 0.0;
    for (var q = 0u; q < k; q = q + 1u) {
        acc = acc + a[row * k + q] * b[q * n + col];
    }
    c[i] = acc;
}
