//! `--image` / `--images-file`: images of your own pulled into the bundle's `images` package,
//! each from its own registry, with the same cache, verification and progress as releases.

use registry_client::{Client, Config, Endpoint, Scheme};

use super::{ACCEPT, Puller};
use crate::error::Error;
use crate::images::{self, Wanted};

/// How to reach `host` for an image: the scheme and trusted CA of the source (`--insecure`,
/// `--tls-ca-file`), the source's credentials only when it is the source's own host (they are
/// never sent to another registry), Docker Hub always over HTTPS at its API host.
pub(super) fn endpoint_for(source: &Endpoint, host: &oci::RegistryHost) -> Endpoint {
    let scheme = if host.is_docker_hub() {
        Scheme::Https
    } else {
        source.scheme
    };
    let mut endpoint = Endpoint::new(scheme, host.api_host());
    endpoint.ca_pem = source.ca_pem.clone();
    if host.eq_ignore_case(&source.host) {
        endpoint.credentials = source.credentials.clone();
    }
    endpoint
}

impl Puller {
    /// Fetches the manifests of `wanted` into the cache and adds them to the `images` package;
    /// returns the references pulled.
    pub(super) async fn images(
        &mut self,
        wanted: &[Wanted],
        source: &Endpoint,
    ) -> Result<Vec<String>, Error> {
        let phase = self.progress.phase("images", wanted.len() as u64, 0);
        let saved = (self.remote.clone(), self.shown.clone());
        let result = self.images_by_registry(wanted, source, &phase).await;
        (self.remote, self.shown) = saved;
        phase.finish();
        result
    }

    async fn images_by_registry(
        &mut self,
        wanted: &[Wanted],
        source: &Endpoint,
        phase: &crate::progress::Phase,
    ) -> Result<Vec<String>, Error> {
        let mut pulled = Vec::new();
        for host in images::registries(wanted) {
            let endpoint = endpoint_for(source, &host);
            let shown = endpoint.display();
            self.remote = Client::new(Config::default())
                .remote(endpoint)
                .map_err(|e| Error::registry(&shown, false, "image registry", e))?;
            self.remote
                .check()
                .await
                .map_err(|e| Error::registry(&shown, false, format!("connect to {shown}"), e))?;
            self.shown = shown;
            for image in wanted.iter().filter(|w| w.reference.registry() == &host) {
                self.image(image).await?;
                pulled.push(image.reference.to_string());
                phase.item();
            }
        }
        Ok(pulled)
    }

    async fn image(&mut self, image: &Wanted) -> Result<(), Error> {
        let repo = image.repository.as_str();
        if let (Some(tag), Some(pinned)) = (image.reference.tag(), image.reference.digest()) {
            // A tag pinned to a digest goes into the bundle as that tag only while the source
            // agrees: otherwise the bundle would tag something the source no longer does.
            let head = self
                .remote
                .head_manifest(repo, tag.as_str(), &ACCEPT)
                .await
                .map_err(|e| {
                    Error::registry(
                        &self.shown,
                        false,
                        format!("pull {}", self.what(repo, tag.as_str())),
                        e,
                    )
                })?;
            if let Some(actual) = head.digest.filter(|d| *d != pinned) {
                return Err(Error::InvalidImage {
                    image: self.what(repo, tag.as_str()),
                    reason: format!(
                        "the source tags {actual}, not {pinned} as given; pull {pinned} without the \
                         tag, or give the tag's current digest"
                    ),
                });
            }
        }
        let record = self
            .fetch(repo, &image.fetch)
            .await?
            .ok_or_else(|| Error::InvalidImage {
                image: self.what(repo, &image.fetch),
                reason: "not found in its registry; check the repository, tag or digest".into(),
            })?;
        self.add(images::PACKAGE, repo, &image.short_tag, &record);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use registry_client::Credentials;

    #[test]
    fn image_registries_get_the_source_trust_but_not_its_credentials() {
        let source = Endpoint::http("127.0.0.1:5000")
            .path_prefix("deckhouse/ee")
            .ca_pem("CA")
            .credentials(Credentials::new("license-token", "secret"));
        let host = |s: &str| oci::RegistryHost::parse(s).unwrap();
        let table = [
            ("127.0.0.1:5000", "http://127.0.0.1:5000", true),
            ("127.0.0.1:5001", "http://127.0.0.1:5001", false),
            ("docker.io", "https://registry-1.docker.io", false),
        ];
        for (given, shown, credentials) in table {
            let e = endpoint_for(&source, &host(given));
            assert_eq!(e.display(), shown, "{given}: no path prefix either");
            assert_eq!(e.ca_pem.as_deref(), Some("CA"), "{given}");
            assert_eq!(e.credentials.is_some(), credentials, "{given}");
        }
    }
}
