//! The pull profile: ping, manifests, blobs, ranges, error bodies.

use http::header::{ACCEPT, RANGE};
use http::{HeaderName, Method};
use oci::ErrorCode;
use oci::media_type::{DOCKER_MANIFEST, DOCKER_MANIFEST_LIST, OCI_INDEX, OCI_MANIFEST};

use super::{Answer, call, ensure, read};
use crate::{Ctx, Profile, Recorder};

const P: Profile = Profile::Pull;

pub(crate) async fn run(ctx: &Ctx, rec: &mut Recorder<'_>) {
    rec.record("pull.ping", P, "GET /v2/ answers 200", ping(ctx).await);
    rec.record(
        "pull.ping.api-version",
        P,
        "GET /v2/ SHOULD carry Docker-Distribution-Api-Version: registry/2.0",
        ping_header(ctx).await,
    );
    rec.record(
        "pull.manifest.get-by-tag",
        P,
        "GET manifest by tag: 200, the exact bytes pushed, its Content-Type and digest",
        manifest_get(ctx, "oci", true).await,
    );
    rec.record(
        "pull.manifest.get-by-digest",
        P,
        "GET manifest by digest: 200, the exact bytes pushed",
        manifest_get(ctx, &ctx.fixtures.manifest.digest().to_string(), false).await,
    );
    rec.record(
        "pull.manifest.head-by-tag",
        P,
        "HEAD manifest by tag: 200, exact Content-Length and Docker-Content-Digest, no body",
        manifest_head(ctx, "oci").await,
    );
    rec.record(
        "pull.manifest.head-by-digest",
        P,
        "HEAD manifest by digest: 200, exact Content-Length and Docker-Content-Digest",
        manifest_head(ctx, &ctx.fixtures.manifest.digest().to_string()).await,
    );
    rec.record(
        "pull.manifest.accept-lines",
        P,
        "Accept sent as several header lines is honoured",
        accept_lines(ctx).await,
    );
    rec.record(
        "pull.manifest.docker-schema2",
        P,
        "a Docker schema 2 manifest is served byte-exact with its own Content-Type",
        typed(
            ctx,
            "docker",
            &ctx.fixtures.docker_manifest,
            &[DOCKER_MANIFEST],
        )
        .await,
    );
    rec.record(
        "pull.manifest.oci-index",
        P,
        "an OCI index is served byte-exact with its own Content-Type",
        typed(ctx, "index", &ctx.fixtures.index, &[OCI_INDEX]).await,
    );
    rec.record(
        "pull.manifest.unknown-tag",
        P,
        "unknown tag: 404 with MANIFEST_UNKNOWN",
        unknown_manifest(ctx, "no-such-tag").await,
    );
    rec.record(
        "pull.manifest.unknown-digest",
        P,
        "unknown manifest digest: 404 with MANIFEST_UNKNOWN",
        unknown_manifest(ctx, &oci::Digest::sha256(b"no such manifest").to_string()).await,
    );
    rec.record(
        "pull.manifest.head-unknown",
        P,
        "HEAD unknown manifest: 404",
        head_unknown(ctx, "manifests/no-such-tag").await,
    );
    rec.record(
        "pull.blob.get",
        P,
        "GET blob: 200, exact bytes, exact Content-Length, matching Docker-Content-Digest",
        blob_get(ctx).await,
    );
    rec.record(
        "pull.blob.head",
        P,
        "HEAD blob: 200, exact Content-Length, no body",
        blob_head(ctx).await,
    );
    rec.record(
        "pull.blob.unknown",
        P,
        "unknown blob: 404 with BLOB_UNKNOWN",
        blob_unknown(ctx).await,
    );
    rec.record(
        "pull.blob.head-unknown",
        P,
        "HEAD unknown blob: 404",
        head_unknown(
            ctx,
            &format!("blobs/{}", oci::Digest::sha256(b"no such blob")),
        )
        .await,
    );
    rec.record(
        "pull.blob.invalid-digest",
        P,
        "malformed digest: 4xx with DIGEST_INVALID",
        invalid_digest(ctx).await,
    );
    rec.record(
        "pull.name.unknown",
        P,
        "unknown repository: 404 with NAME_UNKNOWN (or the object's *_UNKNOWN)",
        unknown_name(ctx).await,
    );
    rec.record(
        "pull.name.invalid",
        P,
        "repository name outside the grammar: 4xx with NAME_INVALID",
        invalid_name(ctx).await,
    );
    // Ranges (RFC 9110 §14, which the spec says registries SHOULD support).
    let layer = &ctx.fixtures.layer;
    let len = layer.size();
    rec.record(
        "pull.blob.range.first-bytes",
        P,
        "Range bytes=0-9: 206, Content-Range bytes 0-9/len, those 10 bytes",
        range(ctx, "bytes=0-9", 0, 9).await,
    );
    rec.record(
        "pull.blob.range.open-end",
        P,
        "Range bytes=10-: 206 with the rest of the blob",
        range(ctx, "bytes=10-", 10, len - 1).await,
    );
    rec.record(
        "pull.blob.range.suffix",
        P,
        "Range bytes=-5: 206 with the last 5 bytes",
        range(ctx, "bytes=-5", len - 5, len - 1).await,
    );
    rec.record(
        "pull.blob.range.last-byte-beyond-end",
        P,
        "Range bytes=990-5000: 206 clipped to the blob's end",
        range(ctx, "bytes=990-5000", 990, len - 1).await,
    );
    rec.record(
        "pull.blob.range.beyond-end",
        P,
        "Range starting at the blob's length: 416 with Content-Range bytes */len",
        unsatisfiable(ctx, &format!("bytes={len}-")).await,
    );
    rec.record(
        "pull.blob.range.far-beyond-end",
        P,
        "Range entirely beyond the end: 416 with Content-Range bytes */len",
        unsatisfiable(ctx, &format!("bytes={}-{}", len * 2, len * 3)).await,
    );
    rec.record(
        "pull.blob.range.unknown-unit",
        P,
        "Range with an unknown unit MUST be ignored: 200 with the whole blob",
        ignored_range(ctx, "items=0-9", false).await,
    );
    rec.record(
        "pull.blob.range.malformed",
        P,
        "malformed byte range: the whole blob (200) or 416, never a partial body",
        ignored_range(ctx, "bytes=abc", true).await,
    );
}

async fn ping(ctx: &Ctx) -> Result<(), String> {
    let answer = call(
        ctx,
        Method::GET,
        "/v2/",
        &[],
        None,
        registry_client::Scope::empty(),
    )
    .await?;
    answer.expect(&[200])
}

async fn ping_header(ctx: &Ctx) -> Result<(), String> {
    let answer = call(
        ctx,
        Method::GET,
        "/v2/",
        &[],
        None,
        registry_client::Scope::empty(),
    )
    .await?;
    let value = answer.header(oci::header::API_VERSION);
    ensure!(
        value == Some(oci::header::API_VERSION_VALUE),
        "{}: Docker-Distribution-Api-Version is {value:?}",
        answer.line()
    );
    Ok(())
}

fn all_accept() -> Vec<(HeaderName, &'static str)> {
    [
        OCI_MANIFEST,
        OCI_INDEX,
        DOCKER_MANIFEST,
        DOCKER_MANIFEST_LIST,
    ]
    .into_iter()
    .map(|m| (ACCEPT, m))
    .collect()
}

fn same_manifest(answer: &Answer, doc: &crate::fixtures::Doc) -> Result<(), String> {
    answer.expect(&[200])?;
    ensure!(
        answer.body == doc.blob.bytes,
        "{}: body differs from the bytes pushed ({} vs {} bytes)",
        answer.line(),
        answer.body.len(),
        doc.blob.bytes.len()
    );
    let media_type = answer.media_type();
    ensure!(
        media_type.as_deref() == Some(doc.media_type),
        "{}: Content-Type {media_type:?}, expected {}",
        answer.line(),
        doc.media_type
    );
    if let Some(d) = answer.digest() {
        ensure!(
            d == doc.digest().to_string(),
            "{}: Docker-Content-Digest {d}, expected {}",
            answer.line(),
            doc.digest()
        );
    }
    Ok(())
}

async fn manifest_get(ctx: &Ctx, reference: &str, digest_header: bool) -> Result<(), String> {
    let answer = read(
        ctx,
        Method::GET,
        &ctx.repo,
        &format!("manifests/{reference}"),
        &all_accept(),
    )
    .await?;
    same_manifest(&answer, &ctx.fixtures.manifest)?;
    if digest_header {
        ensure!(
            answer.digest().is_some(),
            "{}: no Docker-Content-Digest (SHOULD)",
            answer.line()
        );
    }
    Ok(())
}

async fn manifest_head(ctx: &Ctx, reference: &str) -> Result<(), String> {
    let answer = read(
        ctx,
        Method::HEAD,
        &ctx.repo,
        &format!("manifests/{reference}"),
        &all_accept(),
    )
    .await?;
    answer.expect(&[200])?;
    let doc = &ctx.fixtures.manifest;
    ensure!(
        answer.content_length() == Some(doc.blob.size()),
        "{}: Content-Length {:?}, expected {}",
        answer.line(),
        answer.content_length(),
        doc.blob.size()
    );
    let expected = doc.digest().to_string();
    ensure!(
        answer.digest() == Some(expected.as_str()),
        "{}: Docker-Content-Digest {:?}, expected {expected}",
        answer.line(),
        answer.digest()
    );
    ensure!(
        answer.body.is_empty(),
        "{}: HEAD answered with a body",
        answer.line()
    );
    Ok(())
}

async fn accept_lines(ctx: &Ctx) -> Result<(), String> {
    // One line per type, the OCI type last: a server reading only the first line would miss it.
    let headers = [
        (ACCEPT, DOCKER_MANIFEST),
        (ACCEPT, DOCKER_MANIFEST_LIST),
        (ACCEPT, OCI_INDEX),
        (ACCEPT, OCI_MANIFEST),
    ];
    let answer = read(ctx, Method::GET, &ctx.repo, "manifests/oci", &headers).await?;
    same_manifest(&answer, &ctx.fixtures.manifest)
}

async fn typed(
    ctx: &Ctx,
    tag: &str,
    doc: &crate::fixtures::Doc,
    accept: &[&'static str],
) -> Result<(), String> {
    let headers: Vec<_> = accept.iter().map(|m| (ACCEPT, *m)).collect();
    let answer = read(
        ctx,
        Method::GET,
        &ctx.repo,
        &format!("manifests/{tag}"),
        &headers,
    )
    .await?;
    same_manifest(&answer, doc)
}

async fn unknown_manifest(ctx: &Ctx, reference: &str) -> Result<(), String> {
    let answer = read(
        ctx,
        Method::GET,
        &ctx.repo,
        &format!("manifests/{reference}"),
        &all_accept(),
    )
    .await?;
    answer.expect(&[404])?;
    answer.expect_code(ErrorCode::ManifestUnknown)
}

async fn head_unknown(ctx: &Ctx, rest: &str) -> Result<(), String> {
    let answer = read(ctx, Method::HEAD, &ctx.repo, rest, &[]).await?;
    answer.expect(&[404])?;
    ensure!(
        answer.body.is_empty(),
        "{}: HEAD answered with a body",
        answer.line()
    );
    Ok(())
}

async fn blob_get(ctx: &Ctx) -> Result<(), String> {
    let layer = &ctx.fixtures.layer;
    let answer = read(
        ctx,
        Method::GET,
        &ctx.repo,
        &format!("blobs/{}", layer.digest),
        &[],
    )
    .await?;
    answer.expect(&[200])?;
    ensure!(
        answer.body == layer.bytes,
        "{}: bytes differ",
        answer.line()
    );
    ensure!(
        answer.content_length() == Some(layer.size()),
        "{}: Content-Length {:?}",
        answer.line(),
        answer.content_length()
    );
    if let Some(d) = answer.digest() {
        ensure!(
            d == layer.digest.to_string(),
            "{}: Docker-Content-Digest {d}",
            answer.line()
        );
    }
    Ok(())
}

async fn blob_head(ctx: &Ctx) -> Result<(), String> {
    let layer = &ctx.fixtures.layer;
    let answer = read(
        ctx,
        Method::HEAD,
        &ctx.repo,
        &format!("blobs/{}", layer.digest),
        &[],
    )
    .await?;
    answer.expect(&[200])?;
    ensure!(
        answer.content_length() == Some(layer.size()),
        "{}: Content-Length {:?}, expected {}",
        answer.line(),
        answer.content_length(),
        layer.size()
    );
    ensure!(
        answer.body.is_empty(),
        "{}: HEAD answered with a body",
        answer.line()
    );
    Ok(())
}

async fn blob_unknown(ctx: &Ctx) -> Result<(), String> {
    let digest = oci::Digest::sha256(b"no such blob");
    let answer = read(ctx, Method::GET, &ctx.repo, &format!("blobs/{digest}"), &[]).await?;
    answer.expect(&[404])?;
    answer.expect_code(ErrorCode::BlobUnknown)
}

async fn invalid_digest(ctx: &Ctx) -> Result<(), String> {
    let answer = read(ctx, Method::GET, &ctx.repo, "blobs/sha256:not-hex", &[]).await?;
    ensure!(
        answer.status.is_client_error(),
        "{} (expected a 4xx)",
        answer.line()
    );
    answer.expect_code(ErrorCode::DigestInvalid)
}

async fn unknown_name(ctx: &Ctx) -> Result<(), String> {
    let repo = format!("{}-missing", ctx.repo);
    let answer = read(ctx, Method::GET, &repo, "manifests/latest", &all_accept()).await?;
    answer.expect(&[404])?;
    answer
        .expect_code(ErrorCode::NameUnknown)
        .or_else(|_| answer.expect_code(ErrorCode::ManifestUnknown))
}

async fn invalid_name(ctx: &Ctx) -> Result<(), String> {
    let answer = call(
        ctx,
        Method::GET,
        "/v2/Invalid..Name/manifests/latest",
        &all_accept(),
        None,
        registry_client::Scope::pull(&ctx.repo),
    )
    .await?;
    ensure!(
        answer.status.is_client_error(),
        "{} (expected a 4xx)",
        answer.line()
    );
    answer.expect_code(ErrorCode::NameInvalid)
}

async fn range(ctx: &Ctx, header: &str, start: u64, end: u64) -> Result<(), String> {
    let layer = &ctx.fixtures.layer;
    let answer = read(
        ctx,
        Method::GET,
        &ctx.repo,
        &format!("blobs/{}", layer.digest),
        &[(RANGE, header)],
    )
    .await?;
    let line = format!("{} (Range: {header})", answer.line());
    ensure!(answer.status.as_u16() == 206, "{line}, expected 206");
    answer.well_formed()?;
    let expected_range = format!("bytes {start}-{end}/{}", layer.size());
    let content_range = answer.header("content-range");
    ensure!(
        content_range == Some(expected_range.as_str()),
        "{line}: Content-Range {content_range:?}, expected {expected_range}"
    );
    let want = &layer.bytes[start as usize..=end as usize];
    ensure!(
        answer.content_length() == Some(want.len() as u64),
        "{line}: Content-Length {:?}, expected {}",
        answer.content_length(),
        want.len()
    );
    ensure!(answer.body == want, "{line}: wrong bytes");
    Ok(())
}

async fn unsatisfiable(ctx: &Ctx, header: &str) -> Result<(), String> {
    let layer = &ctx.fixtures.layer;
    let answer = read(
        ctx,
        Method::GET,
        &ctx.repo,
        &format!("blobs/{}", layer.digest),
        &[(RANGE, header)],
    )
    .await?;
    let line = format!("{} (Range: {header})", answer.line());
    ensure!(answer.status.as_u16() == 416, "{line}, expected 416");
    let expected = format!("bytes */{}", layer.size());
    let content_range = answer.header("content-range");
    ensure!(
        content_range == Some(expected.as_str()),
        "{line}: Content-Range {content_range:?}, expected {expected}"
    );
    answer.well_formed()
}

async fn ignored_range(ctx: &Ctx, header: &str, may_refuse: bool) -> Result<(), String> {
    let layer = &ctx.fixtures.layer;
    let answer = read(
        ctx,
        Method::GET,
        &ctx.repo,
        &format!("blobs/{}", layer.digest),
        &[(RANGE, header)],
    )
    .await?;
    let line = format!("{} (Range: {header})", answer.line());
    match answer.status.as_u16() {
        200 => {
            answer.well_formed()?;
            ensure!(answer.body == layer.bytes, "{line}: not the whole blob");
            Ok(())
        }
        416 if may_refuse => answer.well_formed(),
        _ => Err(format!(
            "{line}: expected 200 with the whole blob{}",
            if may_refuse { " or 416" } else { "" }
        )),
    }
}
