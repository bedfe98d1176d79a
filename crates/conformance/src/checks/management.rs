//! Content management: deleting tags, manifests, blobs and upload sessions.

use bytes::Bytes;
use http::Method;
use http::header::{CONTENT_LENGTH, CONTENT_TYPE};
use oci::ErrorCode;
use registry_client::{RequestBody, Scope};

use super::{call, call_location, ensure, read};
use crate::{Ctx, Profile, Recorder};

const P: Profile = Profile::Management;

pub(crate) async fn run(ctx: &Ctx, rec: &mut Recorder<'_>) {
    rec.record(
        "management.delete.tag",
        P,
        "DELETE manifests/<tag>: 202 (then 404), or 400/405 when tag deletion is disabled",
        delete_tag(ctx).await,
    );
    rec.record(
        "management.delete.manifest",
        P,
        "DELETE manifests/<digest>: 202, then GET by digest and by its tag answer 404",
        delete_manifest(ctx).await,
    );
    rec.record(
        "management.delete.blob",
        P,
        "DELETE blobs/<digest>: 202, then HEAD answers 404",
        delete_blob(ctx).await,
    );
    rec.record(
        "management.delete.blob-unknown",
        P,
        "DELETE of an unknown blob: 404 with BLOB_UNKNOWN",
        delete_unknown_blob(ctx).await,
    );
    rec.record(
        "management.delete.upload",
        P,
        "DELETE <upload location>: 204, then the session is unknown (404)",
        cancel_upload(ctx).await,
    );
}

/// A manifest of its own (distinct bytes, so deleting it touches nothing else), tagged `tag`.
async fn own_manifest(ctx: &Ctx, tag: &str) -> Result<oci::Digest, String> {
    let f = &ctx.fixtures;
    let bytes = serde_json::to_vec(&serde_json::json!({
        "schemaVersion": 2,
        "mediaType": oci::media_type::OCI_MANIFEST,
        "config": {"mediaType": oci::media_type::OCI_CONFIG, "digest": f.config.digest.to_string(), "size": f.config.size()},
        "layers": [{"mediaType": oci::media_type::OCI_LAYER_TAR, "digest": f.layer.digest.to_string(), "size": f.layer.size()}],
        "annotations": {"d8.conformance/purpose": tag},
    }))
    .unwrap_or_default();
    ctx.remote
        .put_manifest(
            &ctx.repo,
            tag,
            oci::media_type::OCI_MANIFEST,
            Bytes::from(bytes),
        )
        .await
        .map_err(|e| format!("setup: PUT manifest {tag}: {e}"))
}

async fn delete(ctx: &Ctx, rest: &str) -> Result<super::Answer, String> {
    call(
        ctx,
        Method::DELETE,
        &format!("/v2/{}/{rest}", ctx.repo),
        &[],
        None,
        Scope::delete(&ctx.repo),
    )
    .await
}

async fn delete_tag(ctx: &Ctx) -> Result<(), String> {
    own_manifest(ctx, "delete-tag").await?;
    let answer = delete(ctx, "manifests/delete-tag").await?;
    match answer.status.as_u16() {
        202 => {
            let after = read(ctx, Method::GET, &ctx.repo, "manifests/delete-tag", &[]).await?;
            after.expect(&[404])
        }
        400 | 405 => Ok(()),
        _ => answer.expect(&[202, 400, 405]),
    }
}

async fn delete_manifest(ctx: &Ctx) -> Result<(), String> {
    let digest = own_manifest(ctx, "delete-manifest").await?;
    let answer = delete(ctx, &format!("manifests/{digest}")).await?;
    answer.expect(&[202])?;
    let accept = [(http::header::ACCEPT, oci::media_type::OCI_MANIFEST)];
    let by_digest = read(
        ctx,
        Method::GET,
        &ctx.repo,
        &format!("manifests/{digest}"),
        &accept,
    )
    .await?;
    by_digest.expect(&[404])?;
    let by_tag = read(
        ctx,
        Method::GET,
        &ctx.repo,
        "manifests/delete-manifest",
        &accept,
    )
    .await?;
    ensure!(
        by_tag.status.as_u16() == 404,
        "{} (the tag still points at the deleted manifest)",
        by_tag.line()
    );
    Ok(())
}

async fn delete_blob(ctx: &Ctx) -> Result<(), String> {
    let bytes = Bytes::from_static(b"a blob to delete");
    let digest = oci::Digest::sha256(&bytes);
    ctx.remote
        .push_blob(&ctx.repo, &digest, RequestBody::Bytes(bytes))
        .await
        .map_err(|e| format!("setup: push blob: {e}"))?;
    let answer = delete(ctx, &format!("blobs/{digest}")).await?;
    answer.expect(&[202])?;
    let after = read(
        ctx,
        Method::HEAD,
        &ctx.repo,
        &format!("blobs/{digest}"),
        &[],
    )
    .await?;
    after.expect(&[404])
}

async fn delete_unknown_blob(ctx: &Ctx) -> Result<(), String> {
    let digest = oci::Digest::sha256(b"never existed");
    let answer = delete(ctx, &format!("blobs/{digest}")).await?;
    answer.expect(&[404])?;
    answer.expect_code(ErrorCode::BlobUnknown)
}

async fn cancel_upload(ctx: &Ctx) -> Result<(), String> {
    let answer = call(
        ctx,
        Method::POST,
        &format!("/v2/{}/blobs/uploads/", ctx.repo),
        &[(CONTENT_LENGTH, "0")],
        None,
        Scope::push(&ctx.repo),
    )
    .await?;
    answer.expect(&[202])?;
    let location = answer
        .header("location")
        .ok_or_else(|| format!("{}: no Location", answer.line()))?
        .to_owned();
    let answer = call_location(ctx, Method::DELETE, &location, &[], None).await?;
    answer.expect(&[204])?;
    let after = call_location(
        ctx,
        Method::PUT,
        &format!(
            "{location}{}digest={}",
            if location.contains('?') { '&' } else { '?' },
            oci::Digest::sha256(b"")
        ),
        &[
            (CONTENT_TYPE, "application/octet-stream"),
            (CONTENT_LENGTH, "0"),
        ],
        None,
    )
    .await?;
    after.expect(&[404])?;
    after.expect_code(ErrorCode::BlobUploadUnknown)
}
