use super::*;

fn services(names: &[&str]) -> Vec<String> {
    names.iter().map(|s| s.to_string()).collect()
}

#[test]
fn targets_are_a_secret_and_its_services() {
    let target: Target = "webhook-handler-tls=webhook-handler, validating-webhook-handler"
        .parse()
        .unwrap();
    assert_eq!(target.secret, "webhook-handler-tls");
    assert_eq!(
        target.services,
        services(&["webhook-handler", "validating-webhook-handler"])
    );
    for bad in ["", "secret", "secret=", "=svc", "secret=,"] {
        let error = bad.parse::<Target>().unwrap_err();
        assert!(error.contains("SECRET=SERVICE"), "{bad:?}: {error}");
    }
}

#[test]
fn a_service_is_named_as_the_cluster_resolves_it() {
    assert_eq!(
        dns_names("d8-system", &services(&["d8-webhook"])),
        [
            "d8-webhook",
            "d8-webhook.d8-system",
            "d8-webhook.d8-system.svc",
            "d8-webhook.d8-system.svc.cluster.local",
        ]
    );
}

#[test]
fn the_bundle_holds_the_replaced_ca_only_while_it_is_replaced() {
    let pems = |ca: &str| Pems {
        ca_crt: ca.into(),
        ..Default::default()
    };
    let decode = |b: String| {
        String::from_utf8(base64::engine::general_purpose::STANDARD.decode(b).unwrap()).unwrap()
    };
    let table = [
        (pems("NEW\n"), pems("OLD\n"), Renewal::All, "NEW\nOLD\n"),
        (pems("NEW"), pems("OLD\n"), Renewal::All, "NEW\nOLD\n"),
        (pems("NEW\n"), pems(""), Renewal::All, "NEW\n"),
        (pems("NEW\n"), pems("NEW\n"), Renewal::Serving, "NEW\n"),
        (pems("NEW\n"), pems("NEW\n"), Renewal::Keep, "NEW\n"),
    ];
    for (next, previous, renewal, want) in table {
        assert_eq!(
            decode(ca_bundle(&next, &previous, renewal)),
            want,
            "{renewal:?}"
        );
    }
}

fn config(hooks: Value) -> Value {
    json!({"metadata": {"name": "c", "resourceVersion": "7"}, "webhooks": hooks})
}

fn service_hook(ns: &str, name: &str, bundle: Option<&str>) -> Value {
    let mut client = json!({"service": {"namespace": ns, "name": name, "path": "/v", "port": 443}});
    if let Some(b) = bundle {
        client["caBundle"] = json!(b);
    }
    json!({"name": format!("{name}.x"), "clientConfig": client})
}

#[test]
fn the_ca_goes_into_the_webhooks_calling_the_services_and_nowhere_else() {
    let ours = services(&["d8-webhook"]);
    let url_hook =
        json!({"name": "u", "clientConfig": {"url": "https://x/", "caBundle": "T1RIRVI="}});
    // (webhooks, which get the bundle)
    let table: Vec<(Value, Option<Vec<bool>>)> = vec![
        // Missing: injected.
        (
            json!([service_hook("d8-system", "d8-webhook", None)]),
            Some(vec![true]),
        ),
        // Stale: replaced; the others untouched.
        (
            json!([
                service_hook("d8-system", "d8-webhook", Some("T0xE")),
                service_hook("d8-system", "other", Some("T1RIRVI=")),
                url_hook.clone(),
            ]),
            Some(vec![true, false, false]),
        ),
        // Already there: nothing to do.
        (
            json!([service_hook("d8-system", "d8-webhook", Some("QkFORExF"))]),
            None,
        ),
        // Another namespace's Service of the same name, or a URL: not ours.
        (json!([service_hook("elsewhere", "d8-webhook", None)]), None),
        (json!([url_hook]), None),
        (json!([]), None),
    ];
    for (hooks, want) in table {
        let patch = webhooks_patch(&config(hooks.clone()), "d8-system", &ours, "QkFORExF");
        match want {
            None => assert_eq!(patch, None, "{hooks}"),
            Some(flags) => {
                let patch = patch.unwrap_or_else(|| panic!("no patch for {hooks}"));
                assert_eq!(patch["metadata"]["resourceVersion"], "7");
                let patched = patch["webhooks"].as_array().unwrap();
                for (i, injected) in flags.iter().enumerate() {
                    let bundle = &patched[i]["clientConfig"]["caBundle"];
                    if *injected {
                        assert_eq!(bundle, "QkFORExF", "{hooks}");
                    } else {
                        assert_eq!(bundle, &hooks[i]["clientConfig"]["caBundle"], "{hooks}");
                    }
                }
            }
        }
    }
}

#[test]
fn crd_conversions_are_ours_or_get_the_ca_when_they_call_the_services() {
    let handler = services(&["conversion-webhook-handler"]);
    let ours = service_conversion("d8-system", "d8-webhook", "TkVX");
    let crd = |conversion: Value| json!({"spec": {"conversion": conversion}});
    let calling = |name: &str, bundle: &str| {
        json!({"strategy": "Webhook", "webhook": {"clientConfig": {
            "service": {"namespace": "d8-system", "name": name, "path": "/c", "port": 443},
            "caBundle": bundle}}})
    };
    // Ours: set when missing or different, else left.
    assert_eq!(
        conversion_patch(
            &crd(json!({"strategy": "None"})),
            Some(&ours),
            "d8-system",
            &[],
            "TkVX"
        ),
        Some(json!({"spec": {"conversion": ours}}))
    );
    assert_eq!(
        conversion_patch(&crd(ours.clone()), Some(&ours), "d8-system", &[], "TkVX"),
        None
    );
    assert_eq!(
        ours["webhook"]["clientConfig"],
        json!({"service": {"namespace": "d8-system", "name": "d8-webhook", "path": "/convert", "port": 443}, "caBundle": "TkVX"})
    );
    // A CRD webhook-handler converts: the CA injected, nothing else.
    assert_eq!(
        conversion_patch(
            &crd(calling("conversion-webhook-handler", "T0xE")),
            None,
            "d8-system",
            &handler,
            "TkVX"
        ),
        Some(json!({"spec": {"conversion": {"webhook": {"clientConfig": {"caBundle": "TkVX"}}}}}))
    );
    for left in [
        crd(calling("conversion-webhook-handler", "TkVX")),
        crd(calling("someone-else", "T0xE")),
        crd(json!({"strategy": "None"})),
        json!({"spec": {}}),
    ] {
        assert_eq!(
            conversion_patch(&left, None, "d8-system", &handler, "TkVX"),
            None,
            "{left}"
        );
    }
}

#[test]
fn a_secret_round_trips_its_pems() {
    let pems = Pems {
        ca_crt: "A".into(),
        ca_key: "B".into(),
        tls_crt: "C".into(),
        tls_key: "D".into(),
    };
    let secret = Secret {
        data: Some(secret_data(&pems)),
        ..Default::default()
    };
    assert_eq!(pems_of(&secret), pems);
    assert_eq!(
        secret.data.unwrap().keys().collect::<Vec<_>>(),
        ["ca.crt", "ca.key", "tls.crt", "tls.key"]
    );
    assert_eq!(pems_of(&Secret::default()), Pems::default());
}
