//! `d8 image build` / `d8 image push`: `d8`'s own container image, built without Docker by
//! `image-build` (reproducible: the same binary gives the same digest) and uploaded with
//! `registry-client` to any registry.

use std::path::{Path, PathBuf};

use anyhow::Context;
use registry_client::{Client, Config, Credentials, Endpoint, RequestBody, Scheme};

/// The image of `d8` itself.
#[derive(Debug, clap::Subcommand)]
pub(crate) enum Command {
    /// Build the image into an OCI image layout directory and print its digest.
    Build(BuildArgs),
    /// Build the image and push it to a registry (`HOST[:PORT]/REPOSITORY:TAG`); prints
    /// `REPOSITORY@DIGEST`.
    Push(PushArgs),
}

/// What the image is built from.
#[derive(Debug, clap::Args)]
pub(crate) struct BuildArgs {
    /// The `d8` binary to put in the image (default: this one).
    #[arg(long)]
    binary: Option<PathBuf>,
    /// The OCI image layout directory to write.
    #[arg(long, default_value = "d8-image")]
    output: PathBuf,
    /// The tag recorded in the layout's index.
    #[arg(long, default_value = env!("CARGO_PKG_VERSION"))]
    tag: String,
    /// The CA bundle to include ("" for none).
    #[arg(long, default_value = "/etc/ssl/certs/ca-certificates.crt")]
    ca_bundle: PathBuf,
    /// The source commit, for the `org.opencontainers.image.revision` label.
    #[arg(long)]
    revision: Option<String>,
    /// The image's creation time in seconds since the epoch (default 0, for a reproducible
    /// digest).
    #[arg(long, env = "SOURCE_DATE_EPOCH", default_value_t = 0)]
    source_date_epoch: u64,
}

/// Where the image goes.
#[derive(Debug, clap::Args)]
pub(crate) struct PushArgs {
    /// `HOST[:PORT]/REPOSITORY:TAG` (or `http(s)://HOST/REPOSITORY:TAG`).
    reference: String,
    #[command(flatten)]
    build: BuildArgs,
    /// Plain HTTP instead of HTTPS.
    #[arg(long)]
    insecure: bool,
    /// The registry's CA certificate (PEM).
    #[arg(long)]
    tls_ca_file: Option<PathBuf>,
    /// Registry login.
    #[arg(long, short = 'u', env = "D8_IMAGE_LOGIN")]
    username: Option<String>,
    /// Registry password (prefer the environment variable: arguments are visible to others).
    #[arg(long, short = 'p', env = "D8_IMAGE_PASSWORD", hide_env_values = true)]
    password: Option<String>,
}

pub(crate) async fn run(command: Command) -> anyhow::Result<()> {
    match command {
        Command::Build(args) => {
            let built = build(&args)?;
            say(&built.digest.to_string())
        }
        Command::Push(args) => {
            let pushed = push(&args).await?;
            say(&pushed)
        }
    }
}

/// Prints the one line a script reads (the digest, or the pushed reference).
fn say(line: &str) -> anyhow::Result<()> {
    use std::io::Write;
    writeln!(std::io::stdout().lock(), "{line}").context("write to stdout")
}

fn build(args: &BuildArgs) -> anyhow::Result<image_build::Built> {
    let binary = match &args.binary {
        Some(path) => path.clone(),
        None => std::env::current_exe().context("find this binary")?,
    };
    let image = image_build::D8Image {
        binary,
        ca_bundle: (!args.ca_bundle.as_os_str().is_empty()).then(|| args.ca_bundle.clone()),
        version: env!("CARGO_PKG_VERSION").to_string(),
        revision: args.revision.clone(),
        created: args.source_date_epoch,
    };
    let (layers, config) = image.assemble()?;
    let built = image_build::build(&args.output, &layers, &config, &args.tag)
        .with_context(|| format!("build the image into {}", args.output.display()))?;
    tracing::info!(digest = %built.digest, layout = %args.output.display(), "image built");
    Ok(built)
}

/// `host/repo:tag` → (endpoint address, repository, tag). A reference without a tag gets the
/// package version.
fn split_reference(reference: &str) -> anyhow::Result<(String, String, String)> {
    let (scheme, rest) = match reference.split_once("://") {
        Some((scheme, rest)) => (format!("{scheme}://"), rest),
        None => (String::new(), reference),
    };
    let (host, path) = rest
        .split_once('/')
        .with_context(|| format!("{reference:?} names no repository (HOST/REPOSITORY:TAG)"))?;
    let (repository, tag) = match path.rsplit_once(':') {
        Some((repository, tag)) if !tag.contains('/') => (repository, tag),
        _ => (path, env!("CARGO_PKG_VERSION")),
    };
    anyhow::ensure!(
        !host.is_empty() && !repository.is_empty(),
        "{reference:?} names no registry host or repository"
    );
    oci::Tag::parse(tag).map_err(|e| anyhow::anyhow!("{reference:?}: tag {tag:?}: {e}"))?;
    Ok((
        format!("{scheme}{host}"),
        repository.to_string(),
        tag.to_string(),
    ))
}

async fn push(args: &PushArgs) -> anyhow::Result<String> {
    let (address, repository, tag) = split_reference(&args.reference)?;
    let built = build(&args.build)?;
    let mut endpoint = if address.contains("://") {
        Endpoint::from_url(&address)?
    } else {
        Endpoint::new(
            if args.insecure {
                Scheme::Http
            } else {
                Scheme::Https
            },
            &address,
        )
    };
    if let Some(path) = &args.tls_ca_file {
        let pem = std::fs::read_to_string(path)
            .with_context(|| format!("read the CA file {}", path.display()))?;
        endpoint = endpoint.ca_pem(&pem);
    }
    if let (Some(user), Some(password)) = (&args.username, &args.password) {
        endpoint = endpoint.credentials(Credentials::new(user.as_str(), password.as_str()));
    }
    let remote = Client::new(Config::default()).remote(endpoint)?;
    remote
        .check()
        .await
        .with_context(|| format!("reach the registry {address}"))?;
    let config_digest = oci::Digest::sha256(&built.config);
    let blobs = built
        .layers
        .iter()
        .map(|l| (l.digest, l.size))
        .chain([(config_digest, built.config.len() as u64)]);
    for (digest, size) in blobs {
        push_blob(
            &remote,
            &repository,
            &digest,
            size,
            &built.blob_path(&digest),
        )
        .await?;
    }
    remote
        .put_manifest(
            &repository,
            &tag,
            image_build::config::MANIFEST,
            built.manifest.clone().into(),
        )
        .await
        .with_context(|| format!("push the manifest to {address}/{repository}:{tag}"))?;
    Ok(format!("{address}/{repository}@{}", built.digest))
}

/// Uploads a blob unless the registry has it already.
async fn push_blob(
    remote: &registry_client::Remote,
    repository: &str,
    digest: &oci::Digest,
    size: u64,
    path: &Path,
) -> anyhow::Result<()> {
    if let Ok(head) = remote.head_blob(repository, digest).await
        && head.size == Some(size)
    {
        tracing::debug!(%digest, "blob already there");
        return Ok(());
    }
    let bytes = tokio::fs::read(path)
        .await
        .with_context(|| format!("read {}", path.display()))?;
    remote
        .push_blob(repository, digest, RequestBody::Bytes(bytes.into()))
        .await
        .with_context(|| format!("push blob {digest}"))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_split_into_address_repository_and_tag() {
        let v = env!("CARGO_PKG_VERSION");
        for (reference, expected) in [
            ("127.0.0.1:5000/d8:v1", ("127.0.0.1:5000", "d8", "v1")),
            (
                "registry.example/deckhouse/d8",
                ("registry.example", "deckhouse/d8", v),
            ),
            (
                "http://127.0.0.1:5000/a/b:x",
                ("http://127.0.0.1:5000", "a/b", "x"),
            ),
        ] {
            let (a, r, t) = split_reference(reference).unwrap();
            assert_eq!(
                (a.as_str(), r.as_str(), t.as_str()),
                expected,
                "{reference}"
            );
        }
        for bad in ["d8", "host/", "/repo:tag", "host/repo:bad tag"] {
            assert!(split_reference(bad).is_err(), "{bad}");
        }
    }
}
