use serde_json::json;

use super::*;

fn parse(value: Value) -> Result<DeckhouseSettings, String> {
    DeckhouseSettings::from_settings(Some(&value)).map_err(|e| e.to_string())
}

#[test]
fn defaults_without_settings() {
    let s = DeckhouseSettings::from_settings(None).unwrap();
    assert_eq!(s, DeckhouseSettings::default());
    assert_eq!(s.mode, UpdateMode::AutoPatch);
    assert_eq!(s.release_channel, None);
    assert_eq!(s.block_on_alerts.severity, 4);
    assert_eq!(s.notification.retry_min_time, Duration::from_secs(2));
}

#[test]
fn deckhouse_documentation_example() {
    let s = parse(json!({
        "releaseChannel": "Stable",
        "update": {
            "mode": "Auto",
            "windows": [{"from": "18:00", "to": "19:30", "days": ["Tue", "Sat"]}],
            "notification": {
                "webhook": "https://release-webhook.mydomain.com",
                "minimalNotificationTime": "8h",
                "auth": {"bearerToken": "secret-token"},
                "releaseType": "All",
                "retryMinTime": "1m30s"
            },
            "disruptionApprovalMode": "Manual",
            "blockOnAlerts": {"enabled": true, "severity": 6}
        }
    }))
    .unwrap();
    assert_eq!(s.release_channel, Some(Channel::Stable));
    assert_eq!(s.mode, UpdateMode::Auto);
    assert_eq!(s.windows.as_slice().len(), 1);
    // Tuesday 2024-01-02 18:30 is inside, Wednesday is not.
    assert!(
        s.windows
            .is_allowed("2024-01-02T18:30:00Z".parse().unwrap())
    );
    assert!(
        !s.windows
            .is_allowed("2024-01-03T18:30:00Z".parse().unwrap())
    );
    assert_eq!(
        s.notification.webhook.as_deref(),
        Some("https://release-webhook.mydomain.com")
    );
    assert_eq!(
        s.notification.minimal_notification_time,
        SignedDuration::from_hours(8)
    );
    assert_eq!(s.notification.retry_min_time, Duration::from_secs(90));
    assert_eq!(s.notification.release_type, NotifyReleaseType::All);
    assert_eq!(
        s.notification.auth,
        Some(NotificationAuth::Bearer("secret-token".into()))
    );
    assert!(s.disruption_approval_manual);
    assert_eq!(
        s.block_on_alerts,
        BlockOnAlerts {
            enabled: true,
            severity: 6
        }
    );
    let deploy = s.deploy_settings();
    assert!(deploy.webhook_configured);
    assert!(deploy.disruption_approval_manual);
    assert_eq!(deploy.mode, UpdateMode::Auto);
}

#[test]
fn credentials_never_reach_debug_output() {
    let s = parse(json!({"update": {"notification": {
        "webhook": "http://hook.local/x",
        "auth": {"basic": {"username": "ops", "password": "hunter2"}}
    }}}))
    .unwrap();
    let shown = format!("{s:?}");
    assert!(shown.contains("ops"), "{shown}");
    assert!(!shown.contains("hunter2"), "{shown}");
    let s =
        parse(json!({"update": {"notification": {"auth": {"bearerToken": "tok-123"}}}})).unwrap();
    assert!(!format!("{s:?}").contains("tok-123"));
}

#[test]
fn every_refusal_has_its_message() {
    let cases: Vec<(Value, &str)> = vec![
        (
            json!({"releaseChannel": "Lts"}),
            "releaseChannel in body should be one of [Alpha Beta EarlyAccess Stable RockSolid LTS]",
        ),
        (
            json!({"update": {"mode": "Sometimes"}}),
            "update.mode in body should be one of [AutoPatch Auto Manual]",
        ),
        (
            json!({"update": {"mode": 1}}),
            "update.mode in body must be of type string: \"number\"",
        ),
        (
            json!({"update": {"disruptionApprovalMode": "Never"}}),
            "update.disruptionApprovalMode in body should be one of [Auto Manual]",
        ),
        (
            json!({"update": {"windows": [{"from": "19:30", "to": "18:00"}]}}),
            "Invalid update windows. Start time (windows.from) should be less than the end time of the update window (windows.to)",
        ),
        (
            json!({"update": {"windows": [{"from": "25:00", "to": "26:00"}]}}),
            "update.windows[0].from in body should match '^(?:\\d|[01]\\d|2[0-3]):[0-5]\\d$'",
        ),
        (
            json!({"update": {"windows": [{"from": "10:00", "to": "11:00", "days": ["Funday"]}]}}),
            "update.windows[0].days[0] in body should be one of [Mon Tue Wed Thu Fri Sat Sun]",
        ),
        (
            json!({"update": {"windows": [{"to": "11:00"}]}}),
            "update.windows[0].from in body is required",
        ),
        (
            json!({"update": {"notification": {"webhook": "ftp://x"}}}),
            "update.notification.webhook in body should match '^https?://[^\\s/$.?#].[^\\s]*$'",
        ),
        (
            json!({"update": {"notification": {"minimalNotificationTime": "30s"}}}),
            "update.notification.minimalNotificationTime in body should match '^([0-9]+h([0-9]+m)?|[0-9]+m)$'",
        ),
        (
            json!({"update": {"notification": {"retryMinTime": "2x"}}}),
            "update.notification.retryMinTime in body should match '^([0-9]+h)?([0-9]+m)?([0-9]+s)?$'",
        ),
        (
            json!({"update": {"notification": {"releaseType": "Patch"}}}),
            "update.notification.releaseType in body should be one of [All Minor]",
        ),
        (
            json!({"update": {"notification": {"auth": {}}}}),
            "update.notification.auth in body must validate one and only one schema (oneOf). Found none valid",
        ),
        (
            json!({"update": {"notification": {"auth": {"basic": {"username": "u"}, "bearerToken": "t"}}}}),
            "Found 2 valid alternatives",
        ),
        (
            json!({"update": {"notification": {"auth": {"basic": {"username": "u"}}}}}),
            "update.notification.auth.basic.password in body is required",
        ),
        (
            json!({"update": {"blockOnAlerts": {"severity": 10}}}),
            "update.blockOnAlerts.severity in body should be between 0 and 9",
        ),
        (
            json!({"update": {"blockOnAlerts": {"enabled": "yes"}}}),
            "update.blockOnAlerts.enabled in body must be of type boolean: \"string\"",
        ),
        (
            json!("text"),
            "settings in body must be of type object: \"string\"",
        ),
    ];
    for (settings, expected) in cases {
        let err = parse(settings.clone()).unwrap_err();
        assert!(
            err.starts_with("the deckhouse ModuleConfig settings are invalid: "),
            "{err}"
        );
        assert!(err.contains(expected), "{settings}: {err}");
    }
}

#[test]
fn several_problems_are_reported_together() {
    let err = parse(json!({"releaseChannel": "x", "update": {"mode": "y"}})).unwrap_err();
    assert!(err.contains("releaseChannel in body"), "{err}");
    assert!(err.contains("; update.mode in body"), "{err}");
}

#[test]
fn patterns() {
    for ok in ["8h", "1h30m", "45m", "0m"] {
        assert!(matches_minimal_notification_time(ok), "{ok}");
    }
    for bad in ["", "h", "30s", "1h30", "1m30m", "8h0s"] {
        assert!(!matches_minimal_notification_time(bad), "{bad}");
    }
    for ok in ["2s", "1m", "1h2m3s", "10m5s"] {
        assert!(matches_retry_min_time(ok), "{ok}");
    }
    for bad in ["", "2", "1s2m", "s"] {
        assert!(!matches_retry_min_time(bad), "{bad}");
    }
    for ok in ["http://a.b", "https://hook.example.com/path?x=1"] {
        assert!(matches_webhook(ok), "{ok}");
    }
    for bad in ["https://", "https:///x", "https://a b", "mailto:x"] {
        assert!(!matches_webhook(bad), "{bad}");
    }
}

#[test]
fn channels() {
    assert_eq!(Channel::EarlyAccess.image_tag(), "early-access");
    assert_eq!(Channel::RockSolid.canary_key(), "rockSolid");
    assert_eq!(Channel::Lts.as_str(), "LTS");
    assert!(Channel::Lts.is_lts());
    assert!(!Channel::Stable.is_lts());
}
