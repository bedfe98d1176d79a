//! The push profile: uploads in every form, mounts, manifest PUT.

use bytes::Bytes;
use http::header::{CONTENT_LENGTH, CONTENT_RANGE, CONTENT_TYPE, LOCATION};
use http::{HeaderName, Method};
use oci::ErrorCode;
use registry_client::Scope;

use super::{Answer, call, call_location, ensure, read};
use crate::{Ctx, Profile, Recorder};

const P: Profile = Profile::Push;
const OCTETS: &str = "application/octet-stream";

pub(crate) async fn run(ctx: &Ctx, rec: &mut Recorder<'_>) {
    rec.record(
        "push.blob.post-put",
        P,
        "POST uploads/ → 202 + Location; PUT <location>?digest= → 201 + Location; blob readable",
        post_put(ctx).await,
    );
    rec.record(
        "push.blob.single-post",
        P,
        "POST uploads/?digest= with the blob → 201 (or 202 and the PUT fallback works)",
        single_post(ctx).await,
    );
    rec.record(
        "push.blob.chunked",
        P,
        "POST, PATCH chunks with Content-Range (202, Location, Range 0-<end>), closing PUT → 201",
        chunked(ctx).await,
    );
    rec.record(
        "push.blob.chunk-out-of-order",
        P,
        "a PATCH whose range does not continue the upload: 416",
        out_of_order(ctx).await,
    );
    rec.record(
        "push.blob.upload-status",
        P,
        "GET <location>: 204 with Location and Range 0-<end>",
        upload_status(ctx).await,
    );
    rec.record(
        "push.blob.digest-mismatch",
        P,
        "closing PUT with the wrong digest: 400 with DIGEST_INVALID",
        digest_mismatch(ctx).await,
    );
    rec.record(
        "push.blob.mount",
        P,
        "POST uploads/?mount=&from= of an existing blob: 201 + Location; readable in the target",
        mount(ctx).await,
    );
    rec.record(
        "push.blob.mount-missing",
        P,
        "mounting a blob that does not exist: 202 (an upload session starts)",
        mount_missing(ctx).await,
    );
    rec.record(
        "push.manifest.put-tag",
        P,
        "PUT manifest by tag: 201, Location, Docker-Content-Digest of the exact bytes; GET returns them",
        manifest_put(ctx, "pushed").await,
    );
    rec.record(
        "push.manifest.put-digest",
        P,
        "PUT manifest by digest: 201",
        manifest_put_digest(ctx).await,
    );
    rec.record(
        "push.manifest.missing-blob",
        P,
        "a manifest referencing an absent blob: accepted, or refused with MANIFEST_BLOB_UNKNOWN",
        manifest_missing_blob(ctx).await,
    );
    rec.record(
        "push.manifest.subject-header",
        P,
        "PUT of a manifest with `subject` on a registry with referrers: OCI-Subject header",
        subject_header(ctx).await,
    );
}

fn location(answer: &Answer) -> Result<String, String> {
    answer
        .header(LOCATION.as_str())
        .map(str::to_owned)
        .ok_or_else(|| format!("{}: no Location header", answer.line()))
}

async fn start(ctx: &Ctx, repo: &str) -> Result<String, String> {
    let answer = call(
        ctx,
        Method::POST,
        &format!("/v2/{repo}/blobs/uploads/"),
        &[(CONTENT_LENGTH, "0")],
        None,
        Scope::push(repo),
    )
    .await?;
    answer.expect(&[202])?;
    location(&answer)
}

fn with_digest(location: &str, digest: &oci::Digest) -> String {
    let sep = if location.contains('?') { '&' } else { '?' };
    format!("{location}{sep}digest={digest}")
}

fn blob(seed: &str, len: usize) -> (Bytes, oci::Digest) {
    let mut state = seed.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ b as u64).wrapping_mul(0x100_0000_01b3)
    });
    let bytes: Vec<u8> = (0..len)
        .map(|_| {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1);
            (state >> 33) as u8
        })
        .collect();
    let digest = oci::Digest::sha256(&bytes);
    (Bytes::from(bytes), digest)
}

async fn readable(
    ctx: &Ctx,
    repo: &str,
    bytes: &Bytes,
    digest: &oci::Digest,
) -> Result<(), String> {
    let answer = read(ctx, Method::GET, repo, &format!("blobs/{digest}"), &[]).await?;
    answer.expect(&[200])?;
    ensure!(
        answer.body == bytes,
        "{}: the stored bytes differ",
        answer.line()
    );
    Ok(())
}

async fn put_blob(
    ctx: &Ctx,
    location: &str,
    digest: &oci::Digest,
    bytes: Bytes,
) -> Result<Answer, String> {
    let len = bytes.len().to_string();
    call_location(
        ctx,
        Method::PUT,
        &with_digest(location, digest),
        &[(CONTENT_TYPE, OCTETS), (CONTENT_LENGTH, len.as_str())],
        Some(bytes),
    )
    .await
}

async fn post_put(ctx: &Ctx) -> Result<(), String> {
    let (bytes, digest) = blob("post-put", 5000);
    let location = start(ctx, &ctx.repo).await?;
    let answer = put_blob(ctx, &location, &digest, bytes.clone()).await?;
    answer.expect(&[201])?;
    location_of(&answer)?;
    readable(ctx, &ctx.repo, &bytes, &digest).await
}

fn location_of(answer: &Answer) -> Result<(), String> {
    location(answer).map(drop)
}

async fn single_post(ctx: &Ctx) -> Result<(), String> {
    let (bytes, digest) = blob("single-post", 3000);
    let len = bytes.len().to_string();
    let answer = call(
        ctx,
        Method::POST,
        &format!("/v2/{}/blobs/uploads/?digest={digest}", ctx.repo),
        &[(CONTENT_TYPE, OCTETS), (CONTENT_LENGTH, len.as_str())],
        Some(bytes.clone()),
        Scope::push(&ctx.repo),
    )
    .await?;
    match answer.status.as_u16() {
        201 => location_of(&answer)?,
        202 => {
            let location = location(&answer)?;
            put_blob(ctx, &location, &digest, bytes.clone())
                .await?
                .expect(&[201])?;
        }
        _ => answer.expect(&[201, 202])?,
    }
    readable(ctx, &ctx.repo, &bytes, &digest).await
}

async fn patch(ctx: &Ctx, location: &str, start: u64, chunk: Bytes) -> Result<Answer, String> {
    let end = start + chunk.len() as u64 - 1;
    let range = format!("{start}-{end}");
    let len = chunk.len().to_string();
    let headers: [(HeaderName, &str); 3] = [
        (CONTENT_TYPE, OCTETS),
        (CONTENT_RANGE, range.as_str()),
        (CONTENT_LENGTH, len.as_str()),
    ];
    call_location(ctx, Method::PATCH, location, &headers, Some(chunk)).await
}

fn expect_range(answer: &Answer, end: u64) -> Result<(), String> {
    let expected = format!("0-{end}");
    let range = answer.header("range");
    ensure!(
        range == Some(expected.as_str()),
        "{}: Range {range:?}, expected {expected}",
        answer.line()
    );
    Ok(())
}

async fn chunked(ctx: &Ctx) -> Result<(), String> {
    let (bytes, digest) = blob("chunked", 12_000);
    let mut location = start(ctx, &ctx.repo).await?;
    let mut offset = 0u64;
    for chunk in [bytes.slice(..5000), bytes.slice(5000..10_000)] {
        let len = chunk.len() as u64;
        let answer = patch(ctx, &location, offset, chunk).await?;
        answer.expect(&[202])?;
        location = self::location(&answer)?;
        offset += len;
        expect_range(&answer, offset - 1)?;
    }
    let answer = put_blob(ctx, &location, &digest, bytes.slice(10_000..)).await?;
    answer.expect(&[201])?;
    location_of(&answer)?;
    readable(ctx, &ctx.repo, &bytes, &digest).await
}

async fn out_of_order(ctx: &Ctx) -> Result<(), String> {
    let (bytes, _) = blob("out-of-order", 2000);
    let location = start(ctx, &ctx.repo).await?;
    let answer = patch(ctx, &location, 0, bytes.slice(..1000)).await?;
    answer.expect(&[202])?;
    let location = self::location(&answer)?;
    // Skips bytes 1000..1500.
    let answer = patch(ctx, &location, 1500, bytes.slice(1500..)).await?;
    answer.expect(&[416])
}

async fn upload_status(ctx: &Ctx) -> Result<(), String> {
    let (bytes, _) = blob("status", 1500);
    let location = start(ctx, &ctx.repo).await?;
    let answer = patch(ctx, &location, 0, bytes).await?;
    answer.expect(&[202])?;
    let location = self::location(&answer)?;
    let answer = call_location(ctx, Method::GET, &location, &[], None).await?;
    answer.expect(&[204])?;
    location_of(&answer)?;
    expect_range(&answer, 1499)
}

async fn digest_mismatch(ctx: &Ctx) -> Result<(), String> {
    let (bytes, _) = blob("mismatch", 1000);
    let wrong = oci::Digest::sha256(b"something else");
    let location = start(ctx, &ctx.repo).await?;
    let answer = put_blob(ctx, &location, &wrong, bytes).await?;
    answer.expect(&[400])?;
    answer.expect_code(ErrorCode::DigestInvalid)
}

async fn mount(ctx: &Ctx) -> Result<(), String> {
    let layer = &ctx.fixtures.layer;
    let answer = call(
        ctx,
        Method::POST,
        &format!(
            "/v2/{}/blobs/uploads/?mount={}&from={}",
            ctx.other, layer.digest, ctx.repo
        ),
        &[(CONTENT_LENGTH, "0")],
        None,
        Scope::push(&ctx.other).and(Scope::pull(&ctx.repo)),
    )
    .await?;
    answer.expect(&[201])?;
    location_of(&answer)?;
    readable(ctx, &ctx.other, &layer.bytes, &layer.digest).await
}

async fn mount_missing(ctx: &Ctx) -> Result<(), String> {
    let missing = oci::Digest::sha256(b"never pushed");
    let answer = call(
        ctx,
        Method::POST,
        &format!(
            "/v2/{}/blobs/uploads/?mount={missing}&from={}",
            ctx.other, ctx.repo
        ),
        &[(CONTENT_LENGTH, "0")],
        None,
        Scope::push(&ctx.other).and(Scope::pull(&ctx.repo)),
    )
    .await?;
    answer.expect(&[202])?;
    location_of(&answer)
}

async fn put_manifest(
    ctx: &Ctx,
    reference: &str,
    doc: &crate::fixtures::Doc,
) -> Result<Answer, String> {
    call(
        ctx,
        Method::PUT,
        &format!("/v2/{}/manifests/{reference}", ctx.repo),
        &[(CONTENT_TYPE, doc.media_type)],
        Some(doc.blob.bytes.clone()),
        Scope::push(&ctx.repo),
    )
    .await
}

async fn manifest_put(ctx: &Ctx, tag: &str) -> Result<(), String> {
    let doc = &ctx.fixtures.docker_manifest;
    let answer = put_manifest(ctx, tag, doc).await?;
    answer.expect(&[201])?;
    location_of(&answer)?;
    let expected = doc.digest().to_string();
    ensure!(
        answer.digest() == Some(expected.as_str()),
        "{}: Docker-Content-Digest {:?}, expected {expected}",
        answer.line(),
        answer.digest()
    );
    let answer = read(
        ctx,
        Method::GET,
        &ctx.repo,
        &format!("manifests/{tag}"),
        &[(http::header::ACCEPT, doc.media_type)],
    )
    .await?;
    answer.expect(&[200])?;
    ensure!(
        answer.body == doc.blob.bytes,
        "{}: not the bytes pushed",
        answer.line()
    );
    Ok(())
}

async fn manifest_put_digest(ctx: &Ctx) -> Result<(), String> {
    let doc = &ctx.fixtures.index;
    let answer = put_manifest(ctx, &doc.digest().to_string(), doc).await?;
    answer.expect(&[201])?;
    location_of(&answer)
}

async fn manifest_missing_blob(ctx: &Ctx) -> Result<(), String> {
    let missing = oci::Digest::sha256(b"absent layer");
    let config = &ctx.fixtures.config;
    let bytes = serde_json::to_vec(&serde_json::json!({
        "schemaVersion": 2,
        "mediaType": oci::media_type::OCI_MANIFEST,
        "config": {"mediaType": oci::media_type::OCI_CONFIG, "digest": config.digest.to_string(), "size": config.size()},
        "layers": [{"mediaType": oci::media_type::OCI_LAYER_TAR, "digest": missing.to_string(), "size": 12}],
    }))
    .unwrap_or_default();
    let answer = call(
        ctx,
        Method::PUT,
        &format!("/v2/{}/manifests/missing-blob", ctx.repo),
        &[(CONTENT_TYPE, oci::media_type::OCI_MANIFEST)],
        Some(Bytes::from(bytes)),
        Scope::push(&ctx.repo),
    )
    .await?;
    if answer.status.as_u16() == 201 {
        return Ok(());
    }
    ensure!(
        answer.status.is_client_error(),
        "{} (expected 201 or a 4xx)",
        answer.line()
    );
    answer.expect_code(ErrorCode::ManifestBlobUnknown)
}

async fn subject_header(ctx: &Ctx) -> Result<(), String> {
    let doc = &ctx.fixtures.artifact;
    let answer = put_manifest(ctx, &doc.digest().to_string(), doc).await?;
    answer.expect(&[201])?;
    let subject = ctx.fixtures.manifest.digest().to_string();
    let header = answer.header(oci::header::OCI_SUBJECT);
    ensure!(
        header == Some(subject.as_str()),
        "{}: OCI-Subject {header:?}, expected {subject}",
        answer.line()
    );
    Ok(())
}
