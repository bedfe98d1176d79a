//! Loading a chart from its files, as Helm's `loader.LoadFiles` sorts them: `Chart.yaml`,
//! `values.yaml`, `values.schema.json`, `requirements.yaml` (v1), `templates/`, subcharts
//! under `charts/` (directories and `.tgz` archives), everything else into `.Files`.

use std::collections::BTreeMap;
use std::io::Read;

use crate::chart::{API_VERSION_V1, Chart, File, Metadata};

/// The largest decompressed chart archive Helm accepts.
pub const MAX_DECOMPRESSED_CHART_SIZE: u64 = 100 * 1024 * 1024;
/// The largest single file Helm accepts from an archive or a directory.
pub const MAX_DECOMPRESSED_FILE_SIZE: u64 = 5 * 1024 * 1024;

/// Why a chart did not load: Helm's text.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct LoadError(pub String);

/// Loads a chart from `(path, contents)` pairs, paths relative to the chart root.
pub fn load_files(files: Vec<(String, Vec<u8>)>) -> Result<Chart, LoadError> {
    let mut c = Chart::default();
    let mut have_metadata = false;
    for (name, data) in &files {
        if name == "Chart.yaml" {
            have_metadata = true;
            let doc = crate::yaml::parse_typed(&String::from_utf8_lossy(data))
                .map_err(|e| LoadError(format!("cannot load Chart.yaml: {}", e.message())))?;
            c.metadata
                .decode_into(&doc)
                .map_err(|e| LoadError(format!("cannot load Chart.yaml: {e}")))?;
            if c.metadata.api_version.is_empty() {
                c.metadata.api_version = API_VERSION_V1.into();
            }
        }
    }
    let mut subcharts: BTreeMap<String, Vec<(String, Vec<u8>)>> = BTreeMap::new();
    for (name, data) in files {
        match name.as_str() {
            "Chart.yaml" | "Chart.lock" | "requirements.lock" => {
                if name == "requirements.lock" && c.metadata.api_version == API_VERSION_V1 {
                    c.files.push(File { name, data });
                }
            }
            "values.yaml" => {
                c.values = crate::yaml::parse_values(&String::from_utf8_lossy(&data))
                    .map_err(|e| LoadError(format!("cannot load values.yaml: {e}")))?;
            }
            "values.schema.json" => c.schema = Some(data),
            "requirements.yaml" => {
                let doc =
                    crate::yaml::parse_typed(&String::from_utf8_lossy(&data)).map_err(|e| {
                        LoadError(format!("cannot load requirements.yaml: {}", e.message()))
                    })?;
                let mut md = std::mem::take(&mut c.metadata);
                md.decode_into(&doc)
                    .map_err(|e| LoadError(format!("cannot load requirements.yaml: {e}")))?;
                c.metadata = md;
                if c.metadata.api_version == API_VERSION_V1 {
                    c.files.push(File { name, data });
                }
            }
            n if n.starts_with("templates/") => c.templates.push(File { name, data }),
            n if n.starts_with("charts/") => {
                if n.ends_with(".prov") {
                    c.files.push(File { name, data });
                    continue;
                }
                let rest = &n["charts/".len()..];
                let sub = rest.split('/').next().unwrap_or_default().to_owned();
                subcharts
                    .entry(sub)
                    .or_default()
                    .push((rest.to_owned(), data));
            }
            _ => c.files.push(File { name, data }),
        }
    }
    if !have_metadata {
        return Err(LoadError("Chart.yaml file is missing".into()));
    }
    c.metadata
        .validate()
        .map_err(|e| LoadError(e.to_string()))?;

    for (n, files) in subcharts {
        if n.starts_with(['_', '.']) {
            continue;
        }
        let sub = if n.ends_with(".tgz") {
            let (fname, data) = &files[0];
            if *fname != n {
                return Err(LoadError(format!(
                    "error unpacking subchart tar in {}: expected {n}, got {fname}",
                    c.name()
                )));
            }
            load_archive(data)
        } else {
            let inner = files
                .into_iter()
                .filter_map(|(name, data)| {
                    name.split_once('/')
                        .map(|(_, rest)| (rest.to_owned(), data))
                })
                .collect();
            load_files(inner)
        };
        let sub = sub.map_err(|e| {
            LoadError(format!(
                "error unpacking subchart {n} in {}: {}",
                c.name(),
                e.0
            ))
        })?;
        c.dependencies.push(sub);
    }
    Ok(c)
}

/// Loads a chart archive (`.tgz`), with Helm's checks on sizes and paths.
pub fn load_archive(data: &[u8]) -> Result<Chart, LoadError> {
    load_files(archive_files(data)?)
}

/// The files of a chart archive, with the top directory stripped, as Helm's
/// `LoadArchiveFiles` gives them.
pub fn archive_files(data: &[u8]) -> Result<Vec<(String, Vec<u8>)>, LoadError> {
    let gz = flate2::read::GzDecoder::new(data);
    if gz.header().is_none() {
        return Err(LoadError("gzip: invalid header".into()));
    }
    let mut tar = tar::Archive::new(gz);
    let mut files = Vec::new();
    let mut remaining = MAX_DECOMPRESSED_CHART_SIZE;
    let entries = tar
        .entries()
        .map_err(|e| LoadError(format!("archive/tar: {e}")))?;
    for entry in entries {
        let mut entry = entry.map_err(|e| LoadError(format!("archive/tar: {e}")))?;
        let kind = entry.header().entry_type();
        if kind.is_dir()
            || kind.is_pax_global_extensions()
            || kind.is_pax_local_extensions()
            || kind.is_gnu_longname()
        {
            continue;
        }
        let raw = String::from_utf8_lossy(&entry.path_bytes()).into_owned();
        let delim = if raw.contains('\\') { '\\' } else { '/' };
        let parts: Vec<&str> = raw.split(delim).collect();
        let n = parts[1..].join("/");
        if n.starts_with('/') {
            return Err(LoadError("chart illegally contains absolute paths".into()));
        }
        let n = clean(&n);
        if n == "." {
            return Err(LoadError(format!(
                "chart illegally contains content outside the base directory: {raw:?}"
            )));
        }
        if n.starts_with("..") {
            return Err(LoadError(
                "chart illegally references parent directory".into(),
            ));
        }
        let b = n.as_bytes();
        if b.len() >= 2 && b[0].is_ascii_alphabetic() && b[1] == b':' {
            return Err(LoadError("chart contains illegally named files".into()));
        }
        if parts[0] == "Chart.yaml" {
            return Err(LoadError("chart yaml not in base directory".into()));
        }
        let size = entry.header().size().unwrap_or(0);
        if size > remaining {
            return Err(LoadError(format!(
                "decompressed chart is larger than the maximum size {MAX_DECOMPRESSED_CHART_SIZE}"
            )));
        }
        if size > MAX_DECOMPRESSED_FILE_SIZE {
            return Err(LoadError(format!(
                "decompressed chart file {raw:?} is larger than the maximum file size {MAX_DECOMPRESSED_FILE_SIZE}"
            )));
        }
        let mut buf = Vec::new();
        let read = (&mut entry)
            .take(remaining)
            .read_to_end(&mut buf)
            .map_err(|e| LoadError(format!("archive/tar: {e}")))? as u64;
        remaining -= read;
        if read < size || remaining == 0 {
            return Err(LoadError(format!(
                "decompressed chart is larger than the maximum size {MAX_DECOMPRESSED_CHART_SIZE}"
            )));
        }
        let data = buf
            .strip_prefix(b"\xEF\xBB\xBF")
            .map(<[u8]>::to_vec)
            .unwrap_or(buf);
        files.push((n, data));
    }
    if files.is_empty() {
        return Err(LoadError("no files in chart archive".into()));
    }
    Ok(files)
}

/// Go's `path.Clean`.
pub(crate) fn clean(p: &str) -> String {
    if p.is_empty() {
        return ".".into();
    }
    let rooted = p.starts_with('/');
    let mut out: Vec<&str> = Vec::new();
    for seg in p.split('/') {
        match seg {
            "" | "." => {}
            ".." => {
                if out.last().is_some_and(|l| *l != "..") {
                    out.pop();
                } else if !rooted {
                    out.push("..");
                }
            }
            s => out.push(s),
        }
    }
    let joined = out.join("/");
    match (rooted, joined.is_empty()) {
        (true, _) => format!("/{joined}"),
        (false, true) => ".".into(),
        (false, false) => joined,
    }
}

impl Metadata {
    /// Whether this chart declares its dependencies in `Chart.yaml` (or `requirements.yaml`).
    pub fn has_dependencies(&self) -> bool {
        self.dependencies.is_some()
    }
}
