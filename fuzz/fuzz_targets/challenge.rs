//! The `WWW-Authenticate` parser and token-URL builder: never panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(s) = std::str::from_utf8(data) else { return };
    if let Ok(challenges) = oci::challenge::parse_challenges(s) {
        assert!(!challenges.is_empty());
        for c in &challenges {
            if let Some(realm) = c.realm() {
                let _ = oci::challenge::token_url(realm, c.service(), &c.scopes());
            }
        }
    }
    let _ = oci::challenge::TokenResponse::parse(data);
    let _ = oci::ErrorBody::parse(data);
    let _ = oci::range::evaluate(Some(s), 1 << 20);
    let _ = oci::range::ContentRange::parse(s);
    let _ = oci::AcceptList::parse(s.lines()).allows("application/vnd.oci.image.manifest.v1+json");
});
