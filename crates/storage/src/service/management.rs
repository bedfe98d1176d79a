//! The management stage of the write listener: deleting a manifest by digest or a tag.

use http::{HeaderMap, Response, StatusCode};
use oci::{ErrorCode, ManifestReference, Repository};

use super::respond::{error_response, from_error, respond};
use super::{Listener, blocking};
use crate::body::{self, ResponseBody};

impl Listener {
    /// `DELETE /v2/<name>/manifests/<reference>`: 202, or 404 when nothing was there.
    pub(super) async fn delete_manifest(
        &self,
        repository: Repository,
        reference: ManifestReference,
    ) -> Response<ResponseBody> {
        let store = self.registry.store().clone();
        let result = blocking(move || match &reference {
            ManifestReference::Digest(d) => store.delete_manifest(&repository, d),
            ManifestReference::Tag(t) => store.delete_tag(&repository, t),
        })
        .await;
        match result {
            Ok(true) => respond(StatusCode::ACCEPTED, HeaderMap::new(), body::empty()),
            Ok(false) => error_response(404, ErrorCode::ManifestUnknown, "manifest unknown"),
            Err(e) => from_error(&e),
        }
    }
}
