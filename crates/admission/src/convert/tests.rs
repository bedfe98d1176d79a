use proptest::prelude::*;
use serde_json::{Value, json};

use super::*;

fn mup(api_version: &str, spec: Value) -> Value {
    json!({"apiVersion": api_version, "kind": "ModuleUpdatePolicy",
        "metadata": {"name": "p", "labels": {"a": "b"}, "resourceVersion": "7"}, "spec": spec})
}

#[test]
fn every_v1alpha1_mode_reads_back_unchanged_through_v1alpha2() {
    for mode in ["Auto", "Manual", "Ignore", "AutoPatch"] {
        let v1 = mup(
            "deckhouse.io/v1alpha1",
            json!({"releaseChannel": "Beta", "update": {"mode": mode},
                "moduleReleaseSelector": {"labelSelector": {"matchLabels": {"source": "x"}}}}),
        );
        let v2 = convert(v1, "deckhouse.io/v1alpha2").unwrap();
        assert_eq!(v2["apiVersion"], "deckhouse.io/v1alpha2");
        assert_eq!(v2["spec"]["update"]["mode"], mode, "{mode}");
        assert!(v2["spec"].get("moduleReleaseSelector").is_none());
        // A typed client of the stored version reads it.
        let typed: api::module_update_policy::ModuleUpdatePolicy =
            serde_json::from_value(v2.clone()).unwrap();
        assert_eq!(typed.spec.update.mode.as_str(), mode);
        let back = convert(v2, "deckhouse.io/v1alpha1").unwrap();
        assert_eq!(back["spec"]["update"]["mode"], mode);
        let typed: api::module_update_policy::v1alpha1::ModuleUpdatePolicy =
            serde_json::from_value(back).unwrap();
        assert_eq!(typed.spec.update.mode.as_str(), mode);
    }
}

#[test]
fn single_version_kinds_only_name_their_version() {
    let mc = json!({"apiVersion": "deckhouse.io/v1alpha1", "kind": "ModuleConfig",
        "metadata": {"name": "m"}, "spec": {"version": 1, "settings": {"a": 1}}});
    assert_eq!(convert(mc.clone(), "deckhouse.io/v1alpha1").unwrap(), mc);
}

#[test]
fn refusals_say_why() {
    let mc = json!({"apiVersion": "deckhouse.io/v1alpha1", "kind": "ModuleConfig", "metadata": {"name": "m"}});
    assert_eq!(
        convert(mc.clone(), "deckhouse.io/v1alpha2")
            .unwrap_err()
            .to_string(),
        "ModuleConfig.deckhouse.io does not serve \"deckhouse.io/v1alpha2\" (served: v1alpha1)"
    );
    assert_eq!(
        convert(mc, "other.io/v1alpha1").unwrap_err().to_string(),
        "ModuleConfig.deckhouse.io does not serve \"other.io/v1alpha1\" (served: v1alpha1)"
    );
    let pod = json!({"apiVersion": "v1", "kind": "Pod"});
    assert_eq!(
        convert(pod, "v1").unwrap_err().to_string(),
        "Pod in \"\" is not a kind this webhook converts"
    );
    assert_eq!(
        convert(json!({"kind": "X"}), "v1").unwrap_err(),
        ConversionError::Missing("apiVersion")
    );
}

#[test]
fn the_only_multi_version_kind_served_is_module_update_policy() {
    let kinds: Vec<String> = multi_version_kinds()
        .into_iter()
        .map(|(_, k, _)| k)
        .collect();
    assert_eq!(kinds, ["ModuleUpdatePolicy"]);
}

fn window() -> impl Strategy<Value = Value> {
    (
        0u8..24,
        0u8..60,
        0u8..24,
        0u8..60,
        proptest::sample::subsequence(vec!["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"], 0..7),
    )
        .prop_map(|(fh, fm, th, tm, days)| {
            let mut w =
                json!({"from": format!("{fh:02}:{fm:02}"), "to": format!("{th:02}:{tm:02}")});
            if !days.is_empty() {
                w["days"] = json!(days);
            }
            w
        })
}

fn spec_v1() -> impl Strategy<Value = Value> {
    (
        proptest::sample::select(vec![
            "Alpha",
            "Beta",
            "EarlyAccess",
            "Stable",
            "RockSolid",
            "Lts",
        ]),
        proptest::sample::select(vec!["Auto", "Manual", "Ignore", "AutoPatch"]),
        proptest::collection::vec(window(), 0..4),
        proptest::collection::btree_map("[a-z]{1,8}", "[a-z0-9]{0,8}", 1..3),
    )
        .prop_map(|(channel, mode, windows, labels)| {
            let mut update = json!({"mode": mode});
            if !windows.is_empty() {
                update["windows"] = json!(windows);
            }
            json!({"releaseChannel": channel, "update": update,
                "moduleReleaseSelector": {"labelSelector": {"matchLabels": labels}}})
        })
}

/// The fields both versions have: metadata and everything in `spec` but the v1alpha1 selector.
fn common(mut object: Value) -> Value {
    object.as_object_mut().unwrap().remove("apiVersion");
    object["spec"]
        .as_object_mut()
        .unwrap()
        .remove("moduleReleaseSelector");
    object
}

proptest! {
    #[test]
    fn v1alpha1_to_v1alpha2_and_back_keeps_every_common_field(spec in spec_v1()) {
        let v1 = mup("deckhouse.io/v1alpha1", spec);
        let v2 = convert(v1.clone(), "deckhouse.io/v1alpha2").unwrap();
        let back = convert(v2.clone(), "deckhouse.io/v1alpha1").unwrap();
        prop_assert_eq!(common(back.clone()), common(v1.clone()));
        prop_assert_eq!(common(v2), common(v1));
        prop_assert_eq!(&back["apiVersion"], "deckhouse.io/v1alpha1");
        prop_assert!(back["spec"]["moduleReleaseSelector"]["labelSelector"].is_object());
    }

    #[test]
    fn v1alpha2_to_v1alpha1_and_back_is_the_identity(spec in spec_v1()) {
        let mut spec = spec;
        spec.as_object_mut().unwrap().remove("moduleReleaseSelector");
        if spec["update"]["mode"] == "Ignore" {
            spec["update"]["mode"] = json!("Manual");
        }
        let v2 = mup("deckhouse.io/v1alpha2", spec);
        let v1 = convert(v2.clone(), "deckhouse.io/v1alpha1").unwrap();
        prop_assert_eq!(convert(v1, "deckhouse.io/v1alpha2").unwrap(), v2);
    }
}
