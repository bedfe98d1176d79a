//! Pull throughput and latency through `d8 registry agent` against Debian's docker-registry
//! directly, in one run, with ratios; and the agent's memory idle and under many streams.
//!
//! `cargo bench -p d8 --bench agent_pull` (needs docker-registry, skopeo, nginx and socat).
//! Sizes can be scaled down with `BENCH_LAYER_MB` (default 256, four layers: 1 GiB).
//!
//! Four ways to the same image, measured with the same HTTP/1.1 client (the agent serves
//! HTTP/1.1 only, as containerd talks), in rotating order so background load hits all alike:
//! - direct to the registry;
//! - through `socat`, a bare TCP relay: TLS passes through untouched, so this is what an extra
//!   hop costs any proxy on this machine, the ceiling for the agent;
//! - through nginx doing the agent's job (TLS in, TLS out, streamed): a peer;
//! - through the agent.
//!
//! The TLS suite and protocol each negotiates are printed, and the CPU time each process spends
//! per GiB shows where each way's cost goes. `BENCH_ROUNDS` sets the number of rotating rounds
//! (default 5).
//!
//! `BENCH_AGENT_VARIANTS` adds more agents from the same binary to the rotation, each started
//! with extra environment variables, to measure an agent change side by side with its
//! baseline: `name:VAR=value[,VAR=value…][;name:…]`, e.g.
//! `one-worker:TOKIO_WORKER_THREADS=1` (the runtime on one thread), or a switch a change under
//! test reads from the environment.
//!
//! Last, `ctr images pull` of the image by private containerds, straight from the upstream,
//! through the agent (containerd reading the agent's `hosts.toml`), and through an agent whose
//! first backend is a warm cache replica over TLS, in rotating order, with the CPU each pull
//! costs every process on the way and how busy the machine was.
//!
//! The memory row opens its streams in batches and reads the RSS once the process has gone
//! quiet, when every stream holds what it holds in a stall.
//!
//! The replica row does the same to a warm cache replica (`d8 registry storage`, TLS) and to
//! docker-registry serving the same blob over TLS: what a replica holds per node pulling through
//! it, against its peer. `BENCH_REPLICA_VARIANTS` (same format as `BENCH_AGENT_VARIANTS`) adds
//! replicas started with extra environment variables to that row.
//!
//! `BENCH_ROWS` picks the parts to run (`throughput,heads,skopeo,memory,replica,containerd`, all
//! by default).

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

fn rounds() -> usize {
    std::env::var("BENCH_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|&n: &usize| n > 0)
        .unwrap_or(5)
}

/// `BENCH_ROWS`: which parts run (comma-separated of `throughput`, `heads`, `skopeo`, `memory`,
/// `containerd`; all by default).
struct Rows(Vec<String>);

impl Rows {
    fn from_env() -> Self {
        let rows = std::env::var("BENCH_ROWS")
            .unwrap_or_else(|_| "throughput,heads,skopeo,memory,replica,containerd".into());
        Self(rows.split(',').map(|r| r.trim().to_owned()).collect())
    }

    fn has(&self, row: &str) -> bool {
        self.0.iter().any(|r| r == row)
    }
}

/// `BENCH_AGENT_VARIANTS` or `BENCH_REPLICA_VARIANTS` (`knob`): (name, environment) of each
/// extra process.
fn variants(knob: &str) -> Vec<(String, Vec<(String, String)>)> {
    let spec = std::env::var(knob).unwrap_or_default();
    spec.split(';')
        .filter(|v| !v.trim().is_empty())
        .map(|variant| {
            let (name, vars) = variant.split_once(':').unwrap_or((variant, ""));
            let vars = vars
                .split(',')
                .filter(|v| !v.is_empty())
                .map(|v| {
                    let (key, value) = v.split_once('=').unwrap_or((v, "1"));
                    (key.trim().to_owned(), value.to_owned())
                })
                .collect();
            (name.trim().to_owned(), vars)
        })
        .collect()
}

#[tokio::main]
async fn main() {
    // rustls' default order (AES-256-GCM first), as reqwest clients offer it.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let layer_mb: u64 = std::env::var("BENCH_LAYER_MB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(256);
    // The upstream serves HTTPS, as real upstreams do: both ways then pay for TLS, and the ratio
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
    let containerd = testkit::Containerd::start().await;
    let only_upstream = serde_json::json!({"backends": [upstream_backend(&upstream)]});
    let agent = start_agent(&only_upstream, state.path(), &containerd.hosts_dir(), &[]).await;
    let variants = variants("BENCH_AGENT_VARIANTS");
    let mut variant_agents = Vec::new();
    for (name, vars) in &variants {
        let dir = state.path().join(format!("variant-{name}"));
        std::fs::create_dir_all(&dir).unwrap();
        let registry_d = dir.join("registry.d");
        variant_agents.push((
            name.clone(),
            start_agent(&only_upstream, &dir, &registry_d, vars).await,
        ));
    }
    println!("agent pid {}", agent.pid);
    for (name, variant) in &variant_agents {
        println!("agent[{name}] pid {}", variant.pid);
    }
    let idle_at_start = rss_kib(agent.pid);
    let ca = std::fs::read_to_string(state.path().join("pki/ca.crt")).unwrap();
    let relay = start_socat(&upstream, state.path());
    let proxy_ca = testkit::Certs::new("bench proxy CA");
    let nginx = start_nginx(&upstream, &proxy_ca, state.path()).await;
    let upstream_ca = upstream.ca_pem().unwrap();
    let mut ways = vec![
        Via {
            name: "direct".into(),
            target: Target::new(upstream.url(), "dkp/bench", upstream_ca),
            pid: None,
        },
        Via {
            name: "socat".into(),
            target: Target::new(
                format!("https://{}", relay.address),
                "dkp/bench",
                upstream_ca,
            ),
            pid: Some(relay.pid),
        },
        Via {
            name: "nginx".into(),
            target: Target::new(
                format!("https://{}", nginx.address),
                "dkp/bench",
                &proxy_ca.ca_pem(),
            ),
            pid: Some(nginx.pid),
        },
        Via {
            name: "agent".into(),
            target: Target::new(
                format!("https://{}", agent.address),
                "system/deckhouse/bench",
                &ca,
            ),
            pid: Some(agent.pid),
        },
    ];
    for (name, variant) in &variant_agents {
        let dir = state.path().join(format!("variant-{name}"));
        let ca = std::fs::read_to_string(dir.join("pki/ca.crt")).unwrap();
        ways.push(Via {
            name: format!("agent[{name}]"),
            target: Target::new(
                format!("https://{}", variant.address),
                "system/deckhouse/bench",
                &ca,
            ),
            pid: Some(variant.pid),
        });
    }
    let rows = Rows::from_env();
    let rounds = rounds();
    if rows.has("throughput") {
        throughput_rows(&ways, &image, upstream_pid(&upstream), rounds).await;
    }
    let mut targets = ways.into_iter().map(|p| p.target);
    let (direct, _, via_nginx, via_agent) = (
        targets.next().unwrap(),
        targets.next().unwrap(),
        targets.next().unwrap(),
        targets.next().unwrap(),
    );
    let via_variants: Vec<Target> = targets.collect();

    if rows.has("heads") {
        // What the agent's own side costs: requests it answers itself (TLS, HTTP, routing), against
        // the forwarded HEADs below.
        let local = format!("{}/v2/", via_agent.base);
        let agent_cpu_before = cpu_seconds(agent.pid, false);
        for _ in 0..HEADS {
            let response = via_agent.client.get(&local).send().await.unwrap();
            assert_eq!(response.status(), 200);
        }
        let agent_cpu_per_local = (cpu_seconds(agent.pid, false) - agent_cpu_before) / HEADS as f64;
        let agent_cpu_before = cpu_seconds(agent.pid, false);
        let latencies = head_latencies(&[&direct, &via_nginx, &via_agent], image.digest()).await;
        let agent_cpu_per_head = (cpu_seconds(agent.pid, false) - agent_cpu_before) / HEADS as f64;
        let [
            (direct_p50, direct_p99),
            (nginx_p50, nginx_p99),
            (agent_p50, agent_p99),
        ] = latencies[..]
        else {
            unreachable!("one pair per target")
        };
        let added = |p: Duration, direct: Duration| ms(p.saturating_sub(direct));
        println!(
            "manifest HEAD, {HEADS} per path, interleaved: direct p50 {:.3} ms p99 {:.3} ms; nginx p50 {:.3} ms p99 {:.3} ms (added {:.3} / {:.3}); agent p50 {:.3} ms p99 {:.3} ms; agent added p50 {:.3} ms p99 {:.3} ms (target p99 <= 1 ms); agent CPU {:.0} us per forwarded HEAD, {:.0} us per GET /v2/ it answers itself",
            ms(direct_p50),
            ms(direct_p99),
            ms(nginx_p50),
            ms(nginx_p99),
            added(nginx_p50, direct_p50),
            added(nginx_p99, direct_p99),
            ms(agent_p50),
            ms(agent_p99),
            added(agent_p50, direct_p50),
            added(agent_p99, direct_p99),
            agent_cpu_per_head * 1e6,
            agent_cpu_per_local * 1e6,
        );
    }
    if rows.has("skopeo") {
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
    }
    if rows.has("memory") {
        let nginx_idle = rss_kib_tree(nginx.pid);
        let nginx_loaded = rss_under_streams(
            &via_nginx,
            &image,
            || rss_kib_tree(nginx.pid),
            || cpu_seconds(nginx.pid, true),
        )
        .await;
        let (idle, loaded) = idle_and_streaming(&via_agent, &image, agent.pid).await;
        println!(
            "nginx RSS (master and workers): idle {:.1} MiB; {}",
            mib(nginx_idle),
            with_streams(nginx_idle, nginx_loaded)
        );
        println!(
            "agent RSS: idle at start {:.1} MiB (target <= 20), idle after the runs above {:.1} MiB; {} (target <= 40 KiB per stream, issue #22)",
            mib(idle_at_start),
            mib(idle),
            with_streams(idle, loaded)
        );
        for ((name, variant), target) in variant_agents.iter().zip(&via_variants) {
            let (idle, loaded) = idle_and_streaming(target, &image, variant.pid).await;
            println!(
                "agent[{name}] RSS: idle after the runs {:.1} MiB; {}",
                mib(idle),
                with_streams(idle, loaded)
            );
        }
    }
    drop(variant_agents);
    if rows.has("replica") {
        replica_memory(&upstream, &direct, &image, state.path()).await;
    }
    if rows.has("containerd") {
        let image_gib = image.blob_bytes() as f64 / (1u64 << 30) as f64;
        containerd_pulls(
            &containerd,
            &upstream,
            &agent,
            image_gib,
            state.path(),
            rounds,
        )
        .await;
    }
    drop(agent);
}

/// The rotating throughput rounds over every way: rates, ratios, and CPU per GiB of each process.
async fn throughput_rows(ways: &[Via], image: &testkit::Image, upstream_pid: u32, rounds: usize) {
    for way in ways {
        let address = way.target.base.trim_start_matches("https://").to_owned();
        let (suite, alpn) = negotiate(&address, way.target.ca.as_str());
        println!(
            "TLS to {} ({address}), as a rustls client offering h2 and http/1.1: {suite}, ALPN {alpn}",
            way.name
        );
    }
    let own_pid = std::process::id();
    // Warm every path (page cache, connections).
    for way in ways {
        throughput(&way.target, image).await;
    }
    let mut runs: Vec<Vec<Run>> = ways.iter().map(|_| Vec::new()).collect();
    let mut cpu: Vec<Cpu> = ways.iter().map(|_| Cpu::default()).collect();
    for round in 0..rounds {
        // Rotate the order so that no path always runs first after a pause.
        for k in 0..ways.len() {
            let i = (k + round) % ways.len();
            let pids = [Some(upstream_pid), ways[i].pid, Some(own_pid)];
            let before = Cpu::sample(&pids);
            runs[i].push(throughput(&ways[i].target, image).await);
            cpu[i].add(&before, &Cpu::sample(&pids));
        }
    }
    let direct_rate = |round: usize| runs[0][round].rate;
    for (i, way) in ways.iter().enumerate() {
        let rates: Vec<f64> = runs[i].iter().map(|r| r.rate).collect();
        let ratios: Vec<f64> = (0..rounds).map(|r| rates[r] / direct_rate(r)).collect();
        let listed = |values: &[f64], digits: usize| {
            values
                .iter()
                .map(|v| format!("{v:.digits$}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        println!(
            "throughput {:>6}: median {:.0} MiB/s (rounds {} MiB/s), ratio to direct {:.3} (rounds {})",
            way.name,
            median(rates.clone()),
            listed(&rates, 0),
            median(ratios.clone()),
            listed(&ratios, 3),
        );
    }
    let ratio_to = |i: usize, j: usize| {
        median(
            (0..rounds)
                .map(|r| runs[i][r].rate / runs[j][r].rate)
                .collect(),
        )
    };
    let nginx_rounds = |i: usize| {
        (0..rounds)
            .map(|r| format!("{:.3}", runs[i][r].rate / runs[2][r].rate))
            .collect::<Vec<_>>()
            .join(", ")
    };
    println!(
        "throughput, {CLIENTS} Rust clients over HTTP/1.1, median of the rounds' ratios: agent/direct {:.3} (target >= 0.95), agent/nginx {:.3}, agent/socat {:.3}, socat/direct {:.3} (the ceiling of any proxy here)",
        ratio_to(3, 0),
        ratio_to(3, 2),
        ratio_to(3, 1),
        ratio_to(1, 0),
    );
    println!(
        "agent/nginx by round: {} (target >= 1.15 in every round)",
        nginx_rounds(3)
    );
    for (i, way) in ways.iter().enumerate().skip(4) {
        println!(
            "{}: /nginx {:.3} (rounds {}), /agent {:.3}",
            way.name,
            ratio_to(i, 2),
            nginx_rounds(i),
            ratio_to(i, 3),
        );
    }
    let proxy_cpu_per_gib = |i: usize| {
        let gib = runs[i].iter().map(|r| r.bytes).sum::<u64>() as f64 / (1u64 << 30) as f64;
        cpu[i].seconds[1] / gib
    };
    println!(
        "proxy CPU per GiB, agent/nginx {:.3} (target <= 0.85)",
        proxy_cpu_per_gib(3) / proxy_cpu_per_gib(2)
    );
    for (i, way) in ways.iter().enumerate().skip(4) {
        println!(
            "proxy CPU per GiB, {}/agent {:.3}, /nginx {:.3}",
            way.name,
            proxy_cpu_per_gib(i) / proxy_cpu_per_gib(3),
            proxy_cpu_per_gib(i) / proxy_cpu_per_gib(2)
        );
    }
    for (i, way) in ways.iter().enumerate() {
        let gib = runs[i].iter().map(|r| r.bytes).sum::<u64>() as f64 / (1u64 << 30) as f64;
        let wall: f64 = runs[i].iter().map(|r| r.seconds).sum();
        let per_gib = |seconds: f64| seconds / gib;
        println!(
            "CPU seconds per GiB pulled {:>6}: upstream {:.2}, proxy {:.2}, clients {:.2}, total {:.2} (of {:.2} core-seconds available per GiB on {} cores)",
            way.name,
            per_gib(cpu[i].seconds[0]),
            per_gib(cpu[i].seconds[1]),
            per_gib(cpu[i].seconds[2]),
            per_gib(cpu[i].seconds.iter().sum()),
            per_gib(wall) * cores() as f64,
            cores()
        );
    }
}

/// RSS per stalled blob stream of a warm cache replica (TLS read listener, Basic auth, as agents
/// pull from it) against docker-registry serving the same blob over TLS (`direct`).
async fn replica_memory(
    upstream: &Upstream,
    direct: &Target,
    image: &testkit::Image,
    state: &Path,
) {
    let (peer_idle, peer_loaded) = idle_and_streaming(direct, image, upstream_pid(upstream)).await;
    println!(
        "docker-registry RSS (serving over TLS): idle {:.1} MiB; {}",
        mib(peer_idle),
        with_streams(peer_idle, peer_loaded)
    );
    let replicas = std::iter::once(("replica".to_owned(), Vec::new())).chain(
        variants("BENCH_REPLICA_VARIANTS")
            .into_iter()
            .map(|(name, vars)| (format!("replica[{name}]"), vars)),
    );
    for (name, vars) in replicas {
        let dir = state.join(&name);
        std::fs::create_dir_all(&dir).unwrap();
        let replica = start_replica(upstream, &dir, &vars).await;
        let target = replica_target(&replica);
        // Warm: the first pull fills the replica from the upstream.
        let filled = target
            .client
            .get(target.blob_url(&image.layers[0].digest))
            .send()
            .await
            .unwrap()
            .bytes()
            .await
            .unwrap();
        assert_eq!(filled.len() as u64, image.layers[0].size);
        let (idle, loaded) = idle_and_streaming(&target, image, replica.pid).await;
        println!(
            "{name} RSS (warm, serving over TLS): idle {:.1} MiB; {}",
            mib(idle),
            with_streams(idle, loaded)
        );
    }
}

/// A client of `replica`'s read listener, with the agents' Basic credentials.
fn replica_target(replica: &Replica) -> Target {
    use base64::Engine as _;
    let basic = base64::engine::general_purpose::STANDARD
        .encode(format!("{}:{}", REPLICA_ACCOUNT.0, REPLICA_ACCOUNT.1));
    let mut headers = reqwest::header::HeaderMap::new();
    headers.insert(
        reqwest::header::AUTHORIZATION,
        format!("Basic {basic}").parse().unwrap(),
    );
    Target {
        base: format!("https://{}", replica.address),
        repository: "system/deckhouse/bench".into(),
        ca: replica.ca.clone(),
        client: reqwest::Client::builder()
            .http1_only()
            .tls_certs_only(reqwest::Certificate::from_pem_bundle(replica.ca.as_bytes()).unwrap())
            .default_headers(headers)
            .build()
            .unwrap(),
    }
}

/// `ctr images pull` of the image three ways: straight from the upstream, through the agent
/// (whose `_default/hosts.toml` containerd reads), and through an agent whose first backend is a
/// warm cache replica (`d8 registry storage` over TLS, filled before the rounds), each by its own
/// private containerd, in rotating order; everything forgotten before each pull. Prints the wall
/// times and the medians of the rounds' ratios.
async fn containerd_pulls(
    containerd: &testkit::Containerd,
    upstream: &Upstream,
    agent: &Agent,
    image_gib: f64,
    state: &Path,
    rounds: usize,
) {
    let ca = state.join("containerd-upstream-ca.crt");
    std::fs::write(&ca, upstream.ca_pem().unwrap()).unwrap();
    containerd.write_hosts(
        &upstream.host(),
        &testkit::containerd::hosts_toml(&upstream.url(), &upstream.url(), Some(&ca)),
    );
    let cached = state.join("cached");
    std::fs::create_dir_all(&cached).unwrap();
    let replica = start_replica(upstream, &cached, &[]).await;
    let containerd_cached = testkit::Containerd::start().await;
    let layout = serde_json::json!({
        "cache": true,
        "backends": [
            {"name": "Storage", "scheme": "HTTPS", "host": replica.address, "path": "/system/deckhouse",
             "ca": replica.ca, "auth": {"username": REPLICA_ACCOUNT.0, "password": REPLICA_ACCOUNT.1}},
            upstream_backend(upstream),
        ]
    });
    let agent_cached = start_agent(&layout, &cached, &containerd_cached.hosts_dir(), &[]).await;
    let via_agent = "registry.d8-system.svc:5001/system/deckhouse/bench:v1".to_owned();
    // Fill the replica, then check it serves the image with the upstream gone from the path.
    containerd_cached
        .pull(&via_agent)
        .await
        .expect_success("ctr images pull (filling the replica)");
    let direct = format!("{}/dkp/bench:v1", upstream.host());
    let upstream_pid = upstream_pid(upstream);
    // Per way: the containerd, the reference, and the processes between containerd and the
    // upstream's disk whose CPU the pull costs (besides containerd's own and the upstream's).
    let ways: [(&str, &testkit::Containerd, &String, Vec<u32>); 3] = [
        ("direct", containerd, &direct, vec![]),
        ("agent", containerd, &via_agent, vec![agent.pid]),
        (
            "agent+replica",
            &containerd_cached,
            &via_agent,
            vec![agent_cached.pid, replica.pid],
        ),
    ];
    let mut times = [Vec::new(), Vec::new(), Vec::new()];
    let mut spent = [PullCpu::default(), PullCpu::default(), PullCpu::default()];
    for round in 0..rounds {
        for k in 0..ways.len() {
            let i = (k + round) % ways.len();
            let (_, containerd, reference, ref between) = ways[i];
            containerd.clear().await;
            let pids = PullPids {
                upstream: upstream_pid,
                between: between.clone(),
                containerd: containerd.pid().expect("containerd runs"),
            };
            let before = pids.sample();
            let started = Instant::now();
            containerd
                .pull(reference)
                .await
                .expect_success("ctr images pull");
            times[i].push(started.elapsed().as_secs_f64());
            spent[i].add(&before, &pids.sample());
        }
    }
    containerd.clear().await;
    containerd_cached.clear().await;
    let failovers = failovers(&agent_cached).await;
    drop(agent_cached);
    let listed = |values: &[f64], digits: usize| {
        values
            .iter()
            .map(|v| format!("{v:.digits$}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let pulls = rounds as f64;
    for (i, (name, _, _, _)) in ways.iter().enumerate() {
        let ratios: Vec<f64> = (0..rounds).map(|r| times[0][r] / times[i][r]).collect();
        println!(
            "ctr images pull (pull and unpack) of the image, {name}: median {:.2} s (rounds {}); throughput ratio to direct {:.3} (rounds {}; target >= 0.97)",
            median(times[i].clone()),
            listed(&times[i], 2),
            median(ratios.clone()),
            listed(&ratios, 3),
        );
        let cpu = &spent[i];
        println!(
            "  CPU seconds per pull, {name}: upstream {:.2}, agent (and replica) {:.2}, containerd and ctr {:.2}; the machine {:.0} % busy over the pulls ({} cores)",
            cpu.upstream / pulls,
            cpu.between / pulls,
            cpu.containerd / pulls,
            100.0 * cpu.busy / cpu.elapsed,
            cores(),
        );
    }
    // If the two cores were saturated for the whole pull, whatever the agent spends would add
    // its CPU time over the cores to the wall time; the prediction shows how far that holds.
    let direct_time = median(times[0].clone());
    let agent_cpu = spent[1].between / pulls;
    println!(
        "agent: {:.2} CPU s per pull of {:.2} GiB ({:.2} s/GiB); were every core busy, that alone would give a ratio of {:.3}",
        agent_cpu,
        image_gib,
        agent_cpu / image_gib,
        direct_time / (direct_time + agent_cpu / cores() as f64),
    );
    println!(
        "agent+replica moved from the replica to the upstream {failovers} times (0: every blob came from the warm replica)"
    );
}

/// The sum of the agent's `d8_registry_agent_failovers_total` series.
async fn failovers(agent: &Agent) -> u64 {
    let text = reqwest::get(format!("http://{}/metrics", agent.metrics))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        text.contains("d8_registry_agent_requests_total"),
        "the agent counted no request:\n{text}"
    );
    text.lines()
        .filter(|l| l.starts_with("d8_registry_agent_failovers_total"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
        .sum()
}

/// The replica's node account (`username`, `password`).
const REPLICA_ACCOUNT: (&str, &str) = ("node", "node-pw");

/// A cache replica as a cluster runs it: `d8 registry storage` with a TLS read listener, the
/// node account, the upstream filled from on a miss.
struct Replica {
    address: String,
    ca: String,
    pid: u32,
    _service: Service,
}

async fn start_replica(upstream: &Upstream, dir: &Path, vars: &[(String, String)]) -> Replica {
    let certs = testkit::Certs::new("bench replica CA");
    let serving = certs.server(&[]).write(dir, "replica").unwrap();
    std::fs::write(dir.join("upstream-ca.crt"), upstream.ca_pem().unwrap()).unwrap();
    std::fs::write(
        dir.join("pull"),
        format!("{}:{}\n", REPLICA_ACCOUNT.0, REPLICA_ACCOUNT.1),
    )
    .unwrap();
    let read = free_port();
    let mut command = Command::new(env!("CARGO_BIN_EXE_d8"));
    command
        .env("RUST_LOG", "info")
        .args(["registry", "storage", "--node-name", "bench"])
        // A small reserve: the default keeps up to 60 GiB free, more than a build machine has.
        .arg("--reserve=64Mi")
        .arg("--data-dir")
        .arg(dir.join("data"))
        .arg(format!("--read-address=127.0.0.1:{read}"))
        .arg(format!("--write-address=127.0.0.1:{}", free_port()))
        .arg(format!("--metrics-address=127.0.0.1:{}", free_port()))
        .arg("--tls-cert")
        .arg(&serving.cert)
        .arg("--tls-key")
        .arg(&serving.key)
        .arg("--pull-credentials-file")
        .arg(dir.join("pull"))
        .arg("--upstream")
        .arg(format!("{}/dkp", upstream.url()))
        .arg("--upstream-ca")
        .arg(dir.join("upstream-ca.crt"))
        .envs(vars.iter().map(|(k, v)| (k, v)));
    let mut service =
        Service::spawn("d8 registry storage", command, dir.join("storage.log")).unwrap();
    let address = format!("127.0.0.1:{read}");
    let probe = address.clone();
    wait_until(&mut service, Duration::from_secs(30), || {
        let probe = probe.clone();
        async move { tokio::net::TcpStream::connect(probe).await.is_ok() }
    })
    .await;
    Replica {
        address,
        ca: certs.ca_pem(),
        pid: service.pid().expect("the replica runs"),
        _service: service,
    }
}

struct Agent {
    address: String,
    metrics: String,
    pid: u32,
    _service: Service,
}

/// `d8`, or `d8` under the command in `BENCH_AGENT_WRAPPER` (e.g. `heaptrack -o /tmp/agent`)
/// for a profile of the agents; their RSS and CPU figures are then the wrapper's process tree.
fn agent_command() -> Command {
    let wrapper = std::env::var("BENCH_AGENT_WRAPPER").unwrap_or_default();
    let mut words = wrapper.split_whitespace();
    let Some(program) = words.next() else {
        return Command::new(env!("CARGO_BIN_EXE_d8"));
    };
    let mut command = Command::new(program);
    command.args(words).arg(env!("CARGO_BIN_EXE_d8"));
    command
}

/// The upstream as the agent's only backend (`/dkp` on it).
fn upstream_backend(upstream: &Upstream) -> serde_json::Value {
    serde_json::json!({
        "name": "Upstream", "scheme": "HTTPS", "host": upstream.host(), "path": "/dkp",
        "ca": upstream.ca_pem(),
    })
}

/// An agent with `layout` as its bootstrap layout, writing containerd's drop-in into
/// `registry_d`, started with `env` besides.
async fn start_agent(
    layout: &serde_json::Value,
    state: &Path,
    registry_d: &Path,
    env: &[(String, String)],
) -> Agent {
    std::fs::write(state.join("layout.json"), layout.to_string()).unwrap();
    let port = free_port();
    let metrics = format!("127.0.0.1:{}", free_port());
    let mut command = agent_command();
    command
        .env("RUST_LOG", "warn")
        .envs(env.iter().map(|(k, v)| (k, v)))
        .args(["registry", "agent", "--node-name", "bench"])
        .arg(format!("--listen-address=127.0.0.1:{port}"))
        .arg(format!("--metrics-address={metrics}"))
        .arg("--kubeconfig")
        .arg(state.join("no-kubeconfig"))
        .arg("--containerd-registry-dir")
        .arg(registry_d)
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
    let hosts = registry_d.join("_default/hosts.toml");
    wait_until(&mut service, Duration::from_secs(30), || {
        let hosts = hosts.clone();
        async move { hosts.exists() }
    })
    .await;
    Agent {
        address: format!("127.0.0.1:{port}"),
        metrics,
        pid: service.pid().unwrap(),
        _service: service,
    }
}

struct Proxy {
    address: String,
    pid: u32,
    _service: Service,
}

/// A bare TCP relay (`socat`, a process per connection): what any proxy costs here at the least,
/// TLS passing through it untouched.
fn start_socat(upstream: &Upstream, state: &Path) -> Proxy {
    let socat = testkit::process::require_tool("socat", "socat");
    let port = free_port();
    let mut command = Command::new(socat);
    command
        .arg("-b65536")
        .arg(format!("TCP-LISTEN:{port},bind=127.0.0.1,fork,reuseaddr"))
        .arg(format!("TCP:{}", upstream.host()));
    let service = Service::spawn("socat", command, state.join("socat.log")).unwrap();
    Proxy {
        address: format!("127.0.0.1:{port}"),
        pid: service.pid().unwrap(),
        _service: service,
    }
}

/// nginx doing the agent's job: TLS from the clients, TLS to the upstream over kept-alive
/// connections, responses streamed. One worker per core, AES-128-GCM preferred, as the agent.
async fn start_nginx(upstream: &Upstream, ca: &testkit::Certs, state: &Path) -> Proxy {
    let nginx = testkit::process::require_tool("nginx", "nginx");
    let dir = state.join("nginx");
    std::fs::create_dir_all(&dir).unwrap();
    let serving = ca.server(&[]).write(&dir, "server").unwrap();
    std::fs::write(dir.join("upstream-ca.crt"), upstream.ca_pem().unwrap()).unwrap();
    let port = free_port();
    let d = dir.display();
    let config = format!(
        r#"daemon off;
worker_processes auto;
pid {d}/nginx.pid;
error_log {d}/error.log warn;
events {{ worker_connections 8192; }}
http {{
  access_log off;
  client_body_temp_path {d}/body;
  proxy_temp_path {d}/proxy;
  fastcgi_temp_path {d}/fastcgi;
  uwsgi_temp_path {d}/uwsgi;
  scgi_temp_path {d}/scgi;
  upstream registry {{ server {upstream}; keepalive 64; }}
  server {{
    listen 127.0.0.1:{port} ssl;
    ssl_certificate {cert};
    ssl_certificate_key {key};
    ssl_protocols TLSv1.2 TLSv1.3;
    ssl_prefer_server_ciphers on;
    ssl_conf_command Ciphersuites TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256;
    ssl_conf_command Options ServerPreference;
    location / {{
      proxy_pass https://registry;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_buffering off;
      proxy_buffer_size 16k;
      proxy_buffers 4 16k;
      proxy_busy_buffers_size 32k;
      proxy_ssl_verify on;
      proxy_ssl_trusted_certificate {d}/upstream-ca.crt;
      proxy_ssl_name localhost;
      proxy_ssl_session_reuse on;
    }}
  }}
}}
"#,
        upstream = upstream.host(),
        cert = serving.cert.display(),
        key = serving.key.display(),
    );
    std::fs::write(dir.join("nginx.conf"), config).unwrap();
    let mut command = Command::new(nginx);
    command
        .arg("-p")
        .arg(&dir)
        .arg("-c")
        .arg(dir.join("nginx.conf"));
    let mut service = Service::spawn("nginx", command, state.join("nginx.log")).unwrap();
    let address = format!("127.0.0.1:{port}");
    let probe = address.clone();
    wait_until(&mut service, Duration::from_secs(30), || {
        let probe = probe.clone();
        async move { tokio::net::TcpStream::connect(probe).await.is_ok() }
    })
    .await;
    Proxy {
        address,
        pid: service.pid().unwrap(),
        _service: service,
    }
}

/// One way to the image: straight to the upstream or through a proxy process.
struct Via {
    name: String,
    target: Target,
    /// The proxy process (with its children), if any.
    pid: Option<u32>,
}

struct Target {
    base: String,
    repository: String,
    ca: String,
    client: reqwest::Client,
}

impl Target {
    fn new(base: String, repository: &str, ca: &str) -> Self {
        Self {
            base,
            repository: repository.to_owned(),
            ca: ca.to_owned(),
            client: http1_client(ca),
        }
    }

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

/// CPU seconds (user + system) of the upstream, the proxy and the clients, each with its
/// children.
#[derive(Default)]
struct Cpu {
    seconds: [f64; 3],
}

impl Cpu {
    /// `pids`: the upstream, the proxy (both with their children) and this process alone
    /// (its children are the others).
    fn sample(pids: &[Option<u32>; 3]) -> Self {
        let mut cpu = Self::default();
        for (i, (slot, pid)) in cpu.seconds.iter_mut().zip(pids).enumerate() {
            *slot = pid.map_or(0.0, |pid| cpu_seconds(pid, i < 2));
        }
        cpu
    }

    fn add(&mut self, before: &Cpu, after: &Cpu) {
        for i in 0..3 {
            self.seconds[i] += after.seconds[i] - before.seconds[i];
        }
    }
}

/// The processes a `ctr images pull` keeps busy.
struct PullPids {
    upstream: u32,
    /// The agent, and the replica behind it.
    between: Vec<u32>,
    /// containerd with its shims; `ctr` is this process's reaped child.
    containerd: u32,
}

/// CPU seconds spent over pulls, and the machine's busy and elapsed core-ticks.
#[derive(Default)]
struct PullCpu {
    upstream: f64,
    between: f64,
    containerd: f64,
    busy: f64,
    elapsed: f64,
}

impl PullPids {
    fn sample(&self) -> PullCpu {
        let (busy, elapsed) = machine_ticks();
        PullCpu {
            upstream: cpu_seconds(self.upstream, true),
            between: self.between.iter().map(|&p| cpu_seconds(p, true)).sum(),
            containerd: cpu_seconds(self.containerd, true) + reaped_children_seconds(),
            busy,
            elapsed,
        }
    }
}

impl PullCpu {
    fn add(&mut self, before: &PullCpu, after: &PullCpu) {
        self.upstream += after.upstream - before.upstream;
        self.between += after.between - before.between;
        self.containerd += after.containerd - before.containerd;
        self.busy += after.busy - before.busy;
        self.elapsed += after.elapsed - before.elapsed;
    }
}

/// The CPU time of the children this process has reaped (`ctr`), in seconds.
fn reaped_children_seconds() -> f64 {
    stat_fields(std::process::id()).map_or(0.0, |f| (f[13] + f[14]) as f64 / 100.0)
}

/// All cores' busy and total ticks since boot (`/proc/stat`'s `cpu` line; idle and iowait are
/// not busy).
fn machine_ticks() -> (f64, f64) {
    let stat = std::fs::read_to_string("/proc/stat").unwrap();
    let fields: Vec<f64> = stat
        .lines()
        .next()
        .unwrap()
        .split_whitespace()
        .skip(1)
        .map(|f| f.parse().unwrap_or(0.0))
        .collect();
    let total: f64 = fields.iter().take(8).sum();
    (total - fields[3] - fields[4], total)
}

/// utime + stime of `root`, in seconds; with `tree`, also of every live descendant and of the
/// children `root` has reaped (nginx workers, socat's forked relays).
fn cpu_seconds(root: u32, with_children: bool) -> f64 {
    let stats: Vec<(u32, Vec<u64>)> = std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|pid| Some((pid, stat_fields(pid)?)))
        .collect();
    let mut tree = vec![root];
    let mut grew = with_children;
    while grew {
        grew = false;
        for (pid, fields) in &stats {
            if !tree.contains(pid) && tree.contains(&(fields[1] as u32)) {
                tree.push(*pid);
                grew = true;
            }
        }
    }
    let ticks: u64 = stats
        .iter()
        .filter(|(pid, _)| tree.contains(pid))
        .map(|(pid, f)| {
            f[11]
                + f[12]
                + if *pid == root && with_children {
                    f[13] + f[14]
                } else {
                    0
                }
        })
        .sum();
    // The kernel reports them in USER_HZ, 100 per second on Linux.
    ticks as f64 / 100.0
}

/// The numeric fields of `/proc/<pid>/stat` after the command name (state counts as 0):
/// index 1 is the parent, 11–14 utime, stime, cutime, cstime.
fn stat_fields(pid: u32) -> Option<Vec<u64>> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name is in parentheses and may hold spaces.
    let rest = stat.rsplit_once(')')?.1;
    Some(
        rest.split_whitespace()
            .map(|f| f.parse().unwrap_or(0))
            .collect(),
    )
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

/// p50 and p99 of HEADs of the image's manifest through each target, one after another in
/// turn (HEADS rounds), so that the machine's background load hits every target alike.
async fn head_latencies(targets: &[&Target], digest: &str) -> Vec<(Duration, Duration)> {
    let mut samples = vec![Vec::with_capacity(HEADS); targets.len()];
    for _ in 0..HEADS {
        for (target, samples) in targets.iter().zip(&mut samples) {
            let url = format!(
                "{}/v2/{}/manifests/{digest}",
                target.base, target.repository
            );
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
    }
    samples
        .into_iter()
        .map(|mut samples| {
            samples.sort();
            (samples[HEADS / 2], samples[HEADS * 99 / 100])
        })
        .collect()
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

/// The RSS (from `rss`) of the process behind `target` with STREAMS blob streams open whose
/// clients stopped reading after the first chunk. The streams open in batches of
/// [`STREAM_BATCH`], each batch's first chunks in before the next starts, so that a thousand
/// simultaneous TLS handshakes do not leave their transient buffers in the figure; and the RSS is
/// read once the process has gone quiet (`cpu`: its CPU seconds), when every stream has filled
/// what it holds in a stall and moves no more bytes.
async fn rss_under_streams(
    target: &Target,
    image: &testkit::Image,
    rss: impl Fn() -> u64,
    cpu: impl Fn() -> f64,
) -> u64 {
    let url = target.blob_url(&image.layers[0].digest);
    let (release, _) = tokio::sync::watch::channel(false);
    let mut open = Vec::with_capacity(STREAMS);
    for batch in 0..STREAMS.div_ceil(STREAM_BATCH) {
        let mut started = Vec::new();
        for _ in (batch * STREAM_BATCH)..STREAMS.min((batch + 1) * STREAM_BATCH) {
            let client = target.client.clone();
            let url = url.clone();
            let mut released = release.subscribe();
            let (first, first_in) = tokio::sync::oneshot::channel();
            started.push(first_in);
            open.push(tokio::spawn(async move {
                let response = client.get(&url).send().await.unwrap();
                let mut stream = response.bytes_stream();
                let _first = stream.next().await;
                let _ = first.send(());
                let _ = released.wait_for(|released| *released).await;
                drop(stream);
            }));
        }
        for first_in in started {
            first_in.await.unwrap();
        }
    }
    let quiet = wait_quiet(&cpu).await;
    let rss = rss();
    println!(
        "  ({STREAMS} streams open; the process went quiet after {:.1} s)",
        quiet.as_secs_f64()
    );
    release.send_replace(true);
    for task in open {
        let _ = task.await;
    }
    rss
}

/// The RSS of process `pid` idle, and with STREAMS stalled blob streams of `target` open
/// ([`rss_under_streams`]).
async fn idle_and_streaming(target: &Target, image: &testkit::Image, pid: u32) -> (u64, u64) {
    let idle = rss_kib(pid);
    let loaded =
        rss_under_streams(target, image, || rss_kib(pid), || cpu_seconds(pid, false)).await;
    (idle, loaded)
}

/// Streams opened at a time by [`rss_under_streams`].
const STREAM_BATCH: usize = 50;

/// Waits until `cpu` (a process's CPU seconds) grows by less than 20 ms over half a second, at
/// most 30 s; returns how long that took.
async fn wait_quiet(cpu: &impl Fn() -> f64) -> Duration {
    let started = Instant::now();
    let mut last = cpu();
    while started.elapsed() < Duration::from_secs(30) {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let now = cpu();
        if now - last < 0.02 {
            break;
        }
        last = now;
    }
    started.elapsed()
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

/// "with STREAMS blob streams open X MiB, Y KiB per stream".
fn with_streams(idle: u64, loaded: u64) -> String {
    format!(
        "with {STREAMS} blob streams open {:.1} MiB, {:.1} KiB per stream",
        mib(loaded),
        loaded.saturating_sub(idle) as f64 / STREAMS as f64
    )
}

/// VmRSS of `root` and its children (nginx's master and workers).
fn rss_kib_tree(root: u32) -> u64 {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| *pid == root || stat_fields(*pid).is_some_and(|f| f[1] == u64::from(root)))
        .map(rss_kib)
        .sum()
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
