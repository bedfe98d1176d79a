//! `d8 module render CHART_DIR`: `helm template` without Helm — the chart directory (or
//! `.tgz`) read as Helm's loader reads it (`.helmignore` applied, symlinks followed only
//! inside the chart, bounded file sizes, UTF-8 BOM dropped), rendered by `helm-render`, and
//! printed byte for byte as `helm template NAME CHART` prints it, errors included
//! (`Error: …` on stderr, exit status 1).

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use helm_render::helmignore::{HELMIGNORE, HelmIgnore};
use helm_render::loader::MAX_DECOMPRESSED_FILE_SIZE;
use helm_render::{KubeVersion, RenderOptions, ValueSources};

/// Flags of `d8 module render`, named as `helm template`'s.
#[derive(Debug, clap::Args)]
pub(crate) struct RenderArgs {
    /// The chart directory (or packaged `.tgz`).
    chart: PathBuf,
    /// Values files, in order (`-` reads stdin).
    #[arg(short = 'f', long = "values")]
    values: Vec<String>,
    /// `key=value` pairs (Helm's `--set` syntax).
    #[arg(long)]
    set: Vec<String>,
    /// `key=value` pairs whose values stay strings.
    #[arg(long = "set-string")]
    set_string: Vec<String>,
    /// `key=json` pairs.
    #[arg(long = "set-json")]
    set_json: Vec<String>,
    /// `key=path` pairs: the value is the file's contents.
    #[arg(long = "set-file")]
    set_file: Vec<String>,
    /// The release name (`helm template`'s NAME).
    #[arg(long = "release-name", default_value = "release-name")]
    release_name: String,
    /// The release namespace.
    #[arg(short = 'n', long, default_value = "default")]
    namespace: String,
    /// The Kubernetes version for `.Capabilities.KubeVersion`.
    #[arg(long = "kube-version")]
    kube_version: Option<String>,
    /// API versions for `.Capabilities.APIVersions`, added to the defaults.
    #[arg(short = 'a', long = "api-versions")]
    api_versions: Vec<String>,
    /// Print the chart's CRDs (from `crds/`) first.
    #[arg(long = "include-crds")]
    include_crds: bool,
    /// Only the manifests of these templates (paths like `templates/x.yaml`, globs allowed).
    #[arg(short = 's', long = "show-only")]
    show_only: Vec<String>,
}

/// What a run prints: stdout on success, Helm's stderr text on failure.
type Outcome = Result<String, String>;

/// Runs `d8 module render`: prints the manifests, or Helm's error and exits with status 1.
pub(crate) fn run(args: RenderArgs) -> ! {
    let outcome = render(&args);
    match outcome {
        Ok(out) => {
            let mut stdout = std::io::stdout().lock();
            let ok = stdout
                .write_all(out.as_bytes())
                .and_then(|()| stdout.flush());
            std::process::exit(if ok.is_ok() { 0 } else { 1 });
        }
        Err(err) => {
            let mut stderr = std::io::stderr().lock();
            let _ = stderr.write_all(err.as_bytes());
            let _ = stderr.flush();
            std::process::exit(1);
        }
    }
}

fn render(args: &RenderArgs) -> Outcome {
    let err = |m: String| format!("Error: {m}\n");
    let kube_version = match &args.kube_version {
        Some(v) => Some(KubeVersion::parse(v).ok_or_else(|| {
            err(format!(
                "invalid kube version '{v}': Invalid Semantic Version"
            ))
        })?),
        None => None,
    };
    let opts = RenderOptions {
        release_name: args.release_name.clone(),
        namespace: args.namespace.clone(),
        kube_version,
        api_versions: args.api_versions.clone(),
        include_crds: args.include_crds,
        show_only: args.show_only.clone(),
        root: Default::default(),
    };
    // Helm reads the values before the chart.
    let mut sources = ValueSources {
        set_json: args.set_json.clone(),
        set: args.set.clone(),
        set_string: args.set_string.clone(),
        set_file: args.set_file.clone(),
        ..ValueSources::default()
    };
    for name in &args.values {
        let text = read_values_file(name).map_err(err)?;
        sources.files.push((name.clone(), text));
    }
    if !args.chart.exists() {
        return Err(err(format!(
            "path {:?} not found",
            args.chart.display().to_string()
        )));
    }
    let files = if args.chart.is_dir() {
        Files::Dir(read_chart_dir(&args.chart).map_err(err)?)
    } else {
        let data = read_bounded(&args.chart, 100 * 1024 * 1024).map_err(err)?;
        Files::Archive(data)
    };
    // The engine recurses deeply (Helm allows 1000 nested includes): its own thread and stack.
    std::thread::Builder::new()
        .stack_size(helm_render::engine::RENDER_THREAD_STACK)
        .spawn(move || render_on_thread(files, sources, opts))
        .map_err(|e| err(format!("cannot start the render thread: {e}")))?
        .join()
        .map_err(|_| err("rendering template failed".into()))?
}

/// The chart in `dir` rendered as `d8 module render DIR --release-name NAME -n NAMESPACE --set …`
/// prints it (tests of the platform's chart against the binary's own parsers).
#[cfg(test)]
pub(crate) fn render_dir(dir: &Path, name: &str, namespace: &str, set: &[&str]) -> Outcome {
    render(&RenderArgs {
        chart: dir.to_path_buf(),
        values: Vec::new(),
        set: set.iter().map(|s| s.to_string()).collect(),
        set_string: Vec::new(),
        set_json: Vec::new(),
        set_file: Vec::new(),
        release_name: name.into(),
        namespace: namespace.into(),
        kube_version: None,
        api_versions: Vec::new(),
        include_crds: false,
        show_only: Vec::new(),
    })
}

enum Files {
    Dir(Vec<(String, Vec<u8>)>),
    Archive(Vec<u8>),
}

fn render_on_thread(files: Files, sources: ValueSources, opts: RenderOptions) -> Outcome {
    let err = |m: String| format!("Error: {m}\n");
    let read_file =
        |p: &str| std::fs::read_to_string(p).map_err(|e| format!("open {p}: {}", io_text(&e)));
    let user = sources.merge(&read_file).map_err(err)?;
    let chart = match files {
        Files::Dir(files) => helm_render::load_files(files),
        Files::Archive(data) => helm_render::load_archive(&data),
    }
    .map_err(|e| err(e.to_string()))?;
    helm_render::render(chart, &user, &opts).map_err(|e| e.stderr())
}

fn read_values_file(name: &str) -> Result<String, String> {
    if name == "-" {
        let mut s = String::new();
        std::io::stdin()
            .read_to_string(&mut s)
            .map_err(|e| format!("read -: {e}"))?;
        return Ok(s);
    }
    std::fs::read_to_string(name).map_err(|e| format!("open {name}: {}", io_text(&e)))
}

/// The text Go's `os` errors end with.
fn io_text(e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::NotFound => "no such file or directory".into(),
        std::io::ErrorKind::PermissionDenied => "permission denied".into(),
        _ => e.to_string(),
    }
}

fn read_bounded(path: &Path, limit: u64) -> Result<Vec<u8>, String> {
    let f = std::fs::File::open(path)
        .map_err(|e| format!("open {}: {}", path.display(), io_text(&e)))?;
    let mut data = Vec::new();
    f.take(limit + 1)
        .read_to_end(&mut data)
        .map_err(|e| format!("error reading {}: {e}", path.display()))?;
    if data.len() as u64 > limit {
        return Err(format!(
            "chart file {:?} is larger than the maximum file size {limit}",
            path.file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default()
        ));
    }
    Ok(data)
}

/// Reads a chart directory as Helm's `LoadDir` does: a lexical walk per directory,
/// `.helmignore` (plus Helm's default rule) skipping files and whole directories, symlinks
/// followed (only while they stay inside the chart), irregular files refused.
fn read_chart_dir(dir: &Path) -> Result<Vec<(String, Vec<u8>)>, String> {
    let root = dir
        .canonicalize()
        .map_err(|e| format!("{}: {}", dir.display(), io_text(&e)))?;
    let rules = match std::fs::read_to_string(root.join(HELMIGNORE)) {
        Ok(text) => HelmIgnore::parse(&text).map_err(|e| e.to_string())?,
        Err(_) => HelmIgnore::default(),
    };
    let mut files = Vec::new();
    walk(&root, &root, "", &rules, &mut files, 0)?;
    Ok(files)
}

fn walk(
    root: &Path,
    dir: &Path,
    rel: &str,
    rules: &HelmIgnore,
    out: &mut Vec<(String, Vec<u8>)>,
    depth: usize,
) -> Result<(), String> {
    if depth > 64 {
        return Err(format!("{rel}: directories nested too deeply"));
    }
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .map_err(|e| format!("{}: {}", dir.display(), io_text(&e)))?
        .filter_map(Result::ok)
        .collect();
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let name = entry.file_name().to_string_lossy().into_owned();
        let n = if rel.is_empty() {
            name.clone()
        } else {
            format!("{rel}/{name}")
        };
        let path = entry.path();
        // Follow symlinks, but only to places inside the chart.
        let target = path
            .canonicalize()
            .map_err(|e| format!("{}: {}", path.display(), io_text(&e)))?;
        if !target.starts_with(root) {
            return Err(format!(
                "{n}: the symbolic link leads outside the chart ({})",
                target.display()
            ));
        }
        let meta = std::fs::metadata(&target)
            .map_err(|e| format!("{}: {}", target.display(), io_text(&e)))?;
        if meta.is_dir() {
            if rules.ignore(&n, true) {
                continue;
            }
            walk(root, &target, &n, rules, out, depth + 1)?;
            continue;
        }
        if rules.ignore(&n, false) {
            continue;
        }
        if !meta.is_file() {
            return Err(format!(
                "cannot load irregular file {} as it has file mode type bits set",
                path.display()
            ));
        }
        if meta.len() > MAX_DECOMPRESSED_FILE_SIZE {
            return Err(format!(
                "chart file {name:?} is larger than the maximum file size {MAX_DECOMPRESSED_FILE_SIZE}"
            ));
        }
        let data = read_bounded(&target, MAX_DECOMPRESSED_FILE_SIZE)?;
        let data = match data.strip_prefix(b"\xEF\xBB\xBF") {
            Some(rest) => rest.to_vec(),
            None => data,
        };
        out.push((n, data));
    }
    Ok(())
}
