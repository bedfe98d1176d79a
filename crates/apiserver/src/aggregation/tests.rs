use super::*;
use serde_json::json;

fn role(name: &str, labels: Value, rules: Value) -> Value {
    json!({"metadata": {"name": name, "labels": labels}, "rules": rules})
}

fn aggregated(name: &str, labels: Value, selectors: Value) -> Value {
    json!({"metadata": {"name": name, "labels": labels},
           "aggregationRule": {"clusterRoleSelectors": selectors}})
}

fn rule(resource: &str, verb: &str) -> Value {
    json!({"apiGroups": [""], "resources": [resource], "verbs": [verb]})
}

fn to_view() -> Value {
    json!([{"matchLabels": {"aggregate-to-view": "true"}}])
}

/// A case: its name, the ClusterRoles, the plan expected (role, rules).
type Case = (&'static str, Vec<Value>, Vec<(&'static str, Vec<Value>)>);

#[test]
fn plans() {
    let label = |l: &str| json!({ l: "true" });
    #[rustfmt::skip]
    let table: Vec<Case> = vec![
        ("no aggregated role: nothing to do",
         vec![role("a", label("aggregate-to-view"), json!([rule("pods", "get")]))],
         vec![]),
        ("matching roles in name order, each rule once, the role itself left out",
         vec![
            role("z", label("aggregate-to-view"), json!([rule("pods", "get"), rule("secrets", "get")])),
            role("a", label("aggregate-to-view"), json!([rule("pods", "get")])),
            role("other", label("aggregate-to-edit"), json!([rule("pods", "delete")])),
            aggregated("view", label("aggregate-to-view"), to_view()),
         ],
         vec![("view", vec![rule("pods", "get"), rule("secrets", "get")])]),
        ("rules already right: nothing to do (empty fields do not count)",
         vec![
            role("a", label("aggregate-to-view"), json!([rule("pods", "get")])),
            json!({"metadata": {"name": "view"},
                   "aggregationRule": {"clusterRoleSelectors": to_view()},
                   "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"], "resourceNames": []}]}),
         ],
         vec![]),
        ("a rule of a role no longer matching goes",
         vec![
            role("a", json!({}), json!([rule("pods", "get")])),
            json!({"metadata": {"name": "view"},
                   "aggregationRule": {"clusterRoleSelectors": to_view()},
                   "rules": [rule("pods", "get")]}),
         ],
         vec![("view", vec![])]),
        ("a chain settles in one plan: view into edit into admin",
         vec![
            aggregated("admin", json!({}), json!([{"matchLabels": {"aggregate-to-admin": "true"}}])),
            aggregated("edit", label("aggregate-to-admin"), json!([{"matchLabels": {"aggregate-to-edit": "true"}}])),
            aggregated("view", label("aggregate-to-edit"), to_view()),
            role("r", label("aggregate-to-view"), json!([rule("pods", "get")])),
         ],
         vec![
            ("admin", vec![rule("pods", "get")]),
            ("edit", vec![rule("pods", "get")]),
            ("view", vec![rule("pods", "get")]),
         ]),
        ("selectors one after the other; matchExpressions work",
         vec![
            role("a", label("x"), json!([rule("a", "get")])),
            role("b", label("y"), json!([rule("b", "get")])),
            aggregated("agg", json!({}), json!([
                {"matchExpressions": [{"key": "y", "operator": "Exists"}]},
                {"matchLabels": {"x": "true"}}])),
         ],
         vec![("agg", vec![rule("b", "get"), rule("a", "get")])]),
    ];
    for (case, roles, expected) in table {
        let expected: Vec<(String, Vec<Value>)> = expected
            .into_iter()
            .map(|(n, r)| (n.to_owned(), r))
            .collect();
        assert_eq!(plan(&roles), expected, "{case}");
    }
}

#[test]
fn a_plan_applied_then_planned_again_is_empty() {
    let mut roles = vec![
        aggregated(
            "admin",
            json!({}),
            json!([{"matchLabels": {"aggregate-to-admin": "true"}}]),
        ),
        aggregated(
            "edit",
            json!({"aggregate-to-admin": "true"}),
            json!([{"matchLabels": {"aggregate-to-edit": "true"}}]),
        ),
        aggregated("view", json!({"aggregate-to-edit": "true"}), to_view()),
        role(
            "r",
            json!({"aggregate-to-view": "true"}),
            json!([rule("pods", "get")]),
        ),
        role(
            "w",
            json!({"aggregate-to-edit": "true"}),
            json!([rule("pods", "delete")]),
        ),
    ];
    for (name, rules) in plan(&roles) {
        let r = roles.iter_mut().find(|r| super::name(r) == name).unwrap();
        r["rules"] = Value::Array(rules);
    }
    assert_eq!(plan(&roles), vec![]);
    let admin = &roles[0]["rules"];
    assert_eq!(
        admin,
        &json!([rule("pods", "get"), rule("pods", "delete")]),
        "edit: view, then w"
    );
}

#[test]
fn the_seeded_bootstrap_roles_aggregate_as_kubernetes_ones() {
    let policy: Vec<Value> =
        serde_saphyr::from_str(include_str!("../bootstrap_policy.yaml")).unwrap();
    let roles: Vec<Value> = policy
        .into_iter()
        .filter(|o| o["kind"] == "ClusterRole")
        .collect();
    let planned = plan(&roles);
    let rules_of = |n: &str| &planned.iter().find(|(name, _)| name == n).unwrap().1;
    let view = rules_of("view");
    let edit = rules_of("edit");
    let admin = rules_of("admin");
    let own = roles
        .iter()
        .find(|r| name(r) == "system:aggregate-to-view")
        .unwrap();
    assert_eq!(
        view.as_slice(),
        rules(own),
        "view is system:aggregate-to-view"
    );
    assert!(view.iter().all(|r| edit.contains(r)), "edit holds view");
    assert!(edit.iter().all(|r| admin.contains(r)), "admin holds edit");
    assert!(admin.len() > edit.len() && edit.len() > view.len());
}
