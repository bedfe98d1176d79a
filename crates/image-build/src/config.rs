//! The image config and manifest JSON. Pure: every value comes from the arguments, the time
//! included, so the bytes (and digests) depend only on the inputs.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::layer::Layer;

/// OCI image manifest media type.
pub const MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
/// OCI image config media type.
pub const CONFIG: &str = "application/vnd.oci.image.config.v1+json";

/// `org.opencontainers.image.*` labels (and annotations of the manifest).
pub type Labels = BTreeMap<String, String>;

/// How the image runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ImageConfig {
    /// `uid:gid`.
    pub user: String,
    /// The entrypoint.
    pub entrypoint: Vec<String>,
    /// `NAME=value` pairs.
    pub env: Vec<String>,
    /// Labels, also written as the manifest's annotations.
    pub labels: Labels,
    /// Seconds since the epoch for `created` (`SOURCE_DATE_EPOCH`'s role): a fixed value keeps
    /// the digest stable.
    pub created: u64,
}

/// The config blob: runtime settings, the layers' uncompressed digests, one history entry per
/// layer.
pub fn config_json(config: &ImageConfig, layers: &[Layer]) -> Vec<u8> {
    let created = rfc3339(config.created);
    let history: Vec<Value> = layers
        .iter()
        .map(|layer| json!({"created": created, "created_by": format!("d8 image build: {}", layer.name)}))
        .collect();
    let value = json!({
        "architecture": "amd64",
        "os": "linux",
        "created": created,
        "config": {
            "User": config.user,
            "Entrypoint": config.entrypoint,
            "Env": config.env,
            "WorkingDir": "/",
            "Labels": config.labels,
        },
        "rootfs": {
            "type": "layers",
            "diff_ids": layers.iter().map(|l| l.diff_id.to_string()).collect::<Vec<_>>(),
        },
        "history": history,
    });
    serde_json::to_vec(&value).expect("JSON values serialize")
}

/// The image manifest for a config blob and layers.
pub fn manifest_json(config: &[u8], layers: &[Layer], labels: &Labels) -> Vec<u8> {
    let config_digest = oci::Digest::compute(oci::Algorithm::Sha256, config);
    let value = json!({
        "schemaVersion": 2,
        "mediaType": MANIFEST,
        "config": {"mediaType": CONFIG, "digest": config_digest.to_string(), "size": config.len()},
        "layers": layers.iter().map(|l| json!({
            "mediaType": crate::layer::MEDIA_TYPE,
            "digest": l.digest.to_string(),
            "size": l.size,
        })).collect::<Vec<_>>(),
        "annotations": labels,
    });
    serde_json::to_vec(&value).expect("JSON values serialize")
}

/// Seconds since the epoch as `YYYY-MM-DDTHH:MM:SSZ` (proleptic Gregorian, UTC).
pub fn rfc3339(seconds: u64) -> String {
    let days = (seconds / 86_400) as i64;
    let rem = seconds % 86_400;
    let (year, month, day) = civil_from_days(days);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

/// Days since 1970-01-01 to (year, month, day): Howard Hinnant's `civil_from_days`.
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_table() {
        for (seconds, text) in [
            (0, "1970-01-01T00:00:00Z"),
            (951_782_400, "2000-02-29T00:00:00Z"),
            (1_700_000_000, "2023-11-14T22:13:20Z"),
            (4_102_444_799, "2099-12-31T23:59:59Z"),
        ] {
            assert_eq!(rfc3339(seconds), text, "{seconds}");
        }
    }

    #[test]
    fn config_carries_user_labels_and_diff_ids() {
        let layer = Layer {
            name: "base".into(),
            digest: oci::Digest::compute(oci::Algorithm::Sha256, b"gz"),
            diff_id: oci::Digest::compute(oci::Algorithm::Sha256, b"tar"),
            size: 2,
        };
        let config = ImageConfig {
            user: "65532:65532".into(),
            entrypoint: vec!["/usr/bin/d8".into()],
            env: vec![],
            labels: Labels::from([("org.opencontainers.image.title".into(), "d8".into())]),
            created: 0,
        };
        let bytes = config_json(&config, std::slice::from_ref(&layer));
        let value: Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(value["config"]["User"], "65532:65532");
        assert_eq!(
            value["config"]["Labels"]["org.opencontainers.image.title"],
            "d8"
        );
        assert_eq!(value["rootfs"]["diff_ids"][0], layer.diff_id.to_string());
        let manifest: Value =
            serde_json::from_slice(&manifest_json(&bytes, &[layer], &config.labels)).unwrap();
        assert_eq!(manifest["layers"][0]["size"], 2);
        assert_eq!(
            manifest["annotations"]["org.opencontainers.image.title"],
            "d8"
        );
    }
}
