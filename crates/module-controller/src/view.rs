//! What `d8 module list` and `d8 module releases` show: modules with phase, source, version and
//! why they are disabled; releases with why they wait.

use api::module::Module;
use api::module_release::ModuleRelease;
use kube::ResourceExt;

/// One module row.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModuleRow {
    /// Name.
    pub name: String,
    /// Phase.
    pub phase: String,
    /// `Embedded`, the ModuleSource, or `-`.
    pub source: String,
    /// Version, or `-`.
    pub version: String,
    /// Whether the module manager runs it.
    pub enabled: bool,
    /// Why it does not run (the EnabledByModuleManager message), or what it is doing.
    pub message: String,
}

/// The module rows, sorted by name.
pub fn module_rows(modules: &[Module]) -> Vec<ModuleRow> {
    let mut rows: Vec<ModuleRow> = modules
        .iter()
        .map(|m| {
            let conditions = m
                .status
                .as_ref()
                .map(|s| s.conditions.as_slice())
                .unwrap_or_default();
            let manager = conditions
                .iter()
                .find(|c| c.type_ == "EnabledByModuleManager");
            let enabled = manager.is_some_and(|c| c.status == "True");
            let message = manager.and_then(|c| c.message.clone()).unwrap_or_default();
            let overridden = conditions
                .iter()
                .any(|c| c.type_ == "IsOverridden" && c.status == "True");
            ModuleRow {
                name: m.name_any(),
                phase: m
                    .status
                    .as_ref()
                    .and_then(|s| s.phase)
                    .map_or("-", |p| p.as_str())
                    .to_owned(),
                source: m.spec.properties.source.clone().unwrap_or_else(|| {
                    if m.spec.properties.available_sources.is_empty() {
                        "-".into()
                    } else {
                        format!("({})", m.spec.properties.available_sources.join(","))
                    }
                }),
                version: m
                    .spec
                    .properties
                    .version
                    .clone()
                    .unwrap_or_else(|| "-".into()),
                enabled,
                message: if overridden && message.is_empty() {
                    "overridden by ModulePullOverride".into()
                } else {
                    message
                },
            }
        })
        .collect();
    rows.sort_by(|a, b| a.name.cmp(&b.name));
    rows
}

/// Columns padded to their widest cell, the last one unpadded (the style of every `d8 … list`).
pub fn table(header: &[&str], rows: Vec<Vec<String>>) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for row in &rows {
        for (i, cell) in row.iter().enumerate() {
            widths[i] = widths[i].max(cell.chars().count());
        }
    }
    let line = |cells: Vec<String>| {
        let last = cells.len() - 1;
        let mut out = String::new();
        for (i, cell) in cells.into_iter().enumerate() {
            if i == last {
                out.push_str(&cell);
            } else {
                out.push_str(&format!("{cell:<w$}   ", w = widths[i]));
            }
        }
        out.trim_end().to_owned() + "\n"
    };
    let mut out = line(header.iter().map(|h| (*h).to_owned()).collect());
    for row in rows {
        out.push_str(&line(row));
    }
    out
}

/// `d8 module list`.
pub fn render_modules(rows: &[ModuleRow]) -> String {
    table(
        &["NAME", "PHASE", "ENABLED", "SOURCE", "VERSION", "MESSAGE"],
        rows.iter()
            .map(|r| {
                vec![
                    r.name.clone(),
                    r.phase.clone(),
                    if r.enabled { "yes" } else { "no" }.into(),
                    r.source.clone(),
                    r.version.clone(),
                    r.message.clone(),
                ]
            })
            .collect(),
    )
}

/// `d8 module releases`: releases by module then version (newest last), with why they wait.
pub fn render_releases(releases: &[ModuleRelease]) -> String {
    let mut sorted: Vec<&ModuleRelease> = releases.iter().collect();
    sorted.sort_by(|a, b| {
        let va = semver::Version::parse(&a.spec.version).ok();
        let vb = semver::Version::parse(&b.spec.version).ok();
        (a.spec.module_name.as_str(), va).cmp(&(b.spec.module_name.as_str(), vb))
    });
    table(
        &["NAME", "MODULE", "VERSION", "PHASE", "POLICY", "MESSAGE"],
        sorted
            .into_iter()
            .map(|r| {
                let status = r.status.clone().unwrap_or_default();
                vec![
                    r.name_any(),
                    r.spec.module_name.clone(),
                    r.spec.version.clone(),
                    status.phase.map_or("-", |p| p.as_str()).to_owned(),
                    r.labels()
                        .get(api::keys::LABEL_UPDATE_POLICY)
                        .cloned()
                        .filter(|p| !p.is_empty())
                        .unwrap_or_else(|| "(embedded)".into()),
                    status.message,
                ]
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use api::conditions::ModuleCondition;
    use api::module::{ModulePhase, ModuleStatus};
    use api::module_release::{ModuleReleasePhase, ModuleReleaseSpec, ModuleReleaseStatus};

    use super::*;

    #[test]
    fn modules_and_releases_render_as_tables() {
        let mut echo = Module::new("echo", Default::default());
        echo.spec.properties.source = Some("example".into());
        echo.spec.properties.version = Some("v1.2.0".into());
        echo.status = Some(ModuleStatus {
            phase: Some(ModulePhase::Ready),
            hooks_state: None,
            conditions: vec![ModuleCondition {
                type_: "EnabledByModuleManager".into(),
                status: "True".into(),
                ..Default::default()
            }],
        });
        let mut off = Module::new("parca", Default::default());
        off.spec.properties.available_sources = vec!["a".into(), "b".into()];
        off.status = Some(ModuleStatus {
            phase: Some(ModulePhase::Conflict),
            hooks_state: None,
            conditions: vec![ModuleCondition {
                type_: "EnabledByModuleManager".into(),
                status: "False".into(),
                message: Some("several available sources".into()),
                ..Default::default()
            }],
        });
        let text = render_modules(&module_rows(&[off, echo]));
        let expected = [
            "NAME    PHASE      ENABLED   SOURCE    VERSION   MESSAGE",
            "echo    Ready      yes       example   v1.2.0",
            "parca   Conflict   no        (a,b)     -         several available sources",
        ];
        assert_eq!(text, expected.join("\n") + "\n");
        let mut r = ModuleRelease::new(
            "echo-v1.2.0",
            ModuleReleaseSpec {
                module_name: "echo".into(),
                version: "1.2.0".into(),
                ..Default::default()
            },
        );
        r.status = Some(ModuleReleaseStatus {
            phase: Some(ModuleReleasePhase::Pending),
            message: "validation failed: x".into(),
            ..Default::default()
        });
        let text = render_releases(&[r]);
        assert!(
            text.contains(
                "echo-v1.2.0   echo     1.2.0     Pending   (embedded)   validation failed: x"
            ),
            "{text}"
        );
    }
}
