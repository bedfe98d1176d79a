use super::*;
use api::registry::{Primary, StorageConfig, StorageSource};

fn creds(u: &str, p: &str) -> Credentials {
    Credentials {
        username: u.into(),
        password: p.into(),
    }
}

fn upstream(host: &str) -> Upstream<InlineAuth> {
    Upstream {
        host: host.into(),
        path: Some("/deckhouse/ee".into()),
        auth: Some(InlineAuth {
            username: Some("license-token".into()),
            password: Some("SECRET-LICENSE".into()),
            auth: None,
        }),
        mirrors: vec![Mirror {
            host: "mirror.example".into(),
            auth: Some(InlineAuth {
                username: Some("mu".into()),
                password: Some("SECRET-MIRROR".into()),
                auth: None,
            }),
            ..Default::default()
        }],
        ..Default::default()
    }
}

fn config(upstream_host: Option<&str>, cache: bool) -> RegistryConfigSpec {
    RegistryConfigSpec {
        mode: RegistryMode::Managed,
        primary: upstream_host.map(|h| Primary {
            upstream: Some(upstream(h)),
        }),
        storage: Some(StorageConfig {
            cache,
            source: Some(StorageSource {
                bundle_ref: Some("bundle".into()),
                expected_digests: Some(10),
            }),
            ..Default::default()
        }),
    }
}

fn access() -> StorageAccess {
    StorageAccess {
        replicas: vec![
            ("master-a".into(), "10.0.0.1:5001".into()),
            ("master-b".into(), "10.0.0.2:5001".into()),
            ("master-c".into(), "10.0.0.3:5001".into()),
        ],
        leader: Some("master-b".into()),
        scheme: Scheme::Https,
        ca: Some("CA".into()),
        credentials: Some(creds("node", "SECRET-NODE")),
    }
}

fn held_effective() -> EffectiveUpstream {
    effective_of(&upstream("old.example"))
}

fn persisted() -> BTreeMap<String, Credentials> {
    BTreeMap::from([
        ("upstream".to_owned(), creds("license-token", "OLD")),
        ("upstream-mirror-0".to_owned(), creds("mu", "old-mp")),
    ])
}

fn inputs(config: RegistryConfigSpec) -> Inputs {
    Inputs {
        config,
        effective: None,
        persisted: BTreeMap::new(),
        probe_failed: false,
        leader_full: false,
        nodes: vec!["node-1".into(), "node-2".into()],
        routes: Vec::new(),
        storage: access(),
        gc_schedule_fallback: None,
    }
}

/// `(backend name, host, secretRef key)` of every backend of every node, which must agree.
fn backends(desired: &Desired) -> Vec<(BackendName, String, Option<String>)> {
    let mut seen = None;
    for spec in desired.nodes.values() {
        let these: Vec<_> = spec
            .backends
            .iter()
            .map(|b| {
                (
                    b.name,
                    b.host.clone(),
                    b.auth
                        .as_ref()
                        .and_then(|a| a.secret_ref.as_ref())
                        .map(|r| r.key.clone()),
                )
            })
            .collect();
        if let Some(previous) = &seen {
            assert_eq!(previous, &these, "every node gets the same layout");
        }
        seen = Some(these);
    }
    seen.unwrap_or_default()
}

fn storage_upstream_host(desired: &Desired) -> Option<String> {
    desired
        .storage
        .as_ref()
        .and_then(|s| s.upstream.as_ref())
        .map(|u| u.host.clone())
}

use BackendName::{Storage as S, Upstream as U};

struct Row {
    what: &'static str,
    inputs: Inputs,
    backends: Vec<(BackendName, &'static str)>,
    storage: Option<Option<&'static str>>,
    held: bool,
    dropped: bool,
    effective: Option<&'static str>,
}

fn rows() -> Vec<Row> {
    let with = |mut i: Inputs, f: &dyn Fn(&mut Inputs)| {
        f(&mut i);
        i
    };
    let air_gap = |full: bool, effective: bool| {
        with(inputs(config(None, true)), &|i| {
            i.leader_full = full;
            if effective {
                i.effective = Some(held_effective());
                i.persisted = persisted();
            }
        })
    };
    vec![
        Row {
            what: "Unmanaged: nothing",
            inputs: inputs(RegistryConfigSpec {
                mode: RegistryMode::Unmanaged,
                ..config(Some("r.example"), true)
            }),
            backends: vec![],
            storage: None,
            held: false,
            dropped: false,
            effective: None,
        },
        Row {
            what: "cache off: [Upstream]",
            inputs: inputs(config(Some("r.example"), false)),
            backends: vec![(U, "r.example")],
            storage: None,
            held: false,
            dropped: false,
            effective: Some("r.example"),
        },
        Row {
            what: "cache off, probe failed: the previous upstream stays",
            inputs: with(inputs(config(Some("r.example"), false)), &|i| {
                i.probe_failed = true;
                i.effective = Some(held_effective());
                i.persisted = persisted();
            }),
            backends: vec![(U, "old.example")],
            storage: None,
            held: false,
            dropped: false,
            effective: Some("old.example"),
        },
        Row {
            what: "cache on: [Storage(leader), Upstream]",
            inputs: inputs(config(Some("r.example"), true)),
            backends: vec![(S, "10.0.0.2:5001"), (U, "r.example")],
            storage: Some(Some("r.example")),
            held: false,
            dropped: false,
            effective: Some("r.example"),
        },
        Row {
            what: "cache on, probe failed: storage and nodes stay on the previous upstream",
            inputs: with(inputs(config(Some("r.example"), true)), &|i| {
                i.probe_failed = true;
                i.effective = Some(held_effective());
                i.persisted = persisted();
            }),
            backends: vec![(S, "10.0.0.2:5001"), (U, "old.example")],
            storage: Some(Some("old.example")),
            held: false,
            dropped: false,
            effective: Some("old.example"),
        },
        Row {
            what: "cache on, no replica reported yet: [Upstream] while the storage starts",
            inputs: with(inputs(config(Some("r.example"), true)), &|i| {
                i.storage.replicas.clear()
            }),
            backends: vec![(U, "r.example")],
            storage: Some(Some("r.example")),
            held: false,
            dropped: false,
            effective: Some("r.example"),
        },
        Row {
            what: "air gap asked, leader not full: upstream held in both",
            inputs: air_gap(false, true),
            backends: vec![(S, "10.0.0.2:5001"), (U, "old.example")],
            storage: Some(Some("old.example")),
            held: true,
            dropped: false,
            effective: Some("old.example"),
        },
        Row {
            what: "air gap asked, leader full: dropped from both at once",
            inputs: air_gap(true, true),
            backends: vec![(S, "10.0.0.2:5001")],
            storage: Some(None),
            held: false,
            dropped: true,
            effective: None,
        },
        Row {
            what: "air gap from the start (nothing to hold): [Storage]",
            inputs: air_gap(false, false),
            backends: vec![(S, "10.0.0.2:5001")],
            storage: Some(None),
            held: false,
            dropped: false,
            effective: None,
        },
        Row {
            what: "no leader reported: first replica by node name leads",
            inputs: with(inputs(config(Some("r.example"), true)), &|i| {
                i.storage.leader = None
            }),
            backends: vec![(S, "10.0.0.1:5001"), (U, "r.example")],
            storage: Some(Some("r.example")),
            held: false,
            dropped: false,
            effective: Some("r.example"),
        },
    ]
}

#[test]
fn every_row_of_the_mode_table() {
    for row in rows() {
        let desired = compute(&row.inputs).unwrap();
        let got: Vec<_> = backends(&desired)
            .into_iter()
            .map(|(name, host, _)| (name, host))
            .collect();
        let want: Vec<_> = row
            .backends
            .iter()
            .map(|(n, h)| (*n, (*h).to_owned()))
            .collect();
        assert_eq!(got, want, "{}", row.what);
        match row.storage {
            None => assert!(desired.storage.is_none(), "{}", row.what),
            Some(upstream) => assert_eq!(
                storage_upstream_host(&desired).as_deref(),
                upstream,
                "{}",
                row.what
            ),
        }
        assert_eq!(desired.air_gap_held, row.held, "{}", row.what);
        assert_eq!(desired.drop_upstream, row.dropped, "{}", row.what);
        assert_eq!(
            desired.effective.as_ref().and_then(|e| e.host.as_deref()),
            row.effective,
            "{}",
            row.what
        );
        if row.inputs.config.mode == RegistryMode::Managed {
            assert_eq!(
                desired.nodes.len(),
                2,
                "{}: one RegistryNode per Node",
                row.what
            );
        } else {
            assert!(desired.nodes.is_empty() && desired.credentials.is_empty());
        }
    }
}

#[test]
fn storage_replicas_follow_the_leader_as_mirrors_with_one_shared_key() {
    let desired = compute(&inputs(config(Some("r.example"), true))).unwrap();
    let spec = &desired.nodes["node-1"];
    assert_eq!(spec.cache, Some(true));
    let storage = &spec.backends[0];
    assert_eq!(storage.path.as_deref(), Some("/system/deckhouse"));
    assert_eq!(storage.ca.as_deref(), Some("CA"));
    let mirrors: Vec<_> = storage.mirrors.iter().map(|m| m.host.as_str()).collect();
    assert_eq!(mirrors, ["10.0.0.1:5001", "10.0.0.3:5001"]);
    for mirror in &storage.mirrors {
        assert_eq!(
            mirror
                .auth
                .as_ref()
                .unwrap()
                .secret_ref
                .as_ref()
                .unwrap()
                .key,
            "storage"
        );
    }
    assert_eq!(desired.credentials["storage"], creds("node", "SECRET-NODE"));
}

#[test]
fn credentials_only_by_reference() {
    let mut i = inputs(config(Some("r.example"), true));
    i.routes = vec![CompiledRoute {
        match_host: "Quay.io:443".into(),
        upstream: upstream("quay-mirror.example"),
    }];
    let desired = compute(&i).unwrap();
    let text = serde_json::to_string(&(&desired.nodes, &desired.storage)).unwrap();
    for secret in ["SECRET", "license-token", "password", "username"] {
        assert!(
            !text.contains(secret),
            "{secret} leaked into a resource: {text}"
        );
    }
    let keys: Vec<_> = desired.credentials.keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        [
            "route-quay.io_443",
            "route-quay.io_443-mirror-0",
            "storage",
            "upstream",
            "upstream-mirror-0"
        ]
    );
    assert_eq!(
        desired.credentials["upstream"],
        creds("license-token", "SECRET-LICENSE")
    );
    let route = &desired.nodes["node-2"].additional_routes[0];
    assert_eq!(route.match_, "Quay.io:443");
    assert_eq!(
        route
            .auth
            .as_ref()
            .unwrap()
            .secret_ref
            .as_ref()
            .unwrap()
            .key,
        "route-quay.io_443"
    );
    assert_eq!(
        route
            .auth
            .as_ref()
            .unwrap()
            .secret_ref
            .as_ref()
            .unwrap()
            .name,
        "registry-resolved-auth"
    );
}

#[test]
fn a_held_upstream_gets_its_persisted_credentials_back() {
    let mut i = inputs(config(None, true));
    i.effective = Some(held_effective());
    i.persisted = persisted();
    let desired = compute(&i).unwrap();
    assert_eq!(
        desired.credentials["upstream"],
        creds("license-token", "OLD")
    );
    assert_eq!(
        desired.credentials["upstream-mirror-0"],
        creds("mu", "old-mp")
    );
    let storage = desired.storage.unwrap();
    assert_eq!(storage.need_sync, Some(true));
    assert_eq!(storage.air_gap_requested, Some(true));
    assert_eq!(storage.publish, Some(true));
}

#[test]
fn storage_spec_carries_source_store_and_resolved_gc() {
    let mut i = inputs(config(Some("r.example"), true));
    let desired = compute(&i).unwrap();
    let storage = desired.storage.unwrap();
    assert_eq!(
        storage.store.unwrap().path.as_deref(),
        Some("/opt/deckhouse/registry")
    );
    assert_eq!(storage.source.unwrap().expected_digests, Some(10));
    let gc = storage.garbage_collection.unwrap();
    assert_eq!(
        (gc.enabled, gc.schedule.as_deref()),
        (Some(true), Some("17 3 * * *"))
    );
    i.gc_schedule_fallback = Some("0 2 * * 1,3".into());
    let gc = compute(&i)
        .unwrap()
        .storage
        .unwrap()
        .garbage_collection
        .unwrap();
    assert_eq!(gc.schedule.as_deref(), Some("0 2 * * 1,3"));
    if let Some(storage) = i.config.storage.as_mut() {
        storage.garbage_collection = Some(GarbageCollection {
            enabled: Some(false),
            schedule: Some("5 5 * * *".into()),
        });
    }
    let gc = compute(&i)
        .unwrap()
        .storage
        .unwrap()
        .garbage_collection
        .unwrap();
    assert_eq!(
        (gc.enabled, gc.schedule.as_deref()),
        (Some(false), Some("5 5 * * *"))
    );
}

#[test]
fn a_changed_credential_changes_the_secret_only() {
    let first = compute(&inputs(config(Some("r.example"), false))).unwrap();
    let mut changed = config(Some("r.example"), false);
    if let Some(u) = changed.primary.as_mut().and_then(|p| p.upstream.as_mut()) {
        u.auth = Some(InlineAuth {
            username: Some("license-token".into()),
            password: Some("NEW".into()),
            auth: None,
        });
    }
    let second = compute(&inputs(changed)).unwrap();
    assert_eq!(first.nodes, second.nodes);
    assert_ne!(first.credentials, second.credentials);
}

#[test]
fn an_unreadable_credential_is_an_error_naming_the_field() {
    let mut c = config(Some("r.example"), false);
    if let Some(u) = c.primary.as_mut().and_then(|p| p.upstream.as_mut()) {
        u.auth = Some(InlineAuth {
            auth: Some("!!".into()),
            ..Default::default()
        });
    }
    let error = compute(&inputs(c)).unwrap_err().to_string();
    assert_eq!(
        error,
        "spec.primary.upstream.auth: auth is not base64 of username:password"
    );
}
