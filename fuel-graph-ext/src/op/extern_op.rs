//! `extern`: the seam through which the host framework's own compute (a
//! matmul, attention, a fused kernel) lives in our graph.
//!
//! An extern op has a name (which kernel to call), operands, one result
//! whose type its line declares, a placement (`@dev`), free-form
//! attributes the kernel reads (integers, names, lists of integers) and
//! an optional cost hint, the seconds one call takes on its device. No
//! pass looks inside it: CSE never merges two, DCE never removes one, and
//! the collective passes move no data it did not ask for (its operands
//! must live on its device, as any op's). What it computes is what the
//! caller registers: a reference function for the interpreter
//! (`crate::interp::register_reference`) and a kernel per backend for the
//! executor (`fuel_runtime::kernels`). See `docs/extern.md`.
//!
//! ```text
//! %2 = extern "matmul" %0, %1 {cost=2.5e-5} @cpu:0 : f32[64, 32]
//! ```

use crate::device::Device;
use crate::dtype::TensorType;
use std::fmt;

/// One free-form attribute's value, as written.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum ExternAttr {
    /// `{k=7}`
    Int(u64),
    /// `{k=f32}`: any name.
    Name(String),
    /// `{k=[1, 2]}`
    List(Vec<u64>),
}

impl fmt::Display for ExternAttr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ExternAttr::Int(v) => write!(f, "{v}"),
            ExternAttr::Name(n) => f.write_str(n),
            ExternAttr::List(l) => {
                let each: Vec<String> = l.iter().map(u64::to_string).collect();
                write!(f, "[{}]", each.join(", "))
            }
        }
    }
}

/// A cost hint: the seconds one call takes, finite and not negative (the
/// parser and [`CostHint::new`] refuse anything else). Kept as its bits so
/// the op can be hashed and compared.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CostHint(u64);

impl CostHint {
    /// A hint of `secs` seconds, or why it is refused.
    pub fn new(secs: f64) -> Result<CostHint, String> {
        if !secs.is_finite() || secs < 0.0 {
            return Err(format!(
                "a cost hint is the seconds one call takes, finite and 0 or more, found `{secs}`; write e.g. `{{cost=2.5e-5}}` or leave it out"
            ));
        }
        // -0.0 and 0.0 are one hint.
        Ok(CostHint((secs + 0.0).to_bits()))
    }
    /// The seconds.
    pub fn secs(self) -> f64 {
        f64::from_bits(self.0)
    }
}

impl fmt::Display for CostHint {
    /// The shortest text that reads back as the same number.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.secs())
    }
}

/// A foreign op: the kernel `name` on `device`, over its operands, with
/// one result of type `ty`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ExternOp {
    /// The kernel's name (`matmul`), as registered.
    pub name: String,
    /// Where it runs; its operands live there too.
    pub device: Device,
    /// Its result's type, as its line declares it (no rule infers it).
    pub ty: TensorType,
    /// Free-form attributes for the kernel, sorted by key.
    pub attrs: Vec<(String, ExternAttr)>,
    /// What one call costs, where the caller knows.
    pub cost: Option<CostHint>,
}

impl ExternOp {
    /// An extern op with no attributes and no cost hint.
    pub fn new(name: &str, device: Device, ty: TensorType) -> ExternOp {
        ExternOp {
            name: name.to_string(),
            device,
            ty,
            attrs: Vec::new(),
            cost: None,
        }
    }

    /// The integer attribute `key`, if set.
    pub fn int(&self, key: &str) -> Option<u64> {
        self.attrs.iter().find_map(|(k, v)| match v {
            ExternAttr::Int(i) if k == key => Some(*i),
            _ => None,
        })
    }

    /// The `{...}` block as printed: attributes and the cost hint in key
    /// order; empty when there are none.
    pub fn attr_text(&self) -> String {
        let mut all: Vec<(String, String)> = self
            .attrs
            .iter()
            .map(|(k, v)| (k.clone(), v.to_string()))
            .collect();
        if let Some(c) = self.cost {
            all.push(("cost".to_string(), c.to_string()));
        }
        all.sort();
        if all.is_empty() {
            return String::new();
        }
        let each: Vec<String> = all.iter().map(|(k, v)| format!("{k}={v}")).collect();
        format!("{{{}}}", each.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cost_hints_refuse_what_is_not_a_duration() {
        for bad in [-1.0, f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
            let e = CostHint::new(bad).unwrap_err();
            assert!(e.contains("finite and 0 or more"), "{e}");
        }
        let c = CostHint::new(2.5e-5).unwrap();
        assert_eq!(c.to_string().parse::<f64>().unwrap(), 2.5e-5);
        assert_eq!(CostHint::new(-0.0).unwrap(), CostHint::new(0.0).unwrap());
    }
}
