use std::os::unix::fs::PermissionsExt as _;

use super::*;

const DAY: Duration = Duration::from_secs(86_400);

fn at(days: u64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000) + DAY * days as u32
}

#[test]
fn renewal_follows_expiry_and_names() {
    let names = vec!["127.0.0.1".to_string(), "localhost".to_string()];
    let cert = |expires: u64, names: &[&str]| Found {
        not_after: at(expires),
        names: names.iter().map(|n| n.to_string()).collect(),
    };
    let ok_ca = cert(3000, &[]);
    let both = ["localhost", "127.0.0.1"];
    let table: Vec<(Option<Found>, Option<Found>, Renewal)> = vec![
        (None, None, Renewal::All),
        (None, Some(cert(300, &both)), Renewal::All),
        // A CA within a year of its end is renewed, and the serving certificate with it.
        (Some(cert(364, &[])), Some(cert(300, &both)), Renewal::All),
        (Some(cert(10, &[])), Some(cert(300, &both)), Renewal::All),
        (Some(ok_ca.clone()), None, Renewal::Serving),
        (Some(ok_ca.clone()), Some(cert(300, &both)), Renewal::Keep),
        (Some(ok_ca.clone()), Some(cert(31, &both)), Renewal::Keep),
        (Some(ok_ca.clone()), Some(cert(29, &both)), Renewal::Serving),
        // Expired already.
        (Some(ok_ca.clone()), Some(cert(0, &both)), Renewal::Serving),
        // Other names.
        (
            Some(ok_ca.clone()),
            Some(cert(300, &["localhost"])),
            Renewal::Serving,
        ),
        (
            Some(ok_ca.clone()),
            Some(cert(300, &["localhost", "127.0.0.1", "::1"])),
            Renewal::Serving,
        ),
    ];
    for (ca, serving, want) in table {
        assert_eq!(
            plan(ca.as_ref(), serving.as_ref(), &names, at(1)),
            want,
            "{ca:?} {serving:?}"
        );
    }
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

#[test]
fn certificates_are_made_private_kept_and_renewed_before_expiry() {
    let dir = tempfile::tempdir().unwrap();
    let pki = dir.path().join("webhook");
    let names = vec!["127.0.0.1".to_string()];
    let now = SystemTime::now();
    let first = ensure(&pki, &names, now).unwrap();
    assert_eq!(first.renewal, Renewal::All);
    assert_eq!(mode(&pki), 0o700);
    for file in [CA_CERT, CA_KEY, TLS_CERT, TLS_KEY] {
        assert_eq!(mode(&pki.join(file)), 0o600, "{file}");
    }
    // The pair loads as the server loads it.
    crate::CertificateFiles::load(&first.cert_file, &first.key_file).unwrap();
    let serving = found(&std::fs::read(&first.cert_file).unwrap()).unwrap();
    assert_eq!(serving.names, names);

    // A restart keeps them.
    let again = ensure(&pki, &names, now).unwrap();
    assert_eq!(again.renewal, Renewal::Keep);
    assert_eq!(again.ca_pem, first.ca_pem);

    // Near the serving certificate's end: a new one from the same CA.
    let late = now + SERVING_VALIDITY - DAY * 10;
    let renewed = ensure(&pki, &names, late).unwrap();
    assert_eq!(renewed.renewal, Renewal::Serving);
    assert_eq!(renewed.ca_pem, first.ca_pem);
    assert!(
        found(&std::fs::read(&renewed.cert_file).unwrap())
            .unwrap()
            .not_after
            > serving.not_after
    );

    // Near the CA's end: everything new.
    let later = now + CA_VALIDITY - DAY * 100;
    let all = ensure(&pki, &names, later).unwrap();
    assert_eq!(all.renewal, Renewal::All);
    assert_ne!(all.ca_pem, first.ca_pem);

    // A damaged key is replaced rather than served.
    std::fs::write(pki.join(CA_KEY), "not a key").unwrap();
    assert_eq!(ensure(&pki, &names, later).unwrap().renewal, Renewal::All);
}
