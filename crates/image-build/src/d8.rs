//! The `d8` image: what goes into it. Two layers — the base (users, `/tmp`, CA bundle and, for
//! a dynamically linked binary, the C library and loader it needs) and the binary itself — so
//! an upgrade that changes only `d8` re-uses the base layer.

use std::path::{Path, PathBuf};

use crate::Error;
use crate::config::{ImageConfig, Labels, rfc3339};
use crate::ldd::{self, Linkage};
use crate::rootfs::{Rootfs, User};

/// Where `d8` lives in the image.
pub const BINARY: &str = "/usr/bin/d8";
/// Where the CA bundle lives in the image (Debian's path; rustls' native roots look there).
pub const CA_BUNDLE: &str = "/etc/ssl/certs/ca-certificates.crt";

/// What the `d8` image is built from.
#[derive(Clone, Debug)]
pub struct D8Image {
    /// The `d8` binary.
    pub binary: PathBuf,
    /// A CA bundle to include (none: the image trusts only what components are given).
    pub ca_bundle: Option<PathBuf>,
    /// `org.opencontainers.image.version`.
    pub version: String,
    /// `org.opencontainers.image.revision` (the source commit), when known.
    pub revision: Option<String>,
    /// Seconds since the epoch for `created` (`SOURCE_DATE_EPOCH`).
    pub created: u64,
}

impl D8Image {
    /// The layers (bottom first) and config; runs `ldd` on the binary.
    pub fn assemble(&self) -> Result<(Vec<(String, Rootfs)>, ImageConfig), Error> {
        let user = User::nonroot();
        let mut base = Rootfs::base(&user);
        if let Linkage::Dynamic(libraries) = ldd::needed(&self.binary)? {
            for library in libraries {
                add_library(&mut base, &library)?;
            }
        }
        if let Some(bundle) = &self.ca_bundle {
            base.host_file(CA_BUNDLE, 0o644, bundle.clone())?;
        }
        let mut app = Rootfs::new();
        app.host_file(BINARY, 0o755, self.binary.clone())?;
        let config = ImageConfig {
            user: format!("{0}:{0}", user.id),
            entrypoint: vec![BINARY.to_string()],
            env: vec![
                "PATH=/usr/local/bin:/usr/bin:/bin".to_string(),
                format!("SSL_CERT_FILE={CA_BUNDLE}"),
            ],
            labels: labels(&self.version, self.revision.as_deref(), self.created),
            created: self.created,
        };
        Ok((vec![("base".into(), base), ("d8".into(), app)], config))
    }
}

/// The OCI labels of the image.
pub fn labels(version: &str, revision: Option<&str>, created: u64) -> Labels {
    let mut labels = Labels::new();
    let mut put = |key: &str, value: &str| {
        labels.insert(format!("org.opencontainers.image.{key}"), value.to_string());
    };
    put("title", "d8");
    put(
        "description",
        "Deckhouse platform core and registry (d8): controller, webhooks, registry agent and cache",
    );
    put("licenses", "Apache-2.0");
    put("vendor", "d8");
    put("version", version);
    put("created", &rfc3339(created));
    if let Some(revision) = revision {
        put("revision", revision);
    }
    labels
}

/// A library goes in at the path the binary asks for, with the bytes of the file it resolves
/// to on the host (so `/lib64/ld-linux-x86-64.so.2`, a symlink on Debian, becomes a file: no
/// dangling links whatever the host's `/lib` layout is).
fn add_library(fs: &mut Rootfs, library: &Path) -> Result<(), Error> {
    let resolved = std::fs::canonicalize(library).map_err(|source| Error::Read {
        path: library.to_path_buf(),
        source,
    })?;
    let path = library.to_str().ok_or_else(|| Error::InvalidPath {
        path: library.display().to_string(),
        reason: "not UTF-8",
    })?;
    fs.host_file(path, 0o755, resolved)?;
    Ok(())
}
