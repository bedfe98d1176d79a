//! Switching the cluster's CNI. The decisions — the manager's phases in order, the agent's
//! steps on a node, which pods restart, what `switch` refuses — are in [`plan`].

pub mod plan;
