//! Serving and pull-through against Debian's `docker-registry` (CNCF distribution 2.8), in one
//! run, printing ratios (median of rotating rounds):
//!
//! (a) warm serving of 1 GiB of blobs to 16 concurrent curl clients: ours vs distribution vs a
//!     bare `sendfile` server (the machine's ceiling), over plain HTTP (`plain`); and ours vs
//!     distribution over TLS (`tls`), the listeners a cluster uses, certificates of one CA;
//! (b) 50 concurrent cold pulls of one 256 MiB blob: our pull-through vs distribution's `proxy`
//!     mode — upstream bytes and time (`cold`);
//! (c) fill rate: one cold pull through us vs the same blob straight from the upstream and
//!     through `socat`, a bare relay (`fill`);
//! (d) uploads over TLS: curl clients each pushing a blob (one `POST`, then the whole body in
//!     one `PUT` with its digest), into our write listener vs into distribution (`push`).
//!
//! `cargo bench -p storage --bench serve` (needs `docker-registry`, `curl` and `socat`). Knobs:
//! see [`Knobs`].
#![allow(clippy::print_stdout)]

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener as StdListener;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use storage::{Accounts, Limits, Listener, Registry, Settings, Store, Tls, Upstream};

const MIB: usize = 1 << 20;

/// No filesystem reserve: the default (up to 60 GiB free) refuses every write on a build
/// machine's half-full disk, and this bench measures serving, not the limits.
const NO_RESERVE: Limits = Limits {
    budget: None,
    reserve: Some(0),
};

fn content(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut out = Vec::with_capacity(len);
    while out.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out.extend_from_slice(&x.to_le_bytes());
    }
    out.truncate(len);
    out
}

async fn push_blob(http: &reqwest::Client, base: &str, repo: &str, data: Vec<u8>) -> String {
    let digest = oci::Digest::sha256(&data).to_string();
    let r = http
        .post(format!("{base}/v2/{repo}/blobs/uploads/"))
        .send()
        .await
        .expect("post");
    let location = r.headers()["location"]
        .to_str()
        .expect("location")
        .to_owned();
    let url = if location.starts_with("http") {
        location
    } else {
        format!("{base}{location}")
    };
    let sep = if url.contains('?') { '&' } else { '?' };
    let put = http
        .put(format!("{url}{sep}digest={digest}"))
        .header("content-type", "application/octet-stream")
        .body(data)
        .send()
        .await
        .expect("put");
    assert_eq!(put.status(), 201, "push to {base}");
    digest
}

/// A bare HTTP/1.1 server answering every GET with a file by `sendfile`, one thread per
/// connection: the machine's ceiling for serving files over loopback.
fn sendfile_server(root: PathBuf) -> u16 {
    let listener = StdListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let root = root.clone();
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stream.try_clone().expect("clone"));
                let mut stream = stream;
                loop {
                    let mut line = String::new();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 {
                        return;
                    }
                    let path = line.split_whitespace().nth(1).unwrap_or("/").to_owned();
                    loop {
                        let mut h = String::new();
                        if reader.read_line(&mut h).unwrap_or(0) == 0 || h == "\r\n" {
                            break;
                        }
                    }
                    let name = path.rsplit('/').next().unwrap_or("").replace("sha256:", "");
                    let Ok(file) = std::fs::File::open(root.join(&name)) else {
                        let _ = stream
                            .write_all(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n");
                        continue;
                    };
                    let len = file.metadata().expect("stat").len();
                    let _ = write!(
                        stream,
                        "HTTP/1.1 200 OK\r\ncontent-length: {len}\r\ncontent-type: application/octet-stream\r\n\r\n"
                    );
                    let mut offset = 0u64;
                    while offset < len {
                        let count = (len - offset) as usize;
                        match rustix::fs::sendfile(&stream, &file, Some(&mut offset), count) {
                            Ok(0) | Err(_) => return,
                            Ok(_) => {}
                        }
                    }
                }
            });
        }
    });
    port
}

/// `clients` concurrent curl processes, each fetching every URL in turn with `args` added;
/// returns seconds.
async fn curl_all(clients: usize, urls: &[String], args: &[String]) -> f64 {
    let start = Instant::now();
    let mut children = Vec::new();
    for _ in 0..clients {
        let mut command = tokio::process::Command::new("curl");
        command.args(["-s", "--fail", "--http1.1"]).args(args);
        for url in urls {
            command.args(["-o", "/dev/null", url]);
        }
        children.push(command.status());
    }
    for status in futures_util::future::join_all(children).await {
        assert!(status.expect("curl").success(), "a curl client failed");
    }
    start.elapsed().as_secs_f64()
}

/// Serves `listener` on a loopback port: plain HTTP, or TLS with `tls`. Returns the base URL.
async fn serve(listener: Listener, tls: Option<&Tls>) -> String {
    let socket = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = socket.local_addr().expect("addr");
    let acceptor = tls.map(|t| storage::server::acceptor(t).expect("acceptor"));
    let scheme = if tls.is_some() { "https" } else { "http" };
    tokio::spawn(storage::server::serve(
        socket,
        acceptor,
        listener,
        std::future::pending(),
    ));
    format!("{scheme}://{addr}")
}

fn upstream_bytes(log: &str, path: &str) -> u64 {
    log.lines()
        .filter(|l| l.contains(&format!("\"GET {path} ")))
        .filter_map(|l| {
            let after = l.split("\" ").nth(1)?;
            let mut parts = after.split_whitespace();
            let status = parts.next()?;
            (status == "200").then(|| parts.next()?.parse::<u64>().ok())?
        })
        .sum()
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The bench's knobs: `BENCH_ROWS` (comma-separated of `plain`, `tls`, `cold`, `fill`, `push`;
/// all by default), `BENCH_WARM_MB` (what each warm client fetches, default 1024, in blobs of up
/// to 128 MiB), `BENCH_BLOB_MB` (the cold and fill blobs, default 256), `BENCH_PUSH_MB` (the blob
/// each of row (d)'s 8 clients pushes, default 128), `BENCH_ROUNDS` (rotating rounds of rows (a)
/// and (d), default 3) and `BENCH_FILL_ROUNDS` (of row (c), default 5).
struct Knobs {
    rows: Vec<String>,
    warm: usize,
    blob: usize,
    push: usize,
    rounds: usize,
    fill_rounds: usize,
}

impl Knobs {
    fn from_env() -> Self {
        let rows = std::env::var("BENCH_ROWS")
            .unwrap_or_else(|_| "plain,tls,cold,fill,push".into())
            .split(',')
            .map(|r| r.trim().to_owned())
            .collect();
        Self {
            rows,
            warm: env_usize("BENCH_WARM_MB", 1024) * MIB,
            blob: env_usize("BENCH_BLOB_MB", 256) * MIB,
            push: env_usize("BENCH_PUSH_MB", 128) * MIB,
            rounds: env_usize("BENCH_ROUNDS", 3).max(1),
            fill_rounds: env_usize("BENCH_FILL_ROUNDS", 5).max(1),
        }
    }

    fn wants(&self, row: &str) -> bool {
        self.rows.iter().any(|r| r == row)
    }

    /// The warm rows' blobs: 128 MiB each, or one smaller one.
    fn warm_blobs(&self) -> Vec<usize> {
        let size = self.warm.min(128 * MIB);
        vec![size; (self.warm / size).max(1)]
    }
}

/// A store holding `sizes` blobs of deterministic content, and their digests.
fn warm_store(root: &std::path::Path, sizes: &[usize]) -> (Store, Vec<(oci::Digest, Vec<u8>)>) {
    let store = Store::open(root, NO_RESERVE).expect("store");
    let mut blobs = Vec::new();
    for (i, len) in sizes.iter().enumerate() {
        let data = content(*len, i as u64 + 1);
        let digest = oci::Digest::sha256(&data);
        let mut w = store
            .writer(oci::Algorithm::Sha256, Some(data.len() as u64))
            .expect("writer");
        w.write(&data).expect("write");
        w.commit(Some(digest)).expect("commit");
        blobs.push((digest, data));
    }
    (store, blobs)
}

fn blob_urls(base: &str, repo: &str, digests: &[String]) -> Vec<String> {
    digests
        .iter()
        .map(|d| format!("{base}/v2/{repo}/blobs/{d}"))
        .collect()
}

/// One measured way in a rotating round.
struct Way {
    name: &'static str,
    urls: Vec<String>,
    args: Vec<String>,
}

/// `rounds` rounds of `ways` ways, the order rotating by one each round; `run(i)` runs way `i`
/// once and returns its seconds. Returns each way's seconds per round, and the CPU seconds this
/// process spent in its rounds (the replica's, for our way).
async fn rotate<F, Fut>(ways: usize, rounds: usize, mut run: F) -> (Vec<Vec<f64>>, Vec<f64>)
where
    F: FnMut(usize) -> Fut,
    Fut: std::future::Future<Output = f64>,
{
    let mut secs = vec![Vec::new(); ways];
    let mut cpu = vec![0.0; ways];
    for round in 0..rounds {
        for k in 0..ways {
            let i = (round + k) % ways;
            let before = own_cpu_secs();
            secs[i].push(run(i).await);
            cpu[i] += own_cpu_secs() - before;
        }
    }
    (secs, cpu)
}

/// `values` with two decimals, comma-separated: a row's rounds.
fn listed(values: &[f64]) -> String {
    values
        .iter()
        .map(|v| format!("{v:.2}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// (a) warm serving over plain HTTP: ours vs distribution vs a bare sendfile server.
async fn warm_plain(knobs: &Knobs, scratch: &std::path::Path, http: &reqwest::Client) {
    let sizes = knobs.warm_blobs();
    let (store, blobs) = warm_store(&scratch.join("ours"), &sizes);
    let distribution = testkit::Upstream::start_plain().await;
    let sendfile_root = scratch.join("sendfile");
    std::fs::create_dir_all(&sendfile_root).expect("dir");
    let mut digests = Vec::new();
    for (digest, data) in blobs {
        std::fs::hard_link(
            store.blob_path(&digest),
            sendfile_root.join(digest.encoded()),
        )
        .expect("link");
        let pushed = push_blob(http, &distribution.url(), "bench/warm", data).await;
        assert_eq!(pushed, digest.to_string());
        digests.push(digest.to_string());
    }
    let ours = serve(
        Listener::read(
            Registry::new(store.clone(), None, Settings::default()),
            Accounts::open(),
        ),
        None,
    )
    .await;
    let sendfile = format!("http://127.0.0.1:{}", sendfile_server(sendfile_root));
    let way = |name, base: &str| Way {
        name,
        urls: blob_urls(base, "bench/warm", &digests),
        args: Vec::new(),
    };
    let ways = [
        way("sendfile", &sendfile),
        way("distribution", &distribution.url()),
        way("ours", &ours),
    ];
    warm_rounds("(a) plain HTTP", &ways, knobs, sizes.iter().sum()).await;
}

/// Warms every way once, runs the rotating rounds and prints throughputs and ratios to the
/// first two ways.
async fn warm_rounds(title: &str, ways: &[Way], knobs: &Knobs, per_client: usize) {
    let clients = 16;
    for way in ways {
        curl_all(1, &way.urls, &way.args).await;
    }
    let (secs, cpu) = rotate(ways.len(), knobs.rounds, |i| {
        curl_all(clients, &ways[i].urls, &ways[i].args)
    })
    .await;
    let total = (clients * per_client) as f64;
    let rates: Vec<String> = ways
        .iter()
        .zip(&secs)
        .map(|(way, s)| {
            let per_round: Vec<String> = s
                .iter()
                .map(|t| format!("{:.2}", total / t / 1e9))
                .collect();
            format!(
                "{} {:.2} GB/s (rounds {})",
                way.name,
                total / median(s.clone()) / 1e9,
                per_round.join(", ")
            )
        })
        .collect();
    println!(
        "{title}, warm, {clients} clients x {} MiB, median of {} rotating rounds: {}",
        per_client / MIB,
        knobs.rounds,
        rates.join("; ")
    );
    let ours = secs.len() - 1;
    println!(
        "    our CPU per GiB served = {:.2} s",
        cpu[ours] / (total * knobs.rounds as f64 / (1u64 << 30) as f64)
    );
    for (i, way) in ways.iter().enumerate().take(ours) {
        let ratios: Vec<f64> = secs[i]
            .iter()
            .zip(&secs[ours])
            .map(|(theirs, mine)| theirs / mine)
            .collect();
        println!(
            "    ours/{} = {:.2} (median of the rounds' ratios; rounds {})",
            way.name,
            median(ratios.clone()),
            listed(&ratios)
        );
    }
}

/// (a) over TLS, the listeners a cluster uses: ours vs distribution, both with a certificate of
/// the same CA, curl trusting only that CA.
async fn warm_tls(knobs: &Knobs, scratch: &std::path::Path) {
    let ca = testkit::Certs::new("bench CA");
    let ca_path = scratch.join("ca.crt");
    ca.write_ca(&ca_path).expect("write CA");
    let http = testkit::http_client(Some(&ca.ca_pem()));
    let sizes = knobs.warm_blobs();
    let (store, blobs) = warm_store(&scratch.join("ours-tls"), &sizes);
    let distribution = testkit::Upstream::start(testkit::UpstreamOptions::default().tls(&ca)).await;
    let mut digests = Vec::new();
    for (digest, data) in blobs {
        let pushed = push_blob(&http, &distribution.url(), "bench/warm", data).await;
        assert_eq!(pushed, digest.to_string());
        digests.push(digest.to_string());
    }
    let tls = server_tls(&ca);
    let ours = serve(
        Listener::read(
            Registry::new(store.clone(), None, Settings::default()),
            Accounts::open(),
        ),
        Some(&tls),
    )
    .await;
    let args = vec!["--cacert".to_owned(), ca_path.display().to_string()];
    for base in [&distribution.url(), &ours] {
        println!("    {base}: {}", negotiated(base, &args).await);
    }
    let way = |name, base: &str| Way {
        name,
        urls: blob_urls(base, "bench/warm", &digests),
        args: args.clone(),
    };
    let ways = [way("distribution", &distribution.url()), way("ours", &ours)];
    warm_rounds(
        "(a) TLS (target ours/distribution >= 1.2)",
        &ways,
        knobs,
        sizes.iter().sum(),
    )
    .await;
}

/// A serving certificate of `ca` for our listeners, no client certificate asked for.
fn server_tls(ca: &testkit::Certs) -> Tls {
    let serving = ca.server(&[]);
    Tls {
        cert_pem: serving.cert_pem,
        key_pem: serving.key_pem,
        client_ca_pem: None,
        ingress_client_ca: None,
    }
}

/// The protocol and cipher curl negotiates with `base`, from its verbose output.
async fn negotiated(base: &str, args: &[String]) -> String {
    let out = tokio::process::Command::new("curl")
        .args(["-sv", "--http1.1", "-o", "/dev/null"])
        .args(args)
        .arg(format!("{base}/v2/"))
        .output()
        .await
        .expect("curl");
    String::from_utf8_lossy(&out.stderr)
        .lines()
        .find(|l| l.contains("SSL connection using"))
        .map_or_else(
            || "no TLS".to_owned(),
            |l| l.trim_start_matches("* ").to_owned(),
        )
}

/// A pull-through replica of `upstream` on a store at `root`.
async fn pull_through(upstream: &testkit::Upstream, root: &std::path::Path) -> (Store, String) {
    let endpoint = registry_client::Endpoint::from_url(&upstream.url()).expect("endpoint");
    let remote = registry_client::Client::new(registry_client::Config::default())
        .remote(endpoint)
        .expect("remote");
    let cache = Store::open(root, NO_RESERVE).expect("store");
    let url = serve(
        Listener::read(
            Registry::new(
                cache.clone(),
                Some(Upstream {
                    remote,
                    prefix: String::new(),
                }),
                Settings::default(),
            ),
            Accounts::open(),
        ),
        None,
    )
    .await;
    (cache, url)
}

const BIG_REPO: &str = "deckhouse/ee/big";

/// (b) 50 concurrent cold pulls of one blob: our pull-through vs distribution's proxy mode.
async fn cold_clients(knobs: &Knobs, scratch: &std::path::Path, http: &reqwest::Client) {
    let upstream = testkit::Upstream::start_plain().await;
    let d1 = push_blob(http, &upstream.url(), BIG_REPO, content(knobs.blob, 101)).await;
    let d2 = push_blob(http, &upstream.url(), BIG_REPO, content(knobs.blob, 102)).await;
    let proxy =
        testkit::Upstream::start(testkit::UpstreamOptions::default().proxy(&upstream.url(), None))
            .await;
    let (_cache, ours) = pull_through(&upstream, &scratch.join("cache-b")).await;
    let one = |base: &str, d: &str| blob_urls(base, BIG_REPO, &[d.to_owned()]);
    let path = |d: &str| format!("/v2/{BIG_REPO}/blobs/{d}");
    let t_dist = curl_all(50, &one(&proxy.url(), &d1), &[]).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let dist_bytes = upstream_bytes(&upstream.log(), &path(&d1));
    let t_ours = curl_all(50, &one(&ours, &d2), &[]).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let our_bytes = upstream_bytes(&upstream.log(), &path(&d2));
    let ratio = |b: u64| b as f64 / knobs.blob as f64;
    println!(
        "(b) 50 cold clients, {} MiB blob: distribution proxy fetched {:.2}x the blob upstream in {t_dist:.2} s; ours {:.2}x (target <= 1.05) in {t_ours:.2} s",
        knobs.blob / MIB,
        ratio(dist_bytes),
        ratio(our_bytes)
    );
}

/// A bare TCP relay to `upstream` (`socat`, a process per connection): what one more hop costs
/// on this machine, the ceiling of any pull-through. Returns its URL and the process.
fn socat_relay(upstream: &testkit::Upstream, log: PathBuf) -> (String, testkit::process::Service) {
    let socat = testkit::process::require_tool("socat", "socat");
    let port = testkit::process::free_port();
    let mut command = std::process::Command::new(socat);
    command
        .arg("-b65536")
        .arg(format!("TCP-LISTEN:{port},bind=127.0.0.1,fork,reuseaddr"))
        .arg(format!("TCP:{}", upstream.host()));
    let service = testkit::process::Service::spawn("socat", command, log).expect("socat");
    (format!("http://127.0.0.1:{port}"), service)
}

/// (c) one cold pull through our fill vs the same blob straight from the upstream and through a
/// bare relay, a fresh blob every round, the order rotating.
async fn fill_rate(knobs: &Knobs, scratch: &std::path::Path, http: &reqwest::Client) {
    let upstream = testkit::Upstream::start_plain().await;
    let (cache, ours) = pull_through(&upstream, &scratch.join("cache-c")).await;
    let (relay, _socat) = socat_relay(&upstream, scratch.join("socat.log"));
    let names = ["direct", "socat", "fill"];
    let bases = [upstream.url(), relay, ours];
    let mut secs = vec![Vec::new(); names.len()];
    let mut fill_cpu = Vec::new();
    for round in 0..knobs.fill_rounds {
        let data = content(knobs.blob, 300 + round as u64);
        let digest: oci::Digest = push_blob(http, &upstream.url(), BIG_REPO, data)
            .await
            .parse()
            .expect("digest");
        // what a fresh push leaves: the blob in the upstream's page cache, nothing dirty
        sync_disks().await;
        for k in 0..names.len() {
            let i = (round + k) % names.len();
            let urls = blob_urls(&bases[i], BIG_REPO, &[digest.to_string()]);
            let cpu = own_cpu_secs();
            secs[i].push(curl_all(1, &urls, &[]).await);
            if names[i] == "fill" {
                fill_cpu.push((own_cpu_secs() - cpu) / (knobs.blob as f64 / (1u64 << 30) as f64));
                // the commit (fsync) follows the last byte: let it end before the next pull
                while cache.blob_size(&digest).is_none() {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                sync_disks().await;
            }
        }
    }
    let gbps = |s: &[f64]| knobs.blob as f64 / median(s.to_vec()) / 1e9;
    let ratios = |i: usize| -> Vec<f64> {
        secs[0]
            .iter()
            .zip(&secs[i])
            .map(|(direct, way)| direct / way)
            .collect()
    };
    println!(
        "(c) one cold {} MiB pull, median of {} rotating rounds: direct {:.2} GB/s, through socat {:.2} GB/s, through our fill {:.2} GB/s",
        knobs.blob / MIB,
        knobs.fill_rounds,
        gbps(&secs[0]),
        gbps(&secs[1]),
        gbps(&secs[2])
    );
    println!(
        "    fill/direct = {:.2} (target >= 0.9; rounds {}), socat/direct = {:.2} (the ceiling of one more hop; rounds {})",
        median(ratios(2)),
        listed(&ratios(2)),
        median(ratios(1)),
        listed(&ratios(1))
    );
    println!(
        "    our CPU per GiB filled (receive, write, hash, send) = {:.2} s (median; rounds {})",
        median(fill_cpu.clone()),
        listed(&fill_cpu)
    );
}

/// One client's upload: `POST` for a session, then the file in one `PUT` with its digest
/// (`Expect: 100-continue` off, as a registry client sends it).
const PUSH_SCRIPT: &str = r#"set -e
loc=$(curl -s --fail --http1.1 --cacert "$CA" -X POST -o /dev/null -w '%header{location}' \
  "$BASE/v2/bench/push/blobs/uploads/")
case "$loc" in http*) ;; *) loc="$BASE$loc" ;; esac
case "$loc" in *\?*) sep='&' ;; *) sep='?' ;; esac
curl -s --fail --http1.1 --cacert "$CA" -H 'Expect:' -H 'content-type: application/octet-stream' \
  -T "$FILE" -o /dev/null "$loc${sep}digest=$DIGEST"
"#;

/// (d) uploads over TLS: 8 clients each push their own blob, into our write listener vs into
/// distribution, in rotating rounds; our CPU per GiB received.
async fn push_rate(knobs: &Knobs, scratch: &std::path::Path) {
    const CLIENTS: usize = 8;
    let ca = testkit::Certs::new("bench CA");
    let ca_path = scratch.join("push-ca.crt");
    ca.write_ca(&ca_path).expect("write CA");
    let mut files = Vec::new();
    for i in 0..CLIENTS {
        let data = content(knobs.push, 1000 + i as u64);
        let digest = oci::Digest::sha256(&data).to_string();
        let path = scratch.join(format!("push-{i}.bin"));
        std::fs::write(&path, data).expect("write the blob to push");
        files.push((path, digest));
    }
    let distribution = testkit::Upstream::start(testkit::UpstreamOptions::default().tls(&ca)).await;
    let tls = server_tls(&ca);
    let store = Store::open(&scratch.join("ours-push"), NO_RESERVE).expect("store");
    let ours = serve(
        Listener::write(
            Registry::new(store, None, Settings::default()),
            Accounts::open(),
            false,
        ),
        Some(&tls),
    )
    .await;
    let ways = [("distribution", distribution.url()), ("ours", ours)];
    let push_all = |base: &str| {
        let start = Instant::now();
        let children: Vec<_> = files
            .iter()
            .map(|(file, digest)| {
                tokio::process::Command::new("sh")
                    .args(["-c", PUSH_SCRIPT])
                    .env("BASE", base)
                    .env("CA", &ca_path)
                    .env("FILE", file)
                    .env("DIGEST", digest)
                    .spawn()
                    .expect("sh")
            })
            .collect();
        async move {
            for mut child in children {
                assert!(
                    child.wait().await.expect("sh").success(),
                    "an upload failed"
                );
            }
            start.elapsed().as_secs_f64()
        }
    };
    for (_, base) in &ways {
        push_all(base).await;
    }
    let push_all = &push_all;
    let (secs, cpu) = rotate(ways.len(), knobs.rounds, |i| {
        let base = &ways[i].1;
        async move {
            // the previous round's writeback is not this one's
            sync_disks().await;
            push_all(base).await
        }
    })
    .await;
    let total = (CLIENTS * knobs.push) as f64;
    let rates: Vec<String> = ways
        .iter()
        .zip(&secs)
        .map(|((name, _), s)| format!("{name} {:.2} GB/s", total / median(s.clone()) / 1e9))
        .collect();
    let ratios: Vec<f64> = secs[0].iter().zip(&secs[1]).map(|(d, o)| d / o).collect();
    println!(
        "(d) push over TLS, {CLIENTS} clients x {} MiB, median of {} rotating rounds: {}",
        knobs.push / MIB,
        knobs.rounds,
        rates.join("; ")
    );
    println!(
        "    ours/distribution = {:.2} (rounds {}); our CPU per GiB received = {:.2} s",
        median(ratios.clone()),
        listed(&ratios),
        cpu[1] / (total * knobs.rounds as f64 / (1u64 << 30) as f64)
    );
}

/// CPU seconds this process has used, all threads (`/proc/self/stat`, 10 ms ticks): the
/// replica's work, since the bench's own thread only waits for curl.
fn own_cpu_secs() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").expect("/proc/self/stat");
    let after_name = &stat[stat.rfind(')').expect("command name") + 2..];
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    // utime and stime: fields 14 and 15 of the line, 11 and 12 after the name and state
    let ticks: u64 =
        fields[11].parse::<u64>().expect("utime") + fields[12].parse::<u64>().expect("stime");
    ticks as f64 / 100.0
}

async fn sync_disks() {
    let _ = tokio::process::Command::new("sync").status().await;
}

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    testkit::install_crypto();
    let knobs = Knobs::from_env();
    let http = testkit::http_client(None);
    let scratch = tempfile::tempdir().expect("tempdir");
    if knobs.wants("plain") {
        warm_plain(&knobs, scratch.path(), &http).await;
    }
    if knobs.wants("tls") {
        warm_tls(&knobs, scratch.path()).await;
    }
    if knobs.wants("cold") {
        cold_clients(&knobs, scratch.path(), &http).await;
    }
    if knobs.wants("fill") {
        fill_rate(&knobs, scratch.path(), &http).await;
    }
    if knobs.wants("push") {
        push_rate(&knobs, scratch.path()).await;
    }
}
