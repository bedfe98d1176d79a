//! Names and fixed values of the HTTP headers the distribution protocol uses.

/// Sent on every `/v2/` answer.
pub const API_VERSION: &str = "Docker-Distribution-Api-Version";
/// The value of [`API_VERSION`].
pub const API_VERSION_VALUE: &str = "registry/2.0";
/// The digest of the manifest or blob in the answer.
pub const CONTENT_DIGEST: &str = "Docker-Content-Digest";
/// The upload session id.
pub const UPLOAD_UUID: &str = "Docker-Upload-UUID";
/// Set on a manifest PUT answer when the registry processed the manifest's `subject`.
pub const OCI_SUBJECT: &str = "OCI-Subject";
/// Set on a referrers answer that applied an `artifactType` filter.
pub const OCI_FILTERS_APPLIED: &str = "OCI-Filters-Applied";
