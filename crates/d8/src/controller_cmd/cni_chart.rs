//! The deckhouse chart's CNI migration template, carried in the binary: `d8 controller`
//! renders it (with the module runtime's Helm renderer, release `deckhouse`) while a
//! CNIMigration exists, as addon-operator renders the deckhouse module for Deckhouse's
//! `detect-cni-migration` hook. Only the files that template needs are carried; `values.yaml`
//! gives its defaults.

use futures_util::future::BoxFuture;
use serde_json::Value;

/// `(path in the chart, contents)` of the files rendered.
const FILES: [(&str, &str); 4] = [
    (
        "Chart.yaml",
        include_str!("../../../../charts/deckhouse/Chart.yaml"),
    ),
    (
        "values.yaml",
        include_str!("../../../../charts/deckhouse/values.yaml"),
    ),
    (
        "templates/_helpers.tpl",
        include_str!("../../../../charts/deckhouse/templates/_helpers.tpl"),
    ),
    (
        "templates/cni-migration.yaml",
        include_str!("../../../../charts/deckhouse/templates/cni-migration.yaml"),
    ),
];

/// Renders the template into the release namespace.
#[derive(Clone, Debug)]
pub(crate) struct CniChart {
    /// The release namespace (`d8-system`).
    pub(crate) namespace: String,
}

impl utilities::cni::components::Render for CniChart {
    fn render(&self, values: Value) -> BoxFuture<'static, Result<Vec<Value>, String>> {
        let namespace = self.namespace.clone();
        Box::pin(async move {
            let files = FILES
                .iter()
                .map(|(path, text)| ((*path).to_owned(), text.as_bytes().to_vec()))
                .collect();
            module_controller::runtime::render::render(
                "deckhouse",
                files,
                &values,
                Default::default(),
                &namespace,
            )
            .await
            .map(|r| r.objects)
            .map_err(|e| e.to_string())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use utilities::cni::components::{Render, chart_values, platform_values};
    use utilities::cni::detect::HookValues;

    #[tokio::test]
    async fn the_template_renders_the_manager_and_agent_only_while_a_migration_runs() {
        let chart = CniChart {
            namespace: "d8-system".into(),
        };
        let platform = platform_values("registry.example.com/d8@sha256:abc", &["pull".into()]);
        let none = chart
            .render(chart_values(platform.clone(), None))
            .await
            .unwrap();
        assert!(none.is_empty(), "{none:?}");
        let hook = HookValues {
            name: "cni-migration".into(),
            webhooks_disable: true,
        };
        let objects = chart
            .render(chart_values(platform, Some(&hook)))
            .await
            .unwrap();
        let names: Vec<String> = objects
            .iter()
            .map(|o| {
                format!(
                    "{}/{}",
                    o["kind"].as_str().unwrap(),
                    o["metadata"]["name"].as_str().unwrap()
                )
            })
            .collect();
        assert_eq!(
            names,
            [
                "DaemonSet/cni-migration-agent",
                "Deployment/cni-migration-manager"
            ]
        );
        for o in &objects {
            let spec = &o["spec"]["template"]["spec"];
            assert_eq!(
                spec["containers"][0]["image"],
                "registry.example.com/d8@sha256:abc"
            );
            assert_eq!(o["metadata"]["namespace"], "d8-system");
        }
        assert_eq!(
            objects[1]["spec"]["template"]["spec"]["imagePullSecrets"][0]["name"],
            "pull"
        );
    }
}
