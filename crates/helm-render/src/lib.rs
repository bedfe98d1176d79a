//! Helm 3's chart model and renderer, as `helm template` runs it: `Chart.yaml` (v1 and v2),
//! `values.yaml`, subcharts and library charts under `charts/`, value coalescing and scoping,
//! `values.schema.json`, `.Files`, `.Capabilities`, Helm's own template functions (`include`,
//! `tpl`, `required`, `toYaml`…), and the output: documents in Helm's order with their
//! `# Source:` lines.
//!
//! Pure: the chart arrives as file contents (the caller reads the directory or archive), the
//! output is text. No I/O, no network (`lookup` answers an empty map, as `helm template` does).

mod funcs_encoding;
pub mod toml;
pub mod yaml;

pub use funcs_encoding::encoding_funcs;
pub use yaml::{
    ManifestHead, ManifestMetadata, YamlError, parse_document, parse_head, parse_values,
};
