//! A small metric store that applies hooks' metric operations the way shell-operator's
//! metric storage does, and renders the Prometheus text format.
//!
//! Operations of one run that carry a group replace everything that group held before
//! (a group's series expire together); `expire` empties a group; ungrouped `set` / `add`
//! persist until overwritten.

use std::collections::BTreeMap;
use std::fmt::Write;

use crate::output::{MetricAction, MetricOperation};

type Labels = Vec<(String, String)>;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Gauge,
    Counter,
    Histogram,
}

#[derive(Debug, Clone, PartialEq)]
enum Sample {
    Value(f64),
    Histogram {
        buckets: Vec<(f64, u64)>,
        sum: f64,
        count: u64,
    },
}

#[derive(Debug, Clone, PartialEq)]
struct Series {
    kind: Kind,
    sample: Sample,
}

/// Metric series keyed by group (`None` for ungrouped), name and sorted labels.
#[derive(Debug, Clone, Default)]
pub struct MetricStore {
    series: BTreeMap<(Option<String>, String, Labels), Series>,
}

impl MetricStore {
    pub fn new() -> Self {
        Self::default()
    }

    /// Applies the operations of one hook run.
    pub fn apply(&mut self, ops: &[MetricOperation]) {
        let mut touched_groups: Vec<&str> = Vec::new();
        for op in ops {
            if let Some(g) = op.group.as_deref()
                && !touched_groups.contains(&g)
            {
                touched_groups.push(g);
                self.expire_group(g);
            }
        }
        for op in ops {
            let mut labels = op.labels.clone();
            labels.sort();
            let key = (op.group.clone(), op.name.clone(), labels);
            match &op.action {
                MetricAction::Expire => {
                    if let Some(g) = &op.group {
                        self.expire_group(g);
                    }
                }
                MetricAction::Set(v) => {
                    self.series.insert(
                        key,
                        Series {
                            kind: Kind::Gauge,
                            sample: Sample::Value(*v),
                        },
                    );
                }
                MetricAction::Add(v) => {
                    let entry = self.series.entry(key).or_insert(Series {
                        kind: Kind::Counter,
                        sample: Sample::Value(0.0),
                    });
                    if let Sample::Value(x) = &mut entry.sample {
                        *x += v;
                    }
                }
                MetricAction::Observe { value, buckets } => {
                    let entry = self.series.entry(key).or_insert_with(|| Series {
                        kind: Kind::Histogram,
                        sample: Sample::Histogram {
                            buckets: buckets.iter().map(|b| (*b, 0)).collect(),
                            sum: 0.0,
                            count: 0,
                        },
                    });
                    if let Sample::Histogram {
                        buckets,
                        sum,
                        count,
                    } = &mut entry.sample
                    {
                        for (le, n) in buckets.iter_mut() {
                            if value <= le {
                                *n += 1;
                            }
                        }
                        *sum += value;
                        *count += 1;
                    }
                }
            }
        }
    }

    /// Drops every series of `group`.
    pub fn expire_group(&mut self, group: &str) {
        self.series
            .retain(|(g, _, _), _| g.as_deref() != Some(group));
    }

    /// The number of series held.
    pub fn len(&self) -> usize {
        self.series.len()
    }

    pub fn is_empty(&self) -> bool {
        self.series.is_empty()
    }

    /// The value of a gauge or counter series, for tests and status.
    pub fn value(&self, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
        let mut want: Labels = labels
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        want.sort();
        self.series
            .iter()
            .find_map(|((_, n, l), s)| match &s.sample {
                Sample::Value(v) if n == name && *l == want => Some(*v),
                _ => None,
            })
    }

    /// The Prometheus text exposition of every series.
    pub fn render(&self) -> String {
        let mut by_name: BTreeMap<&str, Vec<(&Labels, &Series)>> = BTreeMap::new();
        for ((_, name, labels), s) in &self.series {
            by_name.entry(name).or_default().push((labels, s));
        }
        let mut out = String::new();
        for (name, list) in by_name {
            let kind = match list[0].1.kind {
                Kind::Gauge => "gauge",
                Kind::Counter => "counter",
                Kind::Histogram => "histogram",
            };
            let _ = writeln!(out, "# TYPE {name} {kind}");
            for (labels, s) in list {
                match &s.sample {
                    Sample::Value(v) => {
                        let _ = writeln!(out, "{name}{} {}", fmt_labels(labels, None), fmt_f64(*v));
                    }
                    Sample::Histogram {
                        buckets,
                        sum,
                        count,
                    } => {
                        for (le, n) in buckets {
                            let _ = writeln!(
                                out,
                                "{name}_bucket{} {n}",
                                fmt_labels(labels, Some(&fmt_f64(*le)))
                            );
                        }
                        let _ = writeln!(
                            out,
                            "{name}_bucket{} {count}",
                            fmt_labels(labels, Some("+Inf"))
                        );
                        let _ = writeln!(
                            out,
                            "{name}_sum{} {}",
                            fmt_labels(labels, None),
                            fmt_f64(*sum)
                        );
                        let _ = writeln!(out, "{name}_count{} {count}", fmt_labels(labels, None));
                    }
                }
            }
        }
        out
    }
}

fn fmt_f64(v: f64) -> String {
    if v.is_infinite() {
        return if v > 0.0 {
            "+Inf".into()
        } else {
            "-Inf".into()
        };
    }
    format!("{v}")
}

fn escape(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

fn fmt_labels(labels: &Labels, le: Option<&str>) -> String {
    let mut parts: Vec<String> = labels
        .iter()
        .map(|(k, v)| format!("{k}=\"{}\"", escape(v)))
        .collect();
    if let Some(le) = le {
        parts.push(format!("le=\"{le}\""));
    }
    if parts.is_empty() {
        String::new()
    } else {
        format!("{{{}}}", parts.join(","))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::output::parse_metric_operations;

    fn ops(text: &str) -> Vec<MetricOperation> {
        parse_metric_operations(text.as_bytes(), None).unwrap()
    }

    #[test]
    fn set_add_and_render() {
        let mut s = MetricStore::new();
        s.apply(&ops(
            r#"{"name":"hook_runs","add":1,"labels":{"b":"2","a":"1"}}
{"name":"hook_value","action":"set","value":5}"#,
        ));
        s.apply(&ops(
            r#"{"name":"hook_runs","action":"add","value":2,"labels":{"a":"1","b":"2"}}"#,
        ));
        assert_eq!(s.value("hook_runs", &[("a", "1"), ("b", "2")]), Some(3.0));
        assert_eq!(
            s.render(),
            "# TYPE hook_runs counter\nhook_runs{a=\"1\",b=\"2\"} 3\n# TYPE hook_value gauge\nhook_value 5\n"
        );
    }

    #[test]
    fn a_group_is_replaced_as_a_whole_and_expires_together() {
        let mut s = MetricStore::new();
        s.apply(&ops(r#"{"name":"x","group":"g","set":1,"labels":{"n":"a"}}
{"name":"x","group":"g","set":1,"labels":{"n":"b"}}
{"name":"y","set":7}"#));
        assert_eq!(s.len(), 3);
        // The next run of the group only reports "b": "a" is gone.
        s.apply(&ops(
            r#"{"name":"x","group":"g","set":2,"labels":{"n":"b"}}"#,
        ));
        assert_eq!(s.value("x", &[("n", "a")]), None);
        assert_eq!(s.value("x", &[("n", "b")]), Some(2.0));
        s.apply(&ops(r#"{"action":"expire","group":"g"}"#));
        assert_eq!(s.value("x", &[("n", "b")]), None);
        assert_eq!(s.value("y", &[]), Some(7.0));
    }

    #[test]
    fn histogram_observations() {
        let mut s = MetricStore::new();
        s.apply(&ops(
            r#"{"name":"d","action":"observe","value":0.3,"buckets":[0.1,0.5,1]}
{"name":"d","action":"observe","value":0.7,"buckets":[0.1,0.5,1]}"#,
        ));
        let text = s.render();
        assert!(text.contains("d_bucket{le=\"0.5\"} 1\n"), "{text}");
        assert!(text.contains("d_bucket{le=\"+Inf\"} 2\n"), "{text}");
        assert!(text.contains("d_count 2\n"), "{text}");
    }
}
