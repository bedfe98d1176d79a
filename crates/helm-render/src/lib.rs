//! Helm 3's chart model and renderer, as `helm template` runs it: `Chart.yaml` (v1 and v2),
//! `values.yaml`, subcharts and library charts under `charts/`, value coalescing and scoping,
//! `values.schema.json`, `.Files`, `.Capabilities`, Helm's own template functions (`include`,
//! `tpl`, `required`…), and the output: documents in Helm's order with their `# Source:`
//! lines.
//!
//! Pure: the chart arrives as file contents (the caller reads the directory or archive), the
//! output is text. No I/O, no network (`lookup` answers an empty map, as `helm template` does).
//!
//! The stages, each its own module: [`loader`] (files → [`Chart`]), [`values`] and
//! [`strvals`] (the user's values), [`dependencies`] (conditions, tags, aliases, imports),
//! [`engine`] (templates → rendered files), [`manifests`] (files → ordered documents), and
//! [`render`] here, which runs them as `helm template` does and prints what it prints.

pub mod chart;
mod decode;
pub mod dependencies;
pub mod engine;
mod funcs_encoding;
pub mod glob;
pub mod helmignore;
pub mod loader;
pub mod manifests;
pub mod objects;
pub mod schema;
pub mod strvals;
pub mod toml;
pub mod values;
pub mod yaml;

pub use chart::{Chart, Dependency, File, Metadata};
pub use funcs_encoding::encoding_funcs;
pub use helmignore::HelmIgnore;
pub use loader::{LoadError, load_archive, load_files};
pub use objects::KubeVersion;
pub use values::ValueSources;
pub use yaml::{
    ManifestHead, ManifestMetadata, YamlError, parse_document, parse_head, parse_values,
};

use go_template::{Map, Value};

/// What `helm template NAME CHART [flags]` is asked.
#[derive(Clone, Debug)]
pub struct RenderOptions {
    /// The release name (`NAME`).
    pub release_name: String,
    /// `--namespace` (Helm's default: `default`).
    pub namespace: String,
    /// `--kube-version`, parsed.
    pub kube_version: Option<KubeVersion>,
    /// `--api-versions`, appended to Helm's defaults.
    pub api_versions: Vec<String>,
    /// `--include-crds`.
    pub include_crds: bool,
    /// `--show-only` patterns.
    pub show_only: Vec<String>,
    /// Objects set in the templates' root context (`$`) besides Helm's own, as nelm's
    /// `RootSetJSON` sets them (Deckhouse's package runtime hands an Application's chart
    /// `$.Application` and `$.Platform` this way). Every chart and subchart sees them; a name
    /// Helm uses itself ([`HELM_OBJECTS`]) is Helm's. Empty for `helm template`.
    pub root: std::collections::BTreeMap<String, serde_json::Value>,
}

impl Default for RenderOptions {
    fn default() -> Self {
        RenderOptions {
            release_name: "release-name".into(),
            namespace: "default".into(),
            kube_version: None,
            api_versions: Vec::new(),
            include_crds: false,
            show_only: Vec::new(),
            root: Default::default(),
        }
    }
}

/// The top-level objects Helm gives templates itself.
pub const HELM_OBJECTS: [&str; 7] = [
    "Values",
    "Release",
    "Capabilities",
    "Chart",
    "Files",
    "Subcharts",
    "Template",
];

/// Why `helm template` failed. `Display` is Helm's message (what follows `Error: `).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RenderError {
    /// The chart cannot be installed or its dependencies are missing.
    #[error("{0}")]
    Chart(String),
    /// Values did not merge, coalesce or validate.
    #[error("{0}")]
    Values(String),
    /// Rendering or sorting the manifests failed (Helm adds its `--debug` hint).
    #[error("{0}")]
    Render(String),
    /// A `--show-only` pattern matched nothing.
    #[error("{0}")]
    ShowOnly(String),
}

impl RenderError {
    /// Exactly what `helm template` writes to stderr for this error.
    pub fn stderr(&self) -> String {
        match self {
            RenderError::Render(m) => {
                format!("Error: {m}\n\nUse --debug flag to render out invalid YAML\n")
            }
            other => format!("Error: {other}\n"),
        }
    }
}

/// Helm's release name rule (`chartutil.ValidateReleaseName`).
pub fn validate_release_name(name: &str) -> Result<(), String> {
    let label_ok = |l: &str| {
        let b = l.as_bytes();
        !b.is_empty()
            && b[0].is_ascii_lowercase() | b[0].is_ascii_digit()
            && (b[b.len() - 1].is_ascii_lowercase() || b[b.len() - 1].is_ascii_digit())
            && b.iter()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
    };
    if name.is_empty() || name.len() > 53 || !name.split('.').all(label_ok) {
        return Err(format!(
            "release name {name:?}: invalid release name, must match regex ^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$ and the length must not be longer than 53"
        ));
    }
    Ok(())
}

/// The checks `helm template` makes on a loaded chart before rendering: installable type,
/// declared dependencies present in `charts/`.
pub fn check_chart(chart: &Chart) -> Result<(), RenderError> {
    match chart.metadata.chart_type.as_str() {
        "" | "application" => {}
        t => {
            return Err(RenderError::Chart(format!(
                "{t} charts are not installable"
            )));
        }
    }
    if let Some(reqs) = &chart.metadata.dependencies {
        let missing: Vec<&str> = reqs
            .iter()
            .flatten()
            .filter(|r| !chart.dependencies.iter().any(|d| d.name() == r.name))
            .map(|r| r.name.as_str())
            .collect();
        if !missing.is_empty() {
            return Err(RenderError::Chart(format!(
                "An error occurred while checking for chart dependencies. You may need to run `helm dependency build` to fetch missing dependencies: found in Chart.yaml, but missing in charts/ directory: {}",
                missing.join(", ")
            )));
        }
    }
    Ok(())
}

/// The values templates see at the top (`chartutil.ToRenderValues`): `Values` coalesced and
/// validated against the schemas, `Release`, `Capabilities` — and the caller's extra root
/// objects ([`RenderOptions::root`]), which never replace Helm's.
pub fn render_values(chart: &Chart, user: &Map, opts: &RenderOptions) -> Result<Map, RenderError> {
    let vals = values::coalesce_values(chart, user).map_err(RenderError::Values)?;
    schema::validate_against_schema(chart, &vals)
        .map_err(|report| RenderError::Values(schema::heading(&report)))?;
    let mut release = Map::new();
    release.insert("Name".into(), Value::string(opts.release_name.as_str()));
    release.insert("Namespace".into(), Value::string(opts.namespace.as_str()));
    release.insert("IsUpgrade".into(), Value::Bool(false));
    release.insert("IsInstall".into(), Value::Bool(true));
    release.insert("Revision".into(), Value::Int(1));
    release.insert("Service".into(), Value::string("Helm"));
    let caps = objects::Capabilities::new(opts.kube_version.clone(), &opts.api_versions);
    let mut top = Map::new();
    for (name, value) in &opts.root {
        if !HELM_OBJECTS.contains(&name.as_str()) {
            top.insert(name.clone(), Value::from_json(value));
        }
    }
    top.insert("Values".into(), Value::map(vals));
    top.insert("Release".into(), Value::map(release));
    top.insert("Capabilities".into(), Value::object(caps));
    Ok(top)
}

/// Runs `helm template` on a loaded chart with the user's merged values (see
/// [`ValueSources::merge`]) and returns what it prints on stdout.
pub fn render(
    chart: Chart,
    user_values: &Map,
    opts: &RenderOptions,
) -> Result<String, RenderError> {
    let mut chart = chart;
    check_chart(&chart)?;
    validate_release_name(&opts.release_name).map_err(RenderError::Chart)?;
    dependencies::process_dependencies(&mut chart, user_values).map_err(RenderError::Values)?;
    let top = render_values(&chart, user_values, opts)?;
    let kube = opts.kube_version.clone().unwrap_or_default();
    if !chart.metadata.kube_version.is_empty()
        && !sprig::semver::compatible(&chart.metadata.kube_version, &kube.version)
    {
        return Err(RenderError::Render(format!(
            "chart requires kubeVersion: {} which is incompatible with Kubernetes {}",
            chart.metadata.kube_version, kube.version
        )));
    }
    let files = engine::render(&chart, &top).map_err(RenderError::Render)?;
    assemble(&chart, files, opts)
}

/// The part of `helm template` after the engine: NOTES dropped, documents split and sorted,
/// CRDs (with `--include-crds`) first, hooks after the manifests, `--show-only` applied.
/// `rendered` is the engine's output: `(template name, text)`.
pub fn assemble(
    chart: &Chart,
    rendered: Vec<(String, String)>,
    opts: &RenderOptions,
) -> Result<String, RenderError> {
    let files: Vec<(String, String)> = rendered
        .into_iter()
        .filter(|(name, _)| !name.ends_with("NOTES.txt"))
        .collect();
    let (manifests, hooks) = manifests::sort_manifests(&files).map_err(RenderError::Render)?;

    let mut release_manifest = String::new();
    if opts.include_crds {
        for (name, file) in chart.crd_objects(chart.name()) {
            release_manifest.push_str(&format!(
                "---\n# Source: {name}\n{}\n",
                String::from_utf8_lossy(&file.data)
            ));
        }
    }
    for m in &manifests {
        release_manifest.push_str(&format!("---\n# Source: {}\n{}\n", m.path, m.content));
    }
    let mut out = format!("{}\n", release_manifest.trim_matches(char::is_whitespace));
    for h in &hooks {
        out.push_str(&format!("---\n# Source: {}\n{}\n", h.path, h.content));
    }
    if opts.show_only.is_empty() {
        return Ok(out);
    }
    show_only(&out, &opts.show_only)
}

/// `--show-only`: the documents whose `# Source:` path (without the chart name) matches
/// each pattern, pattern by pattern.
fn show_only(all: &str, patterns: &[String]) -> Result<String, RenderError> {
    let docs = manifests::split_manifests(all);
    let mut picked: Vec<&str> = Vec::new();
    for f in patterns {
        let mut missing = true;
        for doc in &docs {
            let Some(path) = source_path(doc) else {
                continue;
            };
            if !glob::path_match(f, path).unwrap_or(false) {
                continue;
            }
            picked.push(doc);
            missing = false;
        }
        if missing {
            return Err(RenderError::ShowOnly(format!(
                "could not find template {f} in chart"
            )));
        }
    }
    Ok(picked.iter().map(|d| format!("---\n{d}\n")).collect())
}

/// The first `# Source: <chart>/<path>` in a document: `<path>`.
fn source_path(doc: &str) -> Option<&str> {
    let i = doc.find("# Source: ")?;
    let rest = &doc[i + "# Source: ".len()..];
    let line_end = rest.find('\n').unwrap_or(rest.len());
    let line = &rest[..line_end];
    // [^/]+/(.+): the chart name is at least one character, no slash.
    let slash = line.find('/')?;
    if slash == 0 || slash + 1 >= line.len() {
        return None;
    }
    Some(&line[slash + 1..])
}
