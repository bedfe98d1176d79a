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
    // The key is the certificate's own.
    let key = KeyPair::from_pem(&std::fs::read_to_string(&first.key_file).unwrap()).unwrap();
    assert_eq!(
        public_key(&std::fs::read(&first.cert_file).unwrap()).unwrap(),
        key.public_key_raw()
    );
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

const CLIENT: Profile<'static> = Profile {
    ca: "registry-storage-ingress-client-ca",
    leaf: Leaf::Client("registry-storage-ingress-client"),
};

/// The first certificate of `pem`, parsed.
fn parsed(pem: &str, check: impl FnOnce(&x509_parser::certificate::X509Certificate<'_>)) {
    let (_, pem) = x509_parser::pem::parse_x509_pem(pem.as_bytes()).unwrap();
    check(&pem.parse_x509().unwrap());
}

#[test]
fn a_client_certificate_is_issued_kept_and_renewed_from_its_own_ca() {
    let now = SystemTime::now();
    // Issued: nothing yet.
    let (first, renewal) = renew_for(&Pems::default(), &CLIENT, now).unwrap();
    assert_eq!(renewal, Renewal::All);
    parsed(&first.ca_crt, |ca| {
        assert!(ca.is_ca());
        assert_eq!(
            ca.subject().to_string(),
            "CN=registry-storage-ingress-client-ca"
        );
    });
    parsed(&first.tls_crt, |leaf| {
        assert_eq!(
            leaf.subject().to_string(),
            "CN=registry-storage-ingress-client"
        );
        assert_eq!(
            leaf.issuer().to_string(),
            "CN=registry-storage-ingress-client-ca"
        );
        let usage = leaf.extended_key_usage().unwrap().unwrap().value;
        assert!(usage.client_auth && !usage.server_auth);
        assert!(leaf.subject_alternative_name().unwrap().is_none());
    });
    // The file holds the client certificate alone.
    assert_eq!(first.tls_crt.matches("BEGIN CERTIFICATE").count(), 1);

    // Kept while in order.
    let (kept, renewal) = renew_for(&first, &CLIENT, now + DAY * 300).unwrap();
    assert_eq!(renewal, Renewal::Keep);
    assert_eq!(kept, first);

    // Within 30 days of its end: a new client certificate from the same CA.
    let late = now + SERVING_VALIDITY - DAY * 20;
    let (renewed, renewal) = renew_for(&first, &CLIENT, late).unwrap();
    assert_eq!(renewal, Renewal::Serving);
    assert_eq!(
        (&renewed.ca_crt, &renewed.ca_key),
        (&first.ca_crt, &first.ca_key)
    );
    assert_ne!(renewed.tls_crt, first.tls_crt);

    // Within a year of the CA's end: a new CA and certificate.
    let (all, renewal) = renew_for(&renewed, &CLIENT, now + CA_VALIDITY - DAY * 100).unwrap();
    assert_eq!(renewal, Renewal::All);
    assert_ne!(all.ca_crt, first.ca_crt);

    // Made by hand without the CA's key (the operator's openssl): replaced, CA and all.
    let by_hand = Pems {
        ca_key: String::new(),
        ..first.clone()
    };
    assert_eq!(renew_for(&by_hand, &CLIENT, now).unwrap().1, Renewal::All);
    // A key that is not the certificate's: a new certificate.
    let swapped = Pems {
        tls_key: renewed.tls_key.clone(),
        ..first.clone()
    };
    assert_eq!(
        renew_for(&swapped, &CLIENT, now).unwrap().1,
        Renewal::Serving
    );
    // A serving certificate of the same CA (it names hosts): a client certificate instead.
    let names = vec!["registry.example.com".to_owned()];
    let (serving, _) = renew_for(
        &Pems {
            tls_crt: String::new(),
            ..first.clone()
        },
        &Profile {
            ca: CLIENT.ca,
            leaf: Leaf::Serving(&names),
        },
        now,
    )
    .unwrap();
    assert_eq!(
        renew_for(&serving, &CLIENT, now).unwrap().1,
        Renewal::Serving
    );
}
