//! The plan as text: one line per step, saying on which device it runs,
//! what work it does (a real copy, a shared buffer, an import, a view, a
//! kernel, ...), how many bytes its result holds, the slot it writes and
//! the slots it reads, and the node of the text IR it comes from. What
//! `fuel-opt --emit plan` prints, so a user sees what the executor will do
//! without running it. Deterministic for a given graph and capabilities.

use super::schedule::{Schedule, Work};
use super::work::{DeviceWork, Kernel};
use crate::dot::human_bytes;
use crate::graph::Graph;
use crate::op::ElementwiseOp;
use crate::text::Numbering;
use std::fmt::Write;

/// `plan` of `g` as text. `caps` is said in the header (for example
/// "assumed from the topology, no device opened").
pub fn print(plan: &Schedule, g: &Graph, caps: &str) -> String {
    let num = Numbering::new(g);
    let mut s = String::with_capacity(64 + 72 * plan.steps.len());
    let _ = writeln!(
        s,
        "plan @{}: {} steps, {} outputs; device capabilities {caps}",
        crate::text::excerpt::token(&g.name),
        plan.steps.len(),
        plan.outputs.len()
    );
    for (slot, st) in plan.steps.iter().enumerate() {
        let node = num
            .number(st.node)
            .map_or_else(|| "%?".to_string(), |n| format!("%{n}"));
        let reads = st
            .operands
            .iter()
            .map(|o| format!("s{o}"))
            .collect::<Vec<_>>()
            .join(", ");
        let _ = writeln!(
            s,
            "  s{slot:<4} {:<10} {:<34} {:>10}  {node:<6} {:<10} reads [{reads}]",
            st.device.to_string(),
            work(&st.work),
            human_bytes(st.ty.size_bytes()),
            st.mnemonic,
        );
    }
    let outs = plan
        .outputs
        .iter()
        .map(|o| format!("s{o}"))
        .collect::<Vec<_>>()
        .join(", ");
    let _ = writeln!(s, "  outputs [{outs}]");
    s
}

/// What a step does, in a few words.
fn work(w: &Work) -> String {
    match w {
        Work::Device(DeviceWork::Input { name, in_place }) => format!(
            "input \"{}\"{}",
            crate::text::excerpt::token(name),
            if *in_place { " read in place" } else { "" }
        ),
        Work::Device(DeviceWork::Copy { src, is_move }) => {
            format!("{} from {src}", if *is_move { "move" } else { "copy" })
        }
        Work::Device(DeviceWork::Kernel(k)) => match k {
            // A comparison of two operands, not a fold.
            Kernel::Fold {
                kind: ElementwiseOp::Eq,
            } => "eq".to_string(),
            Kernel::Fold { kind } => format!("fold {}", kind.as_str()),
            Kernel::Div { by } => format!("div by {by}"),
            Kernel::FoldDiv { kind, by } => format!("fold {}, div by {by}", kind.as_str()),
            Kernel::Cast { from } => format!("cast from {from}"),
            Kernel::Gather { regions } => format!("gather {} region(s)", regions.len()),
            Kernel::Extern { op, .. } => format!(
                "extern kernel \"{}\"",
                crate::text::excerpt::token(&op.name)
            ),
        },
        Work::Share { src } => format!("share {src}'s buffer"),
        Work::Defer { src } => format!("deferred from {src} into its reader"),
        Work::Import { src } => format!("import {src}'s buffer"),
        Work::View { offset, host_only } => {
            let host = if *host_only { ", read on the host" } else { "" };
            format!("view at +{offset} B{host}")
        }
        // The op itself is the line's mnemonic.
        Work::Comm { comm, ranks, .. } => format!("collective on comm {comm}, {ranks} ranks"),
        Work::Island { island, rank } => format!("driver island {island}, rank {rank}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::{Caps, Options};
    use crate::topology::Topology;

    /// Every kind of work prints, numbered as the text IR numbers nodes.
    #[test]
    fn prints_each_step_with_its_device_work_and_slot() {
        let src = "graph @g {
  %0 = input \"a\" @cpu:0 : f32[1024]
  %1 = copy %0 -> cpu:1 : f32[1024]
  %2 = add %1, %1 @cpu:1 : f32[1024]
  %3 = copy %2 -> vulkan:0 : f32[1024]
  %4 = slice %2 {axis=0, len=256, start=0} @cpu:1 : f32[256]
  %5 = mul %3, %3 @vulkan:0 : f32[1024]
  %6 = copy %2 -> vulkan:1 : f32[1024]
  return %4, %5, %6
}
";
        let g = crate::text::parse(src).unwrap();
        let options = Options::default();
        let mut plan = Schedule::new_with(&g, &options).unwrap();
        let topo = Topology::default();
        plan.fit_to_devices(&options, |d| Caps::assumed(d, &topo));
        let text = print(&plan, &g, "assumed");
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 9, "{text}");
        assert!(
            lines[0].starts_with("plan @g: 7 steps, 3 outputs"),
            "{text}"
        );
        assert!(lines[1].contains("cpu:0") && lines[1].contains("input \"a\""));
        assert!(lines[2].contains("share cpu:0's buffer"), "{text}");
        assert!(lines[3].contains("fold add") && lines[3].contains("4 KiB"));
        // Read by a kernel on vulkan:0: an import.
        assert!(lines[4].contains("import cpu:1's buffer"), "{text}");
        assert!(lines[5].contains("view at +0 B") && lines[5].contains("%4"));
        assert!(lines[6].contains("fold mul"), "{text}");
        // Only returned: the host buffer itself.
        assert!(
            lines[7].contains("vulkan:1") && lines[7].contains("share cpu:1's buffer"),
            "{text}"
        );
        assert!(lines[8].contains("outputs [s4, s5, s6]"), "{text}");
        // Without views or imports, the same graph copies.
        let mut plain = Schedule::new_with(&g, &options).unwrap();
        plain.fit_to_devices(&options, |_| Caps::default());
        let text = print(&plain, &g, "none");
        assert!(text.contains("copy from cpu:1") && text.contains("gather 1 region(s)"));
    }

    /// An `eq` is listed as the comparison it is, not as a fold.
    #[test]
    fn an_eq_is_listed_as_a_comparison() {
        let src = "graph @g {
  %0 = input \"a\" @cpu:0 : f32[4]
  %1 = input \"b\" @cpu:0 : f32[4]
  %2 = eq %0, %1 @cpu:0 : f32[4]
  return %2
}
";
        let g = crate::text::parse(src).unwrap();
        let plan = Schedule::new_with(&g, &Options::default()).unwrap();
        let text = print(&plan, &g, "none");
        let line = text.lines().find(|l| l.contains("%2")).unwrap_or("");
        assert!(line.contains(" eq") && !line.contains("fold"), "{text}");
    }

    /// An extern op is a step of its own, named by its kernel, and its
    /// kernel carries the operand types it is called with.
    #[test]
    fn an_extern_op_is_a_kernel_step_named_after_it() {
        let src = "graph @g {
  %0 = input \"a\" @cpu:0 : f32[2,3]
  %1 = input \"b\" @cpu:0 : f32[3,4]
  %2 = extern \"matmul\" %0, %1 {cost=1e-6} @cpu:0 : f32[2,4]
  return %2
}
";
        let g = crate::text::parse(src).unwrap();
        let plan = Schedule::new(&g).unwrap();
        let text = print(&plan, &g, "none");
        assert!(text.contains("extern kernel \"matmul\""), "{text}");
        let Some(super::super::work::Kernel::Extern { op, operands }) = plan.steps[2].work.kernel()
        else {
            panic!("step 2 is not an extern kernel: {text}");
        };
        assert_eq!(op.name, "matmul");
        let dims: Vec<Vec<usize>> = operands.iter().map(|t| t.shape.to_vec()).collect();
        assert_eq!(dims, [vec![2, 3], vec![3, 4]]);
    }

    /// The outline the cost model prices has the full plan's steps, work
    /// kinds and views, and no region list; and a tensor with a huge axis
    /// gets an outline without one allocated (the full plan would need a
    /// region per row).
    #[test]
    fn an_outline_is_the_plan_without_region_lists() {
        let src = "graph @g {
  %0 = input \"a\" @cpu:0 : f32[8,1024]
  %1 = slice %0 {axis=0, len=2, start=2} @cpu:0 : f32[2,1024]
  %2 = slice %0 {axis=1, len=4, start=0} @cpu:0 : f32[8,4]
  %3 = concat %1, %1 {axis=0} @cpu:0 : f32[4,1024]
  %4 = copy %3 -> vulkan:0 : f32[4,1024]
  return %2, %4
}
";
        let g = crate::text::parse(src).unwrap();
        let options = Options::default();
        let topo = Topology::default();
        let plan = |outline: bool| {
            let mut p = if outline {
                Schedule::outline(&g, &options).unwrap()
            } else {
                Schedule::new_with(&g, &options).unwrap()
            };
            p.fit_to_devices(&options, |d| Caps::assumed(d, &topo));
            p
        };
        let (full, outline) = (plan(false), plan(true));
        let kind = |w: &Work| match w {
            Work::Device(DeviceWork::Kernel(Kernel::Gather { .. })) => "gather".to_string(),
            other => format!("{other:?}"),
        };
        assert_eq!(full.steps.len(), outline.steps.len());
        for (a, b) in full.steps.iter().zip(&outline.steps) {
            assert_eq!(kind(&a.work), kind(&b.work), "{a:?} vs {b:?}");
        }
        assert!(matches!(outline.steps[1].work, Work::View { .. }));
        let lists = |p: &Schedule| {
            p.steps
                .iter()
                .filter_map(|s| s.work.kernel())
                .map(|k| match k {
                    Kernel::Gather { regions } => regions.len(),
                    _ => 0,
                })
                .sum::<usize>()
        };
        assert_eq!(lists(&outline), 0);
        assert!(lists(&full) >= 8, "a row per slice of %2, and the concat's");
        // 2^61 rows: the full plan's region list cannot be held; the
        // outline has none.
        let huge = "graph @h {
  %0 = input \"a\" @cpu:0 : u8[2305843009213693952,2]
  %1 = slice %0 {axis=1, len=1, start=0} @cpu:0 : u8[2305843009213693952,1]
  return %1
}
";
        let h = crate::text::parse(huge).unwrap();
        assert!(Schedule::outline(&h, &options).is_ok());
    }
}
