//! The op table's unit tests: every row round-trips through its parts,
//! and mnemonics split into row and variant.

use super::*;

/// Answers every request with a distinct value and records the order
/// of the requests.
struct Probe {
    asked: Vec<String>,
    next: u64,
    /// Each attribute handed out, with its value.
    given: Vec<(String, AttrValue)>,
}

impl Fields for Probe {
    fn reduce_op(&mut self) -> Result<ReduceOp, FieldError> {
        self.asked.push("variant".into());
        Ok(ReduceOp::Max)
    }
    fn attr(&mut self, key: &'static str) -> Result<u64, FieldError> {
        self.asked.push(key.into());
        self.next += 1;
        self.given.push((key.into(), AttrValue::Int(self.next)));
        Ok(self.next)
    }
    fn dtype_attr(&mut self, key: &'static str) -> Result<DType, FieldError> {
        self.asked.push(key.into());
        self.next += 1;
        let d = DType::ALL[self.next as usize % DType::ALL.len()];
        self.given.push((key.into(), AttrValue::DType(d)));
        Ok(d)
    }
    fn at(&mut self) -> Result<Device, FieldError> {
        self.asked.push("@".into());
        Ok(Device::cuda(3))
    }
    fn list(&mut self, key: &'static str) -> Result<Option<Vec<u64>>, FieldError> {
        // Not recorded: list attributes are checked below, by key.
        Ok(def_lists_probe(key))
    }
    fn opt_attr(&mut self, key: &'static str) -> Result<Option<u64>, FieldError> {
        // Not recorded: optional attributes are checked below, by key.
        Ok(Some(key.len() as u64 + 40))
    }
    fn to(&mut self) -> Result<Device, FieldError> {
        self.asked.push("->".into());
        Ok(Device::vulkan(2))
    }
    fn to_list(&mut self) -> Result<DeviceList, FieldError> {
        self.asked.push("->[]".into());
        Ok([Device::cpu(1), Device::cuda(0)].into_iter().collect())
    }
    fn name(&mut self) -> String {
        "x".into()
    }
    fn result_type(&mut self) -> TensorType {
        TensorType::new(DType::F32, &[2])
    }
    fn free_attrs(&mut self) -> Result<FreeAttrs, FieldError> {
        // Not recorded: they print from the op itself.
        Ok((Vec::new(), None))
    }
}

/// What the probe answers for a list attribute.
fn def_lists_probe(key: &str) -> Option<Vec<u64>> {
    Some(vec![key.len() as u64, 0, 7])
}

/// Every row builds an op whose parts are that row, with the values
/// `build` read; a row asks for its variant first, each of its
/// attributes once, and its placement last.
#[test]
fn every_row_round_trips_through_its_parts() {
    for def in OPS {
        let mut probe = Probe {
            asked: Vec::new(),
            next: 0,
            given: Vec::new(),
        };
        let op = (def.build)(&mut probe).unwrap();
        let parts = op.parts();
        let name = def.mnemonic;
        assert!(std::ptr::eq(op.def(), *def), "{name}");
        assert!(std::ptr::eq(parts.def, *def), "{name}");
        assert_eq!(parts.variant.is_some(), def.reduce_variant, "{name}");
        let mut asked = probe.asked.clone();
        if def.reduce_variant {
            assert_eq!(asked.remove(0), "variant", "{name}: variant first");
        }
        let placement = match def.placement {
            Placement::At => Some("@"),
            Placement::To => Some("->"),
            Placement::ToList => Some("->[]"),
            Placement::Operands => None,
        };
        if let Some(p) = placement {
            assert_eq!(asked.pop().as_deref(), Some(p), "{name}: placement last");
        }
        // What is left is each attribute once, with what it was given.
        assert_eq!(
            asked,
            probe
                .given
                .iter()
                .map(|(k, _)| k.clone())
                .collect::<Vec<_>>(),
            "{name}"
        );
        let mut read: Vec<(&str, AttrValue)> =
            probe.given.iter().map(|(k, v)| (k.as_str(), *v)).collect();
        read.sort_unstable_by_key(|(k, _)| *k);
        let mut sorted: Vec<&str> = def.attrs.to_vec();
        sorted.sort_unstable();
        assert_eq!(sorted, def.attrs, "{name}: attrs must be sorted");
        let printed: Vec<(&str, AttrValue)> = def
            .attrs
            .iter()
            .copied()
            .zip(parts.attrs.iter().copied())
            .collect();
        assert_eq!(printed, read, "{name}");
        let lists: Vec<(&str, Vec<u64>)> = def
            .lists
            .iter()
            .map(|k| (*k, def_lists_probe(k).unwrap_or_default()))
            .collect();
        assert_eq!(parts.lists, lists, "{name}: list attributes");
        let opt: Vec<(&str, u64)> = def
            .opt_attrs
            .iter()
            .map(|k| (*k, k.len() as u64 + 40))
            .collect();
        assert_eq!(parts.opt_attrs, opt, "{name}: optional attributes");
        assert!(
            def.lists
                .iter()
                .all(|l| def.opt_attrs.iter().all(|a| a < l)),
            "{name}: lists print after the optional integer attributes"
        );
        assert!(
            def.lists.iter().all(|l| def.attrs.iter().all(|a| a < l)),
            "{name}: lists print after the integer attributes"
        );
        assert_eq!(
            lookup(def.mnemonic).map(|(d, _)| d.mnemonic),
            Some(def.mnemonic)
        );
    }
}

#[test]
fn lookup_splits_the_variant() {
    let find = |m: &str| lookup(m).map(|(d, v)| (d.mnemonic, v.map(str::to_string)));
    assert_eq!(
        find("all_reduce.sum"),
        Some(("all_reduce", Some("sum".into())))
    );
    assert_eq!(find("all_reduce"), Some(("all_reduce", None)));
    assert_eq!(
        find("reduce_scatter.max"),
        Some(("reduce_scatter", Some("max".into())))
    );
    assert_eq!(
        find("comm.all_reduce.sum.x"),
        Some(("comm.all_reduce", Some("sum.x".into())))
    );
    assert_eq!(find("comm.barrier"), Some(("comm.barrier", None)));
    for unknown in [
        "add.sum",
        "comm",
        "comm.barrier.x",
        "comm.foo",
        "copy_x",
        "input.x",
    ] {
        assert_eq!(find(unknown), None, "{unknown}");
    }
}
