//! Pure decisions of the `registry` module: the resolved node layout and the agent's request
//! routing (which registries serve a pull, in which order, with which credentials), the cache
//! replicas' store limits ([`budget`]), leader eligibility and phase ([`election`]), the
//! expected image set with completeness ([`expected`]), and the garbage collection keep rules
//! ([`gc`]).
//!
//! Pure: no tokio, no sockets, no filesystem, no Kubernetes client. The agent, the controller
//! and the storage replicas call these functions with what they observed and act on the answer.

pub mod budget;
pub mod election;
pub mod expected;
pub mod gc;
pub mod layout;
pub mod route;

pub use layout::{Backend, BackendName, Credentials, Endpoint, Layout, Mirror, Route, Scheme};
pub use route::{Kind, Resolution, Target, Unroutable, resolve};
