//! Deckhouse's finalizers on the webhook objects: while one lives it carries them, so deleting
//! it waits until the handler has taken its registration away (the webhook out of the
//! ValidatingWebhookConfiguration, the CRD's conversion back to `None`) and its hook file off
//! the disk; then the handler removes them and the object goes.

use kube::api::{Api, DynamicObject, Patch, PatchParams};
use serde_json::{Value, json};

/// A ValidationWebhook's: its hook is on disk and its webhook registered.
pub(crate) const VALIDATION: &[&str] = &["validationwebhooks.deckhouse.io/exist-on-fs"];
/// A ConversionWebhook's: the CRD's conversion to reset, its hook on disk.
pub(crate) const CONVERSION: &[&str] = &[
    "conversionwebhooks.deckhouse.io/crd-cleanup",
    "conversionwebhooks.deckhouse.io/exist-on-fs",
];

/// Whether `obj` is being deleted (it has a `deletionTimestamp`).
pub(crate) fn deleting(obj: &Value) -> bool {
    obj.pointer("/metadata/deletionTimestamp")
        .is_some_and(|t| !t.is_null())
}

/// The finalizers `obj` should carry, when they differ from what it carries: `ours` added while
/// it lives, removed once it is being deleted (the caller has removed the registration by
/// then); anyone else's kept, in order.
pub(crate) fn wanted(obj: &Value, ours: &[&str]) -> Option<Vec<String>> {
    let have: Vec<String> = obj
        .pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default();
    let mut want: Vec<String> = have
        .iter()
        .filter(|f| !ours.contains(&f.as_str()))
        .cloned()
        .collect();
    if !deleting(obj) {
        want.extend(ours.iter().map(|f| f.to_string()));
        // Ours already there keep their place.
        want = have
            .iter()
            .filter(|f| want.contains(f))
            .chain(want.iter().filter(|f| !have.contains(f)))
            .cloned()
            .collect();
    }
    (want != have).then_some(want)
}

/// Writes `obj`'s finalizers when they are not [`wanted`]'s, against its resourceVersion (a
/// concurrent change makes it fail; the next pass reads again).
pub(crate) async fn keep(
    api: &Api<DynamicObject>,
    obj: &Value,
    ours: &[&str],
) -> Result<(), kube::Error> {
    let Some(want) = wanted(obj, ours) else {
        return Ok(());
    };
    let name = obj
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let patch = json!({"metadata": {
        "finalizers": want,
        "resourceVersion": obj.pointer("/metadata/resourceVersion"),
    }});
    match api
        .patch(name, &PatchParams::default(), &Patch::Merge(patch))
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ours_are_added_while_it_lives_and_removed_once_it_is_deleted() {
        let obj = |finalizers: Value, deleting: bool| {
            let mut o = json!({"metadata": {"name": "x", "finalizers": finalizers}});
            if deleting {
                o["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
            }
            o
        };
        let (crd, fs) = (CONVERSION[0], CONVERSION[1]);
        let cases: &[(&str, Value, bool, Option<Vec<&str>>)] = &[
            ("new", Value::Null, false, Some(vec![crd, fs])),
            ("has both", json!([crd, fs]), false, None),
            ("has both, other order", json!([fs, crd]), false, None),
            ("has one", json!([fs]), false, Some(vec![fs, crd])),
            (
                "someone else's kept",
                json!(["x/keep"]),
                false,
                Some(vec!["x/keep", crd, fs]),
            ),
            (
                "deleted: ours go",
                json!(["x/keep", crd, fs]),
                true,
                Some(vec!["x/keep"]),
            ),
            ("deleted, none of ours", json!(["x/keep"]), true, None),
            ("deleted, none at all", Value::Null, true, None),
        ];
        for (case, finalizers, deleting, want) in cases {
            let got = wanted(&obj(finalizers.clone(), *deleting), CONVERSION);
            let want = want
                .as_ref()
                .map(|w| w.iter().map(|s| s.to_string()).collect::<Vec<_>>());
            assert_eq!(got, want, "{case}");
        }
    }
}
