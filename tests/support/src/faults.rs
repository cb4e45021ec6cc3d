//! Fault injection at every point a run passes: each injected copy, kernel
//! or allocation failure must end the run with its exact message, leave
//! every allocator at zero, and leave the executable able to run again.
//! The points are the executor's own count
//! (`Executable::planned_events`), so a count that is off fails here too:
//! a point inside the count that does not fire, or one past it that does.

use crate::memory::assert_no_leaks;
use crate::run::assert_close;
use fuel_graph_ext::interp::{deterministic_inputs, interpret};
use fuel_graph_ext::{text, DType, Device, Graph};
use fuel_runtime::exec::FaultPoint;

/// The tail of every injected fault's message.
const TAIL: &str = "(armed by `Executable::inject_fault`; the next run is unaffected)";

/// The message an injected fault must give, if `msg` is one for `point`
/// on one of `devices`: the exact text with the device, op and byte count
/// filled in from the candidates.
pub fn expected_fault_message(point: FaultPoint, msg: &str, devices: &[Device]) -> Option<String> {
    devices.iter().find_map(|d| {
        let want = match point {
            FaultPoint::Copy { .. } => format!("injected fault in `copy` on {d} {TAIL}"),
            FaultPoint::Kernel { .. } => ["add", "mul", "max", "min", "div", "cast", "slice", "concat"]
                .iter()
                .map(|op| format!("injected fault in `{op}` on {d} {TAIL}"))
                .find(|w| w == msg)?,
            FaultPoint::Wait { .. } => format!("{d} was lost during `dispatch`: vkWaitForFences failed: ERROR_DEVICE_LOST (injected by `Executable::inject_fault`); reopen the device (compile again)"),
            FaultPoint::Alloc { .. } => {
                let bytes: usize = msg
                    .strip_prefix(&format!("out of memory on {d}: cannot allocate "))?
                    .split(' ')
                    .next()?
                    .parse()
                    .ok()?;
                format!(
                    "out of memory on {d}: cannot allocate {bytes} bytes (injected allocation failure)"
                )
            }
        };
        (want == msg).then_some(want)
    })
}

/// Every copy, kernel and allocation fault point one run of `exe` passes,
/// as `Executable::planned_events` counts them.
pub fn fault_points(exe: &fuel_runtime::exec::Executable) -> Vec<FaultPoint> {
    let c = exe
        .planned_events()
        .expect("a graph without comm.* steps has planned events");
    (0..c.copies)
        .map(|nth| FaultPoint::Copy { nth })
        .chain((0..c.kernels).map(|nth| FaultPoint::Kernel { nth }))
        .chain((0..c.allocs).map(|nth| FaultPoint::Alloc { nth }))
        .collect()
}

/// Injects every copy, kernel and allocation fault one run of `lowered`
/// passes (as `Executable::planned_events` counts them), one per run. Each
/// run must fail with the exact injected-fault message and leave every
/// allocator at zero, and the next run must succeed with the interpreter's
/// results; a fault one past the last of each kind must not fire. Returns
/// how many faults were checked.
pub fn fail_at_every_point(lowered: &Graph, devices: &[Device]) -> usize {
    let exe = crate::run::compile_env(lowered, devices).unwrap_or_else(|e| panic!("{e}"));
    let inputs = deterministic_inputs(lowered);
    let want = interpret(lowered, &inputs).unwrap();
    let c = exe
        .planned_events()
        .expect("a graph without comm.* steps has planned events");
    let mut checked = 0;
    for point in fault_points(&exe) {
        exe.inject_fault(point);
        let e = match exe.run_host(&inputs) {
            Ok(_) => panic!("{point:?}: the run succeeded"),
            Err(e) => e.to_string(),
        };
        assert!(
            expected_fault_message(point, &e, devices).is_some(),
            "{point:?}: unexpected message: {e}"
        );
        assert_no_leaks(&exe);
        let got = exe
            .run_host(&inputs)
            .unwrap_or_else(|e| panic!("the run after {point:?} failed: {e}"));
        assert_close(&got, &want, &format!("the run after {point:?}"));
        assert_no_leaks(&exe);
        checked += 1;
    }
    // One more fault of each kind past the last event: nothing fires.
    for past in [
        FaultPoint::Copy { nth: c.copies },
        FaultPoint::Kernel { nth: c.kernels },
        FaultPoint::Alloc { nth: c.allocs },
    ] {
        exe.inject_fault(past);
        let got = exe
            .run_host(&inputs)
            .unwrap_or_else(|e| panic!("{past:?} is past the last event, but: {e}"));
        assert_close(&got, &want, &format!("{past:?}"));
    }
    checked
}

/// Compiles a graph of one input of sixteen `dtype` elements on cpu:0,
/// copied to `device` and folded with itself by `op` there (allocation
/// order fixed: the input, then the copy's buffer), injects a copy, a
/// kernel and an allocation fault in turn, and checks each run's exact
/// message, that nothing leaked, and that the next run is correct.
pub fn assert_exact_fault_messages(dtype: DType, device: Device, op: &str) {
    let ty = format!("{dtype}[16]");
    let g = text::parse(&format!(
        "graph @one {{
  %0 = input \"a\" @cpu:0 : {ty}
  %1 = copy %0 -> {device} : {ty}
  %2 = {op} %1, %1 @{device} : {ty}
  return %2
}}
"
    ))
    .unwrap();
    let bytes = 16 * dtype.size_bytes();
    let exe = crate::run::compile_env(&g, &[]).unwrap_or_else(|e| panic!("{e}"));
    let inputs = deterministic_inputs(&g);
    let want = interpret(&g, &inputs).unwrap();
    for (point, msg) in [
        (
            FaultPoint::Copy { nth: 0 },
            format!("injected fault in `copy` on {device} {TAIL}"),
        ),
        (
            FaultPoint::Kernel { nth: 0 },
            format!("injected fault in `{op}` on {device} {TAIL}"),
        ),
        (
            FaultPoint::Alloc { nth: 1 },
            format!(
                "out of memory on {device}: cannot allocate {bytes} bytes (injected allocation failure)"
            ),
        ),
    ] {
        exe.inject_fault(point);
        let e = exe.run_host(&inputs).err().map(|e| e.to_string());
        assert_eq!(e.as_deref(), Some(msg.as_str()), "{point:?}");
        assert_no_leaks(&exe);
        assert_close(&exe.run_host(&inputs).unwrap(), &want, "after the fault");
        assert_no_leaks(&exe);
    }
}
