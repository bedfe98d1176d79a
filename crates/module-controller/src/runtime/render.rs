//! Render: a module directory as addon-operator hands it to Helm — the directory is the chart
//! root (a module with `templates/` and no `Chart.yaml` gets addon-operator's generated one,
//! `name: <module>`, `version: 0.2.0`; a module with neither is not a Helm module), values
//! `{global: …, <moduleValuesKey>: …}` read as Helm reads a values file, release name = module
//! name — rendered by `helm-render` on its own thread, then split into objects.
//!
//! Reading the directory is the only I/O here; [`chart_values`], [`parse_manifest`] and
//! [`decorate`] are pure.

use std::path::Path;

use helm_render::helmignore::{HELMIGNORE, HelmIgnore};
use helm_render::loader::MAX_DECOMPRESSED_FILE_SIZE;
use serde_json::{Map, Value};

use crate::Error;

/// The version of the `Chart.yaml` addon-operator writes for a module without one.
pub const GENERATED_CHART_VERSION: &str = "0.2.0";

/// Label Helm (and nelm) put on every resource of a release.
pub const LABEL_MANAGED_BY: &str = "app.kubernetes.io/managed-by";
/// Annotation naming the owning release.
pub const ANNOTATION_RELEASE_NAME: &str = "meta.helm.sh/release-name";
/// Annotation naming the owning release's namespace.
pub const ANNOTATION_RELEASE_NAMESPACE: &str = "meta.helm.sh/release-namespace";

/// Symlink hops and directory depth followed while reading a module.
const MAX_DEPTH: usize = 32;
/// The whole chart read from a module directory, at most.
const MAX_CHART_BYTES: u64 = 100 * 1024 * 1024;

/// A chart's files: `(path in the chart, contents)`.
pub type ChartFiles = Vec<(String, Vec<u8>)>;

/// The files of a module's chart, ready for `helm_render::load_files`; `None` when the module
/// is not a Helm module (neither `Chart.yaml` nor `templates/`).
pub fn read_chart(module: &str, dir: &Path) -> Result<Option<ChartFiles>, Error> {
    let has_chart = dir.join("Chart.yaml").is_file();
    let has_templates = dir.join("templates").is_dir();
    if !has_chart && !has_templates {
        return Ok(None);
    }
    let rules = match std::fs::read_to_string(dir.join(HELMIGNORE)) {
        Ok(text) => HelmIgnore::parse(&text).map_err(|e| Error::Render {
            module: module.to_owned(),
            message: e.to_string(),
        })?,
        Err(_) => HelmIgnore::default(),
    };
    let mut files = Vec::new();
    let mut total = 0u64;
    walk(module, dir, "", &rules, &mut files, &mut total, 0)?;
    if !has_chart {
        files.push((
            "Chart.yaml".into(),
            generated_chart_yaml(module).into_bytes(),
        ));
    }
    Ok(Some(files))
}

/// addon-operator's `Chart.yaml` for a module that has none.
pub fn generated_chart_yaml(module: &str) -> String {
    format!("apiVersion: v2\nname: {module}\nversion: {GENERATED_CHART_VERSION}\n")
}

fn walk(
    module: &str,
    dir: &Path,
    rel: &str,
    rules: &HelmIgnore,
    out: &mut Vec<(String, Vec<u8>)>,
    total: &mut u64,
    depth: usize,
) -> Result<(), Error> {
    if depth > MAX_DEPTH {
        return Err(Error::Render {
            module: module.to_owned(),
            message: format!("{rel}: directories nested too deeply"),
        });
    }
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .map_err(|e| Error::io("read", dir, e))?
        .filter_map(Result::ok)
        .collect();
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let name = entry.file_name().to_string_lossy().into_owned();
        let n = if rel.is_empty() {
            name.clone()
        } else {
            format!("{rel}/{name}")
        };
        let path = entry.path();
        // Symlinks are followed (Deckhouse modules link `charts/helm_lib` to the shared
        // library); a downloaded module's links were checked when it was unpacked.
        let Ok(meta) = std::fs::metadata(&path) else {
            continue;
        };
        if meta.is_dir() {
            if !rules.ignore(&n, true) {
                walk(module, &path, &n, rules, out, total, depth + 1)?;
            }
            continue;
        }
        if rules.ignore(&n, false) || !meta.is_file() {
            continue;
        }
        if meta.len() > MAX_DECOMPRESSED_FILE_SIZE {
            return Err(Error::Render {
                module: module.to_owned(),
                message: format!(
                    "chart file {name:?} is larger than the maximum file size {MAX_DECOMPRESSED_FILE_SIZE}"
                ),
            });
        }
        *total += meta.len();
        if *total > MAX_CHART_BYTES {
            return Err(Error::TooLarge {
                what: format!("the chart of module {module}"),
                actual: *total,
                limit: MAX_CHART_BYTES,
            });
        }
        let data = std::fs::read(&path).map_err(|e| Error::io("read", &path, e))?;
        let data = match data.strip_prefix(b"\xEF\xBB\xBF") {
            Some(rest) => rest.to_vec(),
            None => data,
        };
        out.push((n, data));
    }
    Ok(())
}

/// The values a module's chart is rendered with: `global` and the module's own values under
/// its camelCase key (addon-operator's `ModuleNameToValuesKey`).
///
/// Stand-in until `module-plan` assembles values: `module` holds the module's settings
/// (converted and defaulted), `global` the global values.
pub fn chart_values(module: &str, global: &Value, module_values: &Value) -> Value {
    let mut top = Map::new();
    top.insert("global".into(), global.clone());
    top.insert(
        module_plan::definition::camel_case(module),
        module_values.clone(),
    );
    Value::Object(top)
}

/// What rendering a module produced.
#[derive(Clone, Debug, PartialEq)]
pub struct Rendered {
    /// The release manifest: Helm's output (documents with their `# Source:` lines).
    pub manifest: String,
    /// The objects to apply, in Helm's install order (Helm hooks left out).
    pub objects: Vec<Value>,
}

/// Root objects a chart's templates see besides Helm's (`$.<name>`): none for a module, an
/// Application's `Application` and `Platform` for a package (nelm's root values).
pub type RootObjects = std::collections::BTreeMap<String, Value>;

/// Renders the chart `files` of `module` with `values` (and the `root` objects) into the
/// release `namespace`, on a thread with the engine's stack.
pub async fn render(
    module: &str,
    files: ChartFiles,
    values: &Value,
    root: RootObjects,
    namespace: &str,
) -> Result<Rendered, Error> {
    let err = |message: String| Error::Render {
        module: module.to_owned(),
        message,
    };
    // Helm reads the values from a file addon-operator writes: the same reading here.
    let text = serde_json::to_string(values).map_err(|e| err(e.to_string()))?;
    let opts = helm_render::RenderOptions {
        release_name: module.to_owned(),
        namespace: namespace.to_owned(),
        root,
        ..Default::default()
    };
    let (tx, rx) = tokio::sync::oneshot::channel();
    std::thread::Builder::new()
        .name(format!("render-{module}"))
        .stack_size(helm_render::engine::RENDER_THREAD_STACK)
        .spawn(move || {
            let out = (|| {
                let user = helm_render::parse_values(&text).map_err(|e| e.message().to_owned())?;
                let chart = helm_render::load_files(files).map_err(|e| e.to_string())?;
                helm_render::render(chart, &user, &opts).map_err(|e| e.to_string())
            })();
            let _ = tx.send(out);
        })
        .map_err(|e| err(format!("cannot start the render thread: {e}")))?;
    let manifest = rx
        .await
        .map_err(|_| err("rendering template failed".into()))?
        .map_err(err)?;
    let objects = parse_manifest(&manifest).map_err(err)?;
    Ok(Rendered { manifest, objects })
}

/// Splits Helm's output into objects: empty documents dropped, Helm hooks
/// (`helm.sh/hook`) left out, each document decoded as kubectl decodes YAML (integers kept).
pub fn parse_manifest(manifest: &str) -> Result<Vec<Value>, String> {
    let mut out = Vec::new();
    for doc in helm_render::manifests::split_manifests(manifest) {
        let source = doc
            .lines()
            .find_map(|l| l.strip_prefix("# Source: "))
            .unwrap_or("")
            .to_owned();
        let checked = helm_render::parse_document(&doc)
            .map_err(|e| format!("YAML parse error on {source}: {}", e.message()))?;
        if matches!(checked, go_template::Value::Nil) {
            continue;
        }
        let value: Value = serde_saphyr::from_str(&doc)
            .ok()
            .or_else(|| checked.to_json())
            .unwrap_or(Value::Null);
        let Value::Object(object) = &value else {
            return Err(format!("{source}: a document is not an object"));
        };
        let kind = object.get("kind").and_then(Value::as_str).unwrap_or("");
        let api_version = object
            .get("apiVersion")
            .and_then(Value::as_str)
            .unwrap_or("");
        let name = object
            .get("metadata")
            .and_then(|m| m.get("name"))
            .and_then(Value::as_str)
            .unwrap_or("");
        if kind.is_empty() || api_version.is_empty() {
            return Err(format!(
                "{source}: Object 'Kind' is missing or apiVersion is not set"
            ));
        }
        if name.is_empty() {
            return Err(format!("{source}: {kind} has no metadata.name"));
        }
        let hook = object
            .get("metadata")
            .and_then(|m| m.get("annotations"))
            .and_then(|a| a.get("helm.sh/hook"))
            .is_some();
        if !hook {
            out.push(value);
        }
    }
    Ok(out)
}

/// Puts on each object what Helm puts on a release's resources (`app.kubernetes.io/managed-by:
/// Helm`, `meta.helm.sh/release-name` and `-namespace`), plus `extra_labels` (addon-operator's
/// maintenance label).
pub fn decorate(
    objects: &mut [Value],
    release: &str,
    release_namespace: &str,
    extra_labels: &[(&str, &str)],
) {
    for object in objects {
        let Some(object) = object.as_object_mut() else {
            continue;
        };
        let metadata = object
            .entry("metadata")
            .or_insert_with(|| Value::Object(Map::new()));
        let Some(metadata) = metadata.as_object_mut() else {
            continue;
        };
        let labels = metadata
            .entry("labels")
            .or_insert_with(|| Value::Object(Map::new()));
        if !labels.is_object() {
            *labels = Value::Object(Map::new());
        }
        if let Some(labels) = labels.as_object_mut() {
            labels.insert(LABEL_MANAGED_BY.into(), "Helm".into());
            for (k, v) in extra_labels {
                labels.insert((*k).into(), (*v).into());
            }
        }
        let annotations = metadata
            .entry("annotations")
            .or_insert_with(|| Value::Object(Map::new()));
        if !annotations.is_object() {
            *annotations = Value::Object(Map::new());
        }
        if let Some(annotations) = annotations.as_object_mut() {
            annotations.insert(ANNOTATION_RELEASE_NAME.into(), release.into());
            annotations.insert(
                ANNOTATION_RELEASE_NAMESPACE.into(),
                release_namespace.into(),
            );
        }
    }
}

#[cfg(test)]
mod tests;
