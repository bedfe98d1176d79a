use super::*;
use crate::arbitration::CompiledRoute;
use crate::layout::{Inputs, StorageAccess, compute, effective_of};
use api::module_source::Scheme;
use api::registry::{
    InlineAuth, Mirror, Primary, RegistryConfigSpec, RegistryMode, StorageConfig, StorageSource,
};
use proptest::prelude::*;
use registry_plan::Credentials;

fn auth(user: &str, password: &str) -> Option<InlineAuth> {
    Some(InlineAuth {
        username: Some(user.into()),
        password: Some(password.into()),
        auth: None,
    })
}

fn upstream(host: &str, password: &str, mirrors: usize) -> Upstream<InlineAuth> {
    Upstream {
        host: host.into(),
        path: Some("/dkp".into()),
        auth: auth("u", password),
        mirrors: (0..mirrors)
            .map(|j| Mirror {
                host: format!("m{j}.{host}"),
                auth: auth("m", password),
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    }
}

fn inputs_strategy() -> impl Strategy<Value = Inputs> {
    (
        any::<bool>(),
        prop_oneof![Just(None), Just(Some("a.example")), Just(Some("b.example"))],
        prop_oneof![Just("p1"), Just("p2")],
        0usize..3,
        any::<bool>(),
        (any::<bool>(), any::<bool>(), any::<bool>()),
        proptest::sample::subsequence(vec!["n1", "n2", "n3", "n4"], 0..=4),
        proptest::sample::subsequence(vec!["quay.io", "ghcr.io:443"], 0..=2),
        proptest::sample::subsequence(vec!["m1", "m2", "m3"], 0..=3),
        prop_oneof![Just(None), Just(Some("m1")), Just(Some("m3"))],
    )
        .prop_map(
            |(
                managed,
                host,
                password,
                mirrors,
                cache,
                (probe_failed, leader_full, had_effective),
                nodes,
                routes,
                replicas,
                leader,
            )| {
                let cache = cache || host.is_none();
                Inputs {
                    config: RegistryConfigSpec {
                        mode: if managed {
                            RegistryMode::Managed
                        } else {
                            RegistryMode::Unmanaged
                        },
                        primary: host.map(|h| Primary {
                            upstream: Some(upstream(h, password, mirrors)),
                        }),
                        storage: Some(StorageConfig {
                            cache,
                            source: Some(StorageSource::default()),
                            ..Default::default()
                        }),
                    },
                    effective: had_effective
                        .then(|| effective_of(&upstream("old.example", "x", 1))),
                    persisted: BTreeMap::from([(
                        "upstream".to_owned(),
                        Credentials {
                            username: "u".into(),
                            password: "old".into(),
                        },
                    )]),
                    probe_failed,
                    leader_full,
                    nodes: nodes.into_iter().map(String::from).collect(),
                    routes: routes
                        .into_iter()
                        .map(|m| CompiledRoute {
                            match_host: m.into(),
                            upstream: upstream(&format!("to-{m}"), password, 1),
                        })
                        .collect(),
                    storage: StorageAccess {
                        replicas: replicas
                            .into_iter()
                            .map(|n| (n.to_owned(), format!("{n}:5001")))
                            .collect(),
                        leader: leader.map(String::from),
                        scheme: Scheme::Https,
                        ca: None,
                        credentials: Some(Credentials {
                            username: "node".into(),
                            password: password.into(),
                        }),
                    },
                    gc_schedule_fallback: None,
                }
            },
        )
}

fn target(inputs: &Inputs, withdraw: bool) -> Option<Desired> {
    (!withdraw).then(|| compute(inputs).unwrap())
}

/// Every reference in an existing resource resolves in the existing Secret.
fn references_resolve(observed: &Observed) -> bool {
    let secret = observed.secret.clone().unwrap_or_default();
    referenced_keys(observed.nodes.values(), observed.storage.as_ref())
        .iter()
        .all(|k| secret.contains_key(k))
}

proptest! {
    #[test]
    fn planning_after_applying_a_plan_yields_nothing_to_do(
        before in inputs_strategy(),
        after in inputs_strategy(),
        withdraw_before in any::<bool>(),
        withdraw_after in any::<bool>(),
    ) {
        let mut observed = Observed::default();
        let first = plan(target(&before, withdraw_before).as_ref(), &observed);
        apply(&mut observed, &first);
        prop_assert!(plan(target(&before, withdraw_before).as_ref(), &observed).is_empty());

        let desired = target(&after, withdraw_after);
        let actions = plan(desired.as_ref(), &observed);
        // Every intermediate state keeps every reference resolvable.
        for action in &actions {
            apply(&mut observed, std::slice::from_ref(action));
            if !matches!(action, Action::DeleteSecret) {
                prop_assert!(references_resolve(&observed), "after {action:?}: {observed:?}");
            }
        }
        prop_assert!(plan(desired.as_ref(), &observed).is_empty(), "{observed:?}");
        // And the result is exactly the target.
        match &desired {
            None => prop_assert_eq!(&observed, &Observed::default()),
            Some(d) => {
                prop_assert_eq!(&observed.nodes, &d.nodes);
                prop_assert_eq!(&observed.storage, &d.storage);
                let keys: Vec<_> = observed.secret.unwrap_or_default().into_keys().collect();
                let wanted: Vec<_> = d.credentials.keys().cloned().collect();
                prop_assert_eq!(keys, wanted);
            }
        }
    }
}

#[test]
fn the_secret_is_written_before_anything_that_references_it() {
    let inputs = Inputs {
        config: RegistryConfigSpec {
            mode: RegistryMode::Managed,
            primary: Some(Primary {
                upstream: Some(upstream("a.example", "p", 0)),
            }),
            storage: None,
        },
        nodes: vec!["n1".into()],
        ..Default::default()
    };
    let desired = compute(&inputs).unwrap();
    let actions = plan(Some(&desired), &Observed::default());
    assert!(matches!(&actions[0], Action::WriteSecret(data) if data.contains_key("upstream")));
    assert!(matches!(&actions[1], Action::ApplyNode { name, .. } if name == "n1"));
    assert_eq!(actions.len(), 2);
}

#[test]
fn a_stale_key_is_pruned_only_after_the_resources_moved_on() {
    let mut observed = Observed::default();
    let with_route = Inputs {
        config: RegistryConfigSpec {
            mode: RegistryMode::Managed,
            primary: Some(Primary {
                upstream: Some(upstream("a.example", "p", 0)),
            }),
            storage: None,
        },
        nodes: vec!["n1".into()],
        routes: vec![CompiledRoute {
            match_host: "quay.io".into(),
            upstream: upstream("q.example", "p", 0),
        }],
        ..Default::default()
    };
    let first = plan(Some(&compute(&with_route).unwrap()), &observed);
    apply(&mut observed, &first);
    let without = Inputs {
        routes: Vec::new(),
        ..with_route
    };
    let actions = plan(Some(&compute(&without).unwrap()), &observed);
    let kinds: Vec<_> = actions
        .iter()
        .map(|a| match a {
            Action::WriteSecret(d) => format!("secret{:?}", d.keys().collect::<Vec<_>>()),
            Action::ApplyNode { name, .. } => format!("node {name}"),
            other => format!("{other:?}"),
        })
        .collect();
    assert_eq!(kinds, ["node n1", "secret[\"upstream\"]"]);
}

#[test]
fn withdrawal_deletes_every_object_and_nothing_else() {
    let observed = Observed {
        secret: Some(SecretData::new()),
        nodes: BTreeMap::from([("n1".to_owned(), RegistryNodeSpec::default())]),
        storage: Some(RegistryStorageSpec::default()),
    };
    assert_eq!(
        plan(None, &observed),
        [
            Action::DeleteNode("n1".into()),
            Action::DeleteStorage,
            Action::DeleteSecret
        ]
    );
    assert!(plan(None, &Observed::default()).is_empty());
}
