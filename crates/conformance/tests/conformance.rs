//! Runs the suite against a registry.
//!
//! - `CONFORMANCE_REGISTRY=http://host:port` (or `https://…`): that registry, with optional
//!   `CONFORMANCE_USERNAME` / `CONFORMANCE_PASSWORD`, `CONFORMANCE_CA_FILE` (PEM), and
//!   `CONFORMANCE_DEVIATIONS=docker-registry-2.8` to apply that allow-list (default: strict).
//! - Otherwise: a fresh `docker-registry` from `testkit` (plain, then with token auth and TLS),
//!   with its documented deviations.
//!
//! `cargo nextest run -p conformance --no-capture` prints the per-check report.

use conformance::{Deviations, Outcome, Settings, deviations};
use registry_client::{Credentials, Endpoint};
use testkit::{Certs, Upstream, UpstreamOptions};

fn endpoint_of(upstream: &Upstream) -> Endpoint {
    let mut endpoint = Endpoint::from_url(&upstream.url()).unwrap();
    if let Some(ca) = upstream.ca_pem() {
        endpoint = endpoint.ca_pem(ca);
    }
    if let Some(c) = upstream.credentials() {
        endpoint = endpoint.credentials(Credentials::new(&c.user, &c.password));
    }
    endpoint
}

async fn run_and_check(settings: Settings) -> conformance::Report {
    let report = conformance::run(&settings).await.expect("suite setup");
    eprintln!(
        "conformance against {} ({}):\n{report}",
        settings.endpoint.display(),
        settings.deviations.registry
    );
    let failures = report.failures();
    assert!(
        failures.is_empty(),
        "{} checks failed:\n{}",
        failures.len(),
        failures
            .iter()
            .map(|r| format!("  {}: {:?}", r.id, r.outcome))
            .collect::<Vec<_>>()
            .join("\n")
    );
    report
}

fn external() -> Option<Settings> {
    let url = std::env::var("CONFORMANCE_REGISTRY").ok()?;
    let mut endpoint = Endpoint::from_url(&url).expect("CONFORMANCE_REGISTRY is a URL");
    if let (Ok(user), Ok(password)) = (
        std::env::var("CONFORMANCE_USERNAME"),
        std::env::var("CONFORMANCE_PASSWORD"),
    ) {
        endpoint = endpoint.credentials(Credentials::new(user, password));
    }
    if let Ok(path) = std::env::var("CONFORMANCE_CA_FILE") {
        endpoint = endpoint.ca_pem(&std::fs::read_to_string(path).expect("CONFORMANCE_CA_FILE"));
    }
    let deviations = match std::env::var("CONFORMANCE_DEVIATIONS").as_deref() {
        Ok("docker-registry-2.8") => deviations::docker_registry_2_8(),
        Ok(other) if !other.is_empty() => panic!("unknown deviation list {other:?}"),
        _ => Deviations::none(),
    };
    Some(Settings::new(endpoint).deviations(deviations))
}

#[tokio::test]
async fn docker_registry_conforms_except_for_documented_deviations() {
    if let Some(settings) = external() {
        run_and_check(settings).await;
        return;
    }
    let upstream = Upstream::start_plain().await;
    let settings =
        Settings::new(endpoint_of(&upstream)).deviations(deviations::docker_registry_2_8());
    let report = run_and_check(settings).await;
    // The suite itself is exercised: the core of every profile passes against a real registry.
    for id in [
        "pull.manifest.get-by-tag",
        "pull.manifest.head-by-digest",
        "pull.manifest.docker-schema2",
        "pull.blob.get",
        "pull.blob.range.suffix",
        "discovery.tags.unknown-repository",
        "push.blob.chunked",
        "push.blob.mount",
        "push.manifest.put-tag",
        "management.delete.manifest",
    ] {
        let result = report.get(id).expect("the check ran");
        assert_eq!(result.outcome, Outcome::Pass, "{id}");
    }
    let (pass, _, dev, _) = report.counts();
    assert!(pass >= 38, "{pass} checks passed");
    assert_eq!(dev, deviations::docker_registry_2_8().entries.len());
}

#[tokio::test]
async fn docker_registry_with_token_auth_over_tls_conforms_too() {
    if std::env::var("CONFORMANCE_REGISTRY").is_ok() {
        return; // the external registry is covered by the other test
    }
    let ca = Certs::new("conformance CA");
    let upstream = Upstream::start(
        UpstreamOptions::default()
            .tls(&ca)
            .token_auth("conformance", "pw"),
    )
    .await;
    let settings = Settings::new(endpoint_of(&upstream))
        .deviations(deviations::docker_registry_2_8_with_token_auth());
    run_and_check(settings).await;
    assert!(upstream.token_server().unwrap().issued() > 0);
}

#[tokio::test]
async fn strict_mode_reports_the_deviations_as_failures() {
    if std::env::var("CONFORMANCE_REGISTRY").is_ok() {
        return;
    }
    // The same registry without its allow-list: the suite must catch what the list excuses.
    let upstream = Upstream::start_plain().await;
    let report = conformance::run(&Settings::new(endpoint_of(&upstream)))
        .await
        .unwrap();
    for deviation in deviations::docker_registry_2_8().entries {
        let result = report
            .get(deviation.check)
            .expect("every listed check exists");
        assert!(
            matches!(result.outcome, Outcome::Fail { .. }),
            "{} should fail strictly: {:?}",
            deviation.check,
            result.outcome
        );
    }
}
