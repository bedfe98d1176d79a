//! Pull throughput and latency through `d8 registry agent` against Debian's docker-registry
//! directly, in one run, with ratios; and the agent's memory idle and under many streams.
//!
//! `cargo bench -p d8 --bench agent_pull` (needs docker-registry and skopeo). Sizes can be
//! scaled down with `BENCH_LAYER_MB` (default 256, four layers: 1 GiB).
//!
//! Both paths are measured with the same HTTP/1.1 client (the agent serves HTTP/1.1 only, as
//! containerd talks), alternating rounds so background load hits both alike; the TLS suite and
//! protocol each path negotiates are printed, and the CPU time each process spends per GiB
//! shows where the agent path's extra cost goes.

#![allow(clippy::print_stdout)] // a benchmark reports on stdout

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use testkit::image::Layout as ImageLayout;
use testkit::process::{Service, free_port, wait_until};
use testkit::push::Registry;
use testkit::skopeo::{Access, Copy};
use testkit::{ImageBuilder, Upstream};

const CLIENTS: usize = 16;
const HEADS: usize = 2000;
const STREAMS: usize = 1000;
const ROUNDS: usize = 3;

#[tokio::main]
async fn main() {
    // rustls' default order (AES-256-GCM first), as reqwest clients offer it.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let layer_mb: u64 = std::env::var("BENCH_LAYER_MB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(256);
    // The upstream serves HTTPS, as real upstreams do: both paths then pay for TLS, and the ratio
    // is the agent's own cost.
    let upstream_ca = testkit::Certs::new("bench upstream CA");
    let upstream = Upstream::start(testkit::UpstreamOptions::default().tls(&upstream_ca)).await;
    let images = ImageLayout::new(&upstream.scratch_dir().join("images")).unwrap();
    let image = ImageBuilder::new("bench")
        .layers(&[layer_mb << 20; 4])
        .uncompressed()
        .build(&images);
    images.tag(&image.manifest, "v1").unwrap();
    Registry::of(&upstream)
        .push_image("dkp/bench", Some("v1"), &image)
        .await
        .unwrap();
    let total_mb = image.blob_bytes() as f64 / (1 << 20) as f64;
    println!("image: 4 layers, {total_mb:.0} MiB; {CLIENTS} concurrent clients");

    let state = tempfile::tempdir().unwrap();
    let agent = start_agent(&upstream, state.path()).await;
    let idle_at_start = rss_kib(agent.pid);
    let ca = std::fs::read_to_string(state.path().join("pki/ca.crt")).unwrap();
    let via_agent = Target {
        base: format!("https://{}", agent.address),
        repository: "system/deckhouse/bench".into(),
        client: http1_client(&ca),
    };
    let direct = Target {
        base: upstream.url(),
        repository: "dkp/bench".into(),
        client: http1_client(upstream.ca_pem().unwrap()),
    };
    for (name, address, ca) in [
        ("direct", upstream.host(), upstream.ca_pem().unwrap()),
        ("agent", agent.address.clone(), ca.as_str()),
    ] {
        let (suite, alpn) = negotiate(&address, ca);
        println!(
            "TLS to {name} ({address}), as a rustls client offering h2 and http/1.1: {suite}, ALPN {alpn}"
        );
    }

    let processes = [
        ("upstream", upstream_pid(&upstream)),
        ("agent", agent.pid),
        ("clients", std::process::id()),
    ];
    // Warm both paths (page cache, connections).
    throughput(&direct, &image).await;
    throughput(&via_agent, &image).await;
    let mut direct_runs = Vec::new();
    let mut agent_runs = Vec::new();
    let mut direct_cpu = Cpu::default();
    let mut agent_cpu = Cpu::default();
    for _ in 0..ROUNDS {
        let before = Cpu::sample(&processes);
        direct_runs.push(throughput(&direct, &image).await);
        let between = Cpu::sample(&processes);
        agent_runs.push(throughput(&via_agent, &image).await);
        let after = Cpu::sample(&processes);
        direct_cpu.add(&before, &between);
        agent_cpu.add(&between, &after);
    }
    let ratios: Vec<f64> = direct_runs
        .iter()
        .zip(&agent_runs)
        .map(|(d, a)| a.rate / d.rate)
        .collect();
    for (i, (d, a)) in direct_runs.iter().zip(&agent_runs).enumerate() {
        println!(
            "round {}: direct {:.0} MiB/s, through the agent {:.0} MiB/s, ratio {:.3}",
            i + 1,
            d.rate,
            a.rate,
            ratios[i]
        );
    }
    let direct_rate = median(direct_runs.iter().map(|r| r.rate).collect());
    let agent_rate = median(agent_runs.iter().map(|r| r.rate).collect());
    println!(
        "throughput, {CLIENTS} Rust clients over HTTP/1.1, median of {ROUNDS} alternating rounds: direct {direct_rate:.0} MiB/s, through the agent {agent_rate:.0} MiB/s, ratio {:.3} (median of the rounds' ratios; target >= 0.95)",
        median(ratios)
    );
    let gib = |runs: &[Run]| runs.iter().map(|r| r.bytes).sum::<u64>() as f64 / (1u64 << 30) as f64;
    for (name, cpu, runs) in [
        ("direct", &direct_cpu, &direct_runs),
        ("through the agent", &agent_cpu, &agent_runs),
    ] {
        let per_gib = |seconds: f64| seconds / gib(runs);
        let wall: f64 = runs.iter().map(|r| r.seconds).sum();
        println!(
            "CPU seconds per GiB pulled {name}: upstream {:.2}, agent {:.2}, clients {:.2}, total {:.2} (of {:.2} core-seconds available per GiB on {} cores)",
            per_gib(cpu.seconds[0]),
            per_gib(cpu.seconds[1]),
            per_gib(cpu.seconds[2]),
            per_gib(cpu.seconds.iter().sum()),
            per_gib(wall) * cores() as f64,
            cores()
        );
    }

    let (direct_p50, direct_p99) = head_latency(&direct, image.digest()).await;
    let (agent_p50, agent_p99) = head_latency(&via_agent, image.digest()).await;
    println!(
        "manifest HEAD, {HEADS} sequential: direct p50 {:.3} ms p99 {:.3} ms; agent p50 {:.3} ms p99 {:.3} ms; added p50 {:.3} ms p99 {:.3} ms (target p99 <= 1 ms)",
        ms(direct_p50),
        ms(direct_p99),
        ms(agent_p50),
        ms(agent_p99),
        ms(agent_p50.saturating_sub(direct_p50)),
        ms(agent_p99.saturating_sub(direct_p99))
    );

    let skopeo_direct = skopeo_pull(
        &format!("docker://{}/dkp/bench:v1", upstream.host()),
        Access::of(&upstream),
    )
    .await;
    let certs = state.path().join("skopeo-certs");
    std::fs::create_dir_all(&certs).unwrap();
    std::fs::write(certs.join("ca.crt"), &ca).unwrap();
    let skopeo_agent = skopeo_pull(
        &format!("docker://{}/system/deckhouse/bench:v1", agent.address),
        Access {
            credentials: None,
            cert_dir: Some(certs),
        },
    )
    .await;
    println!(
        "skopeo copy of the image: direct {:.2} s, through the agent {:.2} s, throughput ratio {:.3}",
        skopeo_direct.as_secs_f64(),
        skopeo_agent.as_secs_f64(),
        skopeo_direct.as_secs_f64() / skopeo_agent.as_secs_f64()
    );

    let idle = rss_kib(agent.pid);
    let loaded = rss_under_streams(&via_agent, &image, agent.pid).await;
    println!(
        "agent RSS: idle at start {:.1} MiB (target <= 20), idle after the runs above {:.1} MiB; with {STREAMS} blob streams open {:.1} MiB, {:.1} KiB per stream (target <= 64)",
        idle_at_start as f64 / 1024.0,
        idle as f64 / 1024.0,
        loaded as f64 / 1024.0,
        (loaded.saturating_sub(idle)) as f64 / STREAMS as f64
    );
    drop(agent);
}

struct Agent {
    address: String,
    pid: u32,
    _service: Service,
}

async fn start_agent(upstream: &Upstream, state: &Path) -> Agent {
    let layout = serde_json::json!({
        "backends": [{
            "name": "Upstream", "scheme": "HTTPS", "host": upstream.host(), "path": "/dkp",
            "ca": upstream.ca_pem(),
        }]
    });
    std::fs::write(state.join("layout.json"), layout.to_string()).unwrap();
    let port = free_port();
    let mut command = Command::new(env!("CARGO_BIN_EXE_d8"));
    command
        .env("RUST_LOG", "warn")
        .args(["registry", "agent", "--node-name", "bench"])
        .arg(format!("--listen-address=127.0.0.1:{port}"))
        .arg(format!("--metrics-address=127.0.0.1:{}", free_port()))
        .arg("--kubeconfig")
        .arg(state.join("no-kubeconfig"))
        .arg("--containerd-registry-dir")
        .arg(state.join("registry.d"))
        .arg("--pki-dir")
        .arg(state.join("pki"))
        .arg("--bootstrap-layout")
        .arg(state.join("layout.json"))
        .arg("--layout-cache")
        .arg(state.join("cache/layout.json"))
        .arg("--trust-dir")
        .arg(state.join("trust"));
    let mut service =
        Service::spawn("d8 registry agent", command, state.join("agent.log")).unwrap();
    let hosts = state.join("registry.d/_default/hosts.toml");
    wait_until(&mut service, Duration::from_secs(30), || {
        let hosts = hosts.clone();
        async move { hosts.exists() }
    })
    .await;
    Agent {
        address: format!("127.0.0.1:{port}"),
        pid: service.pid().unwrap(),
        _service: service,
    }
}

struct Target {
    base: String,
    repository: String,
    client: reqwest::Client,
}

impl Target {
    fn blob_url(&self, digest: &str) -> String {
        format!("{}/v2/{}/blobs/{digest}", self.base, self.repository)
    }
}

/// One throughput round: bytes received, wall seconds, MiB/s.
struct Run {
    bytes: u64,
    seconds: f64,
    rate: f64,
}

/// CLIENTS concurrent downloads, client i fetching layer i % 4, each its own connection.
async fn throughput(target: &Target, image: &testkit::Image) -> Run {
    let started = Instant::now();
    let mut tasks = Vec::new();
    for i in 0..CLIENTS {
        let layer = &image.layers[i % image.layers.len()];
        let url = target.blob_url(&layer.digest);
        let expected = layer.size;
        let ca_client = target.client.clone();
        tasks.push(tokio::spawn(async move {
            let response = ca_client.get(&url).send().await.unwrap();
            assert_eq!(response.status(), 200, "{url}");
            let mut stream = response.bytes_stream();
            let mut received = 0u64;
            while let Some(chunk) = stream.next().await {
                received += chunk.unwrap().len() as u64;
            }
            assert_eq!(received, expected);
            received
        }));
    }
    let mut bytes = 0u64;
    for task in tasks {
        bytes += task.await.unwrap();
    }
    let seconds = started.elapsed().as_secs_f64();
    Run {
        bytes,
        seconds,
        rate: bytes as f64 / (1 << 20) as f64 / seconds,
    }
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// An HTTP/1.1 client trusting only `ca`.
fn http1_client(ca: &str) -> reqwest::Client {
    reqwest::Client::builder()
        .http1_only()
        .tls_certs_only(reqwest::Certificate::from_pem_bundle(ca.as_bytes()).unwrap())
        .build()
        .unwrap()
}

/// The cipher suite and ALPN protocol a rustls client with the process's crypto provider (the
/// one reqwest uses) settles on with `address`.
fn negotiate(address: &str, ca: &str) -> (String, String) {
    use rustls::pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls::pki_types::CertificateDer::pem_slice_iter(ca.as_bytes()) {
        roots.add(cert.unwrap()).unwrap();
    }
    let mut config = rustls::ClientConfig::builder()
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    let host = address.rsplit_once(':').unwrap().0.to_owned();
    let name = rustls::pki_types::ServerName::try_from(host).unwrap();
    let mut connection = rustls::ClientConnection::new(std::sync::Arc::new(config), name).unwrap();
    let mut socket = std::net::TcpStream::connect(address).unwrap();
    while connection.is_handshaking() {
        connection.complete_io(&mut socket).unwrap();
    }
    let suite = format!(
        "{:?}",
        connection.negotiated_cipher_suite().unwrap().suite()
    );
    let alpn = connection
        .alpn_protocol()
        .map_or("none".into(), |p| String::from_utf8_lossy(p).into_owned());
    (suite, alpn)
}

/// CPU seconds (user + system) per process, in the order of `processes`.
#[derive(Default)]
struct Cpu {
    seconds: [f64; 3],
}

impl Cpu {
    fn sample(processes: &[(&str, u32); 3]) -> Self {
        let mut cpu = Self::default();
        for (slot, (_, pid)) in cpu.seconds.iter_mut().zip(processes) {
            *slot = cpu_seconds(*pid);
        }
        cpu
    }

    fn add(&mut self, before: &Cpu, after: &Cpu) {
        for i in 0..3 {
            self.seconds[i] += after.seconds[i] - before.seconds[i];
        }
    }
}

/// utime + stime of `pid` from `/proc/<pid>/stat`, in seconds (the kernel reports them in
/// USER_HZ, 100 per second on Linux).
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // Fields after the command name, which is in parentheses and may hold spaces.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .unwrap()
        .1
        .split_whitespace()
        .collect();
    let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
    ticks as f64 / 100.0
}

fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, usize::from)
}

/// The docker-registry process serving `upstream`: the one whose command line names the config
/// file in its scratch directory.
fn upstream_pid(upstream: &Upstream) -> u32 {
    let config = upstream.scratch_dir().join("config.yml");
    let config = config.to_string_lossy();
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .find(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|cmdline| String::from_utf8_lossy(&cmdline).contains(config.as_ref()))
        })
        .expect("the docker-registry process")
}

async fn head_latency(target: &Target, digest: &str) -> (Duration, Duration) {
    let url = format!(
        "{}/v2/{}/manifests/{digest}",
        target.base, target.repository
    );
    let mut samples = Vec::with_capacity(HEADS);
    for _ in 0..HEADS {
        let started = Instant::now();
        let response = target
            .client
            .head(&url)
            .header("Accept", "application/vnd.oci.image.manifest.v1+json")
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        samples.push(started.elapsed());
    }
    samples.sort();
    (samples[HEADS / 2], samples[HEADS * 99 / 100])
}

async fn skopeo_pull(source: &str, access: Access) -> Duration {
    let out = tempfile::tempdir().unwrap();
    let started = Instant::now();
    Copy::new(source, &format!("oci:{}:v1", out.path().display()))
        .source_access(access)
        .run()
        .await
        .expect_success("skopeo copy");
    started.elapsed()
}

/// RSS with STREAMS blob downloads open and barely read (each client holds its response).
async fn rss_under_streams(target: &Target, image: &testkit::Image, pid: u32) -> u64 {
    let url = target.blob_url(&image.layers[0].digest);
    let mut open = Vec::with_capacity(STREAMS);
    for _ in 0..STREAMS {
        let client = target.client.clone();
        let url = url.clone();
        open.push(tokio::spawn(async move {
            let response = client.get(&url).send().await.unwrap();
            let mut stream = response.bytes_stream();
            let _first = stream.next().await;
            tokio::time::sleep(Duration::from_secs(3)).await;
            drop(stream);
        }));
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let rss = rss_kib(pid);
    for task in open {
        let _ = task.await;
    }
    rss
}

fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap()
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

fn ms(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1000.0
}
