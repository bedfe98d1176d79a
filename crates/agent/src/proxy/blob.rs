//! Whole-blob relays: the digest is in the path, so the agent checks it.
//!
//! A `GET …/blobs/<digest>` without a client `Range` is relayed through [`Relay`], which
//! - hashes every byte as it passes and holds back the blob's last byte (without an announced
//!   length: the last chunk received, until the next one arrives) until the digest has verified:
//!   a client never receives the whole announced length of a blob that does not match its name,
//!   and nothing else is delayed or kept in memory;
//! - on a mismatch ends the response as broken (the connection is closed short of the announced
//!   `Content-Length`, never with a clean end of body), logs it with the target, counts it in
//!   `d8_registry_agent_digest_mismatches_total`, and remembers the target as a suspect for that
//!   digest ([`Suspects`]): the client's retry goes to the other targets first;
//! - when the upstream body breaks after `n` bytes (reset, stall, too slow, truncated), asks the
//!   next target — or, last, the same one again — for `Range: bytes=n-` and splices the answer
//!   into the same response; the digest is checked over the whole spliced stream. Only when no
//!   target can finish does the client see the break.
//!
//! Manifests and client `Range` requests are relayed as they come (a manifest is small and
//! retried whole; a partial answer cannot be checked against the digest of the whole).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures_util::StreamExt;
use http::{HeaderMap, HeaderValue, Method, Response, StatusCode, header};
use http_body_util::{BodyExt, StreamBody};
use hyper::body::Frame;
use oci::Digest;
use registry_plan::route::Kind;

use super::{Hop, Proxy, ProxyBody, relay_with};
use crate::metrics::{FailoverReason, Outcome};
use crate::upstream::Answer;

/// Targets caught serving a digest with the wrong bytes; bounded, entries expire.
#[derive(Debug, Default)]
pub(crate) struct Suspects {
    by_digest: Mutex<HashMap<Digest, (Vec<String>, Instant)>>,
}

impl Suspects {
    /// Digests remembered at most (oldest dropped first).
    const CAPACITY: usize = 1024;
    /// How long a target stays last in line for a digest.
    const FOR: Duration = Duration::from_secs(600);

    /// Remembers that `hosts` together served `digest` with the wrong bytes.
    pub(crate) fn suspect(&self, digest: Digest, hosts: Vec<String>) {
        let mut map = self.by_digest.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        map.retain(|_, (_, at)| now.duration_since(*at) < Self::FOR);
        if map.len() >= Self::CAPACITY
            && let Some(oldest) = map.iter().min_by_key(|(_, (_, at))| *at).map(|(d, _)| *d)
        {
            map.remove(&oldest);
        }
        map.insert(digest, (hosts, now));
    }

    /// Moves the suspects for `digest` behind the other targets (keeping both groups' order).
    pub(crate) fn steer(&self, digest: &Digest, hops: &mut [Hop]) {
        let map = self.by_digest.lock().unwrap_or_else(|e| e.into_inner());
        let Some((hosts, at)) = map.get(digest) else {
            return;
        };
        if at.elapsed() >= Self::FOR {
            return;
        }
        hops.sort_by_key(|hop| hosts.iter().any(|h| h == hop.name()));
    }
}

/// A whole-blob relay in progress; see the [module documentation](self).
pub(crate) struct Relay {
    proxy: Proxy,
    kind: Kind,
    digest: Digest,
    /// The forwarded request headers (no `Range`: the client sent none).
    headers: HeaderMap,
    hops: Vec<Hop>,
    /// The target serving now.
    current: usize,
    query: Option<String>,
}

impl Relay {
    pub(crate) fn new(
        proxy: Proxy,
        kind: Kind,
        digest: Digest,
        headers: HeaderMap,
        hops: Vec<Hop>,
        current: usize,
        query: Option<String>,
    ) -> Self {
        Self {
            proxy,
            kind,
            digest,
            headers,
            hops,
            current,
            query,
        }
    }

    /// The client's response: the first target's `200` head, and a body that verifies, holds
    /// back its tail and resumes.
    pub(crate) fn start(self, answer: Answer, client_repository: &str) -> Response<ProxyBody> {
        let Answer {
            status,
            headers,
            body,
            ..
        } = answer;
        let total = content_length(&headers);
        let target_repository = self.hops[self.current].repository.clone();
        let kind = self.kind;
        let resumes_left = self.hops.len() + 1;
        let state = Stream {
            verifier: Some(self.digest.verifier()),
            contributors: vec![self.current],
            relay: self,
            body,
            total,
            hashed: 0,
            held: None,
            skip: 0,
            resumes_left,
            finished: false,
        };
        let stream = futures_util::stream::unfold(state, |mut state| async move {
            let item = state.next().await?;
            Some((item.map(Frame::data), state))
        });
        relay_with(
            status,
            &headers,
            BodyExt::boxed_unsync(StreamBody::new(stream)),
            kind,
            &target_repository,
            client_repository,
        )
    }
}

struct Stream {
    relay: Relay,
    body: registry_client::Body,
    /// The blob's size, when announced.
    total: Option<u64>,
    /// Bytes hashed so far: handed on, plus the held tail.
    hashed: u64,
    verifier: Option<oci::Verifier>,
    held: Option<Bytes>,
    /// Bytes to drop from the front of the current answer (a `200` to a `Range` request).
    skip: u64,
    resumes_left: usize,
    /// The targets that contributed bytes, by index.
    contributors: Vec<usize>,
    finished: bool,
}

impl Stream {
    fn hop(&self) -> &Hop {
        &self.relay.hops[self.relay.current]
    }

    /// The next chunk for the client; an `Err` breaks the client's response.
    async fn next(&mut self) -> Option<Result<Bytes, std::io::Error>> {
        loop {
            if self.finished {
                return None;
            }
            match self.body.next().await {
                Some(Ok(mut chunk)) => {
                    if self.skip > 0 {
                        let n = self.skip.min(chunk.len() as u64);
                        chunk = chunk.slice(n as usize..);
                        self.skip -= n;
                    }
                    if chunk.is_empty() {
                        continue;
                    }
                    if let Some(total) = self.total
                        && self.hashed + chunk.len() as u64 > total
                    {
                        let error = format!("more than the announced {total} bytes");
                        if let Some(broken) = self.resume(&error).await {
                            return Some(Err(broken));
                        }
                        continue;
                    }
                    if let Some(verifier) = &mut self.verifier {
                        verifier.update(&chunk);
                    }
                    self.hashed += chunk.len() as u64;
                    match self.total {
                        // The announced length: everything but the blob's last byte goes out as
                        // it comes; the last byte waits for the digest.
                        Some(total) if self.hashed == total => {
                            let tail = chunk.split_off(chunk.len() - 1);
                            self.held = Some(tail);
                            if !chunk.is_empty() {
                                return Some(Ok(chunk));
                            }
                        }
                        Some(_) => return Some(Ok(chunk)),
                        // No length announced: the last chunk received waits for the next.
                        None => {
                            if let Some(previous) = self.held.replace(chunk) {
                                return Some(Ok(previous));
                            }
                        }
                    }
                }
                Some(Err(_)) if self.total.is_some_and(|total| self.hashed == total) => {
                    // Every byte is in: what broke after them does not matter.
                    return self.finish();
                }
                Some(Err(error)) => {
                    // Reset, stalled or too slow mid-body: avoided by the next requests too.
                    self.relay.proxy.failed_to_answer(self.hop());
                    if let Some(broken) = self.resume(&error.to_string()).await {
                        return Some(Err(broken));
                    }
                }
                None => {
                    if let Some(total) = self.total
                        && self.hashed < total
                    {
                        let error = format!("ended after {} of {total} bytes", self.hashed);
                        if let Some(broken) = self.resume(&error).await {
                            return Some(Err(broken));
                        }
                        continue;
                    }
                    return self.finish();
                }
            }
        }
    }

    /// The body is complete: the held chunk goes out if the digest verified.
    fn finish(&mut self) -> Option<Result<Bytes, std::io::Error>> {
        self.finished = true;
        let relay = &self.relay;
        let verdict = self.verifier.take().map(oci::Verifier::finish);
        match verdict {
            Some(Err(mismatch)) => {
                self.held = None;
                let hosts: Vec<String> = self
                    .contributors
                    .iter()
                    .map(|&i| relay.hops[i].name().to_owned())
                    .collect();
                tracing::error!(
                    target = %hosts.join(","),
                    digest = %relay.digest,
                    actual = %mismatch.actual,
                    bytes = self.hashed,
                    "a registry served a blob that does not match its digest; the response is \
                     broken off and the next pull of it goes to another registry first"
                );
                for host in &hosts {
                    relay.proxy.metrics.digest_mismatch(host);
                }
                relay.proxy.suspects.suspect(relay.digest, hosts);
                relay
                    .proxy
                    .metrics
                    .request(relay.kind.as_str(), Outcome::unavailable);
                Some(Err(std::io::Error::other(mismatch)))
            }
            _ => {
                relay
                    .proxy
                    .metrics
                    .request(relay.kind.as_str(), Outcome::served);
                self.held.take().map(Ok)
            }
        }
    }

    /// Continues after a break at `hashed` bytes from another target (or the same one), or
    /// returns the error that breaks the client's response.
    async fn resume(&mut self, error: &str) -> Option<std::io::Error> {
        let count = self.relay.hops.len();
        let broken = self.relay.current;
        tracing::warn!(
            target = %self.hop().name(),
            digest = %self.relay.digest,
            received = self.hashed,
            %error,
            "blob stream broke"
        );
        // The next targets in order, the one that broke last (reconnected).
        for step in 1..=count {
            if self.resumes_left == 0 {
                break;
            }
            self.resumes_left -= 1;
            let index = (broken + step) % count;
            if let Some(body) = self.ask(index, step < count).await {
                self.body = body;
                self.relay.current = index;
                if !self.contributors.contains(&index) {
                    self.contributors.push(index);
                }
                let relay = &self.relay;
                relay
                    .proxy
                    .metrics
                    .failover(relay.hops[broken].name(), FailoverReason::interrupted);
                relay.proxy.metrics.resumed(relay.hops[index].name());
                tracing::info!(
                    target = %relay.hops[index].name(),
                    digest = %relay.digest,
                    offset = self.hashed,
                    "blob stream resumed"
                );
                return None;
            }
        }
        self.finished = true;
        self.held = None;
        self.relay
            .proxy
            .metrics
            .request(self.relay.kind.as_str(), Outcome::unavailable);
        Some(std::io::Error::other(format!(
            "the blob stream broke after {} bytes and no registry could continue it: {error}",
            self.hashed
        )))
    }

    /// Asks target `index` for the rest of the blob: its body, positioned at `hashed`.
    /// `others_left`: whether another target could be asked after this one.
    async fn ask(&mut self, index: usize, others_left: bool) -> Option<registry_client::Body> {
        let relay = &self.relay;
        let hop = &relay.hops[index];
        let mut headers = relay.headers.clone();
        let range = HeaderValue::from_str(&format!("bytes={}-", self.hashed)).ok()?;
        headers.insert(header::RANGE, range);
        let answer = match relay
            .proxy
            .send(
                &Method::GET,
                &headers,
                hop,
                relay.query.as_deref(),
                others_left,
            )
            .await
        {
            Ok(answer) => answer,
            Err(error) => {
                tracing::warn!(target = %hop.name(), %error, "cannot resume the blob here");
                return None;
            }
        };
        let fits = match answer.status {
            StatusCode::PARTIAL_CONTENT => {
                content_range(&answer.headers).is_some_and(|(first, total)| {
                    first == self.hashed && self.total.is_none_or(|t| Some(t) == total)
                })
            }
            // A registry that ignores Range sends the whole blob: skip what was relayed.
            StatusCode::OK => self.total.is_none() || content_length(&answer.headers) == self.total,
            _ => false,
        };
        if !fits {
            tracing::warn!(
                target = %hop.name(),
                status = %answer.status,
                "cannot resume the blob here"
            );
            return None;
        }
        self.skip = if answer.status == StatusCode::OK {
            self.hashed
        } else {
            0
        };
        Some(answer.body)
    }
}

fn content_length(headers: &HeaderMap) -> Option<u64> {
    headers
        .get(header::CONTENT_LENGTH)?
        .to_str()
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// `Content-Range: bytes first-last/total` → `(first, total)` (`None` for `*`).
fn content_range(headers: &HeaderMap) -> Option<(u64, Option<u64>)> {
    let value = headers.get(header::CONTENT_RANGE)?.to_str().ok()?;
    let (range, total) = value.strip_prefix("bytes ")?.split_once('/')?;
    let (first, _) = range.split_once('-')?;
    Some((first.trim().parse().ok()?, total.trim().parse().ok()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hop(host: &str) -> Hop {
        Hop {
            scheme: registry_plan::Scheme::Http,
            host: host.to_owned(),
            path: "/v2/x/blobs/sha256:0".into(),
            ca: None,
            credentials: None,
            repository: "x".into(),
        }
    }

    #[test]
    fn suspects_go_last_for_their_digest_only() {
        let suspects = Suspects::default();
        let bad = Digest::sha256(b"bad");
        let other = Digest::sha256(b"other");
        suspects.suspect(bad, vec!["a:1".into()]);
        let mut hops = vec![hop("a:1"), hop("b:2"), hop("c:3")];
        suspects.steer(&bad, &mut hops);
        let names: Vec<_> = hops.iter().map(Hop::name).collect();
        assert_eq!(names, ["b:2", "c:3", "a:1"]);
        let mut hops = vec![hop("a:1"), hop("b:2")];
        suspects.steer(&other, &mut hops);
        assert_eq!(hops[0].name(), "a:1");
    }

    #[test]
    fn content_range_parses() {
        let mut headers = HeaderMap::new();
        headers.insert(
            header::CONTENT_RANGE,
            HeaderValue::from_static("bytes 10-19/100"),
        );
        assert_eq!(content_range(&headers), Some((10, Some(100))));
        headers.insert(
            header::CONTENT_RANGE,
            HeaderValue::from_static("bytes 10-19/*"),
        );
        assert_eq!(content_range(&headers), Some((10, None)));
    }
}
