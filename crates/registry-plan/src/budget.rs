//! Store limits of a cache replica: the filesystem reserve, the `storage.size` budget, and the
//! decision whether a write of `incoming` bytes may proceed.
//!
//! The reserve is what must always stay free on the filesystem, whatever the budget says: the
//! kubelet's soft eviction threshold (10 % of the filesystem, at most 40 GiB) plus a margin
//! (10 %, at most 20 GiB). Reads never consult these rules; only writes (fill, replication,
//! push) are refused.

use serde::{Deserialize, Serialize};

const GIB: u64 = 1 << 30;
/// The status granularity of byte counts (16 MiB), so that a status is not rewritten for every
/// blob.
pub const STATUS_GRANULARITY: u64 = 16 << 20;

/// What a filesystem reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Filesystem {
    /// Total bytes.
    pub capacity: u64,
    /// Bytes available to us.
    pub free: u64,
}

/// Why a write is refused (`StoreUsage.reason`, Deckhouse's enum values).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Refusal {
    /// The store would exceed `storage.size`.
    BudgetExhausted,
    /// The filesystem would drop below the reserve.
    ReserveExhausted,
}

impl Refusal {
    /// The enum value as the status writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::BudgetExhausted => "BudgetExhausted",
            Self::ReserveExhausted => "ReserveExhausted",
        }
    }
}

/// The reserve for a filesystem of `capacity` bytes: min(10 %, 40 GiB) + min(10 %, 20 GiB).
pub fn reserve(capacity: u64) -> u64 {
    (capacity / 10).min(40 * GIB) + (capacity / 10).min(20 * GIB)
}

/// Whether a write of `incoming` more bytes may proceed, with `used` bytes already in the store
/// (including writes in progress), the optional `budget`, and the filesystem's state. The budget
/// is checked first: it is the operator's own limit and names the setting to change.
pub fn admit(
    used: u64,
    budget: Option<u64>,
    reserve: u64,
    fs: Filesystem,
    incoming: u64,
) -> Result<(), Refusal> {
    if let Some(budget) = budget
        && used.saturating_add(incoming) > budget
    {
        return Err(Refusal::BudgetExhausted);
    }
    if fs.free.saturating_sub(incoming) < reserve || fs.free < incoming {
        return Err(Refusal::ReserveExhausted);
    }
    Ok(())
}

/// Rounds a byte count down to [`STATUS_GRANULARITY`].
pub fn granular(bytes: u64) -> u64 {
    bytes - bytes % STATUS_GRANULARITY
}

/// Why a `storage.size` value cannot be read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "storage.size {value:?} is not a quantity like 10Gi, 500M or 1.5T (number, optional suffix E P T G M k Ei Pi Ti Gi Mi Ki)"
)]
pub struct QuantityError {
    /// The value as given (truncated).
    pub value: String,
}

/// Parses a `storage.size` quantity (`^[0-9]+(\.[0-9]+)?(E|P|T|G|M|k|Ei|Pi|Ti|Gi|Mi|Ki)?$`) into
/// bytes, rounding fractions down. Values beyond `u64::MAX` saturate.
pub fn parse_quantity(value: &str) -> Result<u64, QuantityError> {
    let err = || QuantityError {
        value: value.chars().take(40).collect(),
    };
    let split = value
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(value.len());
    let (number, suffix) = value.split_at(split);
    let multiplier: u128 = match suffix {
        "" => 1,
        "k" => 1_000,
        "M" => 1_000_000,
        "G" => 1_000_000_000,
        "T" => 1_000_000_000_000,
        "P" => 1_000_000_000_000_000,
        "E" => 1_000_000_000_000_000_000,
        "Ki" => 1 << 10,
        "Mi" => 1 << 20,
        "Gi" => 1 << 30,
        "Ti" => 1 << 40,
        "Pi" => 1 << 50,
        "Ei" => 1 << 60,
        _ => return Err(err()),
    };
    let (whole, fraction) = match number.split_once('.') {
        Some((w, f)) if !f.is_empty() && !f.contains('.') => (w, f),
        Some(_) => return Err(err()),
        None => (number, ""),
    };
    if whole.is_empty() || !whole.bytes().all(|b| b.is_ascii_digit()) {
        return Err(err());
    }
    let digits = |s: &str| {
        s.bytes().fold(0u128, |acc, b| {
            acc.saturating_mul(10).saturating_add(u128::from(b - b'0'))
        })
    };
    let mut bytes = digits(whole).saturating_mul(multiplier);
    if !fraction.is_empty() {
        // Only the first 18 fractional digits can matter for a u64 of bytes.
        let fraction = &fraction[..fraction.len().min(18)];
        let scale = 10u128.pow(fraction.len() as u32);
        bytes = bytes.saturating_add(digits(fraction).saturating_mul(multiplier) / scale);
    }
    Ok(u64::try_from(bytes).unwrap_or(u64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const FS: Filesystem = Filesystem {
        capacity: 100 * GIB,
        free: 50 * GIB,
    };

    #[test]
    fn reserve_table() {
        for (capacity, expected) in [
            (0, 0),
            (10 * GIB, 2 * GIB),
            (100 * GIB, 20 * GIB),
            // 10 % of 300 GiB is 30 GiB: the eviction part stays, the margin caps at 20 GiB.
            (300 * GIB, 30 * GIB + 20 * GIB),
            (1000 * GIB, 40 * GIB + 20 * GIB),
        ] {
            assert_eq!(reserve(capacity), expected, "capacity {capacity}");
        }
    }

    #[test]
    fn admit_table() {
        let r = reserve(FS.capacity); // 20 GiB
        type Case = (u64, Option<u64>, u64, Result<(), Refusal>);
        let cases: [Case; 7] = [
            (0, None, GIB, Ok(())),
            (0, None, 30 * GIB, Ok(())), // free 50 - 30 = 20 = reserve: allowed
            (0, None, 30 * GIB + 1, Err(Refusal::ReserveExhausted)),
            (9 * GIB, Some(10 * GIB), GIB, Ok(())),
            (
                9 * GIB,
                Some(10 * GIB),
                GIB + 1,
                Err(Refusal::BudgetExhausted),
            ),
            // both exceeded: the budget is named, it is the operator's setting
            (0, Some(GIB), 40 * GIB, Err(Refusal::BudgetExhausted)),
            (10 * GIB, Some(10 * GIB), 0, Ok(())),
        ];
        for (used, budget, incoming, expected) in cases {
            assert_eq!(
                admit(used, budget, r, FS, incoming),
                expected,
                "used {used} budget {budget:?} incoming {incoming}"
            );
        }
    }

    #[test]
    fn quantities() {
        for (value, bytes) in [
            ("0", 0),
            ("1024", 1024),
            ("1k", 1000),
            ("10Gi", 10 * GIB),
            ("1.5Gi", 3 * GIB / 2),
            ("2M", 2_000_000),
            ("1Ei", 1 << 60),
            ("100E", u64::MAX),
        ] {
            assert_eq!(parse_quantity(value), Ok(bytes), "{value}");
        }
        for bad in ["", "Gi", "1.", ".5", "1.2.3", "10GB", "-1", "1 Gi", "1K"] {
            let e = parse_quantity(bad).unwrap_err();
            assert!(e.to_string().contains("storage.size"), "{bad}: {e}");
        }
    }

    #[test]
    fn granularity() {
        assert_eq!(granular(0), 0);
        assert_eq!(granular(STATUS_GRANULARITY - 1), 0);
        assert_eq!(granular(STATUS_GRANULARITY + 5), STATUS_GRANULARITY);
    }

    proptest! {
        /// A write that is admitted never leaves the store above its budget nor the
        /// filesystem below its reserve; one that is refused would have.
        #[test]
        fn admit_is_exact(used in 0u64..1 << 40, budget in proptest::option::of(0u64..1 << 40),
                          capacity in 0u64..1 << 42, free_frac in 0u64..=100, incoming in 0u64..1 << 40) {
            let fs = Filesystem { capacity, free: capacity / 100 * free_frac };
            let r = reserve(capacity);
            let within_budget = budget.is_none_or(|b| used + incoming <= b);
            let within_reserve = fs.free >= incoming && fs.free - incoming >= r;
            let result = admit(used, budget, r, fs, incoming);
            prop_assert_eq!(result.is_ok(), within_budget && within_reserve);
            if !within_budget {
                prop_assert_eq!(result, Err(Refusal::BudgetExhausted));
            }
        }

        #[test]
        fn quantity_never_panics(s in "\\PC{0,24}") {
            let _ = parse_quantity(&s);
        }

        #[test]
        fn quantity_of_integers(n in 0u64..1 << 40) {
            prop_assert_eq!(parse_quantity(&format!("{n}Ki")), Ok(n * 1024));
        }
    }
}
