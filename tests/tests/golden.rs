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

/// Every committed `.dot` (outputs, and the inputs `--before` pins) must render with graphviz.
#[test]
fn golden_dots_render() {
    let dots = fuel_test_support::cases(&fuel_test_support::golden_dir())
        .into_iter()
        .flat_map(|case| {
            [
                case.with_extension("out.dot"),
                case.with_extension("in.dot"),
            ]
        });
    if let Some(checked) = fuel_test_support::golden::render_dots(dots) {
        assert!(checked > 0, "no .out.dot files to render");
    }
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

/// Goldens run with a fixed topology (the defaults, or the file their RUN
/// line names), never this machine's calibration cache: with a cache
/// present whose figures would change the notes, every golden still
/// matches.
#[test]
fn a_present_calibration_cache_changes_no_golden() {
    use fuel_graph_ext::topology::{LinkClass, LinkCost, Source};
    use fuel_graph_ext::{Device, Topology};
    use fuel_runtime::calibration;
    let dir = std::env::temp_dir().join(format!("fuel-golden-cache-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    // Safe here: nothing else in this test binary reads the variable.
    std::env::set_var("FUEL_CACHE_DIR", &dir);
    let mut odd = Topology::default();
    odd.set_link(LinkClass::HostHost, LinkCost::new(0.5, 300.0));
    odd.set_link(LinkClass::HostVulkan, LinkCost::new(0.25, 900.0));
    let cpus = [Device::cpu(0), Device::cpu(1)];
    calibration::write(&cpus, &odd, "2026-12-01").unwrap();
    let with_vulkan = [Device::cpu(0), Device::vulkan(0)];
    if calibration::cache_file(&with_vulkan).is_some() {
        calibration::write(&with_vulkan, &odd, "2026-12-01").unwrap();
    } else {
        fuel_test_support::skip_line(format_args!(
            "SKIP (part): no Vulkan device here, so only the CPU cache is present"
        ));
    }
    // The cache is there, and a library caller asking for it gets it...
    let cached = fuel_runtime::calibration::topology_for(&cpus).unwrap();
    assert!(matches!(cached.source(), Source::Calibrated { .. }));
    // ... and its figures would change a golden's note if a golden read it.
    let case = fuel_test_support::golden_dir().join("collectives/all-reduce/cpu0-cpu1-auto.fir");
    let src = std::fs::read_to_string(&case).unwrap();
    let mut g = fuel_graph_ext::text::parse(&src).unwrap();
    let mut pm = fuel_graph_ext::pass::PassManager::new(
        &fuel_collective::registry(),
        "lower-collectives",
        fuel_graph_ext::pass::PassContext {
            topology: std::sync::Arc::new(cached),
        },
        fuel_graph_ext::pass::DebugOptions::default(),
    )
    .unwrap();
    pm.run(&mut g).unwrap();
    let golden = std::fs::read_to_string(case.with_extension("out.fir")).unwrap();
    assert_ne!(fuel_graph_ext::text::print(&g), golden);
    // The goldens themselves do not move.
    let res = fuel_test_support::check_dir(&fuel_test_support::golden_dir());
    let _ = std::fs::remove_dir_all(&dir);
    if let Err(report) = res {
        panic!("with a calibration cache present:\n{report}");
    }
}
