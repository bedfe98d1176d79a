//! Where a registry is and how to trust and authenticate to it.

use std::fmt;

use crate::error::Error;

/// `http` or `https`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Scheme {
    /// Plain HTTP: only for trusted, insecure registries.
    Http,
    /// HTTPS (the default).
    #[default]
    Https,
}

impl Scheme {
    /// `http` or `https`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Http => "http",
            Self::Https => "https",
        }
    }
}

/// A secret string: compared and hashed like a string, never shown by `Debug`.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Secret(String);

impl Secret {
    /// Wraps a secret.
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    /// The secret itself: only for putting it on the wire.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

/// A user name and password (or license token) for a registry.
///
/// `Debug` shows the user name only; there is deliberately no `Display`.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Credentials {
    username: String,
    password: Secret,
}

impl Credentials {
    /// `username` / `password`.
    pub fn new(username: impl Into<String>, password: impl Into<String>) -> Self {
        Self {
            username: username.into(),
            password: Secret::new(password),
        }
    }

    /// The user name.
    pub fn username(&self) -> &str {
        &self.username
    }

    /// The password, for the wire only.
    pub fn password(&self) -> &Secret {
        &self.password
    }

    /// The `Authorization: Basic …` value.
    pub(crate) fn basic_header(&self) -> Secret {
        use base64::Engine;
        let raw = format!("{}:{}", self.username, self.password.expose());
        Secret(format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(raw)
        ))
    }
}

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Credentials")
            .field("username", &self.username)
            .field("password", &self.password)
            .finish()
    }
}

/// A client certificate chain and its private key, both PEM (for mTLS endpoints).
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct ClientIdentity {
    cert_pem: String,
    key_pem: Secret,
}

impl ClientIdentity {
    /// A certificate chain and its key, PEM.
    pub fn new(cert_pem: impl Into<String>, key_pem: impl Into<String>) -> Self {
        Self {
            cert_pem: cert_pem.into(),
            key_pem: Secret::new(key_pem),
        }
    }

    pub(crate) fn pem_bundle(&self) -> Vec<u8> {
        let mut pem = self.cert_pem.trim_end().as_bytes().to_vec();
        pem.push(b'\n');
        pem.extend_from_slice(self.key_pem.expose().as_bytes());
        pem
    }
}

impl fmt::Debug for ClientIdentity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientIdentity")
            .field("cert_pem", &format_args!("<{} bytes>", self.cert_pem.len()))
            .field("key_pem", &self.key_pem)
            .finish()
    }
}

/// One registry endpoint: address, repository prefix, trust and credentials.
///
/// Repository names given to [`Remote`](crate::Remote) methods are relative to `path_prefix`:
/// with prefix `deckhouse/ee`, repository `install` is `/v2/deckhouse/ee/install/…`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Endpoint {
    /// `http` or `https`.
    pub scheme: Scheme,
    /// `host[:port]`, as in an image reference.
    pub host: String,
    /// Repository prefix without leading or trailing `/` (empty for none).
    pub path_prefix: String,
    /// Extra CA certificates (PEM) trusted in addition to the system roots.
    pub ca_pem: Option<String>,
    /// Client certificate for mTLS.
    pub client_identity: Option<ClientIdentity>,
    /// Credentials for Basic auth or the token exchange; anonymous when absent.
    pub credentials: Option<Credentials>,
}

impl Endpoint {
    /// An HTTPS endpoint at `host[:port]`.
    pub fn https(host: &str) -> Self {
        Self::new(Scheme::Https, host)
    }

    /// A plain-HTTP endpoint at `host[:port]`.
    pub fn http(host: &str) -> Self {
        Self::new(Scheme::Http, host)
    }

    /// An endpoint with no prefix, CA or credentials.
    pub fn new(scheme: Scheme, host: &str) -> Self {
        Self {
            scheme,
            host: host.to_owned(),
            path_prefix: String::new(),
            ca_pem: None,
            client_identity: None,
            credentials: None,
        }
    }

    /// Parses `http://host:port[/prefix]` or `https://…`.
    pub fn from_url(url: &str) -> Result<Self, Error> {
        let parsed = reqwest::Url::parse(url).map_err(|e| Error::InvalidEndpoint {
            endpoint: "<unparsable URL>".to_owned(),
            reason: e.to_string(),
        })?;
        // Never echo the URL as given: it may carry a password.
        let shown = crate::error::display_url(&parsed);
        let invalid = |reason: &str| Error::InvalidEndpoint {
            endpoint: shown.clone(),
            reason: reason.to_owned(),
        };
        let scheme = match parsed.scheme() {
            "http" => Scheme::Http,
            "https" => Scheme::Https,
            _ => return Err(invalid("scheme must be http or https")),
        };
        if !parsed.username().is_empty() || parsed.password().is_some() {
            return Err(invalid(
                "credentials belong in `credentials`, not in the URL",
            ));
        }
        if parsed.query().is_some() {
            return Err(invalid("an endpoint URL has no query"));
        }
        let host = parsed.host_str().ok_or_else(|| invalid("no host"))?;
        let host = match parsed.port() {
            Some(port) => format!("{host}:{port}"),
            None => host.to_owned(),
        };
        Ok(Self::new(scheme, &host).path_prefix(parsed.path()))
    }

    /// Sets the repository prefix (slashes at either end are ignored).
    pub fn path_prefix(mut self, prefix: &str) -> Self {
        self.path_prefix = prefix.trim_matches('/').to_owned();
        self
    }

    /// Trusts `ca_pem` in addition to the system roots.
    pub fn ca_pem(mut self, ca_pem: &str) -> Self {
        self.ca_pem = Some(ca_pem.to_owned());
        self
    }

    /// Presents a client certificate.
    pub fn client_identity(mut self, identity: ClientIdentity) -> Self {
        self.client_identity = Some(identity);
        self
    }

    /// Authenticates with `credentials`.
    pub fn credentials(mut self, credentials: Credentials) -> Self {
        self.credentials = Some(credentials);
        self
    }

    /// `scheme://host[/prefix]`, for messages.
    pub fn display(&self) -> String {
        if self.path_prefix.is_empty() {
            format!("{}://{}", self.scheme.as_str(), self.host)
        } else {
            format!(
                "{}://{}/{}",
                self.scheme.as_str(),
                self.host,
                self.path_prefix
            )
        }
    }

    /// The full repository name of `repository` under this endpoint's prefix.
    pub fn full_repository(&self, repository: &str) -> String {
        let repository = repository.trim_matches('/');
        match (self.path_prefix.is_empty(), repository.is_empty()) {
            (true, _) => repository.to_owned(),
            (false, true) => self.path_prefix.clone(),
            (false, false) => format!("{}/{repository}", self.path_prefix),
        }
    }

    /// `scheme://host`, the base every path is joined to.
    pub(crate) fn base_url(&self) -> Result<reqwest::Url, Error> {
        let text = format!("{}://{}/", self.scheme.as_str(), self.host);
        let url = reqwest::Url::parse(&text).map_err(|e| Error::InvalidEndpoint {
            endpoint: self.display(),
            reason: format!("host {:?} is not a valid authority: {e}", self.host),
        })?;
        if url.path() != "/" || url.query().is_some() || !url.username().is_empty() {
            return Err(Error::InvalidEndpoint {
                endpoint: self.display(),
                reason: format!("host {:?} must be host[:port] only", self.host),
            });
        }
        Ok(url)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_never_shows_secrets() {
        let endpoint = Endpoint::https("r.example")
            .credentials(Credentials::new("license-token", "hunter2-secret"))
            .client_identity(ClientIdentity::new("CERT", "PRIVATE-KEY-secret"));
        let shown = format!("{endpoint:?} {:#?}", endpoint);
        assert!(!shown.contains("hunter2"), "{shown}");
        assert!(!shown.contains("PRIVATE-KEY"), "{shown}");
        assert!(shown.contains("license-token"));
        assert!(shown.contains("<redacted>"));
    }

    #[test]
    fn urls_parse_into_endpoints() {
        let e = Endpoint::from_url("https://registry.example:8443/deckhouse/ee/").unwrap();
        assert_eq!(e.scheme, Scheme::Https);
        assert_eq!(e.host, "registry.example:8443");
        assert_eq!(e.path_prefix, "deckhouse/ee");
        assert_eq!(e.full_repository("install"), "deckhouse/ee/install");
        assert_eq!(e.full_repository(""), "deckhouse/ee");
        let plain = Endpoint::from_url("http://127.0.0.1:5000").unwrap();
        assert_eq!(plain.path_prefix, "");
        assert_eq!(plain.full_repository("a/b"), "a/b");
        for bad in ["ftp://x", "https://u:p@x", "https://x/?q=1", "not a url"] {
            let err = Endpoint::from_url(bad).unwrap_err();
            assert!(matches!(err, Error::InvalidEndpoint { .. }), "{bad}: {err}");
            assert!(!err.to_string().contains(":p@"), "{err}");
        }
    }

    #[test]
    fn basic_header_is_base64_of_user_colon_password() {
        let c = Credentials::new("user", "pa:ss");
        assert_eq!(c.basic_header().expose(), "Basic dXNlcjpwYTpzcw==");
    }
}
