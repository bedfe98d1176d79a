//! Applying a module release to disk: download the module image (verified), unpack it safely
//! into staging, read its `module.yaml` and settings files, check the module's *current*
//! settings against the release's schema and conversions, write the source's registry into its
//! values schema, place it at
//! `<downloaded>/<module>/v<version>` and switch `<weight>-<module>` to it. Any failure leaves
//! the active release as it was.

use api::module_config::ModuleConfigSpec;

use crate::Error;
use crate::install::{Downloaded, ModuleFiles, read_module_files};
use crate::registry::{Download, ModuleRegistry};
use crate::unpack::Limits;

/// A release now active.
#[derive(Clone, Debug)]
pub struct Installed {
    /// Where it is.
    pub path: std::path::PathBuf,
    /// The download.
    pub download: Download,
    /// Its definition and settings.
    pub files: ModuleFiles,
    /// The module's values under the new schema (converted, defaulted).
    pub values: serde_json::Value,
}

/// Installs `R/<module>:<tag>` as version `version` and activates it. `config` is the module's
/// ModuleConfig spec (default when it has none).
pub async fn install(
    registry: &ModuleRegistry,
    downloaded: &Downloaded,
    module: &str,
    tag: &str,
    version: &str,
    config: &ModuleConfigSpec,
    limits: Limits,
) -> Result<Installed, Error> {
    let staging = downloaded.staging()?;
    let download = registry
        .download(module, tag, staging.path(), limits)
        .await?;
    let files = read_module_files(module, staging.path())?;
    let checked = files.settings.check(config);
    if let Some(reason) = checked.error {
        return Err(Error::SettingsRejected { reason });
    }
    let values = checked.values.unwrap_or_default();
    if let Some(source) = registry.source() {
        crate::install::inject_registry(staging.path(), module, source)?;
    }
    let path = downloaded.place(staging, module, version)?;
    downloaded.activate(module, version, files.definition.weight)?;
    Ok(Installed {
        path,
        download,
        files,
        values,
    })
}
