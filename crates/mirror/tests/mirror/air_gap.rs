//! Into a storage replica's publish endpoint over mTLS, then containerd pulls the release
//! through the agent with no upstream at all.
