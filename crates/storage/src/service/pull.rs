//! The pull stage: manifests, blobs and tags from the store, and on the read listener a
//! single-flight fill from the upstream on a miss; tags are refreshed from the upstream at most
//! once per `tag_ttl`.

use std::sync::Arc;

use futures_util::TryStreamExt;
use http::{HeaderMap, HeaderValue, Response, StatusCode, header};
use http_body_util::{BodyExt, StreamBody};
use hyper::body::Frame;
use oci::{Digest, ErrorCode, ManifestReference, Repository, Tag};
use tokio::time::Instant;

use super::respond::{error_response, from_error, respond, value};
use super::{Listener, Role, TagKey, blocking};
use crate::body::{self, ResponseBody};
use crate::error::Error;
use crate::fill::{self, FillState, Source};
use crate::store::StoredManifest;

fn blob_headers(digest: &Digest, len: u64) -> HeaderMap {
    let mut headers = HeaderMap::new();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/octet-stream"),
    );
    headers.insert(header::CONTENT_LENGTH, value(&len.to_string()));
    headers.insert(header::ACCEPT_RANGES, HeaderValue::from_static("bytes"));
    headers.insert(oci::header::CONTENT_DIGEST, value(&digest.to_string()));
    headers.insert(header::ETAG, value(&format!("\"{digest}\"")));
    headers
}

/// What a blob answer reads from.
enum Content {
    Complete(Arc<std::fs::File>),
    Growing(Arc<std::fs::File>, tokio::sync::watch::Receiver<FillState>),
}

fn serve_blob(
    digest: &Digest,
    content: Content,
    len: u64,
    range: Option<&str>,
    head: bool,
) -> Response<ResponseBody> {
    let mut headers = blob_headers(digest, len);
    if head {
        return respond(StatusCode::OK, headers, body::empty());
    }
    let (status, start, end) = match oci::range::evaluate(range, len) {
        oci::RangeOutcome::Full => (StatusCode::OK, 0, len),
        oci::RangeOutcome::Partial(r) => {
            headers.insert(header::CONTENT_RANGE, value(&r.content_range(len)));
            headers.insert(header::CONTENT_LENGTH, value(&r.len().to_string()));
            (StatusCode::PARTIAL_CONTENT, r.start, r.end + 1)
        }
        oci::RangeOutcome::Unsatisfiable { complete_length } => {
            headers.insert(
                header::CONTENT_RANGE,
                value(&format!("bytes */{complete_length}")),
            );
            headers.insert(header::CONTENT_LENGTH, HeaderValue::from_static("0"));
            return respond(StatusCode::RANGE_NOT_SATISFIABLE, headers, body::empty());
        }
    };
    match content {
        Content::Complete(file) => {
            let zero_copy = body::ZeroCopy {
                file: file.clone(),
                start,
                end,
            };
            let mut response = respond(status, headers, body::file(file, start, end));
            response.extensions_mut().insert(zero_copy);
            response
        }
        Content::Growing(file, rx) => {
            respond(status, headers, body::growing(file, start, Some(end), rx))
        }
    }
}

fn manifest_response(m: &StoredManifest, head: bool) -> Response<ResponseBody> {
    let mut headers = HeaderMap::new();
    headers.insert(header::CONTENT_TYPE, value(&m.media_type));
    headers.insert(header::CONTENT_LENGTH, value(&m.bytes.len().to_string()));
    headers.insert(oci::header::CONTENT_DIGEST, value(&m.digest.to_string()));
    headers.insert(header::ETAG, value(&format!("\"{}\"", m.digest)));
    let body = if head {
        body::empty()
    } else {
        body::full(m.bytes.clone())
    };
    respond(StatusCode::OK, headers, body)
}

/// How a tag refresh ended.
enum Refresh {
    Fresh,
    Missing,
    Failed(Error),
}

impl Listener {
    pub(super) async fn get_manifest(
        &self,
        repository: &Repository,
        reference: &ManifestReference,
        head: bool,
    ) -> Response<ResponseBody> {
        let registry = &self.registry;
        let store = registry.store().clone();
        let source = match self.role {
            Role::Read => registry.source(repository),
            Role::Write => None,
        };
        let digest = match reference {
            ManifestReference::Digest(d) => *d,
            ManifestReference::Tag(tag) => {
                let mut refresh_error = None;
                if let Some(source) = &source {
                    match self.refresh_tag(repository, tag, source).await {
                        Refresh::Fresh => {}
                        Refresh::Missing => {
                            return error_response(
                                404,
                                ErrorCode::ManifestUnknown,
                                &format!("manifest unknown: {repository}:{tag} (upstream)"),
                            );
                        }
                        Refresh::Failed(e) => refresh_error = Some(e),
                    }
                }
                let (r, t) = (repository.clone(), tag.clone());
                let local = {
                    let store = store.clone();
                    blocking(move || Ok(store.tag(&r, &t))).await.ok().flatten()
                };
                match (local, refresh_error) {
                    (Some(d), e) => {
                        if let Some(e) = e {
                            tracing::warn!(%repository, %tag, error = %e, "upstream unavailable; serving the last known tag");
                        }
                        d
                    }
                    (None, Some(e)) => return from_error(&e),
                    (None, None) => {
                        return error_response(
                            404,
                            ErrorCode::ManifestUnknown,
                            &format!("manifest unknown: {repository}:{tag}"),
                        );
                    }
                }
            }
        };
        let lookup = {
            let (store, r) = (store.clone(), repository.clone());
            blocking(move || store.manifest(&r, &digest)).await
        };
        match lookup {
            Ok(Some(m)) => return manifest_response(&m, head),
            Ok(None) => {}
            Err(e) => return from_error(&e),
        }
        let Some(source) = source else {
            return error_response(
                404,
                ErrorCode::ManifestUnknown,
                &format!("manifest unknown: {repository}@{digest}"),
            );
        };
        match self
            .fetch_manifest(repository, &digest.to_string(), Some(digest), None, &source)
            .await
        {
            Ok(m) => manifest_response(&m, head),
            Err(e) if matches!(&e, Error::Upstream(u) if u.is_not_found()) => error_response(
                404,
                ErrorCode::ManifestUnknown,
                &format!("manifest unknown: {repository}@{digest}"),
            ),
            Err(e) => from_error(&e),
        }
    }

    async fn fetch_manifest(
        &self,
        repository: &Repository,
        reference: &str,
        expected: Option<Digest>,
        tag: Option<&Tag>,
        source: &Source,
    ) -> Result<StoredManifest, Error> {
        let m = source
            .remote
            .get_manifest(
                &source.repository,
                reference,
                &[oci::media_type::MANIFEST_ACCEPT],
            )
            .await?;
        let parsed = oci::Manifest::parse(m.bytes.to_vec(), m.media_type.as_deref())?;
        let media_type = parsed.media_type().as_str().to_owned();
        let stored = StoredManifest {
            bytes: m.bytes.to_vec(),
            media_type: media_type.clone(),
            digest: m.digest,
        };
        let (store, r, t) = (
            self.registry.store().clone(),
            repository.clone(),
            tag.cloned(),
        );
        let bytes = m.bytes.clone();
        let put = blocking(move || {
            store.put_manifest(
                &r,
                &bytes,
                &media_type,
                expected.or(Some(m.digest)),
                t.as_ref(),
            )
        })
        .await;
        if let Err(e) = put {
            // Unwritable store: serve it anyway, without storing.
            tracing::warn!(%repository, error = %e, "manifest not stored");
        }
        Ok(stored)
    }

    async fn refresh_tag(&self, repository: &Repository, tag: &Tag, source: &Source) -> Refresh {
        let inner = &self.registry.0;
        let key = (repository.to_string(), tag.to_string());
        let fresh = |key: &TagKey| {
            inner
                .tag_checked
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .get(key)
                .is_some_and(|at| at.elapsed() < inner.settings.tag_ttl)
        };
        if fresh(&key) {
            return Refresh::Fresh;
        }
        let flight = inner
            .tag_flights
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(key.clone())
            .or_default()
            .clone();
        let _guard = flight.lock().await;
        if fresh(&key) {
            return Refresh::Fresh;
        }
        let result = self.refresh_tag_now(repository, tag, source).await;
        if matches!(result, Refresh::Fresh) {
            inner
                .tag_checked
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(key.clone(), Instant::now());
        }
        inner
            .tag_flights
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&key);
        result
    }

    async fn refresh_tag_now(
        &self,
        repository: &Repository,
        tag: &Tag,
        source: &Source,
    ) -> Refresh {
        let head = source
            .remote
            .head_manifest(
                &source.repository,
                tag.as_str(),
                &[oci::media_type::MANIFEST_ACCEPT],
            )
            .await;
        let head = match head {
            Ok(head) => head,
            Err(e) if e.is_not_found() => return Refresh::Missing,
            Err(e) => return Refresh::Failed(e.into()),
        };
        let store = self.registry.store().clone();
        if let Some(digest) = head.digest {
            let (s, r, t) = (store.clone(), repository.clone(), tag.clone());
            let known = blocking(move || {
                if s.has_manifest(&r, &digest) {
                    if s.tag(&r, &t) != Some(digest) {
                        s.set_tag(&r, &t, &digest)?;
                    }
                    Ok(true)
                } else {
                    Ok(false)
                }
            })
            .await;
            if let Ok(true) = known {
                return Refresh::Fresh;
            }
        }
        match self
            .fetch_manifest(repository, tag.as_str(), None, Some(tag), source)
            .await
        {
            Ok(_) => Refresh::Fresh,
            Err(e) if matches!(&e, Error::Upstream(u) if u.is_not_found()) => Refresh::Missing,
            Err(e) => Refresh::Failed(e),
        }
    }

    pub(super) async fn get_blob(
        &self,
        repository: &Repository,
        digest: &Digest,
        range: Option<&str>,
        head: bool,
    ) -> Response<ResponseBody> {
        let store = self.registry.store().clone();
        let d = *digest;
        let local = {
            let store = store.clone();
            blocking(move || store.open_blob(&d)).await
        };
        match local {
            Ok(Some((file, len))) => {
                return serve_blob(digest, Content::Complete(Arc::new(file)), len, range, head);
            }
            Ok(None) => {}
            Err(e) => return from_error(&e),
        }
        let source = match self.role {
            Role::Read => self.registry.source(repository),
            Role::Write => None,
        };
        let Some(source) = source else {
            return error_response(
                404,
                ErrorCode::BlobUnknown,
                &format!("blob unknown: {digest}"),
            );
        };
        if store.usage().map(|u| u.refusal.is_some()).unwrap_or(true) {
            return self.direct(&source, digest, range, head).await;
        }
        let mut rx = self.registry.0.fills.join(&store, source.clone(), *digest);
        match fill::started(&mut rx).await {
            FillState::Streaming {
                file,
                total: Some(total),
                ..
            } => serve_blob(digest, Content::Growing(file, rx), total, range, head),
            FillState::Streaming {
                file, total: None, ..
            } => {
                if head || range.is_some() {
                    return match fill::finished(&mut rx).await {
                        FillState::Done { file, size } => {
                            serve_blob(digest, Content::Complete(file), size, range, head)
                        }
                        FillState::Failed { reason, status } => {
                            fill_failed(digest, &reason, status)
                        }
                        _ => self.direct(&source, digest, range, head).await,
                    };
                }
                let mut headers = blob_headers(digest, 0);
                headers.remove(header::CONTENT_LENGTH);
                respond(StatusCode::OK, headers, body::growing(file, 0, None, rx))
            }
            FillState::Done { file, size } => {
                serve_blob(digest, Content::Complete(file), size, range, head)
            }
            FillState::Failed { reason, status } => fill_failed(digest, &reason, status),
            FillState::Unstorable => self.direct(&source, digest, range, head).await,
            FillState::Connecting => fill_failed(digest, "fill aborted", 502),
        }
    }

    /// Streams from the upstream without storing (the store refuses writes).
    async fn direct(
        &self,
        source: &Source,
        digest: &Digest,
        range: Option<&str>,
        head: bool,
    ) -> Response<ResponseBody> {
        if head {
            return match source.remote.head_blob(&source.repository, digest).await {
                Ok(h) => {
                    let mut headers = blob_headers(digest, h.size.unwrap_or(0));
                    if h.size.is_none() {
                        headers.remove(header::CONTENT_LENGTH);
                    }
                    respond(StatusCode::OK, headers, body::empty())
                }
                Err(e) => blob_upstream_error(digest, e),
            };
        }
        match source
            .remote
            .get_blob(&source.repository, digest, range, None)
            .await
        {
            Ok(response) => {
                let (status, upstream_headers, body) = response.into_parts();
                let mut headers = blob_headers(digest, 0);
                headers.remove(header::CONTENT_LENGTH);
                for name in [header::CONTENT_LENGTH, header::CONTENT_RANGE] {
                    if let Some(v) = upstream_headers.get(&name) {
                        headers.insert(name, v.clone());
                    }
                }
                let stream = body.map_err(std::io::Error::other).map_ok(Frame::data);
                respond(
                    status,
                    headers,
                    BodyExt::boxed_unsync(StreamBody::new(stream)),
                )
            }
            Err(e) => blob_upstream_error(digest, e),
        }
    }

    pub(super) async fn tags(
        &self,
        repository: &Repository,
        n: Option<u32>,
        last: Option<&str>,
    ) -> Response<ResponseBody> {
        let source = match self.role {
            Role::Read => self.registry.source(repository),
            Role::Write => None,
        };
        let mut tags = None;
        if let Some(source) = source {
            match source.remote.all_tags(&source.repository).await {
                Ok(t) => tags = Some(t),
                Err(e) => {
                    tracing::warn!(%repository, error = %e, "upstream tag list failed; listing local tags");
                }
            }
        }
        if tags.is_none() {
            let (store, r) = (self.registry.store().clone(), repository.clone());
            match blocking(move || store.tags(&r)).await {
                Ok(t) => tags = t,
                Err(e) => return from_error(&e),
            }
        }
        let Some(tags) = tags else {
            return error_response(
                404,
                ErrorCode::NameUnknown,
                &format!("repository name not known to registry: {repository}"),
            );
        };
        let page = oci::pagination::paginate(tags, n, last);
        let mut headers = HeaderMap::new();
        let path = format!("/v2/{repository}/tags/list");
        if let Some(n) = n
            && let Some(link) = page.link(&path, n)
        {
            headers.insert(header::LINK, value(&link));
        }
        let list = oci::pagination::TagList {
            name: repository.to_string(),
            tags: page.items,
        };
        let bytes = serde_json::to_vec(&list).unwrap_or_default();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        headers.insert(header::CONTENT_LENGTH, value(&bytes.len().to_string()));
        respond(StatusCode::OK, headers, body::full(bytes))
    }
}

fn fill_failed(digest: &Digest, reason: &str, status: u16) -> Response<ResponseBody> {
    if status == 404 {
        return error_response(
            404,
            ErrorCode::BlobUnknown,
            &format!("blob unknown: {digest}"),
        );
    }
    error_response(status, ErrorCode::Unavailable, reason)
}

fn blob_upstream_error(digest: &Digest, e: registry_client::Error) -> Response<ResponseBody> {
    if e.is_not_found() {
        return error_response(
            404,
            ErrorCode::BlobUnknown,
            &format!("blob unknown: {digest}"),
        );
    }
    from_error(&Error::Upstream(e))
}
