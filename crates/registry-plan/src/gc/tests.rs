use super::*;
use proptest::prelude::*;

const ROOT: &str = "system/deckhouse";

fn d(name: &str) -> String {
    format!("sha256:{}", oci::Digest::sha256(name.as_bytes()).encoded())
}

/// A catalog of the platform repository with one image per version (`m-<v>` referencing
/// `cfg-<v>` and `layer-<v>`, plus a layer every version shares), a tag per version, and a
/// foreign repository.
fn catalog(versions: &[&str]) -> Catalog {
    let mut c = Catalog::default();
    let root = c.repositories.entry(ROOT.into()).or_default();
    for v in versions {
        let m = d(&format!("m-{v}"));
        root.manifests.insert(m.clone());
        root.tags.insert((*v).to_owned(), m.clone());
        c.references.insert(
            m,
            vec![
                d(&format!("cfg-{v}")),
                d(&format!("layer-{v}")),
                d("shared"),
            ],
        );
    }
    c
}

fn rules(deployed: &str, previous: Option<&str>, keep: &[&str]) -> Rules {
    Rules {
        root: ROOT.into(),
        deployed: Some(deployed.into()),
        previous: previous.map(Into::into),
        keep: Some(keep.iter().map(|v| d(&format!("m-{v}"))).collect()),
    }
}

fn deleted_tags(plan: &Plan) -> Vec<&str> {
    plan.delete_tags.iter().map(|(_, t)| t.as_str()).collect()
}

#[test]
fn tag_fates_follow_the_rules() {
    let cases = [
        ("v1.60.3", "v1.60.3", Some("v1.59.9"), TagFate::Deployed),
        ("v1.59.9", "v1.60.3", Some("v1.59.9"), TagFate::Previous),
        ("v1.61.0", "v1.60.3", Some("v1.59.9"), TagFate::Newer),
        ("v1.60.4", "v1.60.3", None, TagFate::Newer),
        ("stable", "v1.60.3", None, TagFate::NotSemver),
        ("v1.60", "v1.60.3", None, TagFate::NotSemver),
        ("v1.59.0", "v1.60.3", Some("v1.59.9"), TagFate::Older),
        ("v1.60.3-rc.1", "v1.60.3", None, TagFate::Older),
        ("1.58.0", "v1.60.3", None, TagFate::Older),
        ("v1.58.0", "pr21788", None, TagFate::DeployedUnordered),
    ];
    for (tag, deployed, previous, fate) in cases {
        assert_eq!(
            tag_fate(tag, deployed, previous),
            fate,
            "{tag} vs {deployed}"
        );
        assert_eq!(fate.kept(), fate != TagFate::Older);
    }
}

#[test]
fn several_versions_keep_deployed_previous_newer_and_channels() {
    let mut c = catalog(&["v1.57.0", "v1.58.0", "v1.59.0", "v1.60.0", "v1.61.0"]);
    let root = c.repositories.get_mut(ROOT).expect("root");
    root.tags.insert("stable".into(), d("m-v1.60.0"));
    let plan = plan(
        &c,
        &rules("v1.60.0", Some("v1.59.0"), &["v1.59.0", "v1.60.0"]),
    )
    .expect("plan");
    assert_eq!(deleted_tags(&plan), ["v1.57.0", "v1.58.0"]);
    let manifests: Vec<&str> = plan
        .delete_manifests
        .iter()
        .map(|(_, m)| m.as_str())
        .collect();
    assert_eq!(manifests.len(), 2);
    assert!(manifests.contains(&d("m-v1.57.0").as_str()));
    assert!(manifests.contains(&d("m-v1.58.0").as_str()));
    // v1.61.0 is newer: its tag survives, so its manifest and blobs are marked.
    for kept in ["m-v1.61.0", "layer-v1.61.0", "cfg-v1.59.0", "shared"] {
        assert!(plan.marked.contains(&d(kept)), "{kept} must be kept");
    }
    let blobs: Vec<String> = ["v1.57.0", "v1.58.0", "v1.59.0", "v1.60.0", "v1.61.0"]
        .iter()
        .flat_map(|v| {
            [
                d(&format!("m-{v}")),
                d(&format!("cfg-{v}")),
                d(&format!("layer-{v}")),
            ]
        })
        .chain([d("shared"), d("stray")])
        .collect();
    let mut swept = plan.sweep(blobs.iter().map(String::as_str), |_| false);
    swept.sort();
    let mut expected: Vec<String> = ["v1.57.0", "v1.58.0"]
        .iter()
        .flat_map(|v| {
            [
                d(&format!("m-{v}")),
                d(&format!("cfg-{v}")),
                d(&format!("layer-{v}")),
            ]
        })
        .chain([d("stray")])
        .collect();
    expected.sort();
    assert_eq!(swept, expected);
    // A blob in use is skipped this run.
    let in_use = d("layer-v1.57.0");
    let swept = plan.sweep(blobs.iter().map(String::as_str), |b| b == in_use);
    assert!(!swept.contains(&in_use));
    assert_eq!(swept.len(), expected.len() - 1);
}

#[test]
fn foreign_version_spaces_keep_their_tags() {
    let mut c = catalog(&["v1.60.0"]);
    let foreign = c
        .repositories
        .entry(format!("{ROOT}/modules/echo"))
        .or_default();
    foreign.tags.insert("v0.1.0".into(), d("echo-old"));
    foreign.manifests.insert(d("echo-old"));
    foreign.manifests.insert(d("echo-untagged"));
    c.references.insert(d("echo-old"), vec![d("echo-layer")]);
    c.references
        .insert(d("echo-untagged"), vec![d("echo-layer2")]);
    let plan = plan(&c, &rules("v1.60.0", None, &["v1.60.0"])).expect("plan");
    assert!(plan.delete_tags.is_empty(), "{:?}", plan.delete_tags);
    assert_eq!(
        plan.delete_manifests,
        [(format!("{ROOT}/modules/echo"), d("echo-untagged"))]
    );
    assert!(plan.marked.contains(&d("echo-layer")));
    assert!(!plan.marked.contains(&d("echo-layer2")));
}

#[test]
fn an_index_keeps_its_children() {
    let mut c = catalog(&["v1.60.0"]);
    let root = c.repositories.get_mut(ROOT).expect("root");
    root.tags.insert("v1.60.0".into(), d("index"));
    root.manifests.insert(d("index"));
    root.manifests.insert(d("m-arm"));
    c.references
        .insert(d("index"), vec![d("m-v1.60.0"), d("m-arm")]);
    c.references.insert(d("m-arm"), vec![d("layer-arm")]);
    let mut r = rules("v1.60.0", None, &[]);
    r.keep = Some(BTreeSet::new());
    let plan = plan(&c, &r).expect("plan");
    assert!(
        plan.delete_manifests.is_empty(),
        "{:?}",
        plan.delete_manifests
    );
    assert!(plan.marked.contains(&d("layer-arm")));
    assert!(plan.marked.contains(&d("layer-v1.60.0")));
}

#[test]
fn unordered_deployed_version_deletes_no_tag() {
    let c = catalog(&["v1.58.0", "pr21788"]);
    let plan = plan(&c, &rules("pr21788", None, &["pr21788"])).expect("plan");
    assert!(plan.delete_tags.is_empty());
    assert!(plan.delete_manifests.is_empty());
    assert!(
        plan.notes.iter().any(|n| n.contains("pr21788")),
        "{:?}",
        plan.notes
    );
}

#[test]
fn unknown_keep_set_or_deployed_version_deletes_nothing() {
    let c = catalog(&["v1.58.0", "v1.60.0"]);
    let mut r = rules("v1.60.0", None, &[]);
    r.keep = None;
    let plan = plan(&c, &r).expect("plan");
    assert!(plan.delete_tags.is_empty() && plan.delete_manifests.is_empty());
    assert!(plan.sweep([d("stray").as_str()], |_| false).is_empty());
    r.deployed = None;
    assert_eq!(super::plan(&c, &r), Err(GcError::NoDeployedVersion));
}

#[test]
fn an_unreadable_kept_manifest_blocks_the_sweep() {
    let mut c = catalog(&["v1.60.0"]);
    c.references.remove(&d("m-v1.60.0"));
    let plan = plan(&c, &rules("v1.60.0", None, &["v1.60.0"])).expect("plan");
    assert!(plan.sweep_blocked.is_some());
    assert!(
        plan.sweep([d("layer-v1.60.0").as_str()], |_| false)
            .is_empty()
    );
}

proptest! {
    /// Whatever the versions: the deployed and previous tags and every newer or non-semver tag
    /// survive, everything a surviving tag reaches is marked, and planning again over the
    /// result deletes nothing more.
    #[test]
    fn rules_hold_and_a_second_run_is_empty(
        minors in proptest::collection::btree_set(0u64..30, 1..8),
        deployed_at in 0usize..8,
        channel in any::<bool>(),
    ) {
        let versions: Vec<String> = minors.iter().map(|m| format!("v1.{m}.0")).collect();
        let refs: Vec<&str> = versions.iter().map(String::as_str).collect();
        let mut c = catalog(&refs);
        let deployed = versions[deployed_at % versions.len()].clone();
        let previous = versions.iter().rfind(|v| version(v) < version(&deployed)).cloned();
        if channel {
            c.repositories.get_mut(ROOT).expect("root").tags.insert("stable".into(), d(&format!("m-{deployed}")));
        }
        let mut keep = vec![deployed.as_str()];
        keep.extend(previous.as_deref());
        let r = rules(&deployed, previous.as_deref(), &keep);
        let p = plan(&c, &r).expect("plan");
        for (_, tag) in &p.delete_tags {
            prop_assert!(version(tag) < version(&deployed));
            prop_assert!(Some(tag) != previous.as_ref());
        }
        for (tag, target) in &c.repositories[ROOT].tags {
            if !p.delete_tags.iter().any(|(_, t)| t == tag) {
                prop_assert!(p.marked.contains(target));
            }
        }
        // Apply, then plan again.
        let root = c.repositories.get_mut(ROOT).expect("root");
        for (_, tag) in &p.delete_tags { root.tags.remove(tag); }
        for (_, m) in &p.delete_manifests { root.manifests.remove(m); }
        let again = plan(&c, &r).expect("plan");
        prop_assert!(again.delete_tags.is_empty());
        prop_assert!(again.delete_manifests.is_empty());
    }
}
