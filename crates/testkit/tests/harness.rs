//! The harness end to end against real components: an image built here, pushed by skopeo into a
//! token-auth `docker-registry`, pulled by containerd straight from it.

use testkit::containerd::{Binaries, PullOptions};
use testkit::image::{Format, Image, Index, Layout};
use testkit::skopeo::{Access, Copy};
use testkit::{Certs, Containerd, ImageBuilder, Upstream, UpstreamOptions};

/// Every blob of `image` is in `containerd`'s content store.
async fn assert_holds_every_blob(containerd: &Containerd, image: &Image) {
    let content = containerd.content().await;
    for blob in image.blobs() {
        assert!(
            content.contains(&blob.digest),
            "{} missing from {content:?}",
            blob.digest
        );
    }
}

#[tokio::test]
async fn skopeo_pushes_into_token_auth_upstream_and_containerd_pulls_it() {
    let upstream = Upstream::start(UpstreamOptions::default().token_auth("pusher", "pw")).await;
    let layout = Layout::new(&upstream.scratch_dir().join("layout")).unwrap();
    let image = ImageBuilder::new("harness")
        .files(&[("etc/hello.txt", b"hello\n")])
        .layers(&[300_000, 2 << 20])
        .build(&layout);
    layout.tag(&image.manifest, "v1").unwrap();

    let destination = format!("docker://{}/test/app:v1", upstream.host());
    Copy::new(&layout.skopeo_ref("v1"), &destination)
        .destination_access(Access::of(&upstream))
        .run()
        .await
        .expect_success("skopeo push");
    let issued_by_push = upstream.token_server().unwrap().issued();
    assert!(issued_by_push >= 1, "skopeo went through the token flow");

    let containerd = Containerd::start().await;
    containerd.use_upstream(&upstream);
    let reference = format!("{}/test/app:v1", upstream.host());

    // Without credentials containerd is refused by the token server.
    let refused = containerd.pull(&reference).await;
    assert!(
        !refused.success,
        "anonymous pull must fail:\n{}",
        refused.stderr
    );

    let options = PullOptions {
        credentials: upstream.credentials().cloned(),
        ..PullOptions::default()
    };
    let pulled = containerd
        .pull_with(&reference, &options)
        .await
        .expect_success("ctr pull");
    assert!(upstream.token_server().unwrap().issued() > issued_by_push);
    assert!(pulled.stdout.contains(image.digest()) || pulled.stderr.contains(image.digest()));
    assert_eq!(containerd.images().await, vec![reference]);
    assert_holds_every_blob(&containerd, &image).await;
}

#[tokio::test]
async fn containerd_pulls_a_docker_manifest_list_over_tls_through_a_mirror_entry() {
    let ca = Certs::new("harness CA");
    let upstream = Upstream::start(UpstreamOptions::default().tls(&ca).basic_auth("u", "p")).await;
    let layout = Layout::new(&upstream.scratch_dir().join("layout")).unwrap();
    let amd = ImageBuilder::new("multi-amd64")
        .layer(10_000)
        .docker()
        .build(&layout);
    let arm = ImageBuilder::new("multi-arm64")
        .layer(10_000)
        .docker()
        .platform("linux", "arm64")
        .build(&layout);
    let index = Index::build(&layout, Format::Docker, &[amd.clone(), arm.clone()]);
    testkit::push::Registry::of(&upstream)
        .push_index("test/multi", "v1", &index)
        .await
        .unwrap();

    let containerd = Containerd::start().await;
    // The upstream acts as the mirror for a made-up registry name; the fallback is pinned to it
    // as well, so nothing leaves the machine.
    containerd.use_mirror(&upstream.url(), upstream.ca_pem(), &upstream.url());
    let options = PullOptions {
        credentials: upstream.credentials().cloned(),
        platform: Some("linux/arm64".into()),
        ..PullOptions::default()
    };
    containerd
        .pull_with("registry.example.invalid/test/multi:v1", &options)
        .await
        .expect_success("ctr pull of an index");
    let content = containerd.content().await;
    assert!(content.contains(&index.digest().to_owned()));
    assert!(content.contains(&arm.digest().to_owned()));
    assert!(
        !content.contains(&amd.layers[0].digest),
        "only the requested platform's layers"
    );
    assert!(
        upstream.log().contains("ns=registry.example.invalid"),
        "containerd sent ?ns="
    );
}

/// containerd 2 ([`Binaries::v2`], its own `ctr`, config version 3) pulls an image from the
/// token-auth upstream with `ctr --hosts-dir`, as containerd 1.6 does above.
#[tokio::test]
async fn containerd_2_pulls_from_the_token_auth_upstream() {
    let upstream = Upstream::start(UpstreamOptions::default().token_auth("pusher", "pw")).await;
    let layout = Layout::new(&upstream.scratch_dir().join("layout")).unwrap();
    let image = ImageBuilder::new("harness-2")
        .layers(&[200_000])
        .build(&layout);
    layout.tag(&image.manifest, "v1").unwrap();
    Copy::new(
        &layout.skopeo_ref("v1"),
        &format!("docker://{}/test/app:v1", upstream.host()),
    )
    .destination_access(Access::of(&upstream))
    .run()
    .await
    .expect_success("skopeo push");

    let containerd = Containerd::start_of(&Binaries::v2()).await;
    let version = containerd
        .ctr(&["version".into()])
        .await
        .expect_success("ctr version");
    let server = version.stdout.split("Server:").nth(1).unwrap_or_default();
    assert!(server.contains("Version:  2."), "{}", version.stdout);
    containerd.use_upstream(&upstream);
    let reference = format!("{}/test/app:v1", upstream.host());
    let options = PullOptions {
        credentials: upstream.credentials().cloned(),
        ..PullOptions::default()
    };
    containerd
        .pull_with(&reference, &options)
        .await
        .expect_success("ctr pull on containerd 2");
    assert_eq!(containerd.images().await, vec![reference]);
    assert_holds_every_blob(&containerd, &image).await;
}

/// containerd 2 runs a container with the shim of its own package (not the system's containerd
/// 1.6 one, earlier on the test's PATH) and the system's runc: `ldconfig --version` (a static
/// binary) in a root file system holding only it.
#[tokio::test]
async fn containerd_2_runs_a_container_with_its_own_shim() {
    let binaries = Binaries::v2();
    let containerd = Containerd::start_of(&binaries).await;
    let rootfs = containerd.root().join("rootfs");
    std::fs::create_dir_all(&rootfs).unwrap();
    std::fs::copy("/sbin/ldconfig", rootfs.join("ldconfig")).unwrap();
    let rootfs = rootfs.display().to_string();
    let ctr = |args: &[&str]| {
        let args: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
        let containerd = &containerd;
        async move { containerd.ctr(&args).await }
    };

    let ran = ctr(&[
        "run",
        "--rm",
        "--rootfs",
        &rootfs,
        "once",
        "/ldconfig",
        "--version",
    ])
    .await
    .expect_success("ctr run");
    assert!(ran.stdout.contains("ldconfig"), "{}", ran.stdout);

    // Kept after it exits (detached): the shim containerd started for it.
    ctr(&[
        "run",
        "-d",
        "--rootfs",
        &rootfs,
        "kept",
        "/ldconfig",
        "--version",
    ])
    .await
    .expect_success("ctr run -d");
    let shim_path = containerd
        .root()
        .join("state/io.containerd.runtime.v2.task/default/kept/shim-binary-path");
    let shim = std::fs::read_to_string(&shim_path);
    ctr(&["task", "delete", "--force", "kept"]).await;
    ctr(&["container", "delete", "kept"]).await;
    let shim = shim.unwrap_or_else(|e| panic!("{}: {e}", shim_path.display()));
    assert_eq!(
        std::path::Path::new(&shim),
        binaries.shim(),
        "containerd 2 started another shim"
    );
}
