//! End to end with real components: a docker-registry source built with testkit, bundles on
//! disk, docker-registry and storage replicas as targets, the agent and containerd pulling.

mod air_gap;
mod common;
mod own_images;
mod pull_push;
