//! The generated CRDs: they build, they are structural, they match Deckhouse's names, scopes,
//! versions and short names, their printer columns point at real fields, and the manifests
//! committed under `crds/` are exactly what the types generate.

use std::collections::BTreeSet;
use std::path::PathBuf;

use api::crds;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use serde_json::Value;

fn crds_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../crds")
}

fn schema_of(crd: &CustomResourceDefinition, version: &str) -> Value {
    let v = crd
        .spec
        .versions
        .iter()
        .find(|v| v.name == version)
        .expect("version");
    let schema = v
        .schema
        .as_ref()
        .and_then(|s| s.open_api_v3_schema.as_ref())
        .expect("schema");
    serde_json::to_value(schema).expect("schema to JSON")
}

/// (name, group, kind, scope, [(version, served, storage)], short names) as in Deckhouse.
type Expected = (
    &'static str,
    &'static str,
    &'static str,
    &'static str,
    &'static [(&'static str, bool, bool)],
    &'static [&'static str],
);

const DECKHOUSE: &[Expected] = &[
    (
        "modules.deckhouse.io",
        "deckhouse.io",
        "Module",
        "Cluster",
        &[("v1alpha1", true, true), ("v1beta1", false, false)],
        &[],
    ),
    (
        "moduleconfigs.deckhouse.io",
        "deckhouse.io",
        "ModuleConfig",
        "Cluster",
        &[("v1alpha1", true, true)],
        &["mc"],
    ),
    (
        "modulesources.deckhouse.io",
        "deckhouse.io",
        "ModuleSource",
        "Cluster",
        &[("v1alpha1", true, true)],
        &["ms"],
    ),
    (
        "modulereleases.deckhouse.io",
        "deckhouse.io",
        "ModuleRelease",
        "Cluster",
        &[("v1alpha1", true, true)],
        &["mr"],
    ),
    (
        "moduleupdatepolicies.deckhouse.io",
        "deckhouse.io",
        "ModuleUpdatePolicy",
        "Cluster",
        &[("v1alpha1", true, false), ("v1alpha2", true, true)],
        &["mup"],
    ),
    (
        "modulepulloverrides.deckhouse.io",
        "deckhouse.io",
        "ModulePullOverride",
        "Cluster",
        &[("v1alpha1", false, false), ("v1alpha2", true, true)],
        &["mpo"],
    ),
    (
        "modulesettingsdefinitions.deckhouse.io",
        "deckhouse.io",
        "ModuleSettingsDefinition",
        "Cluster",
        &[("v1alpha1", true, true)],
        &[],
    ),
    (
        "moduledocumentations.deckhouse.io",
        "deckhouse.io",
        "ModuleDocumentation",
        "Cluster",
        &[("v1alpha1", true, true)],
        &[],
    ),
    (
        "deckhousereleases.deckhouse.io",
        "deckhouse.io",
        "DeckhouseRelease",
        "Cluster",
        &[("v1alpha1", true, true)],
        &[],
    ),
    (
        "objectkeepers.deckhouse.io",
        "deckhouse.io",
        "ObjectKeeper",
        "Cluster",
        &[("v1alpha1", true, true)],
        &[],
    ),
    (
        "conversionwebhooks.deckhouse.io",
        "deckhouse.io",
        "ConversionWebhook",
        "Cluster",
        &[("v1alpha1", true, true)],
        &["cwhc"],
    ),
    (
        "validationwebhooks.deckhouse.io",
        "deckhouse.io",
        "ValidationWebhook",
        "Cluster",
        &[("v1alpha1", true, true)],
        &["vwhc"],
    ),
    (
        "applications.deckhouse.io",
        "deckhouse.io",
        "Application",
        "Namespaced",
        &[("v1alpha1", true, true)],
        &["app"],
    ),
    (
        "applicationpackages.deckhouse.io",
        "deckhouse.io",
        "ApplicationPackage",
        "Cluster",
        &[("v1alpha1", true, true)],
        &[],
    ),
    (
        "applicationpackageversions.deckhouse.io",
        "deckhouse.io",
        "ApplicationPackageVersion",
        "Cluster",
        &[("v1alpha1", true, true)],
        &["apv"],
    ),
    (
        "packagerepositories.deckhouse.io",
        "deckhouse.io",
        "PackageRepository",
        "Cluster",
        &[("v1alpha1", true, true)],
        &[],
    ),
    (
        "packagerepositoryoperations.deckhouse.io",
        "deckhouse.io",
        "PackageRepositoryOperation",
        "Cluster",
        &[("v1alpha1", true, true)],
        &["pro"],
    ),
    (
        "cnimigrations.network.deckhouse.io",
        "network.deckhouse.io",
        "CNIMigration",
        "Cluster",
        &[("v1alpha1", true, true)],
        &["cnimig"],
    ),
    (
        "cninodemigrations.network.deckhouse.io",
        "network.deckhouse.io",
        "CNINodeMigration",
        "Cluster",
        &[("v1alpha1", true, true)],
        &["cninm"],
    ),
    (
        "registryconfigs.deckhouse.io",
        "deckhouse.io",
        "RegistryConfig",
        "Cluster",
        &[("v1alpha1", true, true)],
        &["rcfg"],
    ),
    (
        "registryupstreams.deckhouse.io",
        "deckhouse.io",
        "RegistryUpstream",
        "Cluster",
        &[("v1alpha1", true, true)],
        &["rup"],
    ),
    (
        "registrynodes.deckhouse.io",
        "deckhouse.io",
        "RegistryNode",
        "Cluster",
        &[("v1alpha1", true, true)],
        &["rnode"],
    ),
    (
        "registrystorages.deckhouse.io",
        "deckhouse.io",
        "RegistryStorage",
        "Cluster",
        &[("v1alpha1", true, true)],
        &["rstor"],
    ),
];

#[test]
fn every_kind_has_deckhouses_names_scope_versions_and_short_names() {
    let all = crds::all();
    assert_eq!(all.len(), DECKHOUSE.len());
    for (crd, (name, group, kind, scope, versions, short)) in all.iter().zip(DECKHOUSE) {
        assert_eq!(crd.metadata.name.as_deref(), Some(*name));
        assert_eq!(crd.spec.group, *group, "{name}");
        assert_eq!(crd.spec.names.kind, *kind, "{name}");
        assert_eq!(crd.spec.scope, *scope, "{name}");
        assert_eq!(
            format!("{}.{}", crd.spec.names.plural, crd.spec.group),
            *name
        );
        let got: Vec<(&str, bool, bool)> = crd
            .spec
            .versions
            .iter()
            .map(|v| (v.name.as_str(), v.served, v.storage))
            .collect();
        assert_eq!(got, versions.to_vec(), "{name}");
        let got_short = crd.spec.names.short_names.clone().unwrap_or_default();
        assert_eq!(
            got_short,
            short.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
            "{name}"
        );
        assert_eq!(
            crd.spec.versions.iter().filter(|v| v.storage).count(),
            1,
            "{name}"
        );
    }
}

#[test]
fn every_schema_is_structural() {
    for crd in crds::all() {
        for v in &crd.spec.versions {
            let schema = schema_of(&crd, &v.name);
            let violations = crds::structural_violations(&schema);
            assert!(
                violations.is_empty(),
                "{} {}: {violations:#?}",
                crd.spec.names.kind,
                v.name
            );
        }
    }
}

#[test]
fn unknown_fields_are_preserved_only_where_deckhouse_preserves_them() {
    let expected: &[(&str, &str, &[&str])] = &[
        ("Module", "v1alpha1", &[".properties.requirements", ".spec"]),
        ("Module", "v1beta1", &[".spec.settings"]),
        ("ModuleConfig", "*", &[".spec.settings"]),
        ("ModuleRelease", "*", &[".spec.changelog"]),
        (
            "ModuleSettingsDefinition",
            "*",
            &[".spec.versions[].schema"],
        ),
        ("DeckhouseRelease", "*", &[".spec.changelog"]),
        (
            "Application",
            "*",
            &[
                ".spec.settings",
                ".status.lastAppliedConfiguration",
                ".status.tracking",
            ],
        ),
    ];
    for crd in crds::all() {
        let kind = crd.spec.names.kind.clone();
        for v in &crd.spec.versions {
            let want: BTreeSet<String> = expected
                .iter()
                .find(|(k, version, _)| *k == kind && (*version == "*" || *version == v.name))
                .map(|(_, _, paths)| paths.iter().map(|p| p.to_string()).collect())
                .unwrap_or_default();
            let got: BTreeSet<String> = crds::preserve_unknown_paths(&schema_of(&crd, &v.name))
                .into_iter()
                .collect();
            assert_eq!(got, want, "{kind} {}", v.name);
        }
    }
}

/// Columns Deckhouse ships pointing at a field its schema does not declare (kind, column, path).
const DECKHOUSE_DANGLING_COLUMNS: &[(&str, &str, &str)] = &[(
    "ApplicationPackageVersion",
    "Repository",
    ".spec.packageRepository",
)];

#[test]
fn deckhouses_dangling_columns_are_kept_as_shipped() {
    for (kind, column, path) in DECKHOUSE_DANGLING_COLUMNS {
        let crd = crds::find("deckhouse.io", kind).expect("kind");
        let col = crd.spec.versions[0]
            .additional_printer_columns
            .iter()
            .flatten()
            .find(|c| c.name == *column)
            .expect("column");
        assert_eq!(col.json_path, *path, "{kind} {column}");
    }
}

#[test]
fn printer_columns_point_at_declared_fields() {
    for crd in crds::all() {
        for v in &crd.spec.versions {
            let schema = schema_of(&crd, &v.name);
            for col in v.additional_printer_columns.iter().flatten() {
                if col.json_path.starts_with(".metadata.")
                    || DECKHOUSE_DANGLING_COLUMNS.contains(&(
                        crd.spec.names.kind.as_str(),
                        col.name.as_str(),
                        col.json_path.as_str(),
                    ))
                {
                    continue;
                }
                // `.status.conditions[?(@.type=='X')].status`: the filter selects items.
                let path = match col.json_path.split_once("[?(") {
                    Some((head, rest)) => {
                        format!(
                            "{head}[?]{}",
                            rest.split_once(")]").map(|(_, t)| t).unwrap_or("")
                        )
                    }
                    None => col.json_path.clone(),
                };
                let mut node = &schema;
                let mut ok = true;
                for step in path.trim_start_matches('.').split('.') {
                    let (field, filtered) = match step.strip_suffix("[?]") {
                        Some(f) => (f, true),
                        None => (step, false),
                    };
                    match node.get("properties").and_then(|p| p.get(field)) {
                        Some(next) => node = next,
                        None => {
                            ok = false;
                            break;
                        }
                    }
                    if filtered {
                        node = match node.get("items") {
                            Some(items) => items,
                            None => {
                                ok = false;
                                break;
                            }
                        };
                    }
                }
                assert!(
                    ok,
                    "{} {}: column {:?} points at {:?}, not declared",
                    crd.spec.names.kind, v.name, col.name, col.json_path
                );
            }
        }
    }
}

#[test]
fn committed_manifests_equal_the_generated_ones() {
    let dir = crds_dir();
    let update = std::env::var_os("UPDATE_CRDS").is_some_and(|v| v == "1");
    if update {
        std::fs::create_dir_all(&dir).expect("create crds/");
    }
    let mut expected_files = BTreeSet::new();
    let mut stale = Vec::new();
    for crd in crds::all() {
        let file = crds::file_name(&crd);
        let text = crds::to_yaml(&crd).expect("render");
        let path = dir.join(&file);
        expected_files.insert(file.clone());
        if update {
            std::fs::write(&path, &text).expect("write manifest");
            continue;
        }
        match std::fs::read_to_string(&path) {
            Ok(committed) if committed == text => {
                let parsed = crds::from_yaml(&file, &committed).expect("parse committed manifest");
                assert_eq!(parsed, crd, "{file} does not parse back to the same CRD");
            }
            Ok(_) => stale.push(format!("{file} differs")),
            Err(e) => stale.push(format!("{file}: {e}")),
        }
    }
    let present: BTreeSet<String> = std::fs::read_dir(&dir)
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.ends_with(".yaml"))
                .collect()
        })
        .unwrap_or_default();
    for extra in present.difference(&expected_files) {
        if update {
            std::fs::remove_file(dir.join(extra)).expect("remove stale manifest");
        } else {
            stale.push(format!("{extra} is not generated by any type"));
        }
    }
    assert!(
        stale.is_empty(),
        "crds/ is out of date, run `UPDATE_CRDS=1 cargo test -p api --test crds`:\n{}",
        stale.join("\n")
    );
}

/// What the API server accepts without `spec` (Deckhouse's schemas of these kinds do not require
/// it) our controllers can read: the object decodes with an empty spec instead of failing.
#[test]
fn kinds_without_a_required_spec_decode_without_one() {
    let apv: api::packages::ApplicationPackageVersion = serde_json::from_value(serde_json::json!({
        "apiVersion": "deckhouse.io/v1alpha1",
        "kind": "ApplicationPackageVersion",
        "metadata": {"name": "main-nginx-v1.2.3"},
    }))
    .expect("ApplicationPackageVersion without spec");
    assert_eq!(apv.spec, Default::default());
    let migration: api::network::CNIMigration = serde_json::from_value(serde_json::json!({
        "apiVersion": "network.deckhouse.io/v1alpha1",
        "kind": "CNIMigration",
        "metadata": {"name": "cni-migration"},
        "status": {"currentCNI": "flannel"},
    }))
    .expect("CNIMigration without spec");
    assert_eq!(migration.spec, Default::default());
    let node: api::network::CNINodeMigration = serde_json::from_value(serde_json::json!({
        "apiVersion": "network.deckhouse.io/v1alpha1",
        "kind": "CNINodeMigration",
        "metadata": {"name": "worker-0"},
    }))
    .expect("CNINodeMigration without spec");
    assert_eq!(node.spec, Default::default());
}
