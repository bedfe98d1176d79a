//! Every metric an alert rule we ship reads is one our processes expose: the families of
//! `d8 controller` (release engine, module manager, module runtime, registry controller), the
//! registry agent and the registry storage replicas, against the rule files of the `deckhouse`
//! and `registry` modules. A rule that reads a metric nothing emits fails here with its name.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The rule files the chart ships.
const RULE_FILES: [&str; 2] = [
    "crates/module-controller/monitoring/rules.yaml",
    "crates/registry-controller/monitoring/rules.yaml",
];

/// PromQL words that are not metric names when not followed by `(` (aggregations are followed
/// by `by`/`without` then).
const KEYWORDS: [&str; 27] = [
    "and",
    "or",
    "unless",
    "bool",
    "offset",
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
    "inf",
    "nan",
    "atan2",
    "sum",
    "min",
    "max",
    "avg",
    "group",
    "stddev",
    "stdvar",
    "count",
    "count_values",
    "bottomk",
    "topk",
    "quantile",
    "limitk",
];
/// Modifiers whose parenthesised list holds label names, not series.
const LABEL_LISTS: [&str; 6] = [
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
];

/// The metric names a PromQL expression reads (selectors' names; not functions, aggregations,
/// keywords, label names, label values or durations).
fn metrics_read(expr: &str) -> BTreeSet<String> {
    let chars: Vec<char> = expr.chars().collect();
    let mut names = BTreeSet::new();
    let mut i = 0;
    let next_non_space = |mut j: usize| {
        while j < chars.len() && chars[j].is_whitespace() {
            j += 1;
        }
        (j, chars.get(j).copied())
    };
    let skip_to = |mut j: usize, open: char, close: char| {
        let mut depth = 0;
        let mut quoted = false;
        while j < chars.len() {
            let c = chars[j];
            if quoted {
                if c == '\\' {
                    j += 1;
                } else if c == '"' {
                    quoted = false;
                }
            } else if c == '"' {
                quoted = true;
            } else if c == open {
                depth += 1;
            } else if c == close {
                depth -= 1;
                if depth == 0 {
                    return j + 1;
                }
            }
            j += 1;
        }
        j
    };
    while i < chars.len() {
        let c = chars[i];
        if c == '{' {
            i = skip_to(i, '{', '}');
        } else if c == '[' {
            i = skip_to(i, '[', ']');
        } else if c == '"' || c == '\'' {
            let quote = c;
            i += 1;
            while i < chars.len() && chars[i] != quote {
                i += if chars[i] == '\\' { 2 } else { 1 };
            }
            i += 1;
        } else if c.is_ascii_digit() || c == '.' {
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '.') {
                i += 1;
            }
        } else if c.is_ascii_alphabetic() || c == '_' || c == ':' {
            let start = i;
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || "_:".contains(chars[i])) {
                i += 1;
            }
            let word: String = chars[start..i].iter().collect();
            let (j, after) = next_non_space(i);
            if after == Some('(') {
                if LABEL_LISTS.contains(&word.as_str()) {
                    i = skip_to(j, '(', ')');
                }
            } else if !KEYWORDS.contains(&word.as_str()) {
                names.insert(word);
            }
        } else {
            i += 1;
        }
    }
    names
}

#[test]
fn metric_names_of_promql_expressions() {
    let table: [(&str, &[&str]); 6] = [
        ("max by (module) (d8_a{x=\"y\"}) == 1", &["d8_a"]),
        (
            "sum by (name, module) (a{manualApproval=\"true\"} * on(module) group_left sum by (module) (b{enabled=\"true\"}))",
            &["a", "b"],
        ),
        (
            "max without (container, job) (increase(deckhouse_live_ticks[2m])) < 1",
            &["deckhouse_live_ticks"],
        ),
        (
            "x:rec:with_head{module=\"\"} and on(pod) group_left(module, hook) y offset 5m",
            &["x:rec:with_head", "y"],
        ),
        (
            "absent(up{job=\"a\", scrape_source=\"self\"}) == 1",
            &["up"],
        ),
        ("rate(a_total[5m]) > 0.5e3 or vector(0)", &["a_total"]),
    ];
    for (expr, expected) in table {
        let got: Vec<String> = metrics_read(expr).into_iter().collect();
        assert_eq!(got, expected, "{expr}");
    }
}

/// The series names a Prometheus text exposition holds: its samples, and for families without
/// a sample yet the names their type gives them.
fn exposed(text: &str) -> BTreeSet<String> {
    let samples: BTreeSet<String> = text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .filter_map(|l| l.split(['{', ' ']).next())
        .map(str::to_owned)
        .collect();
    let mut names = samples.clone();
    for line in text.lines() {
        let Some(rest) = line.strip_prefix("# TYPE ") else {
            continue;
        };
        let mut parts = rest.split_whitespace();
        let (Some(name), Some(kind)) = (parts.next(), parts.next()) else {
            continue;
        };
        if samples
            .iter()
            .any(|s| s == name || s.starts_with(&format!("{name}_")))
        {
            continue;
        }
        match kind {
            "counter" => {
                names.insert(format!("{name}_total"));
            }
            "histogram" => {
                for suffix in ["_bucket", "_sum", "_count"] {
                    names.insert(format!("{name}{suffix}"));
                }
            }
            _ => {
                names.insert(name.to_owned());
            }
        }
    }
    names
}

fn encode(register: impl FnOnce(&mut prometheus_client::registry::Registry)) -> String {
    let mut registry = prometheus_client::registry::Registry::default();
    register(&mut registry);
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
    text
}

/// The names registered in `registry`, empty families included (prometheus-client leaves a
/// family without series out of the exposition, so the text alone misses them). Whether a
/// family is a counter is not visible there, so each name counts with and without `_total`.
fn registered(register: impl FnOnce(&mut prometheus_client::registry::Registry)) -> Vec<String> {
    let mut registry = prometheus_client::registry::Registry::default();
    register(&mut registry);
    names_in_debug(&format!("{registry:?}"))
}

/// The registered names in the `Debug` text of a registry (or of a struct holding one).
fn names_in_debug(debug: &str) -> Vec<String> {
    debug
        .split("Descriptor { name: \"")
        .skip(1)
        .filter_map(|rest| rest.split('"').next())
        .flat_map(|name| [name.to_owned(), format!("{name}_total")])
        .collect()
}

/// Every series name our processes expose.
fn emitted() -> BTreeSet<String> {
    let scratch = tempfile::tempdir().unwrap();
    let store = storage::store::Store::open(scratch.path(), Default::default()).unwrap();
    // d8 controller: the registry it serves /metrics from is built from these.
    let controller = [
        registered(|r| release_controller::metrics::Metrics::default().register(r)),
        registered(|r| module_controller::metrics::Metrics::default().register(r)),
        registered(|r| module_controller::runtime::worker::QueueMetrics::default().register(r)),
        registered(|r| registry_controller::metrics::Metrics::default().register(r)),
        registered(|r| package_controller::metrics::Metrics::default().register(r)),
    ];
    let replica = storage::metrics::StoreMetrics::new(store, "node-0");
    let texts = [
        // d8 controller (samples as served: deckhouse_live_ticks has no `_total`)
        encode(|r| module_controller::runtime::worker::QueueMetrics::default().register(r)),
        // d8 registry-agent
        agent::metrics::Metrics::default().encode(),
        // d8 registry (a storage replica)
        replica.encode(),
    ];
    // d8 registry: families a storage replica fills later (its last collection).
    let replica = names_in_debug(&format!("{replica:?}"));
    texts
        .iter()
        .flat_map(|t| exposed(t))
        .chain(controller.into_iter().flatten())
        .chain(replica)
        .collect()
}

#[test]
fn every_metric_a_shipped_rule_reads_is_one_our_processes_expose() {
    let emitted = emitted();
    let mut missing = Vec::new();
    let mut read = BTreeSet::new();
    for file in RULE_FILES {
        let text = std::fs::read_to_string(repo().join(file)).unwrap();
        let rules: serde_json::Value = serde_saphyr::from_str(&text).unwrap();
        let groups = rules["groups"].as_array().unwrap();
        // Recording rules produce series the alerts read.
        let recorded: BTreeSet<&str> = groups
            .iter()
            .flat_map(|g| g["rules"].as_array().unwrap())
            .filter_map(|r| r["record"].as_str())
            .collect();
        for rule in groups.iter().flat_map(|g| g["rules"].as_array().unwrap()) {
            let expr = rule["expr"].as_str().unwrap();
            let name = rule["alert"].as_str().or(rule["record"].as_str()).unwrap();
            for metric in metrics_read(expr) {
                if !emitted.contains(&metric) && !recorded.contains(metric.as_str()) {
                    missing.push(format!("{file}: {name} reads {metric}"));
                }
                read.insert(metric);
            }
        }
    }
    assert!(
        missing.is_empty(),
        "rules read metrics nothing exposes:\n{}\n\nexposed:\n{emitted:#?}",
        missing.join("\n")
    );
    // The catalogue itself: both sides are non-trivial.
    assert!(read.len() > 20, "{read:?}");
    assert!(emitted.contains("deckhouse_live_ticks"), "{emitted:?}");
    assert!(
        emitted.contains("deckhouse_mm_module_maintenance"),
        "{emitted:?}"
    );
}
