//! Golden-graph tests: every `tests/golden/**/<case>.fir`, text, DOT and meaning.

#[test]
fn golden_cases() {
    match fuel_test_support::check_dir(&fuel_test_support::golden_dir()) {
        Ok(n) => assert!(
            n > 0,
            "no golden cases found under {}",
            fuel_test_support::golden_dir().display()
        ),
        Err(report) => panic!("{report}"),
    }
}

/// Every committed `.dot` must render with graphviz.
#[test]
fn golden_dots_render() {
    if std::process::Command::new("dot")
        .arg("-V")
        .output()
        .is_err()
    {
        println!("SKIP: graphviz `dot` is not installed (apt-get install graphviz)");
        return;
    }
    let mut checked = 0;
    for case in fuel_test_support::cases(&fuel_test_support::golden_dir()) {
        let dot = case.with_extension("out.dot");
        if !dot.exists() {
            continue;
        }
        let out = std::process::Command::new("dot")
            .arg("-Tsvg")
            .arg(&dot)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{} does not render: {}",
            dot.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            out.stdout.starts_with(b"<?xml"),
            "{} gave no SVG",
            dot.display()
        );
        checked += 1;
    }
    assert!(checked > 0, "no .out.dot files to render");
}

/// The legalising passes reach a fixed point in one run: running each golden
/// input through them twice prints the same graph as running them once.
#[test]
fn legalising_passes_are_idempotent() {
    let once = "insert-cross-device-copies,split-cross-vendor-copies";
    let twice = format!("{once},{once}");
    let mut checked = 0;
    for case in fuel_test_support::cases(&fuel_test_support::golden_dir()) {
        let src = std::fs::read_to_string(&case).unwrap();
        let Ok(g) = fuel_graph_ext::text::parse(&src) else {
            continue;
        };
        let run = |p: &str| {
            let mut g = g.clone();
            fuel_collective::run_pipeline(&mut g, p, Default::default(), Default::default())
                .map(|_| fuel_graph_ext::text::print(&g))
        };
        let (Ok(a), Ok(b)) = (run(once), run(&twice)) else {
            continue;
        };
        assert_eq!(a, b, "{} is not a fixed point", case.display());
        checked += 1;
    }
    assert!(checked >= 4, "only {checked} cases were checked");
}
