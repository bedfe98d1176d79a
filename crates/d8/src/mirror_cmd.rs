//! `d8 mirror pull` / `d8 mirror push`: flags as in Deckhouse's `d8 mirror`, plus the client
//! certificate and progress options of the publish endpoint.

use std::path::PathBuf;

use anyhow::Context;
use mirror::select::{Constraint, ModuleFilter, ModuleSpec, PlatformSelection, parse_release};
use registry_client::{ClientIdentity, Credentials, Endpoint, Scheme};

/// Bundles for air-gapped clusters.
#[derive(Debug, clap::Subcommand)]
pub(crate) enum Command {
    /// Download platform releases and modules into a bundle directory.
    Pull(Box<PullArgs>),
    /// Upload a bundle into a registry (above all the cluster's publish endpoint).
    Push(Box<PushArgs>),
}

/// How progress is shown.
#[derive(Debug, clap::Args)]
pub(crate) struct Output {
    /// Print nothing but errors.
    #[arg(long, short = 'q', conflicts_with = "json")]
    quiet: bool,
    /// Progress and the summary as JSON lines on stdout (for scripts).
    #[arg(long)]
    json: bool,
}

impl Output {
    fn progress(&self) -> mirror::Progress {
        mirror::Progress::new(if self.json {
            mirror::Mode::Json
        } else if self.quiet {
            mirror::Mode::Quiet
        } else {
            mirror::Mode::Auto
        })
    }
}

/// Flags of `d8 mirror pull`.
#[derive(Debug, clap::Args)]
pub(crate) struct PullArgs {
    /// The bundle directory.
    images_bundle_path: PathBuf,
    /// Source registry to pull from.
    #[arg(long, default_value = "registry.deckhouse.ru/deckhouse/ee")]
    source: String,
    /// Source registry login.
    #[arg(long, env = "D8_MIRROR_SOURCE_LOGIN")]
    source_login: Option<String>,
    /// Source registry password.
    #[arg(long, env = "D8_MIRROR_SOURCE_PASSWORD", hide_env_values = true)]
    source_password: Option<String>,
    /// Deckhouse license key (same as --source-login=license-token --source-password=<key>).
    #[arg(
        long,
        short = 'l',
        env = "D8_MIRROR_LICENSE_TOKEN",
        hide_env_values = true
    )]
    license: Option<String>,
    /// Lowest platform release to pull (when above the rock-solid channel's).
    #[arg(long, conflicts_with_all = ["deckhouse_tag", "include_platform"])]
    since_version: Option<String>,
    /// One platform build to pull (a release, a channel or a custom tag).
    #[arg(long, conflicts_with = "include_platform")]
    deckhouse_tag: Option<String>,
    /// Platform releases by constraint (e.g. ">=1.64 <=1.68", "~1.65.0", "=v1.65.3").
    #[arg(long)]
    include_platform: Option<String>,
    /// Only these modules: `name[@constraint]`, one flag per module.
    #[arg(long, short = 'i')]
    include_module: Vec<String>,
    /// Not these modules (or versions): `name[@constraint]`; ignored with --include-module.
    #[arg(long, short = 'e')]
    exclude_module: Vec<String>,
    /// Where modules are under the source.
    #[arg(long, default_value = "/modules")]
    modules_path_suffix: String,
    /// An image of your own to put in the bundle, `[REGISTRY/]REPOSITORY[:TAG][@sha256:DIGEST]`
    /// as `docker pull` reads it; one flag per image. It keeps its repository path (pushed
    /// under the push target's path). With --image or --images-file only those images are
    /// pulled, plus the platform when --deckhouse-tag, --include-platform or --since-version
    /// asks for it and modules when --include-module does. --source-login/--source-password go
    /// only to the --source registry's host; --insecure and --tls-ca-file apply to every
    /// registry.
    #[arg(long, value_name = "REF")]
    image: Vec<String>,
    /// A file of images like --image: one reference per line, `#` comments.
    #[arg(long, value_name = "FILE")]
    images_file: Option<PathBuf>,
    /// An image made on the spot from a local directory, `DIR=REPOSITORY:TAG`: one layer with
    /// the directory's tree (owner root, modes as on disk, linux/amd64); the same directory
    /// always gives the same digest. Counts as --image for what else is pulled.
    #[arg(long, value_name = "DIR=REPOSITORY:TAG")]
    image_dir: Vec<String>,
    /// Do not pull the platform.
    #[arg(long)]
    no_platform: bool,
    /// Do not pull modules.
    #[arg(long)]
    no_modules: bool,
    /// Accepted for compatibility: security databases are not pulled by this implementation.
    #[arg(long)]
    no_security_db: bool,
    /// Do not pull the installer images (install, install-standalone).
    #[arg(long)]
    no_installer: bool,
    /// Split packages into chunks: a number of GiB as in Deckhouse's d8 (`2`), or a size with a
    /// unit (`512M`, `64K`).
    #[arg(long, short = 'c')]
    images_bundle_chunk_size: Option<String>,
    /// Overwrite a bundle already in the directory.
    #[arg(long)]
    force: bool,
    /// Do not continue an interrupted pull; download everything again.
    #[arg(long)]
    no_pull_resume: bool,
    /// Mirror channels the source marks as suspended.
    #[arg(long)]
    ignore_suspend: bool,
    /// Talk plain HTTP to the source.
    #[arg(long)]
    insecure: bool,
    /// Not supported: trust the registry's CA with --tls-ca-file instead.
    #[arg(long)]
    tls_skip_verify: bool,
    /// CA certificate(s) to trust for the source (PEM); SSL_CERT_FILE is read too.
    #[arg(long, env = "SSL_CERT_FILE")]
    tls_ca_file: Option<PathBuf>,
    /// Print what would be pulled; write no bundle.
    #[arg(long)]
    dry_run: bool,
    /// Blobs downloaded at once.
    #[arg(long, default_value_t = 4)]
    parallel: usize,
    #[command(flatten)]
    output: Output,
}

/// Flags of `d8 mirror push`.
#[derive(Debug, clap::Args)]
pub(crate) struct PushArgs {
    /// The bundle directory written by `d8 mirror pull`.
    images_bundle_path: PathBuf,
    /// The target: `host[:port]/path` (https unless --insecure).
    registry: String,
    /// Write (push) login.
    #[arg(long, short = 'u', env = "D8_MIRROR_REGISTRY_LOGIN")]
    registry_login: Option<String>,
    /// Write (push) password.
    #[arg(
        long,
        short = 'p',
        env = "D8_MIRROR_REGISTRY_PASSWORD",
        hide_env_values = true
    )]
    registry_password: Option<String>,
    /// Client certificate (PEM) for the publish endpoint.
    #[arg(long, requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// Its private key (PEM).
    #[arg(long, requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// CA certificate(s) to trust for the registry (PEM); SSL_CERT_FILE is read too.
    #[arg(long, env = "SSL_CERT_FILE")]
    tls_ca_file: Option<PathBuf>,
    /// Talk plain HTTP to the registry.
    #[arg(long)]
    insecure: bool,
    /// Not supported: trust the registry's CA with --tls-ca-file instead.
    #[arg(long)]
    tls_skip_verify: bool,
    /// Where modules go under the target.
    #[arg(long, default_value = "/modules")]
    modules_path_suffix: String,
    /// Blobs pushed at once.
    #[arg(long, default_value_t = 4)]
    parallel: usize,
    /// Blobs larger than this go up in resumable chunks of this size (`16M`).
    #[arg(long, default_value = "16M")]
    upload_chunk_size: String,
    /// Where upload sessions are journaled for resuming (default: <bundle>/.d8-mirror-push).
    #[arg(long)]
    state_dir: Option<PathBuf>,
    /// Verify the bundle and print what would be pushed; push nothing.
    #[arg(long)]
    dry_run: bool,
    #[command(flatten)]
    output: Output,
}

pub(crate) async fn run(command: Command) -> anyhow::Result<()> {
    let (progress, result) = match command {
        Command::Pull(args) => {
            let progress = args.output.progress();
            let result = match pull_options(&args) {
                Ok(options) => mirror::pull(&options, &progress)
                    .await
                    .map(drop)
                    .map_err(Into::into),
                Err(e) => Err(e),
            };
            (progress, result)
        }
        Command::Push(args) => {
            let progress = args.output.progress();
            let result = match push_options(&args) {
                Ok(options) => mirror::push(&options, &progress)
                    .await
                    .map(drop)
                    .map_err(Into::into),
                Err(e) => Err(e),
            };
            (progress, result)
        }
    };
    if let Err(e) = &result {
        progress.error(&format!("{e:#}"));
    }
    result
}

fn endpoint(address: &str, insecure: bool, ca_file: Option<&PathBuf>) -> anyhow::Result<Endpoint> {
    let mut endpoint = if address.starts_with("http://") || address.starts_with("https://") {
        Endpoint::from_url(address)?
    } else {
        let (host, path) = address.split_once('/').unwrap_or((address, ""));
        anyhow::ensure!(!host.is_empty(), "{address:?} names no registry host");
        let scheme = if insecure {
            Scheme::Http
        } else {
            Scheme::Https
        };
        Endpoint::new(scheme, host).path_prefix(path)
    };
    if let Some(path) = ca_file {
        let pem = std::fs::read_to_string(path)
            .with_context(|| format!("read the CA file {}", path.display()))?;
        endpoint = endpoint.ca_pem(&pem);
    }
    Ok(endpoint)
}

fn size(text: &str, default_unit: u64) -> anyhow::Result<u64> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let number: u64 = number
        .parse()
        .with_context(|| format!("{text:?} is not a size"))?;
    let unit = match unit
        .trim()
        .to_ascii_uppercase()
        .trim_end_matches("IB")
        .trim_end_matches('B')
    {
        "" => default_unit,
        "K" => 1 << 10,
        "M" => 1 << 20,
        "G" => 1 << 30,
        "T" => 1 << 40,
        other => anyhow::bail!("{text:?}: unknown unit {other:?} (use K, M, G or T)"),
    };
    Ok(number.saturating_mul(unit))
}

fn pull_options(args: &PullArgs) -> anyhow::Result<mirror::PullOptions> {
    anyhow::ensure!(
        !args.tls_skip_verify,
        "--tls-skip-verify is not supported: pass the registry's CA with --tls-ca-file"
    );
    let mut source = endpoint(&args.source, args.insecure, args.tls_ca_file.as_ref())?;
    source = match (&args.license, &args.source_login, &args.source_password) {
        (Some(license), _, _) => source.credentials(Credentials::new("license-token", license)),
        (None, Some(login), Some(password)) => {
            source.credentials(Credentials::new(login, password))
        }
        (None, Some(_), None) | (None, None, Some(_)) => {
            anyhow::bail!("--source-login and --source-password go together")
        }
        (None, None, None) => source,
    };
    let images = own_images(args)?;
    let dir_images = args
        .image_dir
        .iter()
        .map(|s| mirror::images::parse_dir_image(s))
        .collect::<Result<Vec<_>, _>>()?;
    let only_images = !images.is_empty() || !dir_images.is_empty();
    anyhow::ensure!(
        only_images || !(args.no_platform && args.no_modules),
        "--no-platform and --no-modules together leave nothing to pull"
    );
    let platform = if args.no_platform {
        None
    } else if let Some(tag) = &args.deckhouse_tag {
        Some(PlatformSelection::Tag(tag.clone()))
    } else if let Some(constraint) = &args.include_platform {
        Some(PlatformSelection::Constraint(Constraint::parse(
            constraint,
        )?))
    } else if let Some(since) = &args.since_version {
        let version = parse_release(since)
            .with_context(|| format!("--since-version {since:?} is not a release version"))?;
        Some(PlatformSelection::Since(version))
    } else if only_images {
        None
    } else {
        Some(PlatformSelection::Channels)
    };
    let modules = if args.no_modules || (only_images && args.include_module.is_empty()) {
        None
    } else {
        Some(ModuleFilter {
            include: args
                .include_module
                .iter()
                .map(|s| ModuleSpec::parse(s))
                .collect::<Result<_, _>>()?,
            exclude: args
                .exclude_module
                .iter()
                .map(|s| ModuleSpec::parse(s))
                .collect::<Result<_, _>>()?,
        })
    };
    let chunk_size = args
        .images_bundle_chunk_size
        .as_deref()
        .map(|s| size(s, 1 << 30))
        .transpose()?
        .filter(|s| *s > 0);
    Ok(mirror::PullOptions {
        source,
        bundle_dir: args.images_bundle_path.clone(),
        platform,
        installers: !args.no_installer,
        modules,
        modules_path: args.modules_path_suffix.trim_matches('/').to_owned(),
        chunk_size,
        dry_run: args.dry_run,
        resume: !args.no_pull_resume,
        force: args.force,
        ignore_suspend: args.ignore_suspend,
        parallel: args.parallel,
        images,
        dir_images,
    })
}

/// The images of `--image` and `--images-file`, planned.
fn own_images(args: &PullArgs) -> anyhow::Result<Vec<mirror::images::Wanted>> {
    let mut references = args.image.clone();
    if let Some(path) = &args.images_file {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("read the images file {}", path.display()))?;
        references.extend(
            mirror::images::parse_file(&text)
                .with_context(|| format!("images file {}", path.display()))?,
        );
        anyhow::ensure!(
            !references.is_empty(),
            "the images file {} lists no image",
            path.display()
        );
    }
    Ok(mirror::images::plan(&references)?)
}

fn push_options(args: &PushArgs) -> anyhow::Result<mirror::PushOptions> {
    anyhow::ensure!(
        !args.tls_skip_verify,
        "--tls-skip-verify is not supported: pass the registry's CA with --tls-ca-file"
    );
    let mut target = endpoint(&args.registry, args.insecure, args.tls_ca_file.as_ref())?;
    match (&args.registry_login, &args.registry_password) {
        (Some(login), Some(password)) => {
            target = target.credentials(Credentials::new(login, password));
        }
        (None, None) => {}
        _ => anyhow::bail!("--registry-login and --registry-password go together"),
    }
    if let (Some(cert), Some(key)) = (&args.tls_cert, &args.tls_key) {
        let cert_pem = std::fs::read_to_string(cert)
            .with_context(|| format!("read the client certificate {}", cert.display()))?;
        let key_pem = std::fs::read_to_string(key)
            .with_context(|| format!("read the client key {}", key.display()))?;
        target = target.client_identity(ClientIdentity::new(cert_pem, key_pem));
    }
    Ok(mirror::PushOptions {
        target,
        bundle_dir: args.images_bundle_path.clone(),
        parallel: args.parallel,
        chunk_size: size(&args.upload_chunk_size, 1)?,
        state_dir: args.state_dir.clone(),
        dry_run: args.dry_run,
        modules_path: args.modules_path_suffix.trim_matches('/').to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_as_deckhouse_and_with_units() {
        assert_eq!(size("2", 1 << 30).unwrap(), 2 << 30);
        assert_eq!(size("512M", 1 << 30).unwrap(), 512 << 20);
        assert_eq!(size("64KiB", 1).unwrap(), 64 << 10);
        assert!(size("12 parsecs", 1).is_err());
        assert!(size("", 1).is_err());
    }

    #[derive(clap::Parser)]
    struct Pull {
        #[command(flatten)]
        args: PullArgs,
    }

    fn pull(args: &[&str]) -> anyhow::Result<mirror::PullOptions> {
        let parsed = <Pull as clap::Parser>::try_parse_from(
            std::iter::once("d8 mirror pull").chain(args.iter().copied()),
        )?;
        pull_options(&parsed.args)
    }

    #[test]
    fn own_images_alone_pull_nothing_else_unless_asked() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("images.txt");
        std::fs::write(&file, "# mine\nregistry.example.com/team/app:v1\n").unwrap();
        let file = file.display().to_string();
        let only = pull(&["/b", "--image", "alpine:3.20", "--images-file", &file]).unwrap();
        assert!(only.platform.is_none() && only.modules.is_none());
        let wanted: Vec<String> = only
            .images
            .iter()
            .map(|w| w.reference.to_string())
            .collect();
        assert_eq!(
            wanted,
            [
                "docker.io/library/alpine:3.20",
                "registry.example.com/team/app:v1"
            ]
        );
        let with = pull(&[
            "/b",
            "--image",
            "alpine",
            "--deckhouse-tag",
            "v1.65.3",
            "-i",
            "console",
        ])
        .unwrap();
        assert!(with.platform.is_some() && with.modules.is_some());
        let built = pull(&["/b", "--image-dir", "./site=team/site:v1"]).unwrap();
        assert!(built.platform.is_none() && built.modules.is_none() && built.images.is_empty());
        assert_eq!(built.dir_images[0].repository, "team/site");
        let release = pull(&["/b"]).unwrap();
        assert!(release.images.is_empty() && release.platform.is_some());
        let err = pull(&["/b", "--image", "Not A Reference"]).unwrap_err();
        assert!(
            err.to_string().contains("is not an image reference"),
            "{err}"
        );
        let empty = dir.path().join("empty.txt");
        std::fs::write(&empty, "# nothing\n").unwrap();
        let err = pull(&["/b", "--images-file", &empty.display().to_string()]).unwrap_err();
        assert!(err.to_string().contains("lists no image"), "{err}");
    }

    #[test]
    fn registry_addresses_are_host_and_path() {
        let e = endpoint("registry.example:5000/deckhouse/ee", false, None).unwrap();
        assert_eq!(e.display(), "https://registry.example:5000/deckhouse/ee");
        let e = endpoint("127.0.0.1:5000", true, None).unwrap();
        assert_eq!(e.display(), "http://127.0.0.1:5000");
        let e = endpoint("http://127.0.0.1:5000/x", false, None).unwrap();
        assert_eq!(e.display(), "http://127.0.0.1:5000/x");
    }
}
