use super::*;
use ManifestMediaType as M;

const CONTAINERD_HEAD: &str = "application/vnd.docker.distribution.manifest.v2+json, application/vnd.docker.distribution.manifest.list.v2+json, application/vnd.oci.image.manifest.v1+json, application/vnd.oci.image.index.v1+json, */*";
const SKOPEO_LINES: [&str; 6] = [
    "application/vnd.oci.image.manifest.v1+json",
    "application/vnd.docker.distribution.manifest.v2+json",
    "application/vnd.docker.distribution.manifest.v1+prettyjws",
    "application/vnd.docker.distribution.manifest.v1+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
    "application/vnd.oci.image.index.v1+json",
];

const OCI_MANIFEST_NO: Negotiation = Negotiation::NotAcceptable {
    message: OCI_MANIFEST_NOT_ACCEPTED,
};
const OCI_INDEX_NO: Negotiation = Negotiation::NotAcceptable {
    message: OCI_INDEX_NOT_ACCEPTED,
};

fn negotiate(lines: &[&str], stored: M, by_tag: bool) -> Negotiation {
    AcceptList::parse(lines.iter().copied()).negotiate_manifest(stored, by_tag)
}

#[test]
fn manifest_negotiation_table() {
    use Negotiation::{PlatformFallback, Serve};
    let star: &[&str] = &["*/*"];
    let none: &[&str] = &[];
    let skopeo: &[&str] = &SKOPEO_LINES;
    let containerd: &[&str] = &[CONTAINERD_HEAD];
    // A proxy that collapsed repeated Accept lines keeps only the last one.
    let collapsed: &[&str] = &[SKOPEO_LINES[5]];
    let containerd_by_digest: &[&str] = &["application/vnd.oci.image.manifest.v1+json, */*"];
    let q_zero: &[&str] = &["application/vnd.oci.image.manifest.v1+json;q=0"];
    let cases: &[(&[&str], M, bool, Negotiation)] = &[
        (skopeo, M::OciManifest, true, Serve),
        (skopeo, M::OciIndex, true, Serve),
        (skopeo, M::DockerManifest, true, Serve),
        (skopeo, M::DockerManifestList, true, Serve),
        (containerd, M::OciManifest, true, Serve),
        (containerd, M::OciIndex, true, Serve),
        (containerd, M::DockerManifestList, true, Serve),
        (containerd_by_digest, M::OciManifest, false, Serve),
        (containerd_by_digest, M::OciIndex, false, OCI_INDEX_NO),
        (collapsed, M::OciManifest, true, OCI_MANIFEST_NO),
        (collapsed, M::OciIndex, true, Serve),
        // `*/*` is not enough for OCI types in distribution.
        (star, M::OciManifest, true, OCI_MANIFEST_NO),
        (star, M::OciIndex, false, OCI_INDEX_NO),
        (star, M::DockerManifest, true, Serve),
        (none, M::OciManifest, false, OCI_MANIFEST_NO),
        (none, M::DockerManifest, true, Serve),
        (none, M::DockerManifestList, true, PlatformFallback),
        (none, M::DockerManifestList, false, Serve),
        // q values are ignored, as in distribution.
        (q_zero, M::OciManifest, true, Serve),
    ];
    for (lines, stored, by_tag, want) in cases {
        assert_eq!(
            negotiate(lines, *stored, *by_tag),
            *want,
            "{lines:?} {stored} by_tag={by_tag}"
        );
    }
}

#[test]
fn accept_parsing_splits_lines_and_lists() {
    let a = AcceptList::parse([
        " Application/VND.OCI.Image.Manifest.v1+JSON ; q=0.5 ",
        "text/plain;q=0, ,garbage, a/b/c, */*;q=0.001",
        "application/json;charset=utf-8;Q=1.0",
    ]);
    let got: Vec<(&str, u16)> = a
        .entries()
        .iter()
        .map(|e| (e.media_range.as_str(), e.quality))
        .collect();
    assert_eq!(
        got,
        [
            (OCI_MANIFEST, 500),
            ("text/plain", 0),
            ("*/*", 1),
            ("application/json", 1000),
        ]
    );
    assert!(a.names(OCI_MANIFEST));
    assert!(!a.names(OCI_INDEX));
    assert!(AcceptList::parse(["", ","]).is_empty());
}

#[test]
fn quality_values() {
    let q = |v: &str| AcceptList::parse([v]).entries()[0].quality;
    assert_eq!(q("a/b"), 1000);
    assert_eq!(q("a/b;q=1"), 1000);
    assert_eq!(q("a/b;q=0"), 0);
    assert_eq!(q("a/b; q=0.25"), 250);
    assert_eq!(
        q("a/b;q=0.1234"),
        1000,
        "more than three decimals is malformed"
    );
    assert_eq!(q("a/b;q=abc"), 1000, "malformed q counts as absent");
}

#[test]
fn rfc_allows_uses_most_specific_range() {
    let a = AcceptList::parse(["application/*;q=0, application/json, */*;q=0.1"]);
    assert!(a.allows("application/json; charset=utf-8"));
    assert!(
        !a.allows("application/xml"),
        "application/* with q=0 refuses"
    );
    assert!(a.allows("text/plain"), "*/* with q>0 allows");
    let only = AcceptList::parse(["text/plain"]);
    assert!(!only.allows("application/json"));
    assert!(AcceptList::default().allows("anything/at-all"));
}

#[test]
fn media_type_helpers() {
    assert_eq!(
        essence("Application/JSON; charset=utf-8"),
        "application/json"
    );
    assert!(is_manifest(OCI_MANIFEST) && is_manifest(DOCKER_MANIFEST));
    assert!(!is_manifest(OCI_INDEX) && !is_manifest(OCI_CONFIG));
    assert!(is_index(OCI_INDEX) && is_index(&format!("{DOCKER_MANIFEST_LIST}; charset=utf-8")));
    assert!(!is_index(DOCKER_MANIFEST));
    assert!(
        is_manifest_or_index(DOCKER_MANIFEST_LIST)
            && !is_manifest_or_index(DOCKER_SCHEMA1_MANIFEST)
    );
    assert!(
        is_layer(OCI_LAYER_TAR_ZSTD)
            && is_layer(DOCKER_FOREIGN_LAYER_GZIP)
            && !is_layer(OCI_CONFIG)
    );
    for t in M::ALL {
        assert_eq!(M::from_media_type(t.as_str()), Some(t));
        assert!(MANIFEST_ACCEPT.contains(t.as_str()));
        assert_eq!(t.is_index(), !t.is_manifest());
    }
    assert!(M::OciIndex.is_oci() && !M::DockerManifest.is_oci());
    assert_eq!(M::from_media_type("application/json"), None);
}
