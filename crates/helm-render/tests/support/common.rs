//! Shared by the conformance tables: a chart written as `(path, text)` rows, the `helm
//! template` flags the tables use, and our side of each row.

#![allow(dead_code)]

use helm_render::{RenderOptions, ValueSources, load_files, render};

/// `helm template t <chart> <args>` through our renderer: stdout, or stderr trimmed as the
/// oracle trims Helm's.
pub(crate) fn ours(files: &[(&str, &str)], values: &str, args: &[&str]) -> Result<String, String> {
    let mut all: Vec<(String, Vec<u8>)> = files
        .iter()
        .map(|(p, c)| ((*p).to_owned(), c.as_bytes().to_vec()))
        .collect();
    if !files.iter().any(|(p, _)| *p == "Chart.yaml") {
        all.push((
            "Chart.yaml".into(),
            b"apiVersion: v2\nname: t\nversion: 0.1.0\n".to_vec(),
        ));
    }
    all.push(("values.yaml".into(), values.as_bytes().to_vec()));
    all.sort();
    let mut opts = RenderOptions {
        release_name: "t".into(),
        ..RenderOptions::default()
    };
    let mut sources = ValueSources::default();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut val = || (*it.next().expect("flag value")).to_owned();
        match *a {
            "--set" => sources.set.push(val()),
            "--set-string" => sources.set_string.push(val()),
            "--set-json" => sources.set_json.push(val()),
            "--namespace" => opts.namespace = val(),
            "--kube-version" => {
                let v = val();
                opts.kube_version = Some(helm_render::KubeVersion::parse(&v).ok_or_else(|| {
                    format!("Error: invalid argument {v:?} for \"--kube-version\" flag: Invalid Semantic Version")
                })?);
            }
            "--api-versions" => opts.api_versions.push(val()),
            "--include-crds" => opts.include_crds = true,
            "--show-only" => opts.show_only.push(val()),
            other => panic!("flag {other} not handled by the test harness"),
        }
    }
    let trim = |s: String| {
        s.trim_end()
            .trim_end_matches("Use --debug flag to render out invalid YAML")
            .trim_end()
            .to_owned()
    };
    let (tx, rx) = std::sync::mpsc::channel();
    // The engine needs a deep stack; render as the CLI does, on a thread of its own.
    std::thread::Builder::new()
        .stack_size(helm_render::engine::RENDER_THREAD_STACK)
        .spawn(move || {
            let run = || -> Result<String, String> {
                let user = sources
                    .merge(&|p| Err(format!("open {p}: no such file or directory")))
                    .map_err(|e| format!("Error: {e}"))?;
                let all = helm_render::helmignore::filter_files(all)
                    .map_err(|e| format!("Error: {e}"))?;
                let chart = load_files(all).map_err(|e| format!("Error: {e}"))?;
                render(chart, &user, &opts).map_err(|e| trim(e.stderr()))
            };
            let _ = tx.send(run());
        })
        .expect("thread")
        .join()
        .expect("render thread");
    rx.recv().expect("result")
}

/// Compares a table's rows with what one side produced; `DUMP_TABLE=1` prints the results (on stderr)
/// as Rust literals.
pub(crate) fn check(wants: &[(&str, Result<&str, &str>)], got: &[Result<String, String>]) {
    if std::env::var_os("DUMP_TABLE").is_some() {
        for g in got {
            eprintln!("ROW {g:?}");
        }
    }
    let mut bad = Vec::new();
    for ((name, want), got) in wants.iter().zip(got) {
        let want = want.map(str::to_owned).map_err(str::to_owned);
        if *got != want {
            bad.push(format!("{name}:\n  want {want:?}\n   got {got:?}"));
        }
    }
    assert!(
        bad.is_empty(),
        "{} rows differ:\n{}",
        bad.len(),
        bad.join("\n")
    );
}
