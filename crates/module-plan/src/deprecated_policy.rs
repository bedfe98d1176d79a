//! Which modules a deprecated (`v1alpha1`) ModuleUpdatePolicy still selects, as Deckhouse's
//! `ModuleHasDeprecatedUpdatePolicy` check decides: a module enabled by its ModuleConfig and
//! bound to no policy by name (`ModuleConfig.spec.updatePolicy`) whose labels `module=<name>`
//! and `source=<its source>` a policy's `moduleReleaseSelector` matches. A selector that is not
//! a valid label selector (Deckhouse's way to retire one is `matchLabels: {"": ""}`) matches
//! nothing.

use std::collections::BTreeMap;

use api::module_update_policy::v1alpha1::LabelSelector;

/// A module as the check sees it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Module<'a> {
    /// The module's name.
    pub name: &'a str,
    /// Its ModuleSource (`""` while none is chosen).
    pub source: &'a str,
    /// Whether its ModuleConfig enables it (`EnabledByModuleConfig`).
    pub enabled_by_config: bool,
    /// The policy its ModuleConfig names, if any.
    pub update_policy: Option<&'a str>,
}

/// `(module, policy)` for every deprecated policy selecting a module, in module order.
pub fn matches(
    modules: &[Module<'_>],
    policies: &[(&str, &LabelSelector)],
) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for m in modules {
        if !m.enabled_by_config || m.update_policy.is_some_and(|p| !p.is_empty()) {
            continue;
        }
        let labels = BTreeMap::from([
            ("module".to_owned(), m.name.to_owned()),
            ("source".to_owned(), m.source.to_owned()),
        ]);
        for (policy, selector) in policies {
            if selector.matches(&labels) == Some(true) {
                out.push((m.name.to_owned(), (*policy).to_owned()));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn enabled_modules_without_a_named_policy_are_matched() {
        let by_source: LabelSelector =
            serde_json::from_value(json!({"matchLabels": {"source": "example"}})).unwrap();
        let retired: LabelSelector =
            serde_json::from_value(json!({"matchLabels": {"": ""}})).unwrap();
        let nothing: LabelSelector = serde_json::from_value(
            json!({"matchExpressions": [{"key": "module", "operator": "DoesNotExist"}]}),
        )
        .unwrap();
        let policies = [("old", &by_source), ("retired", &retired), ("v2", &nothing)];
        let module = |name, source, enabled_by_config, update_policy| Module {
            name,
            source,
            enabled_by_config,
            update_policy,
        };
        let table = [
            (module("echo", "example", true, None), vec![("echo", "old")]),
            (
                module("echo", "example", true, Some("")),
                vec![("echo", "old")],
            ),
            (module("echo", "example", true, Some("weekly")), vec![]),
            (module("echo", "example", false, None), vec![]),
            (module("echo", "other", true, None), vec![]),
            (module("echo", "", true, None), vec![]),
        ];
        for (m, want) in table {
            let want: Vec<(String, String)> = want
                .into_iter()
                .map(|(a, b): (&str, &str)| (a.to_owned(), b.to_owned()))
                .collect();
            assert_eq!(matches(std::slice::from_ref(&m), &policies), want, "{m:?}");
        }
    }
}
