//! A synthetic Deckhouse source registry: two platform releases with their image sets,
//! release channels, installers and several modules, built with testkit into a real
//! `docker-registry`.

#![allow(dead_code, unreachable_pub)]

use std::collections::BTreeMap;

use testkit::image::Layout;
use testkit::push::Registry;
use testkit::{Image, ImageBuilder, Upstream, UpstreamOptions};

/// Where the source keeps the platform.
pub const PREFIX: &str = "deckhouse/ee";
/// The two releases.
pub const V_OLD: &str = "v1.60.2";
pub const V_NEW: &str = "v1.61.1";
/// Modules of the source.
pub const MODULES: [&str; 3] = ["commander", "console", "neuvector"];

/// One expected image: repository (relative to the source prefix), reference, manifest digest.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Expected {
    pub repo: String,
    pub reference: String,
    pub digest: String,
}

/// The source registry and what a full pull must bring.
pub struct Source {
    pub upstream: Upstream,
    /// Every image of the release set a pull of both versions must carry.
    pub expected: Vec<Expected>,
    /// Blob bytes of the expected set (distinct blobs).
    pub blob_bytes: u64,
    /// The distinct blobs (configs, layers, manifests) of the expected set.
    pub blobs: Vec<String>,
    _scratch: tempfile::TempDir,
}

impl Source {
    /// `host:port/deckhouse/ee`.
    pub fn address(&self) -> String {
        format!("{}/{PREFIX}", self.upstream.host())
    }

    pub fn endpoint(&self) -> registry_client::Endpoint {
        registry_client::Endpoint::http(&self.upstream.host()).path_prefix(PREFIX)
    }
}

struct Builder {
    layout: Layout,
    registry: Registry,
    expected: Vec<Expected>,
    blobs: BTreeMap<String, u64>,
    layer: u64,
}

impl Builder {
    async fn push(&mut self, repo: &str, tag: Option<&str>, image: &Image, expect: bool) {
        let full = if repo.is_empty() {
            PREFIX.to_owned()
        } else {
            format!("{PREFIX}/{repo}")
        };
        self.registry
            .push_image(&full, tag, image)
            .await
            .expect("push to the source");
        if expect {
            self.expected.push(Expected {
                repo: repo.to_owned(),
                reference: tag.unwrap_or(image.digest()).to_owned(),
                digest: image.digest().to_owned(),
            });
            for blob in image.blobs() {
                self.blobs.insert(blob.digest.clone(), blob.size);
            }
            self.blobs
                .insert(image.manifest.digest.clone(), image.manifest.size);
        }
    }

    fn image(&self, name: &str, files: &[(&str, &[u8])]) -> Image {
        let mut builder = ImageBuilder::new(name).layer(self.layer);
        if !files.is_empty() {
            builder = builder.files(files);
        }
        builder.build(&self.layout)
    }

    fn version_json(&self, version: &str) -> Image {
        let json = format!(r#"{{"version":"{version}","canary":{{}},"requirements":{{}}}}"#);
        ImageBuilder::new(&format!("version-{version}"))
            .files(&[("version.json", json.as_bytes())])
            .build(&self.layout)
    }
}

/// Starts a source holding two releases (`layer` bytes per random layer), channels alpha …
/// early-access at the new one and stable, rock-solid at the old one, and [`MODULES`].
pub async fn source(layer: u64) -> Source {
    let upstream = Upstream::start(UpstreamOptions::default()).await;
    let scratch = tempfile::tempdir().expect("tempdir");
    let mut b = Builder {
        layout: Layout::new(&scratch.path().join("images")).expect("layout"),
        registry: Registry::of(&upstream),
        expected: Vec::new(),
        blobs: BTreeMap::new(),
        layer,
    };
    // A component image both releases share, and one of each release.
    let shared = b.image("component-shared", &[]);
    b.push("", None, &shared, true).await;
    let mut roots = BTreeMap::new();
    for version in [V_OLD, V_NEW] {
        let own = b.image(&format!("component-{version}"), &[]);
        b.push("", None, &own, true).await;
        let digests = format!(
            r#"{{"common": {{"shared": "{}"}}, "controlPlaneManager": {{"own{}": "{}"}}}}"#,
            shared.digest(),
            version.replace('.', ""),
            own.digest()
        );
        // The new release lists its images in the release image, the old one only in its
        // installer (the fallback Deckhouse's d8 uses).
        let root = if version == V_NEW {
            b.image(
                &format!("deckhouse-{version}"),
                &[
                    ("deckhouse/modules/images_digests.json", digests.as_bytes()),
                    ("deckhouse/version", version.as_bytes()),
                ],
            )
        } else {
            b.image(
                &format!("deckhouse-{version}"),
                &[("deckhouse/version", version.as_bytes())],
            )
        };
        b.push("", Some(version), &root, true).await;
        let install = if version == V_OLD {
            b.image(
                &format!("install-{version}"),
                &[("deckhouse/candi/images_digests.json", digests.as_bytes())],
            )
        } else {
            b.image(&format!("install-{version}"), &[])
        };
        b.push("install", Some(version), &install, true).await;
        let standalone = b.image(&format!("install-standalone-{version}"), &[]);
        b.push("install-standalone", Some(version), &standalone, true)
            .await;
        let channel = b.version_json(version);
        b.push("release-channel", Some(version), &channel, true)
            .await;
        roots.insert(version, (root, install, channel));
    }
    // An older patch that no channel points at and that is not the newest of its minor.
    let stale = b.image("deckhouse-v1.60.1", &[]);
    b.push("", Some("v1.60.1"), &stale, false).await;
    let stale_channel = b.version_json("v1.60.1");
    b.push("release-channel", Some("v1.60.1"), &stale_channel, false)
        .await;
    for (channel, version) in [
        ("alpha", V_NEW),
        ("beta", V_NEW),
        ("early-access", V_NEW),
        ("stable", V_OLD),
        ("rock-solid", V_OLD),
    ] {
        let (root, install, release) = roots[version].clone();
        b.push("", Some(channel), &root, true).await;
        b.push("install", Some(channel), &install, true).await;
        b.push("release-channel", Some(channel), &release, true)
            .await;
    }
    // Modules: the module list (tags of `modules`), two versions each, one internal image.
    let marker = ImageBuilder::new("module-marker").build(&b.layout);
    for (i, module) in MODULES.iter().enumerate() {
        b.push("modules", Some(module), &marker, false).await;
        let repo = format!("modules/{module}");
        let release_repo = format!("{repo}/release");
        let internal = b.image(&format!("{module}-internal"), &[]);
        b.push(&repo, None, &internal, true).await;
        let digests = format!(r#"{{"{module}": {{"backend": "{}"}}}}"#, internal.digest());
        let versions = ["v1.0.0".to_owned(), format!("v1.{}.0", i + 1)];
        for version in &versions {
            let image = b.image(
                &format!("{module}-{version}"),
                &[("images_digests.json", digests.as_bytes())],
            );
            b.push(&repo, Some(version), &image, true).await;
            let release = b.version_json(version);
            b.push(&release_repo, Some(version), &release, true).await;
        }
        for (channel, version) in [("alpha", &versions[1]), ("stable", &versions[0])] {
            let release = b.version_json(version);
            b.push(&release_repo, Some(channel), &release, true).await;
        }
    }
    b.expected.sort();
    b.expected.dedup();
    Source {
        upstream,
        expected: b.expected,
        blob_bytes: b.blobs.values().sum(),
        blobs: b.blobs.keys().cloned().collect(),
        _scratch: scratch,
    }
}

/// Options pulling everything of `source` into `dir`.
pub fn pull_options(source: &Source, dir: &std::path::Path) -> mirror::PullOptions {
    mirror::PullOptions {
        source: source.endpoint(),
        bundle_dir: dir.to_owned(),
        platform: Some(mirror::select::PlatformSelection::Channels),
        installers: true,
        modules: Some(mirror::select::ModuleFilter::default()),
        modules_path: "modules".into(),
        chunk_size: None,
        dry_run: false,
        resume: true,
        force: false,
        ignore_suspend: false,
        parallel: 4,
        images: Vec::new(),
        dir_images: Vec::new(),
    }
}

/// Options pushing `dir` into `target`.
pub fn push_options(
    target: registry_client::Endpoint,
    dir: &std::path::Path,
) -> mirror::PushOptions {
    mirror::PushOptions {
        target,
        bundle_dir: dir.to_owned(),
        parallel: 4,
        chunk_size: 16 << 20,
        state_dir: None,
        dry_run: false,
        modules_path: "modules".into(),
    }
}

pub fn quiet() -> mirror::Progress {
    mirror::Progress::new(mirror::Mode::Quiet)
}

/// The digest `reference` resolves to in `repo` of a registry, or `None`.
pub async fn resolve(
    remote: &registry_client::Remote,
    repo: &str,
    reference: &str,
) -> Option<String> {
    remote
        .head_manifest(
            repo,
            reference,
            &[
                oci::media_type::OCI_MANIFEST,
                oci::media_type::OCI_INDEX,
                oci::media_type::DOCKER_MANIFEST,
            ],
        )
        .await
        .ok()
        .and_then(|h| h.digest)
        .map(|d| d.to_string())
}

pub fn remote(endpoint: registry_client::Endpoint) -> registry_client::Remote {
    registry_client::Client::new(registry_client::Config::default())
        .remote(endpoint)
        .expect("remote")
}
