//! What `d8 package list`, `d8 package versions NAME` and `d8 app list` print, in the style of
//! `d8 module list` (pure: objects in, text out).

use api::packages::{Application, ApplicationPackage, ApplicationPackageVersion};
use kube::ResourceExt;
use module_controller::view::table;

use crate::compat::parse_version;

/// `d8 package list`: each package, its repositories, how many versions and instances.
pub fn render_packages(
    packages: &[ApplicationPackage],
    versions: &[ApplicationPackageVersion],
) -> String {
    let mut sorted: Vec<&ApplicationPackage> = packages.iter().collect();
    sorted.sort_by_key(|p| p.name_any());
    table(
        &["NAME", "REPOSITORIES", "VERSIONS", "LATEST", "INSTANCES"],
        sorted
            .into_iter()
            .map(|p| {
                let name = p.name_any();
                let status = p.status.clone().unwrap_or_default();
                let mine: Vec<&str> = versions
                    .iter()
                    .filter(|v| v.spec.package_name.as_deref() == Some(name.as_str()))
                    .filter_map(|v| v.spec.package_version.as_deref())
                    .collect();
                let latest = mine
                    .iter()
                    .filter_map(|v| parse_version(v).map(|s| (s, *v)))
                    .max()
                    .map_or("-".to_owned(), |(_, v)| v.to_owned());
                vec![
                    name,
                    status.available_repositories.join(","),
                    mine.len().to_string(),
                    latest,
                    status.instances_overall.unwrap_or(0).to_string(),
                ]
            })
            .collect(),
    )
}

/// `d8 package versions NAME`: the package's versions, lowest first, with their metadata state.
pub fn render_versions(package: &str, versions: &[ApplicationPackageVersion]) -> String {
    let mut mine: Vec<&ApplicationPackageVersion> = versions
        .iter()
        .filter(|v| v.spec.package_name.as_deref() == Some(package))
        .collect();
    mine.sort_by_key(|v| {
        (
            v.spec.package_repository_name.clone(),
            v.spec.package_version.as_deref().and_then(parse_version),
        )
    });
    table(
        &[
            "NAME",
            "REPOSITORY",
            "VERSION",
            "STAGE",
            "METADATA",
            "USED BY",
            "MESSAGE",
        ],
        mine.into_iter()
            .map(|v| {
                let status = v.status.clone().unwrap_or_default();
                let loaded = status
                    .conditions
                    .iter()
                    .find(|c| c.type_ == crate::versions::METADATA_LOADED);
                vec![
                    v.name_any(),
                    v.spec.package_repository_name.clone().unwrap_or_default(),
                    v.spec.package_version.clone().unwrap_or_default(),
                    status
                        .package_metadata
                        .as_ref()
                        .and_then(|m| m.stage.clone())
                        .unwrap_or_else(|| "-".into()),
                    if crate::versions::is_draft(v) {
                        "draft"
                    } else {
                        "loaded"
                    }
                    .into(),
                    status.used_by_count.unwrap_or(0).to_string(),
                    loaded.and_then(|c| c.message.clone()).unwrap_or_default(),
                ]
            })
            .collect(),
    )
}

/// `d8 app list`: each Application with its package, version, state and why it is not running.
pub fn render_applications(apps: &[Application], all_namespaces: bool) -> String {
    let mut sorted: Vec<&Application> = apps.iter().collect();
    sorted.sort_by_key(|a| (a.namespace(), a.name_any()));
    let mut header = vec!["NAME", "PACKAGE", "VERSION", "STATE", "MESSAGE"];
    if all_namespaces {
        header.insert(0, "NAMESPACE");
    }
    table(
        &header,
        sorted
            .into_iter()
            .map(|a| {
                let status = a.status.clone().unwrap_or_default();
                let summary = status.summary.unwrap_or_default();
                let installed = status
                    .current_version
                    .and_then(|c| c.version)
                    .unwrap_or_else(|| "-".into());
                let mut row = vec![
                    a.name_any(),
                    a.spec.package_name.clone(),
                    if installed == a.spec.package_version {
                        installed
                    } else {
                        format!("{installed} (wants {})", a.spec.package_version)
                    },
                    summary.state.unwrap_or_else(|| "Pending".into()),
                    summary.message.unwrap_or_default(),
                ];
                if all_namespaces {
                    row.insert(0, a.namespace().unwrap_or_default());
                }
                row
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use api::packages::{
        ApplicationPackageStatus, ApplicationPackageVersionSpec, ApplicationSpec,
        ApplicationStatus, CurrentVersion, Summary,
    };

    use super::*;

    fn version(repo: &str, package: &str, v: &str) -> ApplicationPackageVersion {
        ApplicationPackageVersion::new(
            &ApplicationPackageVersion::name_for(repo, package, v),
            ApplicationPackageVersionSpec {
                package_name: Some(package.into()),
                package_repository_name: Some(repo.into()),
                package_version: Some(v.into()),
            },
        )
    }

    #[test]
    fn packages_and_versions() {
        let mut echo = ApplicationPackage::new("echo", Default::default());
        echo.status = Some(ApplicationPackageStatus {
            available_repositories: vec!["main".into()],
            instances_overall: Some(2),
            ..Default::default()
        });
        let versions = vec![
            version("main", "echo", "v1.10.0"),
            version("main", "echo", "v1.2.0"),
            version("main", "web", "v3.0.0"),
        ];
        assert_eq!(
            render_packages(&[echo], &versions),
            "NAME   REPOSITORIES   VERSIONS   LATEST    INSTANCES\n\
             echo   main           2          v1.10.0   2\n"
        );
        let text = render_versions("echo", &versions);
        let names: Vec<&str> = text
            .lines()
            .skip(1)
            .map(|l| l.split_whitespace().next().unwrap())
            .collect();
        assert_eq!(names, ["main-echo-v1.2.0", "main-echo-v1.10.0"]);
        assert!(text.lines().nth(1).unwrap().contains("draft"));
    }

    #[test]
    fn applications_say_why_they_do_not_run() {
        let mut a = Application::new(
            "shop",
            ApplicationSpec {
                package_name: "echo".into(),
                package_version: "v1.3.0".into(),
                ..Default::default()
            },
        );
        a.metadata.namespace = Some("a".into());
        a.status = Some(ApplicationStatus {
            current_version: Some(CurrentVersion {
                version: Some("v1.1.0".into()),
                channel: None,
            }),
            summary: Some(Summary {
                state: Some("Failed".into()),
                message: Some("upgrade refused".into()),
                tip: None,
            }),
            ..Default::default()
        });
        assert_eq!(
            render_applications(&[a], true),
            "NAMESPACE   NAME   PACKAGE   VERSION                 STATE    MESSAGE\n\
             a           shop   echo      v1.1.0 (wants v1.3.0)   Failed   upgrade refused\n"
        );
    }
}
