//! Deterministic OCI and Docker v2 images, written as an OCI image layout on disk.
//!
//! The same builder input always gives the same bytes and so the same digests: tar entries have
//! fixed mtimes, owners and modes, gzip headers carry no time, and layer contents come from a
//! seeded generator. Layers are streamed to disk, never held in memory, so gigabyte images are
//! fine.

use std::io::{self, Write};
use std::path::{Path, PathBuf};

use sha2::{Digest as _, Sha256};

/// OCI image manifest media type.
pub const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
/// OCI image index media type.
pub const OCI_INDEX: &str = "application/vnd.oci.image.index.v1+json";
/// Docker v2 schema 2 manifest media type.
pub const DOCKER_MANIFEST: &str = "application/vnd.docker.distribution.manifest.v2+json";
/// Docker v2 manifest list media type.
pub const DOCKER_MANIFEST_LIST: &str = "application/vnd.docker.distribution.manifest.list.v2+json";

/// Which family of media types an image uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// OCI image-spec media types.
    Oci,
    /// Docker v2 schema 2 media types.
    Docker,
}

impl Format {
    fn manifest(self) -> &'static str {
        match self {
            Format::Oci => OCI_MANIFEST,
            Format::Docker => DOCKER_MANIFEST,
        }
    }
    fn index(self) -> &'static str {
        match self {
            Format::Oci => OCI_INDEX,
            Format::Docker => DOCKER_MANIFEST_LIST,
        }
    }
    fn config(self) -> &'static str {
        match self {
            Format::Oci => "application/vnd.oci.image.config.v1+json",
            Format::Docker => "application/vnd.docker.container.image.v1+json",
        }
    }
    fn layer(self, gzip: bool) -> &'static str {
        match (self, gzip) {
            (Format::Oci, true) => "application/vnd.oci.image.layer.v1.tar+gzip",
            (Format::Oci, false) => "application/vnd.oci.image.layer.v1.tar",
            (Format::Docker, true) => "application/vnd.docker.image.rootfs.diff.tar.gzip",
            (Format::Docker, false) => "application/vnd.docker.image.rootfs.diff.tar",
        }
    }
}

/// A content-addressed blob stored in the layout.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Blob {
    /// `sha256:<hex>`.
    pub digest: String,
    /// Size in bytes.
    pub size: u64,
    /// Media type, as its descriptor states.
    pub media_type: String,
    /// Where the bytes are.
    pub path: PathBuf,
}

impl Blob {
    /// The blob's bytes (for small blobs: manifests, configs).
    pub fn read(&self) -> Vec<u8> {
        std::fs::read(&self.path).expect("read blob")
    }

    fn descriptor(&self) -> serde_json::Value {
        serde_json::json!({"mediaType": self.media_type, "digest": self.digest, "size": self.size})
    }
}

/// An image: its manifest, config and layers, all stored in a [`Layout`].
#[derive(Clone, Debug)]
pub struct Image {
    /// The manifest as stored (its digest is the image's identity).
    pub manifest: Blob,
    /// The config blob.
    pub config: Blob,
    /// The layers, in order.
    pub layers: Vec<Blob>,
    /// `architecture` and `os` of the config.
    pub platform: (String, String),
}

impl Image {
    /// The manifest digest.
    pub fn digest(&self) -> &str {
        &self.manifest.digest
    }

    /// Config and layers: every blob a pull fetches besides manifests.
    pub fn blobs(&self) -> impl Iterator<Item = &Blob> {
        std::iter::once(&self.config).chain(&self.layers)
    }

    /// Total size of config and layers.
    pub fn blob_bytes(&self) -> u64 {
        self.blobs().map(|b| b.size).sum()
    }
}

/// A multi-platform index (OCI) or manifest list (Docker) over several images.
#[derive(Clone, Debug)]
pub struct Index {
    /// The index as stored.
    pub manifest: Blob,
    /// The images it lists.
    pub images: Vec<Image>,
}

impl Index {
    /// Builds an index over `images` (each with its own platform) in `format`.
    pub fn build(layout: &Layout, format: Format, images: &[Image]) -> Index {
        let manifests: Vec<serde_json::Value> = images
            .iter()
            .map(|image| {
                let mut descriptor = image.manifest.descriptor();
                descriptor["platform"] = serde_json::json!({
                    "architecture": image.platform.0, "os": image.platform.1,
                });
                descriptor
            })
            .collect();
        let index = serde_json::json!({
            "schemaVersion": 2, "mediaType": format.index(), "manifests": manifests,
        });
        let manifest = layout
            .put(format.index(), &serde_json::to_vec(&index).expect("json"))
            .expect("write index");
        Index {
            manifest,
            images: images.to_vec(),
        }
    }

    /// The index digest.
    pub fn digest(&self) -> &str {
        &self.manifest.digest
    }
}

/// An OCI image layout directory (`oci-layout`, `index.json`, `blobs/sha256/…`), as skopeo's
/// `oci:` transport reads it.
#[derive(Clone, Debug)]
pub struct Layout {
    dir: PathBuf,
}

impl Layout {
    /// Creates (or reopens) a layout at `dir`.
    pub fn new(dir: &Path) -> io::Result<Self> {
        std::fs::create_dir_all(dir.join("blobs/sha256"))?;
        std::fs::write(dir.join("oci-layout"), br#"{"imageLayoutVersion":"1.0.0"}"#)?;
        let index = dir.join("index.json");
        if !index.exists() {
            std::fs::write(&index, br#"{"schemaVersion":2,"manifests":[]}"#)?;
        }
        Ok(Self {
            dir: dir.to_owned(),
        })
    }

    /// The layout directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// skopeo's name for a tag in this layout: `oci:<dir>:<tag>`.
    pub fn skopeo_ref(&self, tag: &str) -> String {
        format!("oci:{}:{tag}", self.dir.display())
    }

    /// Stores `bytes` as a blob.
    pub fn put(&self, media_type: &str, bytes: &[u8]) -> io::Result<Blob> {
        let hex = hex::encode(Sha256::digest(bytes));
        let path = self.dir.join("blobs/sha256").join(&hex);
        std::fs::write(&path, bytes)?;
        Ok(Blob {
            digest: format!("sha256:{hex}"),
            size: bytes.len() as u64,
            media_type: media_type.to_owned(),
            path,
        })
    }

    /// Names `manifest` (an image's or an index's) `tag` in `index.json`, replacing an older
    /// entry of the same name.
    pub fn tag(&self, manifest: &Blob, tag: &str) -> io::Result<()> {
        let path = self.dir.join("index.json");
        let mut index: serde_json::Value = serde_json::from_slice(&std::fs::read(&path)?)?;
        let entries = index["manifests"].as_array_mut().expect("manifests array");
        entries.retain(|e| e["annotations"]["org.opencontainers.image.ref.name"] != tag);
        let mut descriptor = manifest.descriptor();
        descriptor["annotations"] = serde_json::json!({"org.opencontainers.image.ref.name": tag});
        entries.push(descriptor);
        std::fs::write(&path, serde_json::to_vec(&index)?)
    }
}

/// What a layer holds.
#[derive(Clone, Debug)]
enum LayerSpec {
    /// One file of this many pseudo-random (incompressible) bytes.
    Random(u64),
    /// Given files: (path, contents).
    Files(Vec<(String, Vec<u8>)>),
}

/// Builds deterministic images.
#[derive(Clone, Debug)]
pub struct ImageBuilder {
    name: String,
    format: Format,
    gzip: bool,
    platform: (String, String),
    layers: Vec<LayerSpec>,
    executables: Vec<String>,
}

impl ImageBuilder {
    /// A builder whose random contents are seeded by `name`: different names, different images.
    pub fn new(name: &str) -> Self {
        Self {
            name: name.to_owned(),
            format: Format::Oci,
            gzip: true,
            platform: ("amd64".into(), "linux".into()),
            layers: Vec::new(),
            executables: Vec::new(),
        }
    }

    /// Adds a layer holding one file of `size` pseudo-random bytes.
    pub fn layer(mut self, size: u64) -> Self {
        self.layers.push(LayerSpec::Random(size));
        self
    }

    /// Adds one layer per size.
    pub fn layers(self, sizes: &[u64]) -> Self {
        sizes
            .iter()
            .fold(self, |builder, size| builder.layer(*size))
    }

    /// Adds a layer holding the given files.
    pub fn files(mut self, files: &[(&str, &[u8])]) -> Self {
        let files = files
            .iter()
            .map(|(path, data)| ((*path).to_owned(), data.to_vec()))
            .collect();
        self.layers.push(LayerSpec::Files(files));
        self
    }

    /// Files (of [`ImageBuilder::files`]) stored with mode 0755 instead of 0644 (hooks).
    pub fn executable(mut self, paths: &[&str]) -> Self {
        self.executables
            .extend(paths.iter().map(|p| (*p).to_owned()));
        self
    }

    /// Docker v2 schema 2 media types instead of OCI ones.
    pub fn docker(mut self) -> Self {
        self.format = Format::Docker;
        self
    }

    /// Plain tar layers instead of gzip (fast to build for large benchmark images).
    pub fn uncompressed(mut self) -> Self {
        self.gzip = false;
        self
    }

    /// The platform in the config (default `linux/amd64`).
    pub fn platform(mut self, os: &str, architecture: &str) -> Self {
        self.platform = (architecture.to_owned(), os.to_owned());
        self
    }

    /// Writes the image's blobs into `layout` and returns it.
    pub fn build(&self, layout: &Layout) -> Image {
        let layers = if self.layers.is_empty() {
            vec![LayerSpec::Files(vec![(
                "etc/hello.txt".into(),
                format!("hello from testkit image {}\n", self.name).into_bytes(),
            )])]
        } else {
            self.layers.clone()
        };
        let mut descriptors = Vec::new();
        let mut diff_ids = Vec::new();
        for (i, spec) in layers.iter().enumerate() {
            let (blob, diff_id) = self.write_layer(layout, i, spec).expect("write layer");
            descriptors.push(blob);
            diff_ids.push(diff_id);
        }
        let (architecture, os) = &self.platform;
        let config = serde_json::json!({
            "created": "2024-01-01T00:00:00Z",
            "architecture": architecture, "os": os,
            "config": {"Env": ["PATH=/bin"], "Cmd": ["/bin/sh"], "Labels": {"testkit.image": self.name}},
            "rootfs": {"type": "layers", "diff_ids": diff_ids},
            "history": descriptors.iter().map(|_| serde_json::json!({
                "created": "2024-01-01T00:00:00Z", "created_by": "testkit",
            })).collect::<Vec<_>>(),
        });
        let config = layout
            .put(
                self.format.config(),
                &serde_json::to_vec(&config).expect("json"),
            )
            .expect("write config");
        let manifest = serde_json::json!({
            "schemaVersion": 2,
            "mediaType": self.format.manifest(),
            "config": config.descriptor(),
            "layers": descriptors.iter().map(Blob::descriptor).collect::<Vec<_>>(),
        });
        let manifest = layout
            .put(
                self.format.manifest(),
                &serde_json::to_vec(&manifest).expect("json"),
            )
            .expect("write manifest");
        Image {
            manifest,
            config,
            layers: descriptors,
            platform: self.platform.clone(),
        }
    }

    /// Streams one layer to disk; returns its blob and its diff ID (digest of the plain tar).
    fn write_layer(
        &self,
        layout: &Layout,
        index: usize,
        spec: &LayerSpec,
    ) -> io::Result<(Blob, String)> {
        let temp = tempfile::NamedTempFile::new_in(layout.dir.join("blobs"))?;
        let stored = HashingWriter::new(io::BufWriter::with_capacity(1 << 20, temp.reopen()?));
        let stored = if self.gzip {
            Compressor::Gzip(flate2::GzBuilder::new().write(stored, flate2::Compression::fast()))
        } else {
            Compressor::Plain(stored)
        };
        let mut tar = tar::Builder::new(HashingWriter::new(stored));
        match spec {
            LayerSpec::Random(size) => {
                let seed = seed(&format!("{}/{index}", self.name));
                let reader = io::Read::take(SeededBytes::new(seed), *size);
                append(&mut tar, &format!("data/layer-{index}.bin"), *size, reader)?;
            }
            LayerSpec::Files(files) => {
                for (path, data) in files {
                    let mode = if self.executables.contains(path) {
                        0o755
                    } else {
                        0o644
                    };
                    append_mode(&mut tar, path, data.len() as u64, data.as_slice(), mode)?;
                }
            }
        }
        let plain = tar.into_inner()?;
        let (compressor, diff_id, _) = plain.finish();
        let stored = match compressor {
            Compressor::Gzip(encoder) => encoder.finish()?,
            Compressor::Plain(writer) => writer,
        };
        let (mut file, digest, size) = stored.finish();
        file.flush()?;
        let hex = digest.trim_start_matches("sha256:").to_owned();
        let path = layout.dir.join("blobs/sha256").join(&hex);
        temp.persist(&path).map_err(|e| e.error)?;
        let blob = Blob {
            digest,
            size,
            media_type: self.format.layer(self.gzip).to_owned(),
            path,
        };
        Ok((blob, diff_id))
    }
}

fn append<W: Write>(
    tar: &mut tar::Builder<W>,
    path: &str,
    size: u64,
    data: impl io::Read,
) -> io::Result<()> {
    append_mode(tar, path, size, data, 0o644)
}

fn append_mode<W: Write>(
    tar: &mut tar::Builder<W>,
    path: &str,
    size: u64,
    data: impl io::Read,
    mode: u32,
) -> io::Result<()> {
    let mut header = tar::Header::new_ustar();
    header.set_size(size);
    header.set_mode(mode);
    header.set_mtime(0);
    header.set_uid(0);
    header.set_gid(0);
    header.set_entry_type(tar::EntryType::Regular);
    tar.append_data(&mut header, path, data)
}

enum Compressor<W: Write> {
    Gzip(flate2::write::GzEncoder<W>),
    Plain(W),
}

impl<W: Write> Write for Compressor<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Compressor::Gzip(w) => w.write(buf),
            Compressor::Plain(w) => w.write(buf),
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        match self {
            Compressor::Gzip(w) => w.flush(),
            Compressor::Plain(w) => w.flush(),
        }
    }
}

/// A writer that counts and hashes what passes through.
struct HashingWriter<W> {
    inner: W,
    hasher: Sha256,
    size: u64,
}

impl<W: Write> HashingWriter<W> {
    fn new(inner: W) -> Self {
        Self {
            inner,
            hasher: Sha256::new(),
            size: 0,
        }
    }

    fn finish(self) -> (W, String, u64) {
        let digest = format!("sha256:{}", hex::encode(self.hasher.finalize()));
        (self.inner, digest, self.size)
    }
}

impl<W: Write> Write for HashingWriter<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.hasher.update(&buf[..n]);
        self.size += n as u64;
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

fn seed(name: &str) -> u64 {
    let digest = Sha256::digest(name.as_bytes());
    u64::from_le_bytes(digest[..8].try_into().expect("8 bytes"))
}

/// An endless, fast, deterministic stream of incompressible bytes (splitmix64).
struct SeededBytes {
    state: u64,
}

impl SeededBytes {
    fn new(seed: u64) -> Self {
        Self { state: seed }
    }
    fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

impl io::Read for SeededBytes {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        for chunk in buf.chunks_mut(8) {
            let bytes = self.next_u64().to_le_bytes();
            chunk.copy_from_slice(&bytes[..chunk.len()]);
        }
        Ok(buf.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout() -> (tempfile::TempDir, Layout) {
        let dir = tempfile::tempdir().unwrap();
        let layout = Layout::new(dir.path()).unwrap();
        (dir, layout)
    }

    #[test]
    fn same_input_same_digests_in_different_layouts() {
        let (_a, first) = layout();
        let (_b, second) = layout();
        let builder = ImageBuilder::new("app").layers(&[4096, 100_000]);
        let one = builder.build(&first);
        let two = builder.build(&second);
        assert_eq!(one.digest(), two.digest());
        assert_eq!(one.layers, one.layers);
        assert_eq!(
            one.layers.iter().map(|b| &b.digest).collect::<Vec<_>>(),
            two.layers.iter().map(|b| &b.digest).collect::<Vec<_>>()
        );
        let other = ImageBuilder::new("other")
            .layers(&[4096, 100_000])
            .build(&first);
        assert_ne!(one.digest(), other.digest());
    }

    #[test]
    fn blobs_match_their_descriptors() {
        let (_d, layout) = layout();
        let image = ImageBuilder::new("sizes")
            .layers(&[1, 1 << 20])
            .uncompressed()
            .build(&layout);
        let manifest: serde_json::Value = serde_json::from_slice(&image.manifest.read()).unwrap();
        assert_eq!(manifest["mediaType"], OCI_MANIFEST);
        for (blob, descriptor) in image
            .layers
            .iter()
            .zip(manifest["layers"].as_array().unwrap())
        {
            let bytes = std::fs::read(&blob.path).unwrap();
            assert_eq!(bytes.len() as u64, blob.size);
            assert_eq!(
                format!("sha256:{}", hex::encode(Sha256::digest(&bytes))),
                blob.digest
            );
            assert_eq!(descriptor["digest"], blob.digest);
            assert_eq!(
                descriptor["mediaType"],
                "application/vnd.oci.image.layer.v1.tar"
            );
        }
        // An uncompressed layer's diff ID is its own digest.
        let config: serde_json::Value = serde_json::from_slice(&image.config.read()).unwrap();
        assert_eq!(config["rootfs"]["diff_ids"][1], image.layers[1].digest);
        // A layer of 1 MiB of incompressible content holds at least that much.
        assert!(image.layers[1].size > 1 << 20);
    }

    #[test]
    fn gzip_layers_unpack_to_the_declared_diff_id() {
        let (_d, layout) = layout();
        let image = ImageBuilder::new("gz")
            .files(&[("etc/hello.txt", b"hi\n")])
            .layer(10_000)
            .docker()
            .build(&layout);
        let config: serde_json::Value = serde_json::from_slice(&image.config.read()).unwrap();
        for (i, blob) in image.layers.iter().enumerate() {
            let mut plain = Vec::new();
            io::Read::read_to_end(
                &mut flate2::read::GzDecoder::new(std::fs::File::open(&blob.path).unwrap()),
                &mut plain,
            )
            .unwrap();
            let diff_id = format!("sha256:{}", hex::encode(Sha256::digest(&plain)));
            assert_eq!(config["rootfs"]["diff_ids"][i], diff_id);
            assert_eq!(
                blob.media_type,
                "application/vnd.docker.image.rootfs.diff.tar.gzip"
            );
        }
        let mut archive = tar::Archive::new(flate2::read::GzDecoder::new(
            std::fs::File::open(&image.layers[0].path).unwrap(),
        ));
        let mut entry = archive.entries().unwrap().next().unwrap().unwrap();
        assert_eq!(entry.path().unwrap().to_str(), Some("etc/hello.txt"));
        assert_eq!(entry.header().mtime().unwrap(), 0);
        let mut text = String::new();
        io::Read::read_to_string(&mut entry, &mut text).unwrap();
        assert_eq!(text, "hi\n");
    }

    #[test]
    fn index_lists_each_platform_and_tags_are_replaced() {
        let (_d, layout) = layout();
        let amd = ImageBuilder::new("multi").build(&layout);
        let arm = ImageBuilder::new("multi")
            .platform("linux", "arm64")
            .build(&layout);
        assert_ne!(amd.digest(), arm.digest());
        let index = Index::build(&layout, Format::Oci, &[amd.clone(), arm.clone()]);
        let parsed: serde_json::Value = serde_json::from_slice(&index.manifest.read()).unwrap();
        assert_eq!(parsed["manifests"][1]["platform"]["architecture"], "arm64");
        assert_eq!(parsed["manifests"][0]["digest"], amd.digest());
        layout.tag(&amd.manifest, "v1").unwrap();
        layout.tag(&index.manifest, "v1").unwrap();
        let top: serde_json::Value =
            serde_json::from_slice(&std::fs::read(layout.dir().join("index.json")).unwrap())
                .unwrap();
        assert_eq!(top["manifests"].as_array().unwrap().len(), 1);
        assert_eq!(top["manifests"][0]["digest"], index.digest());
    }
}
