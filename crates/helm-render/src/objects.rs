//! The Go values Helm puts in front of templates, as objects with Go's field and method
//! names: `.Chart` (`struct { chart.Metadata; IsRoot bool }`), `.Files` (`engine.files`),
//! `.Capabilities` (`*chartutil.Capabilities` with `KubeVersion`, `APIVersions.Has` and
//! `HelmVersion`).

use std::collections::BTreeMap;
use std::rc::Rc;

use base64::Engine as _;
use go_template::{CallError, Map, Object, Value};

use crate::chart::{Dependency, File, Maintainer, Metadata};
use crate::glob::Glob;

fn strings(v: &[String]) -> Value {
    Value::list(v.iter().map(|s| Value::string(s.as_str())).collect())
}

fn go_list(items: &[String]) -> String {
    format!("[{}]", items.join(" "))
}

fn go_bool(b: bool) -> &'static str {
    if b { "true" } else { "false" }
}

/// `.Chart`: the chart's metadata with `IsRoot`.
#[derive(Debug, Clone)]
pub struct ChartObject {
    /// The metadata.
    pub metadata: Metadata,
    /// Whether this is the top-level chart.
    pub is_root: bool,
}

impl ChartObject {
    fn annotations(&self) -> Value {
        match &self.metadata.annotations {
            None => Value::Nil,
            Some(a) => Value::map(
                a.iter()
                    .map(|(k, v)| (k.clone(), Value::string(v.as_str())))
                    .collect(),
            ),
        }
    }

    fn metadata_format(&self) -> String {
        let m = &self.metadata;
        let ann = match &m.annotations {
            None => "map[]".to_owned(),
            Some(a) => format!(
                "map[{}]",
                a.iter()
                    .map(|(k, v)| format!("{k}:{v}"))
                    .collect::<Vec<_>>()
                    .join(" ")
            ),
        };
        let ptrs = |n: usize| {
            format!(
                "[{}]",
                (0..n).map(|_| "0xc000000000").collect::<Vec<_>>().join(" ")
            )
        };
        format!(
            "{{{} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {}}}",
            m.name,
            m.home,
            go_list(&m.sources),
            m.version,
            m.description,
            go_list(&m.keywords),
            ptrs(m.maintainers.len()),
            m.icon,
            m.api_version,
            m.condition,
            m.tags,
            m.app_version,
            go_bool(m.deprecated),
            ann,
            m.kube_version,
            ptrs(m.dependencies.as_ref().map_or(0, Vec::len)),
            m.chart_type
        )
    }
}

impl Object for ChartObject {
    fn type_name(&self) -> String {
        "struct { chart.Metadata; IsRoot bool }".into()
    }

    fn kind_name(&self) -> &'static str {
        "struct"
    }

    fn field(&self, name: &str) -> Option<Value> {
        let m = &self.metadata;
        Some(match name {
            "Name" => Value::string(m.name.as_str()),
            "Home" => Value::string(m.home.as_str()),
            "Sources" => strings(&m.sources),
            "Version" => Value::string(m.version.as_str()),
            "Description" => Value::string(m.description.as_str()),
            "Keywords" => strings(&m.keywords),
            "Maintainers" => Value::list(
                m.maintainers
                    .iter()
                    .map(|mm| match mm {
                        Some(mm) => Value::object(MaintainerObject(mm.clone())),
                        None => Value::Nil,
                    })
                    .collect(),
            ),
            "Icon" => Value::string(m.icon.as_str()),
            "APIVersion" => Value::string(m.api_version.as_str()),
            "Condition" => Value::string(m.condition.as_str()),
            "Tags" => Value::string(m.tags.as_str()),
            "AppVersion" => Value::string(m.app_version.as_str()),
            "Deprecated" => Value::Bool(m.deprecated),
            "Annotations" => self.annotations(),
            "KubeVersion" => Value::string(m.kube_version.as_str()),
            "Dependencies" => Value::list(
                m.dependencies
                    .iter()
                    .flatten()
                    .map(|d| match d {
                        Some(d) => Value::object(DependencyObject(d.clone())),
                        None => Value::Nil,
                    })
                    .collect(),
            ),
            "Type" => Value::string(m.chart_type.as_str()),
            "IsRoot" => Value::Bool(self.is_root),
            "Metadata" => Value::object(MetadataObject(self.clone())),
            _ => return None,
        })
    }

    fn format(&self) -> String {
        format!("{{{} {}}}", self.metadata_format(), go_bool(self.is_root))
    }

    fn to_json(&self) -> Option<serde_json::Value> {
        let mut o = metadata_json(&self.metadata);
        o.insert("IsRoot".into(), serde_json::Value::Bool(self.is_root));
        Some(serde_json::Value::Object(o))
    }
}

/// `.Chart.Metadata` (the embedded struct).
#[derive(Debug, Clone)]
struct MetadataObject(ChartObject);

impl Object for MetadataObject {
    fn type_name(&self) -> String {
        "chart.Metadata".into()
    }
    fn kind_name(&self) -> &'static str {
        "struct"
    }
    fn field(&self, name: &str) -> Option<Value> {
        if name == "IsRoot" || name == "Metadata" {
            return None;
        }
        self.0.field(name)
    }
    fn format(&self) -> String {
        self.0.metadata_format()
    }
    fn to_json(&self) -> Option<serde_json::Value> {
        Some(serde_json::Value::Object(metadata_json(&self.0.metadata)))
    }
}

fn metadata_json(m: &Metadata) -> serde_json::Map<String, serde_json::Value> {
    let mut o = serde_json::Map::new();
    let mut s = |k: &str, v: &str| {
        if !v.is_empty() {
            o.insert(k.into(), serde_json::Value::String(v.into()));
        }
    };
    s("name", &m.name);
    s("home", &m.home);
    s("version", &m.version);
    s("description", &m.description);
    s("icon", &m.icon);
    s("apiVersion", &m.api_version);
    s("condition", &m.condition);
    s("tags", &m.tags);
    s("appVersion", &m.app_version);
    s("kubeVersion", &m.kube_version);
    s("type", &m.chart_type);
    let list = |v: &[String]| {
        serde_json::Value::Array(
            v.iter()
                .map(|x| serde_json::Value::String(x.clone()))
                .collect(),
        )
    };
    if !m.sources.is_empty() {
        o.insert("sources".into(), list(&m.sources));
    }
    if !m.keywords.is_empty() {
        o.insert("keywords".into(), list(&m.keywords));
    }
    if m.deprecated {
        o.insert("deprecated".into(), serde_json::Value::Bool(true));
    }
    if let Some(a) = &m.annotations
        && !a.is_empty()
    {
        o.insert(
            "annotations".into(),
            serde_json::Value::Object(
                a.iter()
                    .map(|(k, v)| (k.clone(), serde_json::Value::String(v.clone())))
                    .collect(),
            ),
        );
    }
    if !m.maintainers.is_empty() {
        o.insert(
            "maintainers".into(),
            serde_json::Value::Array(
                m.maintainers
                    .iter()
                    .map(|mm| {
                        mm.as_ref().map_or(serde_json::Value::Null, |mm| {
                            MaintainerObject(mm.clone()).to_json().unwrap_or_default()
                        })
                    })
                    .collect(),
            ),
        );
    }
    if let Some(deps) = &m.dependencies
        && !deps.is_empty()
    {
        o.insert(
            "dependencies".into(),
            serde_json::Value::Array(
                deps.iter()
                    .map(|d| {
                        d.as_ref().map_or(serde_json::Value::Null, |d| {
                            DependencyObject(d.clone()).to_json().unwrap_or_default()
                        })
                    })
                    .collect(),
            ),
        );
    }
    o
}

/// `*chart.Maintainer`.
#[derive(Debug, Clone)]
pub struct MaintainerObject(pub Maintainer);

impl Object for MaintainerObject {
    fn type_name(&self) -> String {
        "*chart.Maintainer".into()
    }
    fn field(&self, name: &str) -> Option<Value> {
        Some(match name {
            "Name" => Value::string(self.0.name.as_str()),
            "Email" => Value::string(self.0.email.as_str()),
            "URL" => Value::string(self.0.url.as_str()),
            _ => return None,
        })
    }
    fn format(&self) -> String {
        format!("&{{{} {} {}}}", self.0.name, self.0.email, self.0.url)
    }
    fn to_json(&self) -> Option<serde_json::Value> {
        let mut o = serde_json::Map::new();
        for (k, v) in [
            ("name", &self.0.name),
            ("email", &self.0.email),
            ("url", &self.0.url),
        ] {
            if !v.is_empty() {
                o.insert(k.into(), serde_json::Value::String(v.clone()));
            }
        }
        Some(serde_json::Value::Object(o))
    }
}

/// `*chart.Dependency`.
#[derive(Debug, Clone)]
pub struct DependencyObject(pub Dependency);

impl Object for DependencyObject {
    fn type_name(&self) -> String {
        "*chart.Dependency".into()
    }
    fn field(&self, name: &str) -> Option<Value> {
        let d = &self.0;
        Some(match name {
            "Name" => Value::string(d.name.as_str()),
            "Version" => Value::string(d.version.as_str()),
            "Repository" => Value::string(d.repository.as_str()),
            "Condition" => Value::string(d.condition.as_str()),
            "Tags" => strings(&d.tags),
            "Enabled" => Value::Bool(d.enabled),
            "ImportValues" => Value::list(d.import_values.clone()),
            "Alias" => Value::string(d.alias.as_str()),
            _ => return None,
        })
    }
    fn format(&self) -> String {
        let d = &self.0;
        format!(
            "&{{{} {} {} {} {} {} {} {}}}",
            d.name,
            d.version,
            d.repository,
            d.condition,
            go_list(&d.tags),
            go_bool(d.enabled),
            go_template::fmt::format_v(&Value::list(d.import_values.clone())),
            d.alias
        )
    }
    fn to_json(&self) -> Option<serde_json::Value> {
        let d = &self.0;
        let mut o = serde_json::Map::new();
        o.insert("name".into(), serde_json::Value::String(d.name.clone()));
        for (k, v) in [
            ("version", &d.version),
            ("repository", &d.repository),
            ("condition", &d.condition),
        ] {
            if !v.is_empty() || k == "repository" {
                o.insert(k.into(), serde_json::Value::String(v.clone()));
            }
        }
        if !d.tags.is_empty() {
            o.insert(
                "tags".into(),
                serde_json::Value::Array(
                    d.tags
                        .iter()
                        .map(|t| serde_json::Value::String(t.clone()))
                        .collect(),
                ),
            );
        }
        if d.enabled {
            o.insert("enabled".into(), serde_json::Value::Bool(true));
        }
        if !d.import_values.is_empty() {
            o.insert(
                "import-values".into(),
                Value::list(d.import_values.clone())
                    .to_json()
                    .unwrap_or_default(),
            );
        }
        if !d.alias.is_empty() {
            o.insert("alias".into(), serde_json::Value::String(d.alias.clone()));
        }
        Some(serde_json::Value::Object(o))
    }
}

/// `.Files`: the chart's non-template files by path, with Helm's methods.
#[derive(Debug, Clone, Default)]
pub struct FilesObject {
    files: Rc<BTreeMap<String, Rc<[u8]>>>,
}

impl FilesObject {
    /// The files of a chart (`Chart.files`).
    pub fn new(files: &[File]) -> FilesObject {
        FilesObject {
            files: Rc::new(
                files
                    .iter()
                    .map(|f| (f.name.clone(), Rc::from(f.data.as_slice())))
                    .collect(),
            ),
        }
    }

    /// The paths, sorted.
    pub fn paths(&self) -> impl Iterator<Item = &str> {
        self.files.keys().map(String::as_str)
    }

    fn to_yaml_map(&self, encode: impl Fn(&[u8]) -> String) -> String {
        if self.files.is_empty() {
            return String::new();
        }
        let mut m = Map::new();
        for (k, v) in self.files.iter() {
            m.insert(
                crate::chart::go_base(k).to_owned(),
                Value::string(encode(v)),
            );
        }
        let y = crate::yaml::to_yaml(&Value::map(m)).unwrap_or_default();
        y.strip_suffix('\n').unwrap_or(&y).to_owned()
    }
}

fn arg_str(args: &[Value], i: usize) -> String {
    match args.get(i) {
        Some(Value::String(s)) => s.to_string(),
        _ => String::new(),
    }
}

impl Object for FilesObject {
    fn type_name(&self) -> String {
        "engine.files".into()
    }

    fn kind_name(&self) -> &'static str {
        "map"
    }

    fn field(&self, _name: &str) -> Option<Value> {
        None
    }

    fn is_method(&self, name: &str) -> bool {
        matches!(
            name,
            "Get" | "GetBytes" | "Glob" | "Lines" | "AsConfig" | "AsSecrets"
        )
    }

    fn method(&self, name: &str, args: &[Value]) -> Result<Value, CallError> {
        let want = match name {
            "AsConfig" | "AsSecrets" => 0,
            _ => 1,
        };
        if args.len() != want {
            return Err(CallError::Exec(format!(
                "wrong number of args for {name}: want {want} got {}",
                args.len()
            )));
        }
        if want == 1 && !matches!(args[0], Value::String(_)) {
            return Err(CallError::Exec(format!(
                "wrong type for value; expected string; got {}",
                args[0].type_name()
            )));
        }
        Ok(match name {
            "Get" => Value::string(
                self.files
                    .get(&arg_str(args, 0))
                    .map(|b| String::from_utf8_lossy(b).into_owned())
                    .unwrap_or_default(),
            ),
            "GetBytes" => match self.files.get(&arg_str(args, 0)) {
                Some(b) => Value::Bytes(b.clone()),
                None => Value::Bytes(Rc::from(&[][..])),
            },
            "Glob" => {
                let pattern = arg_str(args, 0);
                let g = Glob::new(&pattern).or_else(|| Glob::new("**"));
                let files = self
                    .files
                    .iter()
                    .filter(|(k, _)| g.as_ref().is_some_and(|g| g.matches(k)))
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect();
                Value::object(FilesObject {
                    files: Rc::new(files),
                })
            }
            "Lines" => {
                let path = arg_str(args, 0);
                match self.files.get(&path) {
                    None => Value::list(Vec::new()),
                    Some(b) if b.is_empty() => {
                        return Err(CallError::Call(
                            "runtime error: index out of range [-1]".into(),
                        ));
                    }
                    Some(b) => {
                        let s = String::from_utf8_lossy(b);
                        let s = s.strip_suffix('\n').unwrap_or(&s);
                        Value::list(s.split('\n').map(Value::from).collect())
                    }
                }
            }
            "AsConfig" => {
                Value::string(self.to_yaml_map(|b| String::from_utf8_lossy(b).into_owned()))
            }
            _ => Value::string(
                self.to_yaml_map(|b| base64::engine::general_purpose::STANDARD.encode(b)),
            ),
        })
    }

    fn truth(&self) -> bool {
        !self.files.is_empty()
    }

    fn as_value(&self) -> Option<Value> {
        Some(Value::map(
            self.files
                .iter()
                .map(|(k, v)| (k.clone(), Value::Bytes(v.clone())))
                .collect(),
        ))
    }

    fn format(&self) -> String {
        let entries: Vec<String> = self
            .files
            .iter()
            .map(|(k, v)| {
                let bytes: Vec<String> = v.iter().map(u8::to_string).collect();
                format!("{k}:[{}]", bytes.join(" "))
            })
            .collect();
        format!("map[{}]", entries.join(" "))
    }

    fn to_json(&self) -> Option<serde_json::Value> {
        Some(serde_json::Value::Object(
            self.files
                .iter()
                .map(|(k, v)| {
                    (
                        k.clone(),
                        serde_json::Value::String(
                            base64::engine::general_purpose::STANDARD.encode(v),
                        ),
                    )
                })
                .collect(),
        ))
    }
}

/// The Kubernetes version `helm template` assumes (Helm 3.17.3's build).
pub const DEFAULT_KUBE_VERSION: &str = "v1.32.0";

/// The API versions `helm template` assumes (`chartutil.DefaultVersionSet` of Helm 3.17.3),
/// in its order.
pub const DEFAULT_API_VERSIONS: &[&str] = &[
    "v1",
    "admissionregistration.k8s.io/v1",
    "admissionregistration.k8s.io/v1alpha1",
    "admissionregistration.k8s.io/v1beta1",
    "internal.apiserver.k8s.io/v1alpha1",
    "apps/v1",
    "apps/v1beta1",
    "apps/v1beta2",
    "authentication.k8s.io/v1",
    "authentication.k8s.io/v1alpha1",
    "authentication.k8s.io/v1beta1",
    "authorization.k8s.io/v1",
    "authorization.k8s.io/v1beta1",
    "autoscaling/v1",
    "autoscaling/v2",
    "autoscaling/v2beta1",
    "autoscaling/v2beta2",
    "batch/v1",
    "batch/v1beta1",
    "certificates.k8s.io/v1",
    "certificates.k8s.io/v1beta1",
    "certificates.k8s.io/v1alpha1",
    "coordination.k8s.io/v1alpha2",
    "coordination.k8s.io/v1beta1",
    "coordination.k8s.io/v1",
    "discovery.k8s.io/v1",
    "discovery.k8s.io/v1beta1",
    "events.k8s.io/v1",
    "events.k8s.io/v1beta1",
    "extensions/v1beta1",
    "flowcontrol.apiserver.k8s.io/v1",
    "flowcontrol.apiserver.k8s.io/v1beta1",
    "flowcontrol.apiserver.k8s.io/v1beta2",
    "flowcontrol.apiserver.k8s.io/v1beta3",
    "networking.k8s.io/v1",
    "networking.k8s.io/v1alpha1",
    "networking.k8s.io/v1beta1",
    "node.k8s.io/v1",
    "node.k8s.io/v1alpha1",
    "node.k8s.io/v1beta1",
    "policy/v1",
    "policy/v1beta1",
    "rbac.authorization.k8s.io/v1",
    "rbac.authorization.k8s.io/v1beta1",
    "rbac.authorization.k8s.io/v1alpha1",
    "resource.k8s.io/v1beta1",
    "resource.k8s.io/v1alpha3",
    "scheduling.k8s.io/v1alpha1",
    "scheduling.k8s.io/v1beta1",
    "scheduling.k8s.io/v1",
    "storage.k8s.io/v1beta1",
    "storage.k8s.io/v1",
    "storage.k8s.io/v1alpha1",
    "storagemigration.k8s.io/v1alpha1",
    "apiextensions.k8s.io/v1beta1",
    "apiextensions.k8s.io/v1",
];

/// `chartutil.KubeVersion`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KubeVersion {
    /// `v1.32.0`.
    pub version: String,
    /// `1`.
    pub major: String,
    /// `32`.
    pub minor: String,
}

impl KubeVersion {
    /// Helm's `ParseKubeVersion` (`--kube-version`): a loose semver, printed back as
    /// `v<major>.<minor>.<patch>[-pre][+build]`.
    pub fn parse(s: &str) -> Option<KubeVersion> {
        let v = crate::semver::Version::parse(s)?;
        Some(KubeVersion {
            version: format!("v{v}"),
            major: v.major.to_string(),
            minor: v.minor.to_string(),
        })
    }
}

impl Default for KubeVersion {
    fn default() -> Self {
        KubeVersion {
            version: DEFAULT_KUBE_VERSION.into(),
            major: "1".into(),
            minor: "32".into(),
        }
    }
}

impl Object for KubeVersion {
    fn type_name(&self) -> String {
        "chartutil.KubeVersion".into()
    }
    fn kind_name(&self) -> &'static str {
        "struct"
    }
    fn field(&self, name: &str) -> Option<Value> {
        Some(match name {
            "Version" | "GitVersion" | "String" => Value::string(self.version.as_str()),
            "Major" => Value::string(self.major.as_str()),
            "Minor" => Value::string(self.minor.as_str()),
            _ => return None,
        })
    }
    fn format(&self) -> String {
        self.version.clone()
    }
    fn to_json(&self) -> Option<serde_json::Value> {
        Some(serde_json::json!({"Version": self.version, "Major": self.major, "Minor": self.minor}))
    }
}

/// `chartutil.VersionSet`: the API versions, with `Has`.
#[derive(Debug, Clone)]
pub struct VersionSet(pub Vec<String>);

impl Object for VersionSet {
    fn type_name(&self) -> String {
        "chartutil.VersionSet".into()
    }
    fn kind_name(&self) -> &'static str {
        "slice"
    }
    fn field(&self, _name: &str) -> Option<Value> {
        None
    }
    fn is_method(&self, name: &str) -> bool {
        name == "Has"
    }
    fn method(&self, name: &str, args: &[Value]) -> Result<Value, CallError> {
        if name != "Has" {
            return Err(CallError::Exec(format!(
                "can't evaluate field {name} in type chartutil.VersionSet"
            )));
        }
        if args.len() != 1 {
            return Err(CallError::Exec(format!(
                "wrong number of args for Has: want 1 got {}",
                args.len()
            )));
        }
        let Value::String(s) = &args[0] else {
            return Err(CallError::Exec(format!(
                "wrong type for value; expected string; got {}",
                args[0].type_name()
            )));
        };
        Ok(Value::Bool(self.0.iter().any(|v| **v == **s)))
    }
    fn truth(&self) -> bool {
        !self.0.is_empty()
    }
    fn as_value(&self) -> Option<Value> {
        Some(strings(&self.0))
    }
    fn format(&self) -> String {
        go_list(&self.0)
    }
    fn to_json(&self) -> Option<serde_json::Value> {
        Some(serde_json::Value::Array(
            self.0
                .iter()
                .map(|s| serde_json::Value::String(s.clone()))
                .collect(),
        ))
    }
}

/// Helm's build information (`version.BuildInfo`).
#[derive(Debug, Clone)]
pub struct HelmVersion;

const HELM_VERSION: [(&str, &str, &str); 4] = [
    ("Version", "version", "v3.17.3"),
    (
        "GitCommit",
        "git_commit",
        "e4da49785aa6e6ee2b86efd5dd9e43400318262b",
    ),
    ("GitTreeState", "git_tree_state", "clean"),
    ("GoVersion", "go_version", "go1.23.7"),
];

impl Object for HelmVersion {
    fn type_name(&self) -> String {
        "version.BuildInfo".into()
    }
    fn kind_name(&self) -> &'static str {
        "struct"
    }
    fn field(&self, name: &str) -> Option<Value> {
        HELM_VERSION
            .iter()
            .find(|(f, _, _)| *f == name)
            .map(|(_, _, v)| Value::from(*v))
    }
    fn format(&self) -> String {
        let vals: Vec<&str> = HELM_VERSION.iter().map(|(_, _, v)| *v).collect();
        format!("{{{}}}", vals.join(" "))
    }
    fn to_json(&self) -> Option<serde_json::Value> {
        Some(serde_json::Value::Object(
            HELM_VERSION
                .iter()
                .map(|(_, k, v)| ((*k).to_owned(), serde_json::Value::String((*v).into())))
                .collect(),
        ))
    }
}

/// `.Capabilities`.
#[derive(Debug, Clone)]
pub struct Capabilities {
    /// `KubeVersion`.
    pub kube_version: KubeVersion,
    /// `APIVersions`.
    pub api_versions: VersionSet,
}

impl Capabilities {
    /// `helm template`'s capabilities: the defaults, the kube version if given, and the
    /// extra API versions appended.
    pub fn new(kube_version: Option<KubeVersion>, extra_api_versions: &[String]) -> Capabilities {
        let mut api: Vec<String> = DEFAULT_API_VERSIONS
            .iter()
            .map(|s| (*s).to_owned())
            .collect();
        api.extend(extra_api_versions.iter().cloned());
        Capabilities {
            kube_version: kube_version.unwrap_or_default(),
            api_versions: VersionSet(api),
        }
    }
}

impl Object for Capabilities {
    fn type_name(&self) -> String {
        "*chartutil.Capabilities".into()
    }
    fn field(&self, name: &str) -> Option<Value> {
        Some(match name {
            "KubeVersion" => Value::object(self.kube_version.clone()),
            "APIVersions" => Value::object(self.api_versions.clone()),
            "HelmVersion" => Value::object(HelmVersion),
            _ => return None,
        })
    }
    fn format(&self) -> String {
        let k = &self.kube_version;
        format!(
            "{{{{{} {} {}}} {} {}}}",
            k.version,
            k.major,
            k.minor,
            self.api_versions.format(),
            HelmVersion.format()
        )
    }
    fn to_json(&self) -> Option<serde_json::Value> {
        Some(serde_json::json!({
            "KubeVersion": self.kube_version.to_json(),
            "APIVersions": self.api_versions.to_json(),
            "HelmVersion": HelmVersion.to_json(),
        }))
    }
}
