//! Canary waves: a channel may roll a release out in waves, and each cluster picks its wave from a
//! hash of its UUID and the release version, so that the same cluster always lands in the same
//! wave for a given release.
//!
//! Deckhouse computes `wave = murmur3.Sum64([]byte(clusterUUID + version)) % waves` with
//! `github.com/spaolacci/murmur3`, whose `Sum64` is the first half of MurmurHash3_x64_128 with
//! seed 0 over the little-endian reading of the input, and sets
//! `applyAfter = now + wave × interval` (no `applyAfter` for wave 0). [`sum64`] is that hash,
//! bit for bit.

use jiff::{SignedDuration, Timestamp};

use crate::Error;

const C1: u64 = 0x87c3_7b91_1142_53d5;
const C2: u64 = 0x4cf5_ad43_2745_937f;

/// Little-endian value of up to eight bytes (the tail handling of MurmurHash3 reads a short
/// block the same way).
fn le(bytes: &[u8]) -> u64 {
    bytes
        .iter()
        .rev()
        .fold(0, |acc, &b| (acc << 8) | u64::from(b))
}

fn fmix64(mut k: u64) -> u64 {
    k ^= k >> 33;
    k = k.wrapping_mul(0xff51_afd7_ed55_8ccd);
    k ^= k >> 33;
    k = k.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    k ^= k >> 33;
    k
}

/// MurmurHash3_x64_128 of `data` with `seed`, as the two 64-bit halves `(h1, h2)`.
pub fn murmur3_x64_128(data: &[u8], seed: u32) -> (u64, u64) {
    let mut h1 = u64::from(seed);
    let mut h2 = u64::from(seed);
    let blocks = data.chunks_exact(16);
    let tail = blocks.remainder();
    for block in blocks {
        let (lo, hi) = block.split_at(8);
        let k1 = le(lo).wrapping_mul(C1).rotate_left(31).wrapping_mul(C2);
        h1 ^= k1;
        h1 = h1
            .rotate_left(27)
            .wrapping_add(h2)
            .wrapping_mul(5)
            .wrapping_add(0x52dc_e729);
        let k2 = le(hi).wrapping_mul(C2).rotate_left(33).wrapping_mul(C1);
        h2 ^= k2;
        h2 = h2
            .rotate_left(31)
            .wrapping_add(h1)
            .wrapping_mul(5)
            .wrapping_add(0x3849_5ab5);
    }
    if tail.len() > 8 {
        let k2 = le(&tail[8..])
            .wrapping_mul(C2)
            .rotate_left(33)
            .wrapping_mul(C1);
        h2 ^= k2;
    }
    if !tail.is_empty() {
        let k1 = le(&tail[..tail.len().min(8)])
            .wrapping_mul(C1)
            .rotate_left(31)
            .wrapping_mul(C2);
        h1 ^= k1;
    }
    let len = data.len() as u64;
    h1 ^= len;
    h2 ^= len;
    h1 = h1.wrapping_add(h2);
    h2 = h2.wrapping_add(h1);
    h1 = fmix64(h1);
    h2 = fmix64(h2);
    h1 = h1.wrapping_add(h2);
    h2 = h2.wrapping_add(h1);
    (h1, h2)
}

/// Go's `murmur3.Sum64(data)` (spaolacci/murmur3): the first half of MurmurHash3_x64_128, seed 0.
pub fn sum64(data: &[u8]) -> u64 {
    murmur3_x64_128(data, 0).0
}

/// The canary settings of one channel in the channel's `version.json`
/// (`canary.<channel>: {enabled, waves, interval}`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CanarySettings {
    /// Whether the channel rolls this release out in waves.
    pub enabled: bool,
    /// The number of waves.
    pub waves: u64,
    /// The time between two waves.
    pub interval: SignedDuration,
}

/// The wave of a cluster for a release: `sum64(cluster_uuid + version) % waves`. `version` is the
/// version exactly as the channel writes it (`v1.25.5`). Zero waves (which would make Deckhouse
/// divide by zero) means wave 0.
pub fn wave(cluster_uuid: &str, version: &str, waves: u64) -> u64 {
    if waves == 0 {
        return 0;
    }
    let mut data = Vec::with_capacity(cluster_uuid.len() + version.len());
    data.extend_from_slice(cluster_uuid.as_bytes());
    data.extend_from_slice(version.as_bytes());
    sum64(&data) % waves
}

/// How long this cluster waits for a canary release: `wave × interval`, or `None` when the
/// channel has no canary for this release or the cluster is in wave 0.
pub fn delay(
    settings: &CanarySettings,
    cluster_uuid: &str,
    version: &str,
) -> Result<Option<SignedDuration>, Error> {
    if !settings.enabled {
        return Ok(None);
    }
    let wave = wave(cluster_uuid, version, settings.waves);
    if wave == 0 {
        return Ok(None);
    }
    let factor = i32::try_from(wave).map_err(|_| Error::TimeOutOfRange {
        what: "the canary delay",
    })?;
    settings
        .interval
        .checked_mul(factor)
        .map(Some)
        .ok_or(Error::TimeOutOfRange {
            what: "the canary delay",
        })
}

/// The `spec.applyAfter` of a release being created from a channel.
///
/// The canary delay from `now` applies first; then, when the release is created after an earlier
/// release of the same minor that carried the `notification-time-shift` annotation, that
/// release's `applyAfter` (`inherited`) replaces it if it is still in the future.
pub fn new_release_apply_after(
    now: Timestamp,
    canary: Option<&CanarySettings>,
    cluster_uuid: &str,
    version: &str,
    inherited: Option<Timestamp>,
) -> Result<Option<Timestamp>, Error> {
    let mut apply_after = match canary {
        Some(settings) => match delay(settings, cluster_uuid, version)? {
            Some(d) => Some(now.checked_add(d).map_err(|_| Error::TimeOutOfRange {
                what: "the canary applyAfter",
            })?),
            None => None,
        },
        None => None,
    };
    if let Some(shift) = inherited.filter(|t| *t > now) {
        apply_after = Some(shift);
    }
    Ok(apply_after)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// spaolacci/murmur3's reference table (`murmur_test.go`): seed, h64_1, h64_2, input.
    const REFERENCE: &[(u32, u64, u64, &str)] = &[
        (0x00, 0x0000000000000000, 0x0000000000000000, ""),
        (0x00, 0xcbd8a7b341bd9b02, 0x5b1e906a48ae1d19, "hello"),
        (0x00, 0x342fac623a5ebc8e, 0x4cdcbc079642414d, "hello, world"),
        (
            0x00,
            0xb89e5988b737affc,
            0x664fc2950231b2cb,
            "19 Jan 2038 at 3:14:07 AM",
        ),
        (
            0x00,
            0xcd99481f9ee902c9,
            0x695da1a38987b6e7,
            "The quick brown fox jumps over the lazy dog.",
        ),
        (0x01, 0x4610abe56eff5cb5, 0x51622daa78f83583, ""),
        (0x01, 0xa78ddff5adae8d10, 0x128900ef20900135, "hello"),
        (0x01, 0x8b95f808840725c6, 0x1597ed5422bd493b, "hello, world"),
        (
            0x01,
            0x2a929de9c8f97b2f,
            0x56a41d99af43a2db,
            "19 Jan 2038 at 3:14:07 AM",
        ),
        (
            0x01,
            0xfb3325171f9744da,
            0xaaf8b92a5f722952,
            "The quick brown fox jumps over the lazy dog.",
        ),
        (0x2a, 0xf02aa77dfa1b8523, 0xd1016610da11cbb9, ""),
        (0x2a, 0xc4b8b3c960af6f08, 0x2334b875b0efbc7a, "hello"),
        (0x2a, 0xb91864d797caa956, 0xd5d139a55afe6150, "hello, world"),
        (
            0x2a,
            0xfd8f19ebdc8c6b6a,
            0xd30fdc310fa08ff9,
            "19 Jan 2038 at 3:14:07 AM",
        ),
        (
            0x2a,
            0x74f33c659cda5af7,
            0x4ec7a891caf316f0,
            "The quick brown fox jumps over the lazy dog.",
        ),
    ];

    #[test]
    fn murmur3_reference_vectors() {
        for (seed, h1, h2, input) in REFERENCE {
            assert_eq!(
                murmur3_x64_128(input.as_bytes(), *seed),
                (*h1, *h2),
                "seed {seed:#x} input {input:?}"
            );
        }
        assert_eq!(sum64(b"hello"), 0xcbd8a7b341bd9b02);
    }

    /// MurmurHash3_x64_128 (seed 0) of the bytes `1, 2, …, n` for every `n` in 0..=40 (every tail
    /// length, one to two full blocks), computed with an independent implementation (the `mmh3`
    /// Python package, which wraps Appleby's reference C code).
    const PREFIXES: &[(usize, u64, u64)] = &[
        (0, 0x0000000000000000, 0x0000000000000000),
        (1, 0x7ace5c908374fe16, 0x778867e4430e6785),
        (2, 0xa56b287eeb1184b7, 0x67202afce8f676e8),
        (3, 0x1a643eef0e1337a9, 0x494e4a403c239a65),
        (4, 0x0a0090a9da040fe3, 0xeadc23f882b31773),
        (5, 0xfe94a31bab98860e, 0xea8c4c90d79b1aad),
        (6, 0x2844929b2731c68e, 0xa37213488bc74e3e),
        (7, 0xf3f3cc065f0f5de9, 0x3d238137f035c091),
        (8, 0x9ce80ca5ef93bfdc, 0xc567e5e6b655ac07),
        (9, 0xbf9dbe3fa2269d8e, 0xf1031a6fe0cf7da1),
        (10, 0x5b7cdaf50bcf9ac3, 0x6ec5610590ff47d1),
        (11, 0xede69d33bd62539b, 0xfdbf14672bae6cdd),
        (12, 0xeeab6906f095cea4, 0xc098978671686e09),
        (13, 0xaffd298a6e2be8ef, 0xe1b9133900d14b4f),
        (14, 0x8a811bcbbb315273, 0xfa1fceedd62a5937),
        (15, 0x084bf0a04820fc95, 0xa57735e8cbfa38d0),
        (16, 0xb2c94760ef740fe0, 0x892f5d8512b98935),
        (17, 0xf224a4101ea076ab, 0x0a50f3f36bc8da86),
        (18, 0x12b3889f94efac80, 0x446634dac9fafd75),
        (19, 0x6d6655207ed93f3f, 0x0b77f189d4b5743e),
        (20, 0xfd8cb2848480749d, 0x44a4b8cde4428c2b),
        (21, 0xe3bfee32b9c33d79, 0x83448aa0fdacf9e3),
        (22, 0x244666892877be7d, 0xf6810ea495a6d945),
        (23, 0xcde68c33af00bd6a, 0xd6c707bb6659d2ea),
        (24, 0xc1e36c51e3c5af39, 0xe2562cafbdcf909c),
        (25, 0x3fece78ed8a9bac7, 0xa44a378691e0ef64),
        (26, 0xdc4d75251b815cd8, 0xd0cac1c08e1e918e),
        (27, 0xdb4086d39c313ca1, 0xe58eea77b59a60bf),
        (28, 0x90b819343b66bdf4, 0xacf392f19ab4edd9),
        (29, 0x350eb8f79638335d, 0xa4f1bd2b32fe50e1),
        (30, 0x7fb0ffbaa1b5bf60, 0x37111bbb6ff84738),
        (31, 0xe67d62e397513ddb, 0x2b46270af0ee6ef6),
        (32, 0xde00e0aaa0eb1988, 0xacce4dc71351197e),
        (33, 0x9e6b247a000d5c84, 0x476e0d604509ecde),
        (34, 0x92fef8adb654930e, 0xd1e256a248076d37),
        (35, 0x2e8f1de91d8fd3c9, 0x9a3bedc1d66a91b8),
        (36, 0x237bfb35c33e4f9c, 0x48dbfb7e76cbfdc3),
        (37, 0x6c27c1ddf101675e, 0x1371d935b7755835),
        (38, 0x06f3679de4b7fb49, 0x525feb8911b706f8),
        (39, 0xbf7079a5806010af, 0xa501484cd32319ae),
        (40, 0x7d67d498bb929a60, 0x273cb54c31ebb850),
    ];

    #[test]
    fn every_tail_length_matches_reference() {
        let data: Vec<u8> = (1..=40).collect();
        for (n, h1, h2) in PREFIXES {
            assert_eq!(murmur3_x64_128(&data[..*n], 0), (*h1, *h2), "length {n}");
        }
    }

    /// The cluster UUID of Deckhouse's check-release tests and the waves their golden files show:
    /// `v1.25.0` with 5 waves has no applyAfter (wave 0), `v1.25.5` with 5 waves × 15m is
    /// 60 minutes late (wave 4), `v1.31.0` on `stable` with 6 waves × 30m is 90 minutes late
    /// (wave 3).
    #[test]
    fn waves_match_deckhouse_golden_files() {
        let uuid = "21da7734-77a7-45ad-a795-ea0b629ee930";
        assert_eq!(wave(uuid, "v1.25.0", 5), 0);
        assert_eq!(wave(uuid, "v1.25.5", 5), 4);
        assert_eq!(wave(uuid, "v1.31.0", 6), 3);
    }

    #[test]
    fn apply_after_from_canary_and_shift() {
        let uuid = "21da7734-77a7-45ad-a795-ea0b629ee930";
        let now: Timestamp = "2019-10-17T15:33:00Z".parse().unwrap();
        let canary = |waves, minutes| CanarySettings {
            enabled: true,
            waves,
            interval: SignedDuration::from_mins(minutes),
        };
        let at = |s: &str| Some(s.parse::<Timestamp>().unwrap());
        // have-canary-release-wave-4.yaml
        assert_eq!(
            new_release_apply_after(now, Some(&canary(5, 15)), uuid, "v1.25.5", None).unwrap(),
            at("2019-10-17T16:33:00Z")
        );
        // have-canary-release-wave-0.yaml
        assert_eq!(
            new_release_apply_after(now, Some(&canary(5, 6)), uuid, "v1.25.0", None).unwrap(),
            None
        );
        // release-has-canary.yaml
        assert_eq!(
            new_release_apply_after(now, Some(&canary(6, 30)), uuid, "v1.31.0", None).unwrap(),
            at("2019-10-17T17:03:00Z")
        );
        // Disabled canary for the channel.
        let disabled = CanarySettings {
            enabled: false,
            ..canary(5, 15)
        };
        assert_eq!(
            new_release_apply_after(now, Some(&disabled), uuid, "v1.25.5", None).unwrap(),
            None
        );
        // Zero waves: no division by zero, no delay.
        assert_eq!(
            new_release_apply_after(now, Some(&canary(0, 15)), uuid, "v1.25.5", None).unwrap(),
            None
        );
        // A future notification shift of the previous release of the minor wins.
        assert_eq!(
            new_release_apply_after(
                now,
                Some(&canary(5, 15)),
                uuid,
                "v1.25.5",
                at("2019-10-18T00:00:00Z")
            )
            .unwrap(),
            at("2019-10-18T00:00:00Z")
        );
        // A past one does not.
        assert_eq!(
            new_release_apply_after(now, None, uuid, "v1.25.6", at("2019-10-17T00:00:00Z"))
                .unwrap(),
            None
        );
    }
}
