//! PTX for the CUDA kernels, generated as text by plain Rust.
//!
//! [`module`] writes one PTX module with two entries per dtype:
//! `fold_<dt>(a0..a7, out, count, op, n)` folds up to eight operands in one
//! pass (op 0 add, 1 mul, 2 max, 3 min, 4 eq: 1 where the two operands are
//! equal, else 0, NaN equal to nothing; unused pointers repeat operand 0),
//! and `div_<dt>(a, out, by, n)` divides by a positive integer; and one
//! `cast_<from>_<to>(a, out, n)` per conversion. f16 and bf16 compute in f32
//! and round back after every step; `max`/`min` (without `.NaN`) let a
//! number win over a NaN, and equal operands are combined bit by bit so
//! that -0 is below +0 (the interpreter's rule). Floats divide in f64 and round once (through f32
//! rounded to odd for the half types), which is the exact quotient for the
//! divisors `CudaDev::check_div` lets through; integers wrap and divide
//! their magnitude toward zero. The text is loaded with `Ptx::from_src` (no
//! NVRTC) and checked offline by `scripts/check-ptx.sh` with `ptxas` for
//! sm_80 and sm_90.

use fuel_graph_ext::dtype::DType;
use std::fmt::Write;

/// Operands one fold launch reads.
pub const MAX_ARITY: usize = 8;

/// Every dtype the CUDA backend has kernels for; the CUDA backend refuses
/// the others (bool, i8, i16, u16) at compile time.
pub const DTYPES: [DType; 9] = [
    DType::F32,
    DType::F64,
    DType::F16,
    DType::BF16,
    DType::I32,
    DType::I64,
    DType::U8,
    DType::U32,
    DType::U64,
];

/// How one dtype is loaded, computed and stored.
struct Spec {
    /// Bytes per element.
    size: usize,
    /// Register type arithmetic runs in.
    reg: &'static str,
    /// Register declaration prefix for the compute type.
    regdecl: &'static str,
    /// ld/st suffix.
    mem: &'static str,
    /// Instruction suffixes for add, mul, max, min.
    add: &'static str,
    mul: &'static str,
    minmax: &'static str,
}

/// How `dt` is computed, or `None` for a dtype with no kernel.
fn spec(dt: DType) -> Option<Spec> {
    Some(match dt {
        DType::F32 | DType::F16 | DType::BF16 => Spec {
            size: dt.size_bytes(),
            reg: "f",
            regdecl: ".f32",
            mem: if dt == DType::F32 { "f32" } else { "b16" },
            add: "add.rn.f32",
            mul: "mul.rn.f32",
            minmax: "f32",
        },
        DType::F64 => Spec {
            size: 8,
            reg: "d",
            regdecl: ".f64",
            mem: "f64",
            add: "add.rn.f64",
            mul: "mul.rn.f64",
            minmax: "f64",
        },
        DType::I32 => Spec {
            size: 4,
            reg: "r",
            regdecl: ".s32",
            mem: "s32",
            add: "add.s32",
            mul: "mul.lo.s32",
            minmax: "s32",
        },
        DType::I64 => Spec {
            size: 8,
            reg: "l",
            regdecl: ".s64",
            mem: "s64",
            add: "add.s64",
            mul: "mul.lo.s64",
            minmax: "s64",
        },
        DType::U8 => Spec {
            size: 1,
            reg: "r",
            regdecl: ".u32",
            mem: "u8",
            add: "add.u32",
            mul: "mul.lo.u32",
            minmax: "u32",
        },
        DType::U32 => Spec {
            size: 4,
            reg: "r",
            regdecl: ".u32",
            mem: "u32",
            add: "add.u32",
            mul: "mul.lo.u32",
            minmax: "u32",
        },
        DType::U64 => Spec {
            size: 8,
            reg: "l",
            regdecl: ".u64",
            mem: "u64",
            add: "add.u64",
            mul: "mul.lo.u64",
            minmax: "u64",
        },
        DType::Bool | DType::I8 | DType::I16 | DType::U16 => return None,
    })
}

/// Loads element at `%addr` into compute register `dst` (with `%h` scratch).
fn load(dt: DType, s: &Spec, dst: &str, out: &mut String) {
    let _ = match dt {
        DType::F16 => writeln!(
            out,
            "\tld.global.b16 %h, [%addr];\n\tcvt.f32.f16 {dst}, %h;"
        ),
        DType::BF16 => writeln!(
            out,
            "\tld.global.b16 %h, [%addr];\n\tcvt.u32.u16 %t, %h;\n\tshl.b32 %t, %t, 16;\n\tmov.b32 {dst}, %t;"
        ),
        _ => writeln!(out, "\tld.global.{} {dst}, [%addr];", s.mem),
    };
}

/// Rounds compute register `r` to the stored type (halves only).
fn round(dt: DType, r: &str, out: &mut String) {
    match dt {
        DType::F16 => {
            let _ = writeln!(out, "\tcvt.rn.f16.f32 %h, {r};\n\tcvt.f32.f16 {r}, %h;");
        }
        DType::BF16 => {
            let _ = writeln!(
                out,
                "\tcvt.rn.bf16.f32 %h, {r};\n\tcvt.u32.u16 %t, %h;\n\tshl.b32 %t, %t, 16;\n\tmov.b32 {r}, %t;"
            );
        }
        _ => {}
    }
}

/// Stores compute register `r` to `%addr`.
fn store(dt: DType, s: &Spec, r: &str, out: &mut String) {
    let _ = match dt {
        DType::F16 => writeln!(
            out,
            "\tcvt.rn.f16.f32 %h, {r};\n\tst.global.b16 [%addr], %h;"
        ),
        DType::BF16 => writeln!(
            out,
            "\tcvt.rn.bf16.f32 %h, {r};\n\tst.global.b16 [%addr], %h;"
        ),
        _ => writeln!(out, "\tst.global.{} [%addr], {r};", s.mem),
    };
}

/// The prologue shared by both kernels: `%i` = global index, exit if >= n.
fn prologue(out: &mut String) {
    out.push_str(
        "\tmov.u32 %t, %ctaid.x;\n\tmov.u32 %t2, %ntid.x;\n\tmul.wide.u32 %i, %t, %t2;\n\tmov.u32 %t, %tid.x;\n\tcvt.u64.u32 %off, %t;\n\tadd.u64 %i, %i, %off;\n\tsetp.ge.u64 %p, %i, %n;\n\t@%p bra DONE;\n",
    );
}

fn regs(s: &Spec, out: &mut String) {
    let _ = writeln!(
        out,
        "\t.reg .pred %p, %pa, %pm, %px, %pn, %pe, %pq, %pz, %pzx, %pzn;\n\t.reg .b16 %h;\n\t.reg .b32 %t, %t2, %cnt, %op, %ta, %tb;\n\t.reg .b64 %i, %off, %addr, %base, %n, %by, %ua, %ub;\n\t.reg {} %{}<3>;\n\t.reg .f64 %q<2>;",
        s.regdecl, s.reg
    );
}

fn fold_entry(dt: DType, out: &mut String) {
    let Some(s) = spec(dt) else { return };
    let name = dt.as_str();
    let _ = write!(out, ".visible .entry fold_{name}(");
    for k in 0..MAX_ARITY {
        let _ = write!(out, "\n\t.param .u64 a{k},");
    }
    out.push_str(
        "\n\t.param .u64 dst,\n\t.param .u32 count,\n\t.param .u32 op,\n\t.param .u64 n\n)\n{\n",
    );
    regs(&s, out);
    out.push_str(
        "\tld.param.u64 %n, [n];\n\tld.param.u32 %cnt, [count];\n\tld.param.u32 %op, [op];\n",
    );
    out.push_str("\tsetp.eq.u32 %pa, %op, 0;\n\tsetp.eq.u32 %pm, %op, 1;\n\tsetp.eq.u32 %px, %op, 2;\n\tsetp.eq.u32 %pn, %op, 3;\n\tsetp.eq.u32 %pe, %op, 4;\n");
    prologue(out);
    let _ = writeln!(out, "\tmul.lo.u64 %off, %i, {};", s.size);
    let acc = format!("%{}0", s.reg);
    let x = format!("%{}1", s.reg);
    out.push_str("\tld.param.u64 %base, [a0];\n\tcvta.to.global.u64 %base, %base;\n\tadd.u64 %addr, %base, %off;\n");
    load(dt, &s, &acc, out);
    for k in 1..MAX_ARITY {
        let _ = writeln!(
            out,
            "\tsetp.le.u32 %p, %cnt, {k};\n\t@%p bra STORE;\n\tld.param.u64 %base, [a{k}];\n\tcvta.to.global.u64 %base, %base;\n\tadd.u64 %addr, %base, %off;"
        );
        load(dt, &s, &x, out);
        // Floats: equal operands (two zeros of either sign, or one value)
        // give the AND of their bits for max and the OR for min, so -0 is
        // below +0 whatever max/min do with zeros; NaN is never equal, and
        // max/min return the other operand for it.
        let (bits, w) = if dt == DType::F64 {
            (("%ua", "%ub"), "b64")
        } else {
            (("%ta", "%tb"), "b32")
        };
        if dt.is_float() {
            let _ = writeln!(
                out,
                "\tsetp.eq.{mm} %pz, {acc}, {x};\n\tmov.{w} {a}, {acc};\n\tmov.{w} {b}, {x};",
                mm = s.minmax,
                a = bits.0,
                b = bits.1
            );
        }
        let _ = writeln!(
            out,
            "\t@%pa {add} {acc}, {acc}, {x};\n\t@%pm {mul} {acc}, {acc}, {x};\n\t@%px max.{mm} {acc}, {acc}, {x};\n\t@%pn min.{mm} {acc}, {acc}, {x};",
            add = s.add,
            mul = s.mul,
            mm = s.minmax
        );
        if dt.is_float() {
            let _ = writeln!(
                out,
                "\tand.pred %pzx, %pz, %px;\n\t@%pzx and.{w} {a}, {a}, {b};\n\t@%pzx mov.{w} {acc}, {a};\n\tand.pred %pzn, %pz, %pn;\n\t@%pzn or.{w} {a}, {a}, {b};\n\t@%pzn mov.{w} {acc}, {a};",
                a = bits.0,
                b = bits.1
            );
        }
        // eq: compared in the compute type (exact for the halves), 1 or 0.
        let (one, zero) = match dt {
            DType::F64 => ("0d3FF0000000000000", "0d0000000000000000"),
            _ if dt.is_float() => ("0f3F800000", "0f00000000"),
            _ => ("1", "0"),
        };
        let _ = writeln!(
            out,
            "\tsetp.eq.{mm} %pq, {acc}, {x};\n\t@%pe selp.{mm} {acc}, {one}, {zero}, %pq;",
            mm = s.minmax
        );
        round(dt, &acc, out);
    }
    out.push_str("STORE:\n\tld.param.u64 %base, [dst];\n\tcvta.to.global.u64 %base, %base;\n\tadd.u64 %addr, %base, %off;\n");
    store(dt, &s, &acc, out);
    out.push_str("DONE:\n\tret;\n}\n\n");
}

fn div_entry(dt: DType, out: &mut String) {
    let Some(s) = spec(dt) else { return };
    let name = dt.as_str();
    let _ = writeln!(
        out,
        ".visible .entry div_{name}(\n\t.param .u64 a,\n\t.param .u64 dst,\n\t.param .u64 by,\n\t.param .u64 n\n)\n{{"
    );
    regs(&s, out);
    out.push_str("\t.reg .s64 %s<2>;\n\tld.param.u64 %n, [n];\n\tld.param.u64 %by, [by];\n");
    prologue(out);
    let _ = writeln!(out, "\tmul.lo.u64 %off, %i, {};", s.size);
    out.push_str("\tld.param.u64 %base, [a];\n\tcvta.to.global.u64 %base, %base;\n\tadd.u64 %addr, %base, %off;\n");
    let x = format!("%{}0", s.reg);
    load(dt, &s, &x, out);
    match dt {
        DType::F64 => {
            let _ = writeln!(
                out,
                "\tcvt.rn.f64.u64 %q1, %by;\n\tdiv.rn.f64 {x}, {x}, %q1;"
            );
        }
        DType::F32 => {
            // Divide in f64 and round once: exact for divisors below 2^24,
            // the most `CudaDev::check_div` lets through (docs/backends.md).
            let _ = writeln!(
                out,
                "\tcvt.f64.f32 %q0, {x};\n\tcvt.rn.f64.u64 %q1, %by;\n\tdiv.rn.f64 %q0, %q0, %q1;\n\tcvt.rn.f32.f64 {x}, %q0;"
            );
        }
        DType::F16 | DType::BF16 => {
            // Divide in f64, then cut to f32 rounding to odd (toward zero,
            // the last bit set if anything was cut), so that the store's
            // one rounding to the half type is the correct one.
            let _ = writeln!(
                out,
                "\tcvt.f64.f32 %q0, {x};\n\tcvt.rn.f64.u64 %q1, %by;\n\tdiv.rn.f64 %q0, %q0, %q1;\n\tcvt.rz.f32.f64 {x}, %q0;\n\tcvt.f64.f32 %q1, {x};\n\tsetp.neu.f64 %p, %q1, %q0;\n\tmov.b32 %t, {x};\n\t@%p or.b32 %t, %t, 1;\n\tmov.b32 {x}, %t;"
            );
        }
        DType::I32 => {
            // Divide the magnitude unsigned (a divisor of 2^63 or more is
            // negative as an s64), then put the sign back.
            let _ = writeln!(
                out,
                "\tcvt.s64.s32 %s0, {x};\n\tsetp.lt.s64 %p, %s0, 0;\n\tabs.s64 %s1, %s0;\n\tdiv.u64 %s1, %s1, %by;\n\t@%p neg.s64 %s1, %s1;\n\tcvt.u32.u64 {x}, %s1;"
            );
        }
        DType::I64 => {
            // As for i32; the magnitude of the most negative value, 2^63,
            // is right as a u64 (neg wraps to itself).
            let _ = writeln!(
                out,
                "\tsetp.lt.s64 %p, {x}, 0;\n\tneg.s64 %s1, {x};\n\t@%p mov.b64 {x}, %s1;\n\tdiv.u64 {x}, {x}, %by;\n\tneg.s64 %s1, {x};\n\t@%p mov.b64 {x}, %s1;"
            );
        }
        DType::U32 => {
            let _ = writeln!(
                out,
                "\tcvt.u64.u32 %s0, {x};\n\tdiv.u64 %s0, %s0, %by;\n\tcvt.u32.u64 {x}, %s0;"
            );
        }
        DType::U64 => {
            let _ = writeln!(out, "\tdiv.u64 {x}, {x}, %by;");
        }
        // No kernel (see `spec`): nothing is emitted.
        DType::Bool | DType::I8 | DType::I16 | DType::U16 => return,
        DType::U8 => {
            let _ = writeln!(
                out,
                "\tcvt.u64.u32 %off, {x};\n\tdiv.u64 %off, %off, %by;\n\tcvt.u32.u64 {x}, %off;\n\tld.param.u64 %base, [dst];\n\tcvta.to.global.u64 %base, %base;\n\tmul.lo.u64 %off, %i, 1;\n\tadd.u64 %addr, %base, %off;"
            );
            store(dt, &s, &x, out);
            out.push_str("DONE:\n\tret;\n}\n\n");
            return;
        }
    }
    out.push_str("\tld.param.u64 %base, [dst];\n\tcvta.to.global.u64 %base, %base;\n\tadd.u64 %addr, %base, %off;\n");
    store(dt, &s, &x, out);
    out.push_str("DONE:\n\tret;\n}\n\n");
}

/// The entry that casts `from` elements to `to` elements.
pub fn cast_entry(from: DType, to: DType) -> String {
    format!("cast_{}_{}", from.as_str(), to.as_str())
}

/// Every (from, to) pair a `cast` kernel is written for: each conversion
/// the IR defines between two dtypes of [`DTYPES`].
pub fn cast_pairs() -> Vec<(DType, DType)> {
    let mut pairs = Vec::new();
    for from in DTYPES {
        for to in DTYPES {
            if fuel_graph_ext::op::cast_defined(from, to).is_ok() {
                pairs.push((from, to));
            }
        }
    }
    pairs
}

/// `cast_<from>_<to>(a, dst, n)`. Integers widen to a 64-bit register
/// (sign- or zero-extended as the source is signed or not) and the store
/// keeps the low bytes, which is the wrapping conversion. Floats widen to
/// f64, which is exact, and round once to the target: `cvt.rn` for f32 and
/// f64; for f16 and bf16 the value is first cut to f32 rounding to odd (cut
/// toward zero, then the last bit set if anything was cut), which keeps
/// the one rounding to the half type correct (f32 has more than the half
/// types' precision plus two bits), as a direct f64-to-half conversion is
/// not available on sm_80.
fn cast_entry_text(from: DType, to: DType, out: &mut String) {
    let _ = writeln!(
        out,
        ".visible .entry {}(\n\t.param .u64 a,\n\t.param .u64 dst,\n\t.param .u64 n\n)\n{{",
        cast_entry(from, to)
    );
    out.push_str(
        "\t.reg .pred %p;\n\t.reg .b16 %h;\n\t.reg .b32 %t, %t2, %r0;\n\t.reg .b64 %i, %off, %addr, %base, %n, %l0;\n\t.reg .f32 %f0;\n\t.reg .f64 %d0, %d1;\n\tld.param.u64 %n, [n];\n",
    );
    prologue(out);
    let _ = writeln!(
        out,
        "\tmul.lo.u64 %off, %i, {};\n\tld.param.u64 %base, [a];\n\tcvta.to.global.u64 %base, %base;\n\tadd.u64 %addr, %base, %off;",
        from.size_bytes()
    );
    let load = match from {
        DType::I32 => "\tld.global.s32 %r0, [%addr];\n\tcvt.s64.s32 %l0, %r0;\n",
        DType::U32 => "\tld.global.u32 %r0, [%addr];\n\tcvt.u64.u32 %l0, %r0;\n",
        DType::U8 => "\tld.global.u8 %r0, [%addr];\n\tcvt.u64.u32 %l0, %r0;\n",
        DType::I64 | DType::U64 => "\tld.global.u64 %l0, [%addr];\n",
        DType::F32 => "\tld.global.f32 %f0, [%addr];\n\tcvt.f64.f32 %d0, %f0;\n",
        DType::F16 => "\tld.global.b16 %h, [%addr];\n\tcvt.f32.f16 %f0, %h;\n\tcvt.f64.f32 %d0, %f0;\n",
        DType::BF16 => "\tld.global.b16 %h, [%addr];\n\tcvt.u32.u16 %r0, %h;\n\tshl.b32 %r0, %r0, 16;\n\tmov.b32 %f0, %r0;\n\tcvt.f64.f32 %d0, %f0;\n",
        DType::F64 => "\tld.global.f64 %d0, [%addr];\n",
        // Not in DTYPES: no entry is written (see `cast_pairs`).
        DType::Bool | DType::I8 | DType::I16 | DType::U16 => return,
    };
    out.push_str(load);
    let _ = writeln!(
        out,
        "\tmul.lo.u64 %off, %i, {};\n\tld.param.u64 %base, [dst];\n\tcvta.to.global.u64 %base, %base;\n\tadd.u64 %addr, %base, %off;",
        to.size_bytes()
    );
    // f64 to f32 rounding to odd, for the half types.
    let to_odd_f32 = "\tcvt.rz.f32.f64 %f0, %d0;\n\tcvt.f64.f32 %d1, %f0;\n\tsetp.neu.f64 %p, %d1, %d0;\n\tmov.b32 %r0, %f0;\n\t@%p or.b32 %r0, %r0, 1;\n\tmov.b32 %f0, %r0;\n";
    match to {
        DType::I64 | DType::U64 => out.push_str("\tst.global.u64 [%addr], %l0;\n"),
        DType::I32 | DType::U32 => {
            out.push_str("\tcvt.u32.u64 %r0, %l0;\n\tst.global.u32 [%addr], %r0;\n")
        }
        DType::U8 => out.push_str("\tcvt.u32.u64 %r0, %l0;\n\tst.global.u8 [%addr], %r0;\n"),
        DType::F64 => out.push_str("\tst.global.f64 [%addr], %d0;\n"),
        DType::F32 => out.push_str("\tcvt.rn.f32.f64 %f0, %d0;\n\tst.global.f32 [%addr], %f0;\n"),
        DType::F16 => {
            out.push_str(to_odd_f32);
            out.push_str("\tcvt.rn.f16.f32 %h, %f0;\n\tst.global.b16 [%addr], %h;\n");
        }
        DType::BF16 => {
            out.push_str(to_odd_f32);
            out.push_str("\tcvt.rn.bf16.f32 %h, %f0;\n\tst.global.b16 [%addr], %h;\n");
        }
        DType::Bool | DType::I8 | DType::I16 | DType::U16 => {}
    }
    out.push_str("DONE:\n\tret;\n}\n\n");
}

/// Every entry the module has: `fold_<dt>` and `div_<dt>` per dtype, and
/// `cast_<from>_<to>` per pair of [`cast_pairs`].
pub fn entries() -> Vec<String> {
    let mut names = Vec::new();
    for dt in DTYPES {
        names.push(format!("fold_{}", dt.as_str()));
        names.push(format!("div_{}", dt.as_str()));
    }
    names.extend(cast_pairs().into_iter().map(|(f, t)| cast_entry(f, t)));
    names
}

/// The whole PTX module, for `sm_80` and newer.
pub fn module() -> String {
    let mut out = String::from(
        "// Generated by fuel-graph-ext/runtime/src/backend/cuda/ptx.rs\n.version 7.8\n.target sm_80\n.address_size 64\n\n",
    );
    for dt in DTYPES {
        fold_entry(dt, &mut out);
        div_entry(dt, &mut out);
    }
    for (from, to) in cast_pairs() {
        cast_entry_text(from, to, &mut out);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn module_has_every_entry() {
        let m = module();
        let names = entries();
        assert_eq!(names.len(), 2 * DTYPES.len() + cast_pairs().len());
        for name in names {
            assert!(m.contains(&format!(".entry {name}(")), "{name}");
        }
        assert_eq!(m.matches(".entry ").count(), entries().len());
        // Balanced braces: a cheap structural check; ptxas does the real one.
        assert_eq!(m.matches('{').count(), m.matches('}').count());
    }

    /// Writes the module for `scripts/check-ptx.sh` when `FUEL_PTX_DUMP_DIR` is set.
    #[test]
    fn dump_for_ptxas() {
        if let Ok(dir) = std::env::var("FUEL_PTX_DUMP_DIR") {
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(format!("{dir}/fuel_kernels.ptx"), module()).unwrap();
        }
    }
}
