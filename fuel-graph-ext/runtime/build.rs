//! Compiles the WGSL compute shaders to SPIR-V with naga, into
//! `$OUT_DIR/<name>.spv`: the element-wise template once per element type
//! that WGSL has, `elementwise_bf16` (bf16 as halves of 32-bit words, with
//! the f32 max/min pasted in), and the `cast`, `transport_cast` (one entry
//! point per transport cast) and `div` kernels once. The Vulkan backend embeds them
//! with `include_bytes!`, so no shader compiler is needed at run time.
//! Without the `vulkan` feature there is no Vulkan backend, naga is not a
//! build-dependency, and this script does nothing.

#[cfg(feature = "vulkan")]
use std::path::PathBuf;

/// (module name, `enable` line, stored type, compute type, float helpers)
#[cfg(feature = "vulkan")]
const VARIANTS: &[(&str, &str, &str, &str, Floats)] = &[
    ("elementwise_f32", "", "f32", "f32", Floats::F32),
    ("elementwise_i32", "", "i32", "i32", Floats::None),
    ("elementwise_f16", "enable f16;", "f16", "f32", Floats::F32),
    ("elementwise_f64", "", "f64", "f64", Floats::F64),
    ("elementwise_i64", "", "i64", "i64", Floats::None),
    ("elementwise_u32", "", "u32", "u32", Floats::None),
    ("elementwise_u64", "", "u64", "u64", Floats::None),
];

/// Which max/min a variant compares with: the floats' (`shaders/minmax.wgsl`
/// over the tests of `shaders/minmax_<ty>.wgsl`) or the integers' built-ins.
#[cfg(feature = "vulkan")]
#[derive(Clone, Copy)]
enum Floats {
    F32,
    F64,
    None,
}

/// The kernels that are one module each, with no template.
#[cfg(feature = "vulkan")]
const SINGLE: &[&str] = &["cast", "transport_cast", "div"];
/// The kernels of `SINGLE` that convert between f32 and the 16-bit floats,
/// which get `shaders/half_bits.wgsl` appended.
#[cfg(feature = "vulkan")]
const CONVERTS: &[&str] = &["cast", "transport_cast"];

#[cfg(not(feature = "vulkan"))]
fn main() {}

#[cfg(feature = "vulkan")]
fn main() {
    let out = PathBuf::from(std::env::var("OUT_DIR").unwrap_or_else(|_| ".".into()));
    let template_path = "shaders/elementwise.wgsl";
    println!("cargo:rerun-if-changed={template_path}");
    println!("cargo:rerun-if-changed=build.rs");
    let template = std::fs::read_to_string(template_path)
        .unwrap_or_else(|e| panic!("cannot read {template_path}: {e}"));
    let read = |path: &str| {
        println!("cargo:rerun-if-changed={path}");
        std::fs::read_to_string(path).unwrap_or_else(|e| panic!("cannot read {path}: {e}"))
    };
    // Each float type's NaN and sign tests, then the max and min written
    // once in terms of them.
    let minmax = read("shaders/minmax.wgsl");
    let minmax_f32 = read("shaders/minmax_f32.wgsl") + &minmax;
    let minmax_f64 = read("shaders/minmax_f64.wgsl") + &minmax;
    let mut sources: Vec<(String, String)> = VARIANTS
        .iter()
        .map(|(name, enable, ty, cty, floats)| {
            let (helpers, max, min) = match floats {
                Floats::F32 => (minmax_f32.as_str(), "fmax", "fmin"),
                Floats::F64 => (minmax_f64.as_str(), "fmax", "fmin"),
                Floats::None => ("", "max", "min"),
            };
            let src = template
                .replace("ENABLE", enable)
                .replace("CTYPE", cty)
                .replace("TYPE", ty)
                .replace("FLOATS", helpers)
                .replace("MAX(", &format!("{max}("))
                .replace("MIN(", &format!("{min}("));
            (name.to_string(), src)
        })
        .collect();
    // WGSL has no include: the kernels that convert floats get the shared
    // conversions appended.
    let half_bits = read("shaders/half_bits.wgsl");
    for name in SINGLE {
        let mut src = read(&format!("shaders/{name}.wgsl"));
        if CONVERTS.contains(name) {
            src.push_str(&half_bits);
        }
        sources.push((name.to_string(), src));
    }
    // WGSL has no bf16: its kernel is its own file, computing in f32.
    let bf16 = read("shaders/elementwise_bf16.wgsl").replace("FLOATS", &minmax_f32);
    sources.push(("elementwise_bf16".to_string(), bf16));
    for (name, src) in &sources {
        let words = compile(name, src);
        let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
        let path = out.join(format!("{name}.spv"));
        std::fs::write(&path, bytes)
            .unwrap_or_else(|e| panic!("cannot write {}: {e}", path.display()));
    }
}

/// The compile the extern kernel registry uses too.
#[cfg(feature = "vulkan")]
#[path = "src/kernels/wgsl.rs"]
mod wgsl;

#[cfg(feature = "vulkan")]
fn compile(name: &str, src: &str) -> Vec<u32> {
    wgsl::wgsl_words(name, src).unwrap_or_else(|e| panic!("{e}"))
}
