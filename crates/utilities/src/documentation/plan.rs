//! Which documentation builders get a module's docs, what its status says afterwards, and how
//! long to wait before trying a failing builder again. Pure.

use std::time::Duration;

use api::module_documentation::{DocumentationCondition, ModuleDocumentationSpec};
use k8s_openapi::api::discovery::v1::EndpointSlice;

/// Label of the documentation builder's EndpointSlices (in `d8-system`).
pub const BUILDER_SELECTOR: &str = "app=documentation";
/// Name of the builder's HTTP port in its Service.
pub const BUILDER_PORT: &str = "builder-http";

/// Condition type (and result): the builder rendered this version.
pub const RENDERED: &str = "Rendered";
/// Condition type (and result): the builder failed.
pub const ERROR: &str = "Error";
/// Result: some builders rendered, some failed.
pub const PARTIALLY: &str = "Partially";

/// `http://<address>:<port>` of every ready endpoint behind the builder's `builder-http` port,
/// sorted and without duplicates.
pub fn builder_addresses(slices: &[EndpointSlice]) -> Vec<String> {
    let mut out = Vec::new();
    for slice in slices {
        let port = slice.ports.iter().flatten().find_map(|p| {
            (p.name.as_deref() == Some(BUILDER_PORT))
                .then_some(p.port)
                .flatten()
        });
        let Some(port) = port else { continue };
        for endpoint in &slice.endpoints {
            if endpoint.conditions.as_ref().and_then(|c| c.ready) == Some(false) {
                continue;
            }
            for address in &endpoint.addresses {
                let host = if address.contains(':') {
                    format!("[{address}]")
                } else {
                    address.clone()
                };
                out.push(format!("http://{host}:{port}"));
            }
        }
    }
    out.sort();
    out.dedup();
    out
}

/// Whether a file of a module belongs to its documentation (Deckhouse's rule: `docs*`, `crds*`,
/// `openapi*`, `module.yaml`, `oss.yaml`).
pub fn is_docs_path(path: &str) -> bool {
    path.starts_with("docs")
        || path.starts_with("crds")
        || path.starts_with("openapi")
        || path == "module.yaml"
        || path == "oss.yaml"
}

/// Per builder address: what it already has.
#[derive(Clone, Debug, PartialEq)]
pub enum Step {
    /// Rendered this very version and checksum: keep the condition.
    Keep(DocumentationCondition),
    /// Send the docs and build.
    Send(String),
}

/// What to do on each builder found.
pub fn steps(
    spec: &ModuleDocumentationSpec,
    conditions: &[DocumentationCondition],
    addresses: &[String],
) -> Vec<Step> {
    addresses
        .iter()
        .map(|address| {
            let done = conditions.iter().find(|c| {
                c.address.as_deref() == Some(address.as_str())
                    && c.type_.as_deref() == Some(RENDERED)
                    && c.version.as_deref() == Some(spec.version.as_str())
                    && c.checksum == spec.checksum
            });
            match done {
                Some(c) => Step::Keep(c.clone()),
                None => Step::Send(address.clone()),
            }
        })
        .collect()
}

/// `status.result` over the builders' conditions.
pub fn result(conditions: &[DocumentationCondition]) -> &'static str {
    let rendered = conditions
        .iter()
        .filter(|c| c.type_.as_deref() == Some(RENDERED))
        .count();
    match rendered {
        0 => ERROR,
        n if n == conditions.len() => RENDERED,
        _ => PARTIALLY,
    }
}

/// The wait before retry number `attempt` (0-based): `base` doubled each time, at most `max`.
pub fn backoff(attempt: u32, base: Duration, max: Duration) -> Duration {
    base.saturating_mul(2u32.saturating_pow(attempt.min(20)))
        .min(max)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::discovery::v1::{Endpoint, EndpointConditions, EndpointPort};

    fn slice(port: (&str, i32), endpoints: &[(&str, Option<bool>)]) -> EndpointSlice {
        EndpointSlice {
            address_type: "IPv4".into(),
            ports: Some(vec![EndpointPort {
                name: Some(port.0.into()),
                port: Some(port.1),
                ..Default::default()
            }]),
            endpoints: endpoints
                .iter()
                .map(|(a, ready)| Endpoint {
                    addresses: vec![(*a).into()],
                    conditions: Some(EndpointConditions {
                        ready: *ready,
                        ..Default::default()
                    }),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }
    }

    #[test]
    fn addresses_come_from_the_builder_port_of_ready_endpoints() {
        let slices = [
            slice(
                ("builder-http", 8081),
                &[
                    ("10.0.0.2", Some(true)),
                    ("10.0.0.1", None),
                    ("10.0.0.3", Some(false)),
                ],
            ),
            slice(("http", 8080), &[("10.0.0.9", Some(true))]),
            slice(("builder-http", 8081), &[("fd00::1", Some(true))]),
        ];
        assert_eq!(
            builder_addresses(&slices),
            [
                "http://10.0.0.1:8081",
                "http://10.0.0.2:8081",
                "http://[fd00::1]:8081"
            ]
        );
        assert!(builder_addresses(&[]).is_empty());
    }

    #[test]
    fn docs_paths() {
        for yes in [
            "docs/README.md",
            "crds/x.yaml",
            "openapi/config-values.yaml",
            "module.yaml",
            "oss.yaml",
        ] {
            assert!(is_docs_path(yes), "{yes}");
        }
        for no in [
            "templates/a.yaml",
            "hooks/x.py",
            "Chart.yaml",
            "charts/docs/x",
            "version.json",
        ] {
            assert!(!is_docs_path(no), "{no}");
        }
    }

    fn condition(
        address: &str,
        type_: &str,
        version: &str,
        checksum: &str,
    ) -> DocumentationCondition {
        DocumentationCondition {
            type_: Some(type_.into()),
            version: Some(version.into()),
            checksum: Some(checksum.into()),
            address: Some(address.into()),
            ..Default::default()
        }
    }

    #[test]
    fn only_builders_without_this_version_get_it() {
        let spec = ModuleDocumentationSpec {
            version: "v1.1.0".into(),
            checksum: Some("c2".into()),
            path: None,
        };
        let a = "http://a:8081".to_owned();
        let b = "http://b:8081".to_owned();
        let c = "http://c:8081".to_owned();
        let d = "http://d:8081".to_owned();
        let conditions = [
            condition(&a, RENDERED, "v1.1.0", "c2"),
            condition(&b, RENDERED, "v1.0.0", "c1"),
            condition(&c, ERROR, "v1.1.0", "c2"),
            condition(&d, RENDERED, "v1.1.0", "c1"),
        ];
        let addresses = [
            a.clone(),
            b.clone(),
            c.clone(),
            d.clone(),
            "http://e:8081".into(),
        ];
        assert_eq!(
            steps(&spec, &conditions, &addresses),
            [
                Step::Keep(conditions[0].clone()),
                Step::Send(b),
                Step::Send(c),
                Step::Send(d),
                Step::Send("http://e:8081".into()),
            ]
        );
    }

    #[test]
    fn results() {
        let ok = condition("a", RENDERED, "v1", "x");
        let bad = condition("b", ERROR, "v1", "x");
        assert_eq!(result(std::slice::from_ref(&ok)), RENDERED);
        assert_eq!(result(&[ok.clone(), bad.clone()]), PARTIALLY);
        assert_eq!(result(&[bad]), ERROR);
    }

    #[test]
    fn backoff_doubles_up_to_the_limit() {
        let s = Duration::from_secs;
        let rows = [
            (0, s(10)),
            (1, s(20)),
            (2, s(40)),
            (5, s(300)),
            (40, s(300)),
        ];
        for (attempt, expected) in rows {
            assert_eq!(backoff(attempt, s(10), s(300)), expected, "{attempt}");
        }
    }
}
