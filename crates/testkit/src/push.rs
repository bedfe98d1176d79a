//! A small pushing client of our own, independent of the code under test: puts blobs
//! (HEAD to skip what exists, POST then a streamed PUT) and manifests byte for byte, with Basic
//! or Bearer-token auth.

use anyhow::{Context, bail, ensure};
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use reqwest::StatusCode;
use reqwest::header::{AUTHORIZATION, CONTENT_LENGTH, CONTENT_TYPE, LOCATION, WWW_AUTHENTICATE};

use crate::image::{Blob, Image, Index};
use crate::upstream::{Credentials, Upstream};

/// A registry to push into.
#[derive(Clone, Debug)]
pub struct Registry {
    url: String,
    client: reqwest::Client,
    credentials: Option<Credentials>,
}

impl Registry {
    /// A registry at `url` (`http://host:port`), trusting `ca_pem` when given.
    pub fn new(url: &str, ca_pem: Option<&str>, credentials: Option<Credentials>) -> Self {
        Self {
            url: url.trim_end_matches('/').to_owned(),
            client: crate::http_client(ca_pem),
            credentials,
        }
    }

    /// The registry of a [`Upstream`], with its credentials.
    pub fn of(upstream: &Upstream) -> Self {
        Self::new(
            &upstream.url(),
            upstream.ca_pem(),
            upstream.credentials().cloned(),
        )
    }

    /// Pushes an image's blobs and manifest, tagging it `tag` when given (else by digest).
    pub async fn push_image(
        &self,
        repo: &str,
        tag: Option<&str>,
        image: &Image,
    ) -> anyhow::Result<()> {
        let auth = self.authorize(repo).await?;
        for blob in image.blobs() {
            self.put_blob(repo, blob, auth.as_deref()).await?;
        }
        let reference = tag.unwrap_or(image.digest());
        self.put_manifest(repo, reference, &image.manifest, auth.as_deref())
            .await
    }

    /// Pushes every image of an index by digest, then the index, tagged `tag`.
    pub async fn push_index(&self, repo: &str, tag: &str, index: &Index) -> anyhow::Result<()> {
        for image in &index.images {
            self.push_image(repo, None, image).await?;
        }
        let auth = self.authorize(repo).await?;
        self.put_manifest(repo, tag, &index.manifest, auth.as_deref())
            .await
    }

    /// The `Authorization` value for pushing to `repo`, from the registry's challenge.
    async fn authorize(&self, repo: &str) -> anyhow::Result<Option<String>> {
        let response = self.client.get(format!("{}/v2/", self.url)).send().await?;
        if response.status() != StatusCode::UNAUTHORIZED {
            ensure!(
                response.status().is_success(),
                "GET /v2/: {}",
                response.status()
            );
            return Ok(None);
        }
        let credentials = self
            .credentials
            .as_ref()
            .context("the registry wants credentials and none were given")?;
        let challenge = response
            .headers()
            .get(WWW_AUTHENTICATE)
            .and_then(|v| v.to_str().ok())
            .context("401 without a challenge")?;
        let (scheme, params) = parse_challenge(challenge);
        if scheme.eq_ignore_ascii_case("basic") {
            let encoded = STANDARD.encode(credentials.colon_joined());
            return Ok(Some(format!("Basic {encoded}")));
        }
        ensure!(
            scheme.eq_ignore_ascii_case("bearer"),
            "unknown auth scheme {scheme}"
        );
        let realm = param(&params, "realm").context("challenge without realm")?;
        let mut query = vec![("scope", format!("repository:{repo}:pull,push"))];
        if let Some(service) = param(&params, "service") {
            query.push(("service", service.to_owned()));
        }
        let response = self
            .client
            .get(realm)
            .query(&query)
            .basic_auth(&credentials.user, Some(&credentials.password))
            .send()
            .await?;
        ensure!(
            response.status().is_success(),
            "token request: {}",
            response.status()
        );
        let body: serde_json::Value = response.json().await?;
        let token = body["token"]
            .as_str()
            .or(body["access_token"].as_str())
            .context("token response without a token")?;
        Ok(Some(format!("Bearer {token}")))
    }

    async fn put_blob(&self, repo: &str, blob: &Blob, auth: Option<&str>) -> anyhow::Result<()> {
        let url = format!("{}/v2/{repo}/blobs/{}", self.url, blob.digest);
        let head = with_auth(self.client.head(&url), auth).send().await?;
        if head.status() == StatusCode::OK {
            return Ok(());
        }
        let start = with_auth(
            self.client
                .post(format!("{}/v2/{repo}/blobs/uploads/", self.url)),
            auth,
        )
        .send()
        .await?;
        ensure!(
            start.status() == StatusCode::ACCEPTED,
            "start upload: {}",
            start.status()
        );
        let location = start
            .headers()
            .get(LOCATION)
            .and_then(|v| v.to_str().ok())
            .context("upload without Location")?;
        let location = if location.starts_with('/') {
            format!("{}{location}", self.url)
        } else {
            location.to_owned()
        };
        let separator = if location.contains('?') { '&' } else { '?' };
        let file = tokio::fs::File::open(&blob.path).await?;
        let body =
            reqwest::Body::wrap_stream(tokio_util::io::ReaderStream::with_capacity(file, 1 << 20));
        let put = with_auth(
            self.client
                .put(format!("{location}{separator}digest={}", blob.digest)),
            auth,
        )
        .header(CONTENT_TYPE, "application/octet-stream")
        .header(CONTENT_LENGTH, blob.size)
        .body(body)
        .send()
        .await?;
        if put.status() != StatusCode::CREATED {
            bail!(
                "PUT blob {}: {} {}",
                blob.digest,
                put.status(),
                put.text().await.unwrap_or_default()
            );
        }
        Ok(())
    }

    async fn put_manifest(
        &self,
        repo: &str,
        reference: &str,
        manifest: &Blob,
        auth: Option<&str>,
    ) -> anyhow::Result<()> {
        let url = format!("{}/v2/{repo}/manifests/{reference}", self.url);
        let put = with_auth(self.client.put(url), auth)
            .header(CONTENT_TYPE, &manifest.media_type)
            .body(manifest.read())
            .send()
            .await?;
        if put.status() != StatusCode::CREATED {
            bail!(
                "PUT manifest {reference}: {} {}",
                put.status(),
                put.text().await.unwrap_or_default()
            );
        }
        Ok(())
    }
}

fn with_auth(request: reqwest::RequestBuilder, auth: Option<&str>) -> reqwest::RequestBuilder {
    match auth {
        Some(value) => request.header(AUTHORIZATION, value),
        None => request,
    }
}

/// `Bearer realm="…",service="…"` → ("Bearer", [(realm, …), (service, …)]). Enough for the
/// challenges `docker-registry` sends; the product's parser lives in the `oci` crate.
fn parse_challenge(header: &str) -> (&str, Vec<(String, String)>) {
    let (scheme, rest) = header.trim().split_once(' ').unwrap_or((header.trim(), ""));
    let mut params = Vec::new();
    let mut chars = rest.chars().peekable();
    loop {
        let key: String = chars.by_ref().take_while(|c| *c != '=').collect();
        let key = key
            .trim()
            .trim_start_matches(',')
            .trim()
            .to_ascii_lowercase();
        if key.is_empty() {
            break;
        }
        let mut value = String::new();
        if chars.peek() == Some(&'"') {
            chars.next();
            while let Some(c) = chars.next() {
                match c {
                    '\\' => value.extend(chars.next()),
                    '"' => break,
                    c => value.push(c),
                }
            }
        } else {
            value = chars.by_ref().take_while(|c| *c != ',').collect();
        }
        params.push((key, value.trim().to_owned()));
    }
    (scheme, params)
}

fn param<'a>(params: &'a [(String, String)], key: &str) -> Option<&'a str> {
    params
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn challenge_parameters() {
        let (scheme, params) = parse_challenge(
            r#"Bearer realm="http://127.0.0.1:1/token",service="svc",scope="repository:a/b:pull,push""#,
        );
        assert_eq!(scheme, "Bearer");
        assert_eq!(param(&params, "realm"), Some("http://127.0.0.1:1/token"));
        assert_eq!(param(&params, "scope"), Some("repository:a/b:pull,push"));
        let (scheme, params) = parse_challenge(r#"Basic realm="testkit""#);
        assert_eq!(
            (scheme, param(&params, "realm")),
            ("Basic", Some("testkit"))
        );
    }
}
