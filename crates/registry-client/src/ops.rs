//! Typed registry operations on a [`Remote`]: manifests, blobs, tags, and the push side
//! (uploads, mounts, manifest PUT, deletes) that `d8 mirror` uses.

use bytes::Bytes;
use http::{Method, StatusCode, header};

use crate::auth::Scope;
use crate::client::{Remote, RequestBody, Response};
use crate::error::Error;

/// A manifest as fetched: its exact bytes, media type and digest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Manifest {
    /// The bytes, untouched (they are the manifest's identity).
    pub bytes: Bytes,
    /// `Content-Type` without parameters.
    pub media_type: Option<String>,
    /// The digest of `bytes` (verified against the reference when it was a digest, and against
    /// `Docker-Content-Digest` when the registry sent one of the same algorithm).
    pub digest: oci::Digest,
}

/// What a HEAD on a manifest or blob said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Head {
    /// `Content-Length`.
    pub size: Option<u64>,
    /// `Docker-Content-Digest`.
    pub digest: Option<oci::Digest>,
    /// `Content-Type` without parameters.
    pub media_type: Option<String>,
}

/// One page of a tag list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TagPage {
    /// The repository name as the registry reports it.
    pub name: String,
    /// The tags.
    pub tags: Vec<String>,
    /// The next page's path and query from the `Link: <…>; rel="next"` header.
    pub next: Option<String>,
}

/// An upload session (`Location` of a `POST …/blobs/uploads/`).
#[derive(Debug, Clone)]
pub struct Upload {
    remote: Remote,
    repository: String,
    location: reqwest::Url,
    offset: u64,
}

/// The answer to a cross-repository mount.
#[derive(Debug)]
pub enum Mount {
    /// 201: the blob is now in the target repository.
    Mounted,
    /// 202: the registry started an upload session instead.
    Upload(Box<Upload>),
}

fn invalid(response: &Response, reason: impl Into<String>) -> Error {
    Error::InvalidResponse {
        url: response.url(),
        reason: reason.into(),
    }
}

fn validate_reference(reference: &str) -> Result<(), Error> {
    if oci::Digest::parse(reference).is_ok() || oci::Tag::parse(reference).is_ok() {
        Ok(())
    } else {
        Err(Error::InvalidRequest {
            reason: format!("{reference:?} is neither a tag nor a digest"),
        })
    }
}

impl Remote {
    /// `GET /v2/`: Ok when the registry answers 200 to us (authenticated as needed).
    pub async fn check(&self) -> Result<(), Error> {
        self.raw_request(Method::GET, "/v2/", Some(Scope::empty()))
            .send()
            .await?
            .error_for_status()
            .await
            .map(drop)
    }

    /// `HEAD` a manifest with the caller's `Accept` values, each sent as its own header line.
    pub async fn head_manifest(
        &self,
        repository: &str,
        reference: &str,
        accept: &[&str],
    ) -> Result<Head, Error> {
        validate_reference(reference)?;
        let mut request = self.request(Method::HEAD, repository, &format!("manifests/{reference}"));
        for value in accept {
            request = request.header(header::ACCEPT, value);
        }
        let response = request.send().await?.error_for_status().await?;
        Ok(head_of(&response))
    }

    /// `GET` a manifest: exact bytes, at most `max_manifest_bytes`, digest verified.
    pub async fn get_manifest(
        &self,
        repository: &str,
        reference: &str,
        accept: &[&str],
    ) -> Result<Manifest, Error> {
        validate_reference(reference)?;
        let mut request = self.request(Method::GET, repository, &format!("manifests/{reference}"));
        for value in accept {
            request = request.header(header::ACCEPT, value);
        }
        let response = request.send().await?.error_for_status().await?;
        let limit = self.client().config().max_manifest_bytes;
        if response.content_length().is_some_and(|len| len > limit) {
            return Err(Error::TooLong { expected: limit });
        }
        let announced = response.digest();
        let media_type = response.media_type();
        let bytes = response.into_body().collect(limit).await?;
        let requested = oci::Digest::parse(reference).ok();
        let algorithm = requested
            .or(announced)
            .map_or(oci::Algorithm::Sha256, |d| d.algorithm());
        let digest = oci::Digest::compute(algorithm, &bytes);
        for expected in [requested, announced].into_iter().flatten() {
            if expected.algorithm() == digest.algorithm() && expected != digest {
                return Err(Error::from(oci::DigestMismatch {
                    expected,
                    actual: digest,
                }));
            }
        }
        Ok(Manifest {
            bytes,
            media_type,
            digest,
        })
    }

    /// `HEAD` a blob.
    pub async fn head_blob(&self, repository: &str, digest: &oci::Digest) -> Result<Head, Error> {
        let response = self
            .request(Method::HEAD, repository, &format!("blobs/{digest}"))
            .send()
            .await?
            .error_for_status()
            .await?;
        Ok(head_of(&response))
    }

    /// `GET` a blob, streaming. Without `range` (or when the registry ignores it and answers
    /// 200), the body is **verified**: it ends with `None` only if it hashes to `digest` (and has
    /// `expected_size` bytes when given); see [`Body`]. With a range the 206 body is checked
    /// against its `Content-Length` only.
    pub async fn get_blob(
        &self,
        repository: &str,
        digest: &oci::Digest,
        range: Option<&str>,
        expected_size: Option<u64>,
    ) -> Result<Response, Error> {
        let mut request = self.request(Method::GET, repository, &format!("blobs/{digest}"));
        if let Some(range) = range {
            request = request.header(header::RANGE, range);
        }
        let response = request.send().await?.error_for_status().await?;
        if response.status() == StatusCode::OK {
            let digest = *digest;
            return Ok(response.map_body(|body| body.verify(digest, expected_size)));
        }
        Ok(response)
    }

    /// One page of `GET /v2/<name>/tags/list?n=&last=`.
    pub async fn tags(
        &self,
        repository: &str,
        n: Option<usize>,
        last: Option<&str>,
    ) -> Result<TagPage, Error> {
        let mut request = self.request(Method::GET, repository, "tags/list");
        if let Some(n) = n {
            request = request.query_pair("n", &n.to_string());
        }
        if let Some(last) = last {
            request = request.query_pair("last", last);
        }
        self.tag_page(request.send().await?).await
    }

    /// Every tag, following `Link` headers (at most 10 000 pages).
    pub async fn all_tags(&self, repository: &str) -> Result<Vec<String>, Error> {
        let mut page = self.tags(repository, None, None).await?;
        let mut tags = std::mem::take(&mut page.tags);
        let full = self.endpoint().full_repository(repository);
        for _ in 0..10_000 {
            let Some(next) = page.next.take() else {
                return Ok(tags);
            };
            let response = self
                .raw_request(Method::GET, &next, Some(Scope::pull(&full)))
                .send()
                .await?;
            page = self.tag_page(response).await?;
            tags.append(&mut page.tags);
        }
        Err(Error::InvalidRequest {
            reason: "tag list pagination did not end after 10000 pages".into(),
        })
    }

    async fn tag_page(&self, response: Response) -> Result<TagPage, Error> {
        let response = response.error_for_status().await?;
        let next = response
            .headers()
            .get_all(header::LINK)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .find_map(oci::pagination::parse_next_link)
            .map(str::to_owned);
        let shown = response.url();
        let bytes = response.into_body().collect(16 << 20).await?;
        let list: oci::pagination::TagList =
            serde_json::from_slice(&bytes).map_err(|e| Error::InvalidResponse {
                url: shown,
                reason: format!("tag list is not JSON of the expected shape: {e}"),
            })?;
        Ok(TagPage {
            name: list.name,
            tags: list.tags,
            next,
        })
    }

    /// `POST /v2/<name>/blobs/uploads/`: starts an upload session.
    pub async fn start_upload(&self, repository: &str) -> Result<Upload, Error> {
        let response = self
            .request(Method::POST, repository, "blobs/uploads/")
            .header(header::CONTENT_LENGTH, "0")
            .send()
            .await?
            .error_for_status()
            .await?;
        self.upload_from(repository, &response)
    }

    /// Single-request monolithic upload: `POST …/blobs/uploads/?digest=` with the whole blob.
    /// Registries that do not support it answer 202 with a session, which is then completed
    /// with a PUT.
    pub async fn post_blob(
        &self,
        repository: &str,
        digest: &oci::Digest,
        data: Bytes,
    ) -> Result<(), Error> {
        let response = self
            .request(Method::POST, repository, "blobs/uploads/")
            .query_pair("digest", &digest.to_string())
            .header(header::CONTENT_TYPE, "application/octet-stream")
            .body(RequestBody::Bytes(data.clone()))
            .send()
            .await?
            .error_for_status()
            .await?;
        match response.status() {
            StatusCode::CREATED => Ok(()),
            StatusCode::ACCEPTED => {
                self.upload_from(repository, &response)?
                    .finish(digest, Some(RequestBody::Bytes(data)))
                    .await
            }
            other => Err(invalid(
                &response,
                format!("monolithic POST answered {other}"),
            )),
        }
    }

    /// Monolithic upload in two requests: POST for a session, then one PUT with the blob.
    pub async fn push_blob(
        &self,
        repository: &str,
        digest: &oci::Digest,
        body: RequestBody,
    ) -> Result<(), Error> {
        self.start_upload(repository)
            .await?
            .finish(digest, Some(body))
            .await
    }

    /// `POST …/blobs/uploads/?mount=<digest>&from=<other>`: cross-repository mount. `from` is
    /// relative to the endpoint's prefix, like `repository`.
    pub async fn mount_blob(
        &self,
        repository: &str,
        digest: &oci::Digest,
        from: &str,
    ) -> Result<Mount, Error> {
        let full_from = self.endpoint().full_repository(from);
        let full = self.endpoint().full_repository(repository);
        let response = self
            .request(Method::POST, repository, "blobs/uploads/")
            .query_pair("mount", &digest.to_string())
            .query_pair("from", &full_from)
            .header(header::CONTENT_LENGTH, "0")
            .scope(Some(Scope::push(&full).and(Scope::pull(&full_from))))
            .send()
            .await?
            .error_for_status()
            .await?;
        match response.status() {
            StatusCode::CREATED => Ok(Mount::Mounted),
            StatusCode::ACCEPTED => Ok(Mount::Upload(Box::new(
                self.upload_from(repository, &response)?,
            ))),
            other => Err(invalid(&response, format!("mount answered {other}"))),
        }
    }

    /// `PUT /v2/<name>/manifests/<reference>` with the exact bytes; returns the digest the
    /// registry reports (or the sha256 of the bytes when it reports none).
    pub async fn put_manifest(
        &self,
        repository: &str,
        reference: &str,
        media_type: &str,
        bytes: Bytes,
    ) -> Result<oci::Digest, Error> {
        validate_reference(reference)?;
        let response = self
            .request(Method::PUT, repository, &format!("manifests/{reference}"))
            .header(header::CONTENT_TYPE, media_type)
            .body(RequestBody::Bytes(bytes.clone()))
            .send()
            .await?
            .error_for_status()
            .await?;
        Ok(response
            .digest()
            .unwrap_or_else(|| oci::Digest::sha256(&bytes)))
    }

    /// `DELETE /v2/<name>/manifests/<reference>`.
    pub async fn delete_manifest(&self, repository: &str, reference: &str) -> Result<(), Error> {
        validate_reference(reference)?;
        self.request(
            Method::DELETE,
            repository,
            &format!("manifests/{reference}"),
        )
        .send()
        .await?
        .error_for_status()
        .await
        .map(drop)
    }

    /// `DELETE /v2/<name>/blobs/<digest>`.
    pub async fn delete_blob(&self, repository: &str, digest: &oci::Digest) -> Result<(), Error> {
        self.request(Method::DELETE, repository, &format!("blobs/{digest}"))
            .send()
            .await?
            .error_for_status()
            .await
            .map(drop)
    }

    fn upload_from(&self, repository: &str, response: &Response) -> Result<Upload, Error> {
        let location = response
            .header_str(header::LOCATION.as_str())
            .and_then(|loc| response.raw_url().join(loc).ok())
            .ok_or_else(|| invalid(response, "upload answer without a usable Location"))?;
        Ok(Upload {
            remote: self.clone(),
            repository: repository.to_owned(),
            location,
            offset: 0,
        })
    }
}

impl Upload {
    /// The session URL without its query (safe to log).
    pub fn location(&self) -> String {
        crate::error::display_url(&self.location)
    }

    /// Bytes accepted so far.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    fn scope(&self) -> Scope {
        Scope::push(&self.remote.endpoint().full_repository(&self.repository))
    }

    /// `PATCH <location>` with the next chunk and its `Content-Range`; the session moves to the
    /// `Location` the registry answers with.
    pub async fn patch(mut self, chunk: Bytes) -> Result<Upload, Error> {
        if chunk.is_empty() {
            return Ok(self);
        }
        let end = self.offset + chunk.len() as u64 - 1;
        let response = self
            .remote
            .url_request(Method::PATCH, self.location.clone(), self.scope())
            .header(header::CONTENT_TYPE, "application/octet-stream")
            .header(header::CONTENT_RANGE, &format!("{}-{end}", self.offset))
            .header(header::CONTENT_LENGTH, &chunk.len().to_string())
            .body(RequestBody::Bytes(chunk))
            .send()
            .await?
            .error_for_status()
            .await?;
        if let Some(next) = response
            .header_str(header::LOCATION.as_str())
            .and_then(|loc| response.raw_url().join(loc).ok())
        {
            self.location = next;
        }
        self.offset = end + 1;
        Ok(self)
    }

    /// `PUT <location>?digest=` closing the session, with an optional final chunk.
    pub async fn finish(
        self,
        digest: &oci::Digest,
        last: Option<RequestBody>,
    ) -> Result<(), Error> {
        let mut url = self.location.clone();
        url.query_pairs_mut()
            .append_pair("digest", &digest.to_string());
        let mut request = self
            .remote
            .url_request(Method::PUT, url, self.scope())
            .header(header::CONTENT_TYPE, "application/octet-stream");
        match last {
            Some(RequestBody::Bytes(b)) => {
                request = request
                    .header(header::CONTENT_LENGTH, &b.len().to_string())
                    .body(RequestBody::Bytes(b));
            }
            Some(body @ RequestBody::Stream(_)) => request = request.body(body),
            Some(RequestBody::Empty) | None => {
                request = request.header(header::CONTENT_LENGTH, "0");
            }
        }
        let response = request.send().await?.error_for_status().await?;
        if response.status() != StatusCode::CREATED {
            return Err(invalid(
                &response,
                format!("closing PUT answered {} instead of 201", response.status()),
            ));
        }
        Ok(())
    }
}

fn head_of(response: &Response) -> Head {
    Head {
        size: response.content_length(),
        digest: response.digest(),
        media_type: response.media_type(),
    }
}

/// A body from bytes, for callers building requests.
impl From<Bytes> for RequestBody {
    fn from(b: Bytes) -> Self {
        Self::Bytes(b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_are_tags_or_digests() {
        assert!(validate_reference("v1.0").is_ok());
        assert!(validate_reference(&oci::Digest::sha256(b"").to_string()).is_ok());
        assert!(validate_reference("../x").is_err());
        assert!(validate_reference("").is_err());
    }
}
