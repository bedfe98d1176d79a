//! The replica end to end: real docker-registry upstreams, skopeo over mTLS, controlled
//! upstreams for growing-file reads, and `kill -9` of a writing child process.

mod bearer;
mod common;
mod durability;
mod faults;
mod growing;
mod headers;
mod manners;
mod publish;
mod pull_through;
mod referrers;
mod replicate;
mod stalled;
mod tls;
