use super::*;
use crate::media_type::*;
use proptest::prelude::*;

fn d(n: u8) -> String {
    Digest::sha256(&[n]).to_string()
}

fn oci_manifest(media_type_field: bool) -> String {
    let mt = if media_type_field {
        format!(r#""mediaType": "{OCI_MANIFEST}","#)
    } else {
        String::new()
    };
    // Odd spacing and key order on purpose: the bytes must survive untouched.
    format!(
        r#"{{ "schemaVersion":2, {mt}
  "layers":[{{"mediaType":"{OCI_LAYER_TAR_GZIP}","size":312,"digest":"{}"}},
            {{"mediaType":"{OCI_LAYER_TAR_ZSTD}","digest":"{}","size":0,"urls":["https://x/y"]}}],
  "config":{{"mediaType":"{OCI_CONFIG}","digest":"{}","size":313}},
  "annotations":{{"org.opencontainers.image.created":"2024-01-01T00:00:00Z"}},
  "unknownField": {{"ignored": [1,2,3]}} }}"#,
        d(1),
        d(2),
        d(0)
    )
}

fn oci_index(media_type_field: bool) -> String {
    let mt = if media_type_field {
        format!(r#""mediaType":"{OCI_INDEX}","#)
    } else {
        String::new()
    };
    format!(
        r#"{{"schemaVersion":2,{mt}"manifests":[
 {{"mediaType":"{OCI_MANIFEST}","digest":"{}","size":401,"platform":{{"architecture":"amd64","os":"linux"}}}},
 {{"mediaType":"{OCI_MANIFEST}","digest":"{}","size":402,
   "platform":{{"architecture":"arm64","os":"linux","variant":"v8","os.version":"1","os.features":["f"]}},
   "annotations":{{"org.opencontainers.image.ref.name":"v1"}}}}]}}"#,
        d(3),
        d(4)
    )
}

fn parse(s: &str, ct: Option<&str>) -> Result<Manifest, ManifestError> {
    Manifest::parse(s.as_bytes().to_vec(), ct)
}

#[test]
fn oci_manifest_keeps_bytes_and_digest() {
    let text = oci_manifest(true);
    let m = parse(&text, Some(OCI_MANIFEST)).unwrap();
    assert_eq!(m.bytes(), text.as_bytes());
    assert_eq!(m.digest(), Digest::sha256(text.as_bytes()));
    assert_eq!(m.size(), text.len() as u64);
    assert_eq!(m.media_type(), ManifestMediaType::OciManifest);
    let img = m.as_image().unwrap();
    assert_eq!(img.config.media_type, OCI_CONFIG);
    assert_eq!(img.config.size, 313);
    assert_eq!(img.layers.len(), 2);
    assert_eq!(img.layers[1].urls, ["https://x/y"]);
    assert!(m.as_index().is_none());
    assert_eq!(
        m.annotations()["org.opencontainers.image.created"],
        "2024-01-01T00:00:00Z"
    );
    let refs: Vec<String> = m
        .references()
        .iter()
        .map(|x| x.digest.to_string())
        .collect();
    assert_eq!(
        refs,
        [d(0), d(1), d(2)],
        "config first, then layers in order"
    );
    assert_eq!(m.clone().into_bytes(), text.as_bytes());
}

#[test]
fn media_type_from_shape_or_content_type() {
    let cases: &[(String, Option<&str>, ManifestMediaType)] = &[
        (oci_manifest(false), None, ManifestMediaType::OciManifest),
        (
            oci_manifest(false),
            Some("application/json"),
            ManifestMediaType::OciManifest,
        ),
        (
            oci_manifest(false),
            Some(DOCKER_MANIFEST),
            ManifestMediaType::DockerManifest,
        ),
        (oci_index(false), None, ManifestMediaType::OciIndex),
        (
            oci_index(false),
            Some("application/octet-stream"),
            ManifestMediaType::OciIndex,
        ),
        (
            oci_index(false),
            Some(DOCKER_MANIFEST_LIST),
            ManifestMediaType::DockerManifestList,
        ),
        (
            oci_index(true),
            Some("application/vnd.oci.image.index.v1+json; charset=utf-8"),
            ManifestMediaType::OciIndex,
        ),
    ];
    for (text, ct, want) in cases {
        assert_eq!(parse(text, *ct).unwrap().media_type(), *want, "{ct:?}");
    }
}

#[test]
fn index_entries_and_platforms() {
    let m = parse(&oci_index(true), None).unwrap();
    let idx = m.as_index().unwrap();
    assert_eq!(idx.manifests.len(), 2);
    let p = idx.manifests[1].platform.as_ref().unwrap();
    assert_eq!((p.architecture.as_str(), p.os.as_str()), ("arm64", "linux"));
    assert_eq!(p.variant.as_deref(), Some("v8"));
    assert_eq!(p.os_version.as_deref(), Some("1"));
    assert_eq!(p.os_features, ["f"]);
    assert_eq!(
        idx.manifests[1].annotations["org.opencontainers.image.ref.name"],
        "v1"
    );
    assert_eq!(m.references().len(), 2);
}

#[test]
fn docker_schema2_and_list() {
    let manifest = format!(
        r#"{{"schemaVersion":2,"mediaType":"{DOCKER_MANIFEST}","config":{{"mediaType":"{DOCKER_CONFIG}","size":7023,"digest":"{}"}},"layers":[{{"mediaType":"{DOCKER_LAYER_GZIP}","size":32654,"digest":"{}"}}]}}"#,
        d(5),
        d(6)
    );
    let m = parse(&manifest, Some("application/json")).unwrap();
    assert_eq!(m.media_type(), ManifestMediaType::DockerManifest);
    assert_eq!(
        m.as_image().unwrap().layers[0].media_type,
        DOCKER_LAYER_GZIP
    );
    let list = format!(
        r#"{{"schemaVersion":2,"mediaType":"{DOCKER_MANIFEST_LIST}","manifests":[{{"mediaType":"{DOCKER_MANIFEST}","size":7143,"digest":"{}","platform":{{"architecture":"ppc64le","os":"linux","features":["sse4"]}}}}]}}"#,
        d(7)
    );
    let l = parse(&list, None).unwrap();
    assert_eq!(l.media_type(), ManifestMediaType::DockerManifestList);
    assert_eq!(
        l.as_index().unwrap().manifests[0]
            .platform
            .as_ref()
            .unwrap()
            .features,
        ["sse4"]
    );
}

#[test]
fn subject_artifact_type_and_referrer_descriptor() {
    let artifact = format!(
        r#"{{"schemaVersion":2,"mediaType":"{OCI_MANIFEST}","artifactType":"application/vnd.example.sbom",
"config":{{"mediaType":"{OCI_EMPTY}","digest":"{}","size":2,"data":"e30="}},"layers":[],
"subject":{{"mediaType":"{OCI_MANIFEST}","digest":"{}","size":401}},
"annotations":{{"a":"b"}}}}"#,
        Digest::sha256(b"{}"),
        d(8)
    );
    let m = parse(&artifact, None).unwrap();
    assert_eq!(m.artifact_type(), Some("application/vnd.example.sbom"));
    assert_eq!(m.subject().unwrap().digest.to_string(), d(8));
    assert_eq!(m.as_image().unwrap().config.data.as_deref(), Some("e30="));
    let r = m.referrer_descriptor();
    assert_eq!(
        r.artifact_type.as_deref(),
        Some("application/vnd.example.sbom")
    );
    assert_eq!(r.annotations["a"], "b");
    assert_eq!((r.digest, r.size), (m.digest(), m.size()));
    assert_eq!(r.media_type, OCI_MANIFEST);

    // Without artifactType the config media type stands in.
    let plain = parse(&oci_manifest(true), None).unwrap();
    assert_eq!(
        plain.referrer_descriptor().artifact_type.as_deref(),
        Some(OCI_CONFIG)
    );
    assert_eq!(plain.descriptor().artifact_type, None);
    // The referrer descriptor serialises with camelCase names and no empty fields.
    let v = serde_json::to_value(m.descriptor()).unwrap();
    assert_eq!(
        v.as_object().unwrap().keys().collect::<Vec<_>>(),
        ["digest", "mediaType", "size"]
    );
}

#[test]
fn parse_verified_checks_the_digest() {
    let text = oci_manifest(true);
    let good = Digest::sha256(text.as_bytes());
    assert!(Manifest::parse_verified(text.clone().into_bytes(), None, good).is_ok());
    let sha512 = Digest::compute(crate::digest::Algorithm::Sha512, text.as_bytes());
    let m = Manifest::parse_verified(text.clone().into_bytes(), None, sha512).unwrap();
    assert_eq!(m.digest(), good, "digest() is always sha256");
    let wrong = Digest::sha256(b"other");
    let err = Manifest::parse_verified(text.into_bytes(), None, wrong).unwrap_err();
    assert!(matches!(&err, ManifestError::Digest(m) if m.expected == wrong && m.actual == good));
    assert_eq!(err.error_code(), ErrorCode::DigestInvalid);
}

fn err(s: &str, ct: Option<&str>) -> ManifestError {
    parse(s, ct).expect_err(s)
}

#[test]
fn refuses_bad_manifests() {
    use ManifestError as E;
    let big = vec![b' '; MANIFEST_MAX_LEN + 1];
    let e = Manifest::parse(big, None).unwrap_err();
    assert!(
        matches!(e, E::TooLarge { len, max } if len == MANIFEST_MAX_LEN + 1 && max == MANIFEST_MAX_LEN)
    );
    assert_eq!(
        e.to_string(),
        "manifest is 4194305 bytes, the limit is 4194304 bytes"
    );
    assert_eq!(e.error_code(), ErrorCode::ManifestInvalid);

    let json_errors = [
        "not json".to_owned(),
        format!("{} trailing", oci_manifest(true)),
        oci_manifest(true).replace("\"size\":313", "\"size\":-1"),
        oci_manifest(true).replace(&d(0), "sha256:abc"),
        oci_manifest(true).replace(&d(0), "md5:00"),
        r#"{"schemaVersion":"2","config":{}}"#.to_owned(),
        oci_manifest(true).replace(
            "\"schemaVersion\":2,",
            "\"schemaVersion\":2,\"schemaVersion\":2,",
        ),
        oci_index(true).replace(r#""os":"linux"}"#, "}"),
        "[]".to_owned(),
    ];
    for text in &json_errors {
        assert!(matches!(err(text, None), E::Json(_)), "{text}");
    }
    assert!(matches!(
        err(r#"{"layers":[]}"#, None),
        E::MissingSchemaVersion
    ));
    assert!(matches!(
        err(r#"{"schemaVersion":1,"fsLayers":[]}"#, None),
        E::UnsupportedSchemaVersion { version: 1 }
    ));
    assert!(matches!(
        err(&oci_manifest(true).replace(OCI_MANIFEST, "application/vnd.oci.artifact.manifest.v1+json"), None),
        E::UnsupportedMediaType { media_type } if media_type == "application/vnd.oci.artifact.manifest.v1+json"
    ));
    assert!(matches!(
        err(&oci_manifest(true), Some(OCI_INDEX)),
        E::MediaTypeMismatch {
            declared: ManifestMediaType::OciManifest,
            content_type: ManifestMediaType::OciIndex
        }
    ));
    assert!(matches!(
        err(r#"{"schemaVersion":2}"#, None),
        E::UnknownShape
    ));
    assert!(matches!(
        err(r#"{"schemaVersion":2,"layers":[]}"#, None),
        E::UnknownShape
    ));
    let both = oci_index(false).replacen(
        "\"manifests\"",
        &format!(
            r#""config":{{"mediaType":"x","digest":"{}","size":1}},"manifests""#,
            d(0)
        ),
        1,
    );
    assert!(matches!(err(&both, None), E::AmbiguousShape));
    assert!(matches!(
        err(
            &both.replace(
                "{\"schemaVersion\":2,",
                &format!("{{\"schemaVersion\":2,\"mediaType\":\"{OCI_INDEX}\",")
            ),
            None
        ),
        E::AmbiguousShape
    ));
    assert!(matches!(
        err(
            &format!(
                r#"{{"schemaVersion":2,"mediaType":"{DOCKER_MANIFEST}","config":{{"mediaType":"x","digest":"{}","size":1}}}}"#,
                d(0)
            ),
            None
        ),
        E::MissingField {
            field: "layers",
            media_type: ManifestMediaType::DockerManifest
        }
    ));
    assert!(matches!(
        err(
            &format!(r#"{{"schemaVersion":2,"mediaType":"{OCI_MANIFEST}","layers":[]}}"#),
            None
        ),
        E::MissingField {
            field: "config",
            ..
        }
    ));
    assert!(matches!(
        err(
            &format!(r#"{{"schemaVersion":2,"mediaType":"{OCI_INDEX}"}}"#),
            None
        ),
        E::MissingField {
            field: "manifests",
            ..
        }
    ));
    assert_eq!(
        err(
            &format!(r#"{{"schemaVersion":2,"mediaType":"{OCI_INDEX}"}}"#),
            None
        )
        .to_string(),
        "application/vnd.oci.image.index.v1+json is missing the required field 'manifests'"
    );
}

#[test]
fn deeply_nested_unknown_fields_are_an_error_not_a_crash() {
    // Unknown fields are skipped without recursion, so the document is merely not a manifest.
    let deep = format!(
        r#"{{"schemaVersion":2,"x":{}{}}}"#,
        "[".repeat(100_000),
        "]".repeat(100_000)
    );
    assert!(matches!(err(&deep, None), ManifestError::UnknownShape));
    // Deep nesting where a value is parsed hits serde_json's recursion limit.
    let deep = format!(
        r#"{{"schemaVersion":2,"config":{{"mediaType":"x","size":1,"digest":"{}","platform":{{"architecture":"a","os":"o","features":{}{}}}}}}}"#,
        d(0),
        "[".repeat(100_000),
        "]".repeat(100_000)
    );
    assert!(matches!(err(&deep, None), ManifestError::Json(_)));
}

fn descriptor_json() -> impl Strategy<Value = (String, Digest, u64)> {
    (
        "[a-z]{1,10}/[a-z.+-]{1,20}",
        any::<[u8; 32]>(),
        any::<u64>(),
    )
        .prop_map(|(mt, b, size)| (mt, Digest::Sha256(b), size))
}

proptest! {
    #[test]
    fn generated_manifests_parse_with_their_digest(
        config in descriptor_json(),
        layers in proptest::collection::vec(descriptor_json(), 0..8),
        ws in "[ \n\t]{0,3}",
    ) {
        let desc = |(mt, dg, size): &(String, Digest, u64)| format!(r#"{{"mediaType":"{mt}",{ws}"digest":"{dg}","size":{size}}}"#);
        let text = format!(
            r#"{{"schemaVersion":2,{ws}"config":{},"layers":[{}]}}"#,
            desc(&config),
            layers.iter().map(desc).collect::<Vec<_>>().join(",")
        );
        let m = Manifest::parse(text.clone().into_bytes(), None).unwrap();
        prop_assert_eq!(m.digest(), Digest::sha256(text.as_bytes()));
        prop_assert_eq!(m.references().len(), layers.len() + 1);
        prop_assert_eq!(m.as_image().unwrap().config.digest, config.1);
        prop_assert_eq!(m.bytes(), text.as_bytes());
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        let _ = Manifest::parse(bytes, None);
    }
}
