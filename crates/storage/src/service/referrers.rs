//! The referrers API (distribution-spec 1.1): `GET /v2/<name>/referrers/<digest>` answers an
//! OCI image index of the descriptors of the manifests whose `subject` is `<digest>` — an empty
//! index, never a 404, when nothing refers to it.
//!
//! - The store indexes a manifest under its subject when it is stored (pushed, filled or
//!   replicated); the read listener also asks the upstream it fills from and merges its answer
//!   (first page only), so signatures kept upstream are found through the cache.
//! - `artifactType=` filters, and the answer then says so in `OCI-Filters-Applied`.
//! - Pages are ordered by digest and cut at `n` (at most [`PAGE_MAX`]); a cut page names the
//!   next one in `Link` (`?n=…&last=<digest>`), like the tag list.
//!
//! Because we serve this API, pushing a manifest with a `subject` answers `OCI-Subject`.

use http::{HeaderMap, HeaderValue, Method, Response, StatusCode, header};
use oci::{Descriptor, Digest, Repository, Route};
use serde::Serialize;

use super::respond::{from_error, respond, value};
use super::{Listener, Role, blocking};
use crate::body::{self, ResponseBody};
use crate::fill::Source;

/// The most descriptors one answer lists.
pub(super) const PAGE_MAX: u32 = 1000;

/// The largest upstream referrers answer read (the manifest limit: it is an index).
const UPSTREAM_LIMIT: u64 = oci::manifest::MANIFEST_MAX_LEN as u64;

/// The query of a referrers request.
#[derive(Debug, Clone, Default)]
pub(super) struct Query {
    /// `artifactType`.
    pub artifact_type: Option<String>,
    /// `n`.
    pub n: Option<u32>,
    /// `last`.
    pub last: Option<String>,
}

/// One page of a referrers list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Page {
    /// The descriptors, ordered by digest.
    pub descriptors: Vec<Descriptor>,
    /// The digest the next page starts after, when this one was cut.
    pub next_last: Option<String>,
}

/// Filters `all` by `artifact_type`, orders it by digest (duplicates dropped), skips what
/// sorts at or before `last` and cuts the page at `n` (never above [`PAGE_MAX`]).
pub(super) fn page(
    all: Vec<Descriptor>,
    artifact_type: Option<&str>,
    n: Option<u32>,
    last: Option<&str>,
) -> Page {
    let mut all: Vec<(String, Descriptor)> = all
        .into_iter()
        .filter(|d| artifact_type.is_none_or(|t| d.artifact_type.as_deref() == Some(t)))
        .map(|d| (d.digest.to_string(), d))
        .collect();
    all.sort_by(|a, b| a.0.cmp(&b.0));
    all.dedup_by(|a, b| a.0 == b.0);
    let start = last.map_or(0, |l| all.partition_point(|(k, _)| k.as_str() <= l));
    let mut rest = all.split_off(start);
    let limit = n.unwrap_or(PAGE_MAX).min(PAGE_MAX) as usize;
    let cut = rest.len() > limit;
    rest.truncate(limit);
    let next_last = if cut {
        rest.last().map(|(k, _)| k.clone())
    } else {
        None
    };
    Page {
        descriptors: rest.into_iter().map(|(_, d)| d).collect(),
        next_last,
    }
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Index<'a> {
    schema_version: u32,
    media_type: &'static str,
    manifests: &'a [Descriptor],
}

/// The index a page is answered with.
pub(super) fn index_bytes(descriptors: &[Descriptor]) -> Vec<u8> {
    serde_json::to_vec(&Index {
        schema_version: 2,
        media_type: oci::media_type::OCI_INDEX,
        manifests: descriptors,
    })
    .unwrap_or_default()
}

/// The descriptors an upstream lists for `subject`; `None` when it has no referrers API or
/// cannot be asked (the local list is answered alone).
async fn upstream_referrers(source: &Source, subject: &Digest) -> Option<Vec<Descriptor>> {
    let response = source
        .remote
        .request(
            Method::GET,
            &source.repository,
            &format!("referrers/{subject}"),
        )
        .header(header::ACCEPT, oci::media_type::OCI_INDEX)
        .send()
        .await
        .ok()?;
    if response.status() != StatusCode::OK {
        return None;
    }
    let bytes = response.into_body().collect(UPSTREAM_LIMIT).await.ok()?;
    let manifest = oci::Manifest::parse(bytes.to_vec(), Some(oci::media_type::OCI_INDEX)).ok()?;
    Some(manifest.as_index()?.manifests.clone())
}

impl Listener {
    /// `GET /v2/<name>/referrers/<digest>`.
    pub(super) async fn referrers(
        &self,
        repository: &Repository,
        digest: &Digest,
        query: Query,
    ) -> Response<ResponseBody> {
        let digest = *digest;
        let local = {
            let (store, r) = (self.registry.store().clone(), repository.clone());
            blocking(move || store.referrers(&r, &digest)).await
        };
        let mut all = match local {
            Ok(all) => all,
            Err(e) => return from_error(&e),
        };
        let source = match self.role {
            Role::Read => self.registry.source(repository),
            Role::Write => None,
        };
        if let Some(source) = source
            && let Some(upstream) = upstream_referrers(&source, &digest).await
        {
            all.extend(upstream);
        }
        let page = page(
            all,
            query.artifact_type.as_deref(),
            query.n,
            query.last.as_deref(),
        );
        answer(repository, &digest, query.artifact_type, query.n, page)
    }
}

fn answer(
    repository: &Repository,
    digest: &Digest,
    artifact_type: Option<String>,
    n: Option<u32>,
    page: Page,
) -> Response<ResponseBody> {
    let bytes = index_bytes(&page.descriptors);
    let mut headers = HeaderMap::new();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(oci::media_type::OCI_INDEX),
    );
    headers.insert(header::CONTENT_LENGTH, value(&bytes.len().to_string()));
    if artifact_type.is_some() {
        headers.insert(
            oci::header::OCI_FILTERS_APPLIED,
            HeaderValue::from_static("artifactType"),
        );
    }
    if let Some(last) = page.next_last {
        let next = Route::Referrers {
            repository: repository.clone(),
            digest: *digest,
            artifact_type,
            n: Some(n.unwrap_or(PAGE_MAX).min(PAGE_MAX)),
            last: Some(last),
        };
        let target = match next.query() {
            Some(q) => format!("{}?{q}", next.path()),
            None => next.path(),
        };
        headers.insert(header::LINK, value(&format!("<{target}>; rel=\"next\"")));
    }
    respond(StatusCode::OK, headers, body::full(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(n: u8, artifact_type: Option<&str>) -> Descriptor {
        let digest = Digest::compute(oci::Algorithm::Sha256, &[n]);
        let mut d = Descriptor::new(oci::media_type::OCI_MANIFEST, digest, 100 + u64::from(n));
        d.artifact_type = artifact_type.map(str::to_owned);
        d
    }

    fn keys(page: &Page) -> Vec<String> {
        page.descriptors
            .iter()
            .map(|d| d.digest.to_string())
            .collect()
    }

    /// (artifact type, n, last) → (listed, next last)
    type Case<'a> = (
        Option<&'a str>,
        Option<u32>,
        Option<&'a str>,
        Vec<String>,
        Option<String>,
    );

    #[test]
    fn pages_filter_order_and_cut() {
        let sig = "application/vnd.example.signature";
        let sbom = "application/vnd.example.sbom";
        let all = vec![
            d(1, Some(sig)),
            d(2, Some(sbom)),
            d(3, Some(sig)),
            d(1, Some(sig)),
        ];
        let mut sorted: Vec<String> = [1u8, 2, 3]
            .iter()
            .map(|&n| d(n, None).digest.to_string())
            .collect();
        sorted.sort();
        let sigs: Vec<String> = {
            let mut s: Vec<String> = [1u8, 3]
                .iter()
                .map(|&n| d(n, None).digest.to_string())
                .collect();
            s.sort();
            s
        };
        let cases: Vec<Case> = vec![
            (None, None, None, sorted.clone(), None),
            (Some(sig), None, None, sigs.clone(), None),
            (Some("application/none"), None, None, vec![], None),
            (
                None,
                Some(2),
                None,
                sorted[..2].to_vec(),
                Some(sorted[1].clone()),
            ),
            (None, Some(2), Some(&sorted[1]), sorted[2..].to_vec(), None),
            (None, Some(0), None, vec![], None),
            (
                Some(sig),
                Some(1),
                None,
                sigs[..1].to_vec(),
                Some(sigs[0].clone()),
            ),
            (None, None, Some(&sorted[2]), vec![], None),
        ];
        for (artifact_type, n, last, listed, next) in cases {
            let p = page(all.clone(), artifact_type, n, last);
            assert_eq!(keys(&p), listed, "{artifact_type:?} {n:?} {last:?}");
            assert_eq!(p.next_last, next, "{artifact_type:?} {n:?} {last:?}");
        }
    }

    #[test]
    fn a_page_never_exceeds_the_maximum() {
        let all: Vec<Descriptor> = (0..=255u8)
            .flat_map(|a| {
                (0..5u8).map(move |b| {
                    let digest = Digest::compute(oci::Algorithm::Sha256, &[a, b]);
                    Descriptor::new(oci::media_type::OCI_MANIFEST, digest, 1)
                })
            })
            .collect();
        let p = page(all, None, Some(u32::MAX), None);
        assert_eq!(p.descriptors.len(), PAGE_MAX as usize);
        assert!(p.next_last.is_some());
    }

    #[test]
    fn the_answer_is_an_oci_index_with_its_headers() {
        let repository = Repository::parse("system/deckhouse").unwrap();
        let subject = d(9, None).digest;
        let response = answer(
            &repository,
            &subject,
            Some("application/vnd.example.signature".into()),
            Some(1),
            Page {
                descriptors: vec![d(1, Some("application/vnd.example.signature"))],
                next_last: Some(d(1, None).digest.to_string()),
            },
        );
        assert_eq!(response.status(), StatusCode::OK);
        let h = response.headers();
        assert_eq!(h[header::CONTENT_TYPE], oci::media_type::OCI_INDEX);
        assert_eq!(h[oci::header::OCI_FILTERS_APPLIED], "artifactType");
        let link = h[header::LINK].to_str().unwrap();
        assert!(
            link.starts_with(&format!("</v2/system/deckhouse/referrers/{subject}?")),
            "{link}"
        );
        assert!(
            link.contains("artifactType=application%2Fvnd.example.signature"),
            "{link}"
        );
        assert!(link.contains("n=1"), "{link}");
        assert!(link.ends_with(">; rel=\"next\""), "{link}");
        let index: serde_json::Value = serde_json::from_slice(&index_bytes(&[d(1, None)])).unwrap();
        assert_eq!(index["schemaVersion"], 2);
        assert_eq!(index["mediaType"], oci::media_type::OCI_INDEX);
        assert_eq!(index["manifests"].as_array().unwrap().len(), 1);
    }
}
