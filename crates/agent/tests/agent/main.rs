//! The agent against real components: docker-registry upstreams, containerd, skopeo.

mod common;
mod failover;
mod faults;
mod headers;
mod pull;
mod routes;
mod streaming;
