//! Verdicts kept for a while, so a scrape every few seconds does not cost two reviews each time.
//! Keys are SHA-256 digests: a bearer token is never kept as such.

use std::collections::HashMap;
use std::time::Duration;

use sha2::{Digest, Sha256};
use tokio::time::Instant;

/// At most this many verdicts are kept; when full, expired ones go, then all.
const CAPACITY: usize = 4096;

/// A bounded map from digests to values that expire.
#[derive(Debug)]
pub(crate) struct TtlCache<V> {
    entries: HashMap<[u8; 32], (Instant, V)>,
}

impl<V> Default for TtlCache<V> {
    fn default() -> Self {
        Self {
            entries: HashMap::new(),
        }
    }
}

/// The digest a secret or a question is kept under.
pub(crate) fn digest(parts: &[&str]) -> [u8; 32] {
    let mut h = Sha256::new();
    for p in parts {
        h.update(p.as_bytes());
        h.update([0]);
    }
    h.finalize().into()
}

impl<V: Clone> TtlCache<V> {
    /// The value under `key`, unless it expired by `now`.
    pub(crate) fn get(&mut self, key: &[u8; 32], now: Instant) -> Option<V> {
        match self.entries.get(key) {
            Some((until, v)) if *until > now => Some(v.clone()),
            Some(_) => {
                self.entries.remove(key);
                None
            }
            None => None,
        }
    }

    /// Keeps `value` under `key` for `ttl` from `now`.
    pub(crate) fn insert(&mut self, key: [u8; 32], value: V, ttl: Duration, now: Instant) {
        if self.entries.len() >= CAPACITY {
            self.entries.retain(|_, (until, _)| *until > now);
            if self.entries.len() >= CAPACITY {
                self.entries.clear();
            }
        }
        self.entries.insert(key, (now + ttl, value));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn entries_expire_and_the_size_is_bounded() {
        let mut c = TtlCache::default();
        let now = Instant::now();
        c.insert(digest(&["a"]), 1, Duration::from_secs(10), now);
        assert_eq!(
            c.get(&digest(&["a"]), now + Duration::from_secs(9)),
            Some(1)
        );
        assert_eq!(c.get(&digest(&["a"]), now + Duration::from_secs(10)), None);
        assert_eq!(
            c.get(&digest(&["a"]), now),
            None,
            "an expired entry is gone"
        );
        for i in 0..CAPACITY + 10 {
            c.insert(digest(&[&i.to_string()]), i, Duration::from_secs(1), now);
        }
        assert!(c.entries.len() <= CAPACITY);
        assert_ne!(digest(&["ab", "c"]), digest(&["a", "bc"]));
    }
}
