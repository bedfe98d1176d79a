//! The chart model: `Chart.yaml`'s metadata as Helm's `chart.Metadata` holds it, the chart's
//! values, schema, templates, other files and subcharts, and Helm's validation of the metadata.

use go_template::Map;

use crate::decode::{self, Decoder};
use sprig::semver;

/// `apiVersion: v1` (Helm 2 charts: dependencies in `requirements.yaml`).
pub const API_VERSION_V1: &str = "v1";
/// `apiVersion: v2`.
pub const API_VERSION_V2: &str = "v2";

/// A file of a chart, by its path relative to the chart root (`templates/x.yaml`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct File {
    /// The path, `/`-separated.
    pub name: String,
    /// The contents.
    pub data: Vec<u8>,
}

/// A loaded chart.
#[derive(Clone, Debug, Default)]
pub struct Chart {
    /// `Chart.yaml` (plus `requirements.yaml`'s dependencies for v1 charts).
    pub metadata: Metadata,
    /// `values.yaml`.
    pub values: Map,
    /// `values.schema.json`, raw.
    pub schema: Option<Vec<u8>>,
    /// Files under `templates/`.
    pub templates: Vec<File>,
    /// Every other file the loader keeps (`crds/`, `files/`, `.helmignore`, …): `.Files`.
    pub files: Vec<File>,
    /// Subcharts, from `charts/`.
    pub dependencies: Vec<Chart>,
}

impl Chart {
    /// The chart's name (after an alias is applied, the alias).
    pub fn name(&self) -> &str {
        &self.metadata.name
    }

    /// Whether this is a library chart (`type: library`).
    pub fn is_library(&self) -> bool {
        self.metadata.chart_type == "library"
    }

    /// The CRD files (`.yaml`, `.yml`, `.json` under `crds/`) as Helm's `CRDObjects` lists
    /// them: this chart's, then each subchart's, named as `# Source:` prints them
    /// (`<chart>/crds/x.yaml`, `<chart>/charts/<sub>/crds/x.yaml`).
    pub fn crd_objects(&self, full_path: &str) -> Vec<(String, &File)> {
        let mut out = Vec::new();
        for f in &self.files {
            if f.name.starts_with("crds/") && has_crd_ext(&f.name) {
                out.push((format!("{full_path}/{}", f.name), f));
            }
        }
        for dep in &self.dependencies {
            out.extend(dep.crd_objects(&format!("{full_path}/charts/{}", dep.name())));
        }
        out
    }
}

fn has_crd_ext(name: &str) -> bool {
    let base = go_base(name);
    base.rsplit_once('.').is_some_and(|(_, e)| {
        e.eq_ignore_ascii_case("yaml")
            || e.eq_ignore_ascii_case("yml")
            || e.eq_ignore_ascii_case("json")
    })
}

/// A chart maintainer.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Maintainer {
    /// `name`.
    pub name: String,
    /// `email`.
    pub email: String,
    /// `url`.
    pub url: String,
}

/// A dependency as `Chart.yaml` (or `requirements.yaml`) declares it.
#[derive(Clone, Debug, Default)]
pub struct Dependency {
    /// `name`.
    pub name: String,
    /// `version`: a semver range.
    pub version: String,
    /// `repository`.
    pub repository: String,
    /// `condition`: comma-separated value paths.
    pub condition: String,
    /// `tags`.
    pub tags: Vec<String>,
    /// `enabled`.
    pub enabled: bool,
    /// `import-values`: strings or `{child, parent}` maps.
    pub import_values: Vec<go_template::Value>,
    /// `alias`.
    pub alias: String,
}

/// `Chart.yaml`, field for field as `chart.Metadata`.
#[derive(Clone, Debug, Default)]
pub struct Metadata {
    /// `name`.
    pub name: String,
    /// `home`.
    pub home: String,
    /// `sources`.
    pub sources: Vec<String>,
    /// `version`.
    pub version: String,
    /// `description`.
    pub description: String,
    /// `keywords`.
    pub keywords: Vec<String>,
    /// `maintainers` (a `null` entry is kept as `None`: validation refuses it).
    pub maintainers: Vec<Option<Maintainer>>,
    /// `icon`.
    pub icon: String,
    /// `apiVersion`.
    pub api_version: String,
    /// `condition`.
    pub condition: String,
    /// `tags`.
    pub tags: String,
    /// `appVersion`.
    pub app_version: String,
    /// `deprecated`.
    pub deprecated: bool,
    /// `annotations`, `None` when absent (Go's nil map).
    pub annotations: Option<Vec<(String, String)>>,
    /// `kubeVersion`: a semver range.
    pub kube_version: String,
    /// `dependencies` (a `null` entry is kept as `None`: validation refuses it).
    pub dependencies: Option<Vec<Option<Dependency>>>,
    /// `type`: `application`, `library`, or empty.
    pub chart_type: String,
    /// Whether `sources`/`keywords` were given at all (Go's nil slice prints as `[]` too, but
    /// encodes as `null`).
    pub(crate) present: Present,
}

/// Which slice fields were present (non-nil in Go).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Present {
    pub(crate) sources: bool,
    pub(crate) keywords: bool,
    pub(crate) maintainers: bool,
}

/// A `Chart.yaml` that does not pass Helm's checks: `validation: …`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("validation: {0}")]
pub struct ValidationError(pub String);

impl Metadata {
    /// Decodes `Chart.yaml` (or merges `requirements.yaml` into existing metadata) the way
    /// `sigs.k8s.io/yaml` decodes into `chart.Metadata`. The error is Go's text.
    pub(crate) fn decode_into(&mut self, doc: &serde_json::Value) -> Result<(), String> {
        let mut d = Decoder::new("Metadata");
        let Some(obj) = d.object(doc)? else {
            return Ok(());
        };
        for (key, val) in obj {
            let Some(field) = decode::field(key, METADATA_FIELDS) else {
                continue;
            };
            d.push(field);
            match field {
                "name" => d.string(val, &mut self.name)?,
                "home" => d.string(val, &mut self.home)?,
                "sources" => self.present.sources = d.strings(val, &mut self.sources)?,
                "version" => d.string(val, &mut self.version)?,
                "description" => d.string(val, &mut self.description)?,
                "keywords" => self.present.keywords = d.strings(val, &mut self.keywords)?,
                "maintainers" => {
                    self.present.maintainers =
                        decode_maintainers(&mut d, val, &mut self.maintainers)?
                }
                "icon" => d.string(val, &mut self.icon)?,
                "apiVersion" => d.string(val, &mut self.api_version)?,
                "condition" => d.string(val, &mut self.condition)?,
                "tags" => d.string(val, &mut self.tags)?,
                "appVersion" => d.string(val, &mut self.app_version)?,
                "deprecated" => d.bool(val, &mut self.deprecated)?,
                "annotations" => d.string_map(val, &mut self.annotations)?,
                "kubeVersion" => d.string(val, &mut self.kube_version)?,
                "dependencies" => decode_dependencies(&mut d, val, &mut self.dependencies)?,
                "type" => d.string(val, &mut self.chart_type)?,
                _ => {}
            }
            d.pop();
        }
        Ok(())
    }

    /// Helm's `Metadata.Validate`: sanitizes the strings, then checks them in Helm's order.
    pub fn validate(&mut self) -> Result<(), ValidationError> {
        for s in [
            &mut self.name,
            &mut self.description,
            &mut self.home,
            &mut self.icon,
            &mut self.condition,
            &mut self.tags,
            &mut self.app_version,
            &mut self.kube_version,
        ] {
            *s = sanitize(s);
        }
        for s in self.sources.iter_mut().chain(self.keywords.iter_mut()) {
            *s = sanitize(s);
        }
        let err = |m: String| Err(ValidationError(m));
        if self.api_version.is_empty() {
            return err("chart.metadata.apiVersion is required".into());
        }
        if self.name.is_empty() {
            return err("chart.metadata.name is required".into());
        }
        if self.name != go_base(&self.name) {
            return err(format!("chart.metadata.name {:?} is invalid", self.name));
        }
        if self.version.is_empty() {
            return err("chart.metadata.version is required".into());
        }
        if semver::Version::parse(&self.version).is_err() {
            return err(format!(
                "chart.metadata.version {:?} is invalid",
                self.version
            ));
        }
        if !matches!(self.chart_type.as_str(), "" | "application" | "library") {
            return err("chart.metadata.type must be application or library".into());
        }
        for m in &mut self.maintainers {
            let Some(m) = m else {
                return err("maintainers must not contain empty or null nodes".into());
            };
            m.name = sanitize(&m.name);
            m.email = sanitize(&m.email);
            m.url = sanitize(&m.url);
        }
        let mut seen: Vec<String> = Vec::new();
        for dep in self.dependencies.iter_mut().flatten() {
            let Some(dep) = dep else {
                return err("dependencies must not contain empty or null nodes".into());
            };
            dep.name = sanitize(&dep.name);
            dep.version = sanitize(&dep.version);
            dep.repository = sanitize(&dep.repository);
            dep.condition = sanitize(&dep.condition);
            for t in &mut dep.tags {
                *t = sanitize(t);
            }
            if !dep.alias.is_empty()
                && !dep
                    .alias
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
            {
                return err(format!(
                    "dependency {:?} has disallowed characters in the alias",
                    dep.name
                ));
            }
            let key = if dep.alias.is_empty() {
                &dep.name
            } else {
                &dep.alias
            };
            if seen.contains(key) {
                return err(format!(
                    "more than one dependency with name or alias {key:?}"
                ));
            }
            seen.push(key.clone());
        }
        Ok(())
    }
}

const METADATA_FIELDS: &[&str] = &[
    "name",
    "home",
    "sources",
    "version",
    "description",
    "keywords",
    "maintainers",
    "icon",
    "apiVersion",
    "condition",
    "tags",
    "appVersion",
    "deprecated",
    "annotations",
    "kubeVersion",
    "dependencies",
    "type",
];

const MAINTAINER_FIELDS: &[&str] = &["name", "email", "url"];

const DEPENDENCY_FIELDS: &[&str] = &[
    "name",
    "version",
    "repository",
    "condition",
    "tags",
    "enabled",
    "import-values",
    "alias",
];

fn decode_maintainers(
    d: &mut Decoder,
    val: &serde_json::Value,
    out: &mut Vec<Option<Maintainer>>,
) -> Result<bool, String> {
    let Some(items) = d.array(val, "[]*chart.Maintainer")? else {
        out.clear();
        return Ok(false);
    };
    out.clear();
    for item in items {
        let outer = d.enter_struct("Maintainer");
        let Some(obj) = d.object(item)? else {
            d.leave_struct(outer);
            out.push(None);
            continue;
        };
        let mut m = Maintainer::default();
        for (key, val) in obj {
            let Some(field) = decode::field(key, MAINTAINER_FIELDS) else {
                continue;
            };
            d.push(field);
            match field {
                "name" => d.string(val, &mut m.name)?,
                "email" => d.string(val, &mut m.email)?,
                _ => d.string(val, &mut m.url)?,
            }
            d.pop();
        }
        d.leave_struct(outer);
        out.push(Some(m));
    }
    Ok(true)
}

fn decode_dependencies(
    d: &mut Decoder,
    val: &serde_json::Value,
    out: &mut Option<Vec<Option<Dependency>>>,
) -> Result<(), String> {
    let Some(items) = d.array(val, "[]*chart.Dependency")? else {
        *out = None;
        return Ok(());
    };
    let mut deps = Vec::new();
    for item in items {
        let outer = d.enter_struct("Dependency");
        let Some(obj) = d.object(item)? else {
            d.leave_struct(outer);
            deps.push(None);
            continue;
        };
        let mut dep = Dependency::default();
        for (key, val) in obj {
            let Some(field) = decode::field(key, DEPENDENCY_FIELDS) else {
                continue;
            };
            d.push(field);
            match field {
                "name" => d.string(val, &mut dep.name)?,
                "version" => d.string(val, &mut dep.version)?,
                "repository" => d.string(val, &mut dep.repository)?,
                "condition" => d.string(val, &mut dep.condition)?,
                "tags" => {
                    d.strings(val, &mut dep.tags)?;
                }
                "enabled" => d.bool(val, &mut dep.enabled)?,
                "import-values" => d.any_list(val, &mut dep.import_values)?,
                _ => d.string(val, &mut dep.alias)?,
            }
            d.pop();
        }
        d.leave_struct(outer);
        deps.push(Some(dep));
    }
    *out = Some(deps);
    Ok(())
}

/// Helm's `sanitizeString`: whitespace becomes a space, unprintable characters go.
fn sanitize(s: &str) -> String {
    s.chars()
        .filter_map(|c| {
            if c.is_whitespace() {
                Some(' ')
            } else if c.is_control() {
                None
            } else {
                Some(c)
            }
        })
        .collect()
}

/// Go's `filepath.Base`.
pub(crate) fn go_base(p: &str) -> &str {
    if p.is_empty() {
        return ".";
    }
    let trimmed = p.trim_end_matches('/');
    if trimmed.is_empty() {
        return "/";
    }
    match trimmed.rfind('/') {
        Some(i) => &trimmed[i + 1..],
        None => trimmed,
    }
}
