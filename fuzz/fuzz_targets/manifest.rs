//! The manifest parser: never panics, keeps the bytes, and the digest is theirs.
#![no_main]

use libfuzzer_sys::fuzz_target;

const CONTENT_TYPES: [Option<&str>; 6] = [
    None,
    Some("application/json"),
    Some(oci::media_type::OCI_MANIFEST),
    Some(oci::media_type::OCI_INDEX),
    Some(oci::media_type::DOCKER_MANIFEST),
    Some(oci::media_type::DOCKER_MANIFEST_LIST),
];

fuzz_target!(|data: &[u8]| {
    let Some((&mode, bytes)) = data.split_first() else { return };
    let content_type = CONTENT_TYPES[usize::from(mode) % CONTENT_TYPES.len()];
    if let Ok(m) = oci::Manifest::parse(bytes.to_vec(), content_type) {
        assert_eq!(m.bytes(), bytes);
        assert_eq!(m.digest(), oci::Digest::sha256(bytes));
        assert_eq!(m.media_type().is_index(), m.as_index().is_some());
        let _ = m.referrer_descriptor();
    }
});
