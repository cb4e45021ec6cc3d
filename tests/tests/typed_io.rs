//! Typed data in and out of a run, for every dtype: tensors made from
//! `&[T]` and a shape, results read back as `Vec<T>` and found by the
//! handle or the name they were recorded with; a wrong `T`, an unknown or
//! missing input name, and lookups that cannot succeed are errors.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use fuel_graph_ext::half::{bf16, f16};
use fuel_graph_ext::{Device, Element, LazyGraph, Tensor, TensorType};
use fuel_runtime::{exec, ExecError};
use std::collections::BTreeMap;

/// `data` goes through a run as an input on cpu:0 copied to cpu:1, and
/// comes back equal (bit for bit: the element type's own `PartialEq` is
/// not used for floats, whose NaN would not equal itself) by handle and by
/// name. Reading it as `W` is an error naming both types.
fn round_trip<T: Element, W: Element>(data: &[T]) {
    let graph = LazyGraph::new("typed");
    let shape = [2, data.len() / 2];
    let x = graph.input("x", Device::cpu(0), TensorType::new(T::DTYPE, &shape));
    let y = x.copy_to(Device::cpu(1)).unwrap();
    graph.output_named("y", &y).unwrap();
    graph.output(&x).unwrap();
    let exe = exec::compile(&graph.snapshot(), &[]).unwrap();
    let inputs = BTreeMap::from([("x".to_string(), Tensor::from_slice(&shape, data).unwrap())]);
    let out = graph.results(exe.run(&inputs).unwrap()).unwrap();
    let bits = |v: &[T]| format!("{v:?}");
    assert_eq!(bits(&out.vec::<T>(&y).unwrap()), bits(data), "{}", T::DTYPE);
    assert_eq!(bits(&out.vec::<T>(&x).unwrap()), bits(data), "{}", T::DTYPE);
    assert_eq!(
        bits(&out.named("y").unwrap().to_vec::<T>().unwrap()),
        bits(data)
    );
    assert_eq!(
        out.get(&y).unwrap().ty(),
        &TensorType::new(T::DTYPE, &shape)
    );
    let wrong = out.vec::<W>(&y).unwrap_err().to_string();
    assert_eq!(
        wrong,
        format!(
            "the tensor is {}, whose elements are {t}, but it was used as {w}; use Vec<{t}> or &[{t}]",
            TensorType::new(T::DTYPE, &shape),
            t = T::RUST_NAME,
            w = W::RUST_NAME
        )
    );
}

#[test]
fn every_dtype_round_trips_and_a_wrong_type_is_refused() {
    round_trip::<f32, f64>(&[1.5, -0.0, f32::MAX, f32::from_bits(1)]);
    round_trip::<f64, f32>(&[f64::MIN_POSITIVE / 8.0, -1e300]);
    round_trip::<f16, bf16>(&[f16::MAX, f16::from_bits(1), f16::NEG_INFINITY, f16::ONE]);
    round_trip::<bf16, f16>(&[bf16::MIN, bf16::from_bits(1)]);
    round_trip::<i8, u8>(&[i8::MIN, i8::MAX]);
    round_trip::<i16, u16>(&[i16::MIN, i16::MAX]);
    round_trip::<i32, f32>(&[i32::MIN, i32::MAX, 0, -7]);
    round_trip::<i64, u64>(&[i64::MIN, (1 << 53) + 1]);
    round_trip::<u8, i8>(&[0, u8::MAX]);
    round_trip::<u16, i16>(&[u16::MAX, 1]);
    round_trip::<u32, i32>(&[u32::MAX, 7]);
    round_trip::<u64, i64>(&[u64::MAX, (1 << 53) + 1]);
    round_trip::<bool, u8>(&[true, false]);
}

/// A graph `a + b` on cpu:0, its handles and an executable.
fn sum() -> (LazyGraph, fuel_graph_ext::LazyTensor, exec::Executable) {
    let graph = LazyGraph::new("sum");
    let ty = TensorType::new(fuel_graph_ext::DType::I32, &[2]);
    let a = graph.input("a", Device::cpu(0), ty.clone());
    let b = graph.input("b", Device::cpu(0), ty);
    let s = a.add(&b).unwrap();
    graph.output_named("s", &s).unwrap();
    let exe = exec::compile(&graph.snapshot(), &[]).unwrap();
    (graph, s, exe)
}

fn ints(v: &[i32]) -> Tensor {
    Tensor::from_slice(&[v.len()], v).unwrap()
}

#[test]
fn input_names_must_be_the_graphs() {
    let (graph, s, exe) = sum();
    let mut inputs = BTreeMap::from([
        ("a".to_string(), ints(&[1, 2])),
        ("b".to_string(), ints(&[10, 20])),
    ]);
    let out = graph.results(exe.run(&inputs).unwrap()).unwrap();
    assert_eq!(out.vec::<i32>(&s).unwrap(), [11, 22]);
    // A misspelt extra name is refused, not ignored.
    inputs.insert("B".to_string(), ints(&[0, 0]));
    assert_eq!(
        exe.run(&inputs).unwrap_err().to_string(),
        "the graph has no input named \"B\" (its inputs: \"a\", \"b\"); fix the name, or leave that tensor out"
    );
    inputs.remove("b");
    assert!(matches!(exe.run(&inputs), Err(ExecError::MissingInput(n)) if n == "b"));
}

#[test]
fn lookups_that_cannot_succeed_are_errors() {
    let (graph, s, exe) = sum();
    let inputs = BTreeMap::from([
        ("a".to_string(), ints(&[1, 2])),
        ("b".to_string(), ints(&[3, 4])),
    ]);
    let results = exe.run(&inputs).unwrap();
    let out = graph.results(results.clone()).unwrap();
    assert_eq!(out.named("s").unwrap().to_vec::<i32>().unwrap(), [4, 6]);
    assert_eq!(
        out.named("S").unwrap_err().to_string(),
        "no output is named \"S\" (named outputs: \"s\"); name it with graph.output_named, or fix the name"
    );
    let twice = s.add(&s).unwrap();
    assert_eq!(
        out.get(&twice).unwrap_err().to_string(),
        "the tensor (i32[2] on cpu:0) was not recorded as an output; call graph.output(&t) on it before taking the snapshot"
    );
    let other = LazyGraph::new("other");
    let o = other.input(
        "a",
        Device::cpu(0),
        TensorType::new(fuel_graph_ext::DType::I32, &[2]),
    );
    assert!(matches!(
        out.get(&o),
        Err(fuel_graph_ext::OutputError::ResultOfAnotherGraph)
    ));
    // An output recorded after the snapshot: the counts differ.
    graph.output(&twice).unwrap();
    assert!(matches!(
        graph.results(results),
        Err(fuel_graph_ext::OutputError::ResultCount {
            recorded: 2,
            given: 1
        })
    ));
    assert_eq!(
        graph.output_named("s", &twice).unwrap_err().to_string(),
        "an output is already named \"s\"; give each output its own name"
    );
}
