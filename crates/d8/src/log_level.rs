//! The log level of a running `d8`: `RUST_LOG` (else `info`) at start, then — for `d8
//! controller` and `d8 up` — the `deckhouse` ModuleConfig's `logLevel` (`Trace`, `Debug`,
//! `Info`, `Error`), followed as it changes, as Deckhouse's controller follows it. Without a
//! `logLevel` the start level applies again.

use std::sync::OnceLock;

use api::module_config::ModuleConfig;
use futures_util::StreamExt;
use kube::runtime::watcher;
use kube::{Api, Client};
use module_plan::values::LogLevel;
use serde_json::Value;
use tracing_subscriber::EnvFilter;

type Reload = Box<dyn Fn(EnvFilter) -> Result<(), String> + Send + Sync>;

static RELOAD: OnceLock<Reload> = OnceLock::new();

/// The filter at start: `RUST_LOG`, else `info`.
fn start_filter() -> String {
    std::env::var("RUST_LOG")
        .ok()
        .filter(|s| !s.trim().is_empty())
        .unwrap_or_else(|| "info".to_owned())
}

/// Installs the process's subscriber (stderr) with a filter `logLevel` can replace.
pub(crate) fn init() {
    let builder = tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_new(start_filter()).unwrap_or_else(|_| EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .with_filter_reloading();
    let handle = builder.reload_handle();
    builder.init();
    let _ = RELOAD.set(Box::new(move |filter| {
        handle.reload(filter).map_err(|e| e.to_string())
    }));
}

/// The filter for the `deckhouse` ModuleConfig's settings: its `logLevel` when it names one,
/// else `start`.
pub(crate) fn filter_for(settings: Option<&Value>, start: &str) -> String {
    settings
        .and_then(|s| s.get("logLevel"))
        .and_then(Value::as_str)
        .and_then(LogLevel::parse)
        .map_or_else(|| start.to_owned(), |l| l.directive().to_owned())
}

fn set(filter: &str) {
    let Some(reload) = RELOAD.get() else {
        return;
    };
    match EnvFilter::try_new(filter) {
        Ok(parsed) => {
            if let Err(e) = reload(parsed) {
                tracing::warn!(error = %e, "cannot change the log level");
            }
        }
        Err(e) => tracing::warn!(filter, error = %e, "cannot change the log level"),
    }
}

/// Follows the `deckhouse` ModuleConfig's `logLevel` until the process ends.
pub(crate) async fn follow(client: Client) {
    let start = start_filter();
    let configs: Api<ModuleConfig> = Api::all(client);
    let config = watcher::Config::default().fields("metadata.name=deckhouse");
    let mut current = start.clone();
    let mut events = std::pin::pin!(watcher(configs, config));
    while let Some(event) = events.next().await {
        let settings = match event {
            Ok(watcher::Event::Apply(c) | watcher::Event::InitApply(c)) => c.spec.settings,
            Ok(watcher::Event::Delete(_)) => None,
            Ok(watcher::Event::Init | watcher::Event::InitDone) => continue,
            Err(e) => {
                tracing::debug!(error = %e, "watching ModuleConfig deckhouse");
                continue;
            }
        };
        let wanted = filter_for(settings.as_ref(), &start);
        if wanted != current {
            tracing::info!(from = %current, to = %wanted, "log level from ModuleConfig deckhouse");
            set(&wanted);
            current = wanted;
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_log_level_follows_the_module_config() {
        for (settings, want) in [
            (None, "info"),
            (Some(json!({})), "info"),
            (Some(json!({"logLevel": "Debug"})), "debug"),
            (Some(json!({"logLevel": "Trace"})), "trace"),
            (Some(json!({"logLevel": "Error"})), "error"),
            (Some(json!({"logLevel": "Info"})), "info"),
            // A word the schema refuses leaves the start level.
            (Some(json!({"logLevel": "Loud"})), "info"),
            (Some(json!({"logLevel": 3})), "info"),
        ] {
            assert_eq!(filter_for(settings.as_ref(), "info"), want, "{settings:?}");
        }
        assert_eq!(filter_for(None, "warn,d8=debug"), "warn,d8=debug");
    }
}
