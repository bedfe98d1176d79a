//! When an ObjectKeeper goes: a pure function of the keeper, what was observed of the object it
//! follows, and "now" (passed in, so tests never depend on the wall clock). Every time it
//! counts from is recorded in the cluster — `creationTimestamp` for `TTL`, `status.lostAt` for
//! `FollowObjectWithTTL` — so a restarted controller neither shortens nor loses a TTL.

use std::time::Duration;

use api::object_keeper::{
    FollowObjectRef, ObjectKeeperMode, ObjectKeeperPhase, REASON_INVALID_API_VERSION,
    REASON_MISSING_FOLLOW_OBJECT_REF,
};
use jiff::{SignedDuration, Timestamp};

/// How often a followed object is looked at again while it lives (Deckhouse: one minute).
pub const DEFAULT_RECHECK: Duration = Duration::from_secs(60);

/// What the controller saw of the followed object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Followed {
    /// Not looked up (the reference cannot be followed, or the mode follows nothing).
    NotLookedUp,
    /// The API answered 404.
    Absent,
    /// It exists, with this UID.
    Present {
        /// Its `metadata.uid`.
        uid: String,
    },
}

/// The keeper as far as the decision needs it.
#[derive(Clone, Debug)]
pub struct Keeper<'a> {
    /// `spec.mode`.
    pub mode: ObjectKeeperMode,
    /// `spec.followObjectRef`.
    pub follow: Option<&'a FollowObjectRef>,
    /// `spec.ttl`, unparsed.
    pub ttl: Option<&'a str>,
    /// `metadata.creationTimestamp`.
    pub created: Timestamp,
    /// `status.lostAt`, when already recorded.
    pub lost_at: Option<Timestamp>,
}

/// What to do with the keeper.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Keep it; write this status and look again after `recheck`.
    Keep {
        /// `status.phase`.
        phase: ObjectKeeperPhase,
        /// The `Active` condition: `(status, reason)`.
        active: (bool, &'static str),
        /// `status.message`.
        message: String,
        /// `status.lostAt`.
        lost_at: Option<Timestamp>,
        /// When to decide again (`None`: only when the keeper changes).
        recheck: Option<Duration>,
    },
    /// Delete the keeper: the garbage collector removes what it kept.
    Delete {
        /// Why (for the log).
        why: String,
    },
}

/// Whether the followed object must be looked up for this keeper (and which `apiVersion`).
pub fn must_look_up(keeper: &Keeper<'_>) -> bool {
    keeper.mode != ObjectKeeperMode::Ttl
        && keeper
            .follow
            .is_some_and(|f| parse_api_version(&f.api_version).is_ok())
}

/// `group/version` or `version` → `(group, version)`.
pub fn parse_api_version(api_version: &str) -> Result<(String, String), String> {
    let invalid = || format!("invalid apiVersion {api_version:?}");
    let (group, version) = match api_version.split_once('/') {
        Some((group, version)) if !group.is_empty() => (group, version),
        Some(_) => return Err(invalid()),
        None => ("", api_version),
    };
    let fine = |s: &str| {
        !s.is_empty()
            && s.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.')
    };
    if !fine(version) || version.contains('.') || (!group.is_empty() && !fine(group)) {
        return Err(invalid());
    }
    Ok((group.to_owned(), version.to_owned()))
}

/// Decides the keeper's fate at `now`; `recheck` is how long a live followed object is trusted.
pub fn decide(
    keeper: &Keeper<'_>,
    followed: &Followed,
    now: Timestamp,
    recheck: Duration,
) -> Decision {
    let pending = |reason: &'static str, message: String| Decision::Keep {
        phase: ObjectKeeperPhase::Pending,
        active: (false, reason),
        message,
        lost_at: keeper.lost_at,
        recheck: None,
    };
    let ttl = match (keeper.mode, keeper.ttl) {
        (ObjectKeeperMode::FollowObject, _) => None,
        (_, None) => {
            return pending(
                "MissingTTL",
                api::object_keeper::MSG_TTL_REQUIRED.to_owned(),
            );
        }
        (_, Some(text)) => match release_controller::duration::parse_go_duration(text) {
            Ok(ttl) => Some(ttl),
            Err(e) => return pending("InvalidTTL", e),
        },
    };
    if keeper.mode == ObjectKeeperMode::Ttl {
        return expiring_or_delete(
            keeper.created,
            ttl.unwrap_or_default(),
            None,
            now,
            "TTL expired",
        );
    }
    let Some(follow) = keeper.follow else {
        return pending(
            REASON_MISSING_FOLLOW_OBJECT_REF,
            api::object_keeper::MSG_FOLLOW_REF_REQUIRED.to_owned(),
        );
    };
    if let Err(e) = parse_api_version(&follow.api_version) {
        return pending(REASON_INVALID_API_VERSION, e);
    }
    let alive = matches!(followed, Followed::Present { uid } if *uid == follow.uid);
    // Once lost, always lost: a UID is never reused, so the countdown that started goes on.
    if alive && keeper.lost_at.is_none() {
        return Decision::Keep {
            phase: ObjectKeeperPhase::Tracking,
            active: (true, "Following"),
            message: format!(
                "Following object {}/{}/{}",
                follow.api_version, follow.kind, follow.name
            ),
            lost_at: None,
            recheck: Some(recheck),
        };
    }
    if *followed == Followed::NotLookedUp && keeper.lost_at.is_none() {
        // Nothing known yet: keep as is until the lookup succeeds.
        return pending(
            "LookupFailed",
            "the followed object could not be looked up".into(),
        );
    }
    let gone = match followed {
        Followed::Present { .. } if !alive => "the followed object was replaced (new UID)",
        _ => "the followed object is gone",
    };
    match ttl {
        None => Decision::Delete {
            why: gone.to_owned(),
        },
        Some(ttl) => {
            let lost_at = keeper
                .lost_at
                .unwrap_or_else(|| Timestamp::from_second(now.as_second()).unwrap_or(now));
            expiring_or_delete(
                lost_at,
                ttl,
                Some(lost_at),
                now,
                "TTL after the followed object expired",
            )
        }
    }
}

fn expiring_or_delete(
    from: Timestamp,
    ttl: SignedDuration,
    lost_at: Option<Timestamp>,
    now: Timestamp,
    why: &str,
) -> Decision {
    let expires = from.checked_add(ttl).unwrap_or(Timestamp::MAX);
    if now >= expires {
        return Decision::Delete {
            why: why.to_owned(),
        };
    }
    let remaining = now.duration_until(expires).unsigned_abs();
    Decision::Keep {
        phase: ObjectKeeperPhase::Expiring,
        active: (true, "WaitingTTL"),
        message: format!("TTL expires at {}", rfc3339(expires)),
        lost_at,
        recheck: Some(remaining),
    }
}

/// Go's `time.RFC3339` for UTC: whole seconds, `Z`.
pub fn rfc3339(t: Timestamp) -> String {
    t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

#[cfg(test)]
mod tests;
