//! The crate's one error type. Messages tell an operator what failed and, where there is one,
//! what to do about it; they never carry credentials.

use std::path::PathBuf;

/// Everything `d8 mirror pull` and `d8 mirror push` can fail with.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A version constraint does not parse.
    #[error("invalid version constraint {constraint:?}: {reason}")]
    InvalidConstraint {
        /// As given.
        constraint: String,
        /// What is wrong.
        reason: String,
    },
    /// An `--include-module` / `--exclude-module` value does not parse.
    #[error("invalid module filter {filter:?}: expected `module-name[@version-constraint]`")]
    InvalidModuleFilter {
        /// As given.
        filter: String,
    },
    /// A command-line value is unusable.
    #[error("{0}")]
    InvalidArgument(String),
    /// No release channel could be read from the source.
    #[error(
        "the source registry has no readable release channel (release-channel:alpha … rock-solid, lts); \
         check --source, or pull a specific release with --deckhouse-tag"
    )]
    NoChannels,
    /// The selection matched nothing.
    #[error("no {what} matches the selection; nothing to pull")]
    NothingSelected {
        /// What was being selected.
        what: String,
    },
    /// A release channel is suspended at the source.
    #[error(
        "the source registry holds the suspended release channel {channel:?}; try again later (or pass --ignore-suspend)"
    )]
    SuspendedChannel {
        /// The channel.
        channel: String,
    },
    /// A file operation failed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// A registry request failed.
    #[error("{what}: {source}")]
    Registry {
        /// What we were doing (`pull deckhouse/ee/install:v1.2.3`).
        what: String,
        /// The cause.
        #[source]
        source: registry_client::Error,
    },
    /// The registry refused the TLS handshake for want of a client certificate.
    #[error(
        "{registry} requires a client certificate: pass --tls-cert and --tls-key (the publish endpoint \
         of the cluster's registry only accepts pushes from clients with a certificate its CA issued)"
    )]
    ClientCertificateRequired {
        /// `scheme://host/path`.
        registry: String,
    },
    /// The registry broke off the connection while we presented no client certificate: over
    /// TLS 1.3 a refusal for want of one can surface as a bare reset, so say what is likely.
    #[error(
        "cannot reach {registry} ({detail}); if it is the publish endpoint of the cluster's registry, \
         it requires a client certificate: pass --tls-cert and --tls-key"
    )]
    UnreachableWithoutCertificate {
        /// `scheme://host/path`.
        registry: String,
        /// The transport error.
        detail: String,
    },
    /// The registry refused the client certificate presented.
    #[error(
        "{registry} refused the client certificate given with --tls-cert ({detail}): use a certificate \
         issued by the CA the registry trusts for pushes, not expired, with its matching --tls-key"
    )]
    ClientCertificateRejected {
        /// `scheme://host/path`.
        registry: String,
        /// The TLS alert or error.
        detail: String,
    },
    /// We could not verify the registry's certificate.
    #[error(
        "cannot verify the TLS certificate of {registry} ({detail}): pass the registry's CA with --tls-ca-file \
         (or SSL_CERT_FILE)"
    )]
    ServerCertificateUntrusted {
        /// `scheme://host/path`.
        registry: String,
        /// The TLS error.
        detail: String,
    },
    /// Credentials were refused (or needed and missing).
    #[error("{}", credentials_message(registry, *sent, *push))]
    CredentialsRefused {
        /// `scheme://host/path`.
        registry: String,
        /// Whether we sent credentials.
        sent: bool,
        /// Pushing (write credentials) rather than pulling.
        push: bool,
    },
    /// The target has no room: it answered 413 to an upload.
    #[error(
        "{registry} has no room for {what} (413 Payload Too Large): free disk space there; the cache \
         replica of `d8 up` keeps `--storage-reserve` free (by default Deckhouse's reserve for \
         cluster nodes, up to 60 GiB)"
    )]
    NoRoom {
        /// `scheme://host/path`.
        registry: String,
        /// What was being uploaded.
        what: String,
    },
    /// A blob of the bundle does not hash to its name.
    #[error(
        "the bundle is corrupted: blob {expected} in {package} ({path}) hashes to {actual}; \
         no image was pushed. Pull the bundle again or copy {package} again from its source"
    )]
    CorruptBlob {
        /// The package file (`platform.tar`).
        package: String,
        /// The path inside the package.
        path: String,
        /// The digest the blob is named by.
        expected: String,
        /// What its bytes hash to.
        actual: String,
    },
    /// A package file does not match the bundle manifest.
    #[error(
        "the bundle is corrupted: {file} {reason}; no image was pushed. Copy the file again from its source"
    )]
    CorruptPackage {
        /// The file.
        file: String,
        /// How it differs.
        reason: String,
    },
    /// A blob a manifest needs is missing from the bundle.
    #[error(
        "the bundle is incomplete: {package} lacks blob {digest} needed by {image}; nothing was pushed"
    )]
    MissingBlob {
        /// The package.
        package: String,
        /// The missing blob.
        digest: oci::Digest,
        /// The image needing it.
        image: String,
    },
    /// A bundle file is not what it should be.
    #[error("{file} is not a valid bundle file: {reason}")]
    InvalidBundle {
        /// The file.
        file: String,
        /// What is wrong.
        reason: String,
    },
    /// An image's manifest is unusable.
    #[error("{image}: {reason}")]
    InvalidImage {
        /// The image.
        image: String,
        /// What is wrong.
        reason: String,
    },
    /// The bundle directory already holds a different bundle.
    #[error(
        "{} already holds {file} from another pull; pass --force to overwrite it, or choose another directory",
        dir.display()
    )]
    BundleExists {
        /// The bundle directory.
        dir: PathBuf,
        /// The conflicting file.
        file: String,
    },
}

fn credentials_message(registry: &str, sent: bool, push: bool) -> String {
    match (sent, push) {
        (true, true) => format!(
            "{registry} refused the credentials given with --registry-login/--registry-password: \
             use the registry's write (push) credentials"
        ),
        (false, true) => format!(
            "{registry} requires credentials: pass the write credentials with --registry-login and \
             --registry-password (or D8_MIRROR_REGISTRY_LOGIN / D8_MIRROR_REGISTRY_PASSWORD)"
        ),
        (true, false) => format!(
            "{registry} refused the source credentials: check --license (or --source-login / \
             --source-password)"
        ),
        (false, false) => format!(
            "{registry} requires credentials: pass --license (or --source-login and --source-password)"
        ),
    }
}

impl Error {
    /// An I/O error on `path`.
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Self::Io {
            path: path.into(),
            source,
        }
    }

    /// A registry error while doing `what` against `registry`, turned into the operator-facing
    /// variants when it is about certificates or credentials.
    pub(crate) fn registry(
        registry: &str,
        push: bool,
        what: impl Into<String>,
        source: registry_client::Error,
    ) -> Self {
        if let registry_client::Error::Status { status, .. } = &source
            && push
            && status.as_u16() == 413
        {
            return Self::NoRoom {
                registry: registry.to_owned(),
                what: what.into(),
            };
        }
        if let registry_client::Error::Unauthorized {
            credentials_sent, ..
        } = &source
        {
            return Self::CredentialsRefused {
                registry: registry.to_owned(),
                sent: *credentials_sent,
                push,
            };
        }
        let chain = error_chain(&source).to_ascii_lowercase();
        let detail = || tls_detail(&chain);
        if chain.contains("certificaterequired") || chain.contains("certificate required") {
            return Self::ClientCertificateRequired {
                registry: registry.to_owned(),
            };
        }
        if chain.contains("unknownca")
            || chain.contains("badcertificate")
            || chain.contains("bad certificate")
            || chain.contains("certificateexpired")
            || chain.contains("decrypterror")
        {
            // Alerts the server sends about *our* certificate.
            if chain.contains("alert") {
                return Self::ClientCertificateRejected {
                    registry: registry.to_owned(),
                    detail: detail(),
                };
            }
        }
        if chain.contains("invalid peer certificate") || chain.contains("unknownissuer") {
            return Self::ServerCertificateUntrusted {
                registry: registry.to_owned(),
                detail: detail(),
            };
        }
        Self::Registry {
            what: what.into(),
            source,
        }
    }

    /// [`Error::registry`] for the first contact with a push target: a connection broken off
    /// over HTTPS with no client certificate configured is reported as probably wanting one.
    pub(crate) fn first_contact(
        registry: &str,
        endpoint: &registry_client::Endpoint,
        source: registry_client::Error,
    ) -> Self {
        let without_certificate =
            endpoint.client_identity.is_none() && endpoint.scheme == registry_client::Scheme::Https;
        match Self::registry(registry, true, format!("connect to {registry}"), source) {
            Self::Registry { source, .. }
                if without_certificate
                    && matches!(
                        source,
                        registry_client::Error::Transport { .. }
                            | registry_client::Error::Connect { .. }
                            | registry_client::Error::Auth { .. }
                    ) =>
            {
                Self::UnreachableWithoutCertificate {
                    registry: registry.to_owned(),
                    detail: error_chain(&source),
                }
            }
            other => other,
        }
    }

    /// Whether retrying the same request may help (network trouble, 5xx).
    pub(crate) fn transient(&self) -> bool {
        match self {
            Self::Registry { source, .. } => match source {
                registry_client::Error::Status { status, .. } => {
                    status.is_server_error() || status.as_u16() == 429
                }
                registry_client::Error::Connect { .. }
                | registry_client::Error::Transport { .. }
                | registry_client::Error::Timeout { .. }
                | registry_client::Error::Stalled { .. }
                | registry_client::Error::BodyInterrupted { .. }
                | registry_client::Error::Truncated { .. } => true,
                _ => false,
            },
            _ => false,
        }
    }
}

fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(e) = source {
        text.push_str(": ");
        text.push_str(&format!("{e} {e:?}"));
        source = e.source();
    }
    text
}

fn tls_detail(chain: &str) -> String {
    for needle in [
        "received fatal alert: ",
        "invalid peer certificate: ",
        "alert",
    ] {
        if let Some(at) = chain.find(needle) {
            let after = &chain[at + needle.len()..];
            let end = after.find([')', ':', '\n', ',']).unwrap_or(after.len());
            return format!("{needle}{}", &after[..end]).trim().to_owned();
        }
    }
    "TLS handshake failed".to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_target_says_where_room_is_made() {
        let status = |code: u16| registry_client::Error::Status {
            status: http::StatusCode::from_u16(code).unwrap(),
            code: Some("DENIED".into()),
            url: "https://127.0.0.1:5003/v2/system/deckhouse/app/blobs/uploads/".into(),
        };
        let full = Error::registry(
            "https://127.0.0.1:5003/system/deckhouse",
            true,
            "upload blob",
            status(413),
        );
        let message = full.to_string();
        assert!(
            message.contains("has no room for upload blob (413 Payload Too Large)")
                && message.contains("--storage-reserve"),
            "{message}"
        );
        let pull = Error::registry("https://r.example", false, "pull blob", status(413));
        assert!(
            matches!(pull, Error::Registry { .. }),
            "only pushes are about room"
        );
        let other = Error::registry("https://r.example", true, "upload blob", status(500));
        assert!(matches!(other, Error::Registry { .. }));
    }
}
