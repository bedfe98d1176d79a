//! The image-reference parser: never panics; canonical and familiar forms parse back to the
//! same reference.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(s) = std::str::from_utf8(data) else { return };
    if let Ok(r) = oci::Reference::parse(s) {
        let canonical = r.to_string();
        assert_eq!(oci::Reference::parse(&canonical).as_ref(), Ok(&r), "canonical {canonical:?}");
        let familiar = r.familiar();
        assert_eq!(oci::Reference::parse(&familiar).as_ref(), Ok(&r), "familiar {familiar:?}");
    }
    let _ = oci::Digest::parse(s);
    let _ = oci::RegistryHost::parse(s);
});
