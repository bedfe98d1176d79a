//! Hostile requests: what a well-behaved client never sends. Each must get a 4xx — with an OCI
//! error body where the spec defines a code for it (names, digests, references) — never a 5xx,
//! a hang or a dead endpoint; the last check reads the test content again.

use bytes::Bytes;
use http::{HeaderName, Method};
use oci::ErrorCode;

use super::{Answer, call, ensure, read};
use crate::{Ctx, Profile, Recorder};

const P: Profile = Profile::Hostile;

/// A header value above our head limit (16 KiB) and below what HTTP/2 clients refuse to send
/// (our servers advertise 256 KiB); Go's limit is 1 MiB, so docker-registry may serve it.
const HUGE_HEADER: usize = 128 << 10;

pub(crate) async fn run(ctx: &Ctx, rec: &mut Recorder<'_>) {
    rec.record(
        "hostile.path-traversal",
        P,
        "`..` encoded into the repository: 4xx with NAME_INVALID or NAME_UNKNOWN",
        path_traversal(ctx).await,
    );
    rec.record(
        "hostile.name.uppercase",
        P,
        "an uppercase repository component: 4xx with NAME_INVALID or NAME_UNKNOWN",
        named(ctx, &format!("{}/UPPER", ctx.repo)).await,
    );
    rec.record(
        "hostile.name.too-long",
        P,
        "a 400-character repository name: 4xx with NAME_INVALID or NAME_UNKNOWN",
        named(ctx, &format!("{}/{}", ctx.repo, "a".repeat(400))).await,
    );
    rec.record(
        "hostile.digest.malformed",
        P,
        "blobs/sha256:<not hex>: 4xx with DIGEST_INVALID or BLOB_UNKNOWN",
        coded(
            ctx,
            "blobs/sha256:zz",
            &[ErrorCode::DigestInvalid, ErrorCode::BlobUnknown],
        )
        .await,
    );
    rec.record(
        "hostile.digest.unknown-algorithm",
        P,
        "blobs/md5:<hex>: 4xx with DIGEST_INVALID, UNSUPPORTED or BLOB_UNKNOWN",
        coded(
            ctx,
            "blobs/md5:d41d8cd98f00b204e9800998ecf8427e",
            &[
                ErrorCode::DigestInvalid,
                ErrorCode::Unsupported,
                ErrorCode::BlobUnknown,
            ],
        )
        .await,
    );
    rec.record(
        "hostile.reference.malformed",
        P,
        "manifests/<not a tag or digest>: 4xx with MANIFEST_INVALID, MANIFEST_UNKNOWN, \
         DIGEST_INVALID or NAME_INVALID",
        coded(ctx, "manifests/-not.a:tag", REFERENCE_CODES).await,
    );
    rec.record(
        "hostile.reference.too-long",
        P,
        "a 200-character tag (the grammar allows 128): 4xx with an OCI error code",
        coded(
            ctx,
            &format!("manifests/{}", "t".repeat(200)),
            REFERENCE_CODES,
        )
        .await,
    );
    rec.record(
        "hostile.header.huge",
        P,
        "a 128 KiB request header: answered below 500 (431 where heads are limited), never a \
         5xx or a dropped connection",
        huge_header(ctx).await,
    );
    rec.record(
        "hostile.method.unserved",
        P,
        "PATCH of a manifest and TRACE of the base: 4xx",
        unserved_methods(ctx).await,
    );
    rec.record(
        "hostile.endpoint.alive",
        P,
        "after all of the above, the test content is still served",
        alive(ctx).await,
    );
}

const NAME_CODES: &[ErrorCode] = &[ErrorCode::NameInvalid, ErrorCode::NameUnknown];

const REFERENCE_CODES: &[ErrorCode] = &[
    ErrorCode::ManifestInvalid,
    ErrorCode::ManifestUnknown,
    ErrorCode::DigestInvalid,
    ErrorCode::NameInvalid,
    ErrorCode::TagInvalid,
];

/// A 4xx, whole, whose OCI error body carries one of `codes` (none: any OCI error body) — or
/// refuses the request's credentials first (a token covers the names a client asked it for).
fn refused(answer: &Answer, codes: &[ErrorCode]) -> Result<(), String> {
    ensure!(
        answer.status.is_client_error(),
        "{} (expected a 4xx)",
        answer.line()
    );
    answer.well_formed()?;
    if codes.is_empty() {
        return oci::ErrorBody::parse(&answer.body)
            .map(|_| ())
            .map_err(|e| format!("{}: not an OCI error body: {e}", answer.line()));
    }
    let mut observed = Vec::new();
    let auth = [ErrorCode::Unauthorized, ErrorCode::Denied];
    for code in codes.iter().chain(&auth) {
        match answer.expect_code(*code) {
            Ok(()) => return Ok(()),
            Err(e) => observed.push(e),
        }
    }
    Err(observed.swap_remove(0))
}

/// The 4xx part only: no body required (methods and header limits have no OCI code).
fn client_error(answer: &Answer) -> Result<(), String> {
    ensure!(
        answer.status.is_client_error(),
        "{} (expected a 4xx)",
        answer.line()
    );
    Ok(())
}

async fn get(ctx: &Ctx, path: &str, headers: &[(HeaderName, &str)]) -> Result<Answer, String> {
    call(
        ctx,
        Method::GET,
        path,
        headers,
        None,
        registry_client::Scope::pull(&ctx.repo),
    )
    .await
}

async fn path_traversal(ctx: &Ctx) -> Result<(), String> {
    // Encoded slashes: plain `..` segments are resolved by the client's URL parser already.
    let path = format!(
        "/v2/{}/..%2F..%2F..%2Fetc%2Fpasswd/manifests/latest",
        ctx.repo
    );
    let answer = get(ctx, &path, &[]).await?;
    refused(&answer, NAME_CODES)
}

async fn named(ctx: &Ctx, repository: &str) -> Result<(), String> {
    let answer = get(ctx, &format!("/v2/{repository}/manifests/latest"), &[]).await?;
    refused(&answer, NAME_CODES)
}

async fn coded(ctx: &Ctx, rest: &str, codes: &[ErrorCode]) -> Result<(), String> {
    let answer = read(ctx, Method::GET, &ctx.repo, rest, &[]).await?;
    refused(&answer, codes)
}

async fn huge_header(ctx: &Ctx) -> Result<(), String> {
    let value = "x".repeat(HUGE_HEADER);
    let name = HeaderName::from_static("x-conformance-padding");
    let answer = get(ctx, "/v2/", &[(name, &value)]).await?;
    ensure!(
        answer.status.as_u16() < 500,
        "{} (expected an answer below 500)",
        answer.line()
    );
    answer.well_formed()
}

async fn unserved_methods(ctx: &Ctx) -> Result<(), String> {
    let patch = call(
        ctx,
        Method::PATCH,
        &format!("/v2/{}/manifests/oci", ctx.repo),
        &[],
        Some(Bytes::from_static(b"{}")),
        registry_client::Scope::push(&ctx.repo),
    )
    .await?;
    client_error(&patch)?;
    let trace = call(
        ctx,
        Method::TRACE,
        "/v2/",
        &[],
        None,
        registry_client::Scope::pull(&ctx.repo),
    )
    .await?;
    client_error(&trace)
}

async fn alive(ctx: &Ctx) -> Result<(), String> {
    let accept = oci::media_type::OCI_MANIFEST;
    let answer = read(
        ctx,
        Method::GET,
        &ctx.repo,
        "manifests/oci",
        &[(http::header::ACCEPT, accept)],
    )
    .await?;
    answer.expect(&[200])?;
    ensure!(
        answer.body == ctx.fixtures.manifest.blob.bytes,
        "{}: another manifest than the one pushed",
        answer.line()
    );
    Ok(())
}
