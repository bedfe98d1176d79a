//! Content discovery: tag lists with `n`, `last` and `Link`; referrers.

use http::Method;
use oci::ErrorCode;

use super::{Answer, call, ensure, read};
use crate::fixtures::ARTIFACT_TYPE;
use crate::{Ctx, Profile, Recorder};

const P: Profile = Profile::Discovery;

pub(crate) async fn run(ctx: &Ctx, rec: &mut Recorder<'_>) {
    rec.record(
        "discovery.tags.list",
        P,
        "tags/list: 200, the repository name, every tag in lexical order",
        list(ctx).await,
    );
    rec.record(
        "discovery.tags.n",
        P,
        "tags/list?n=2: exactly the first two tags (fewer only with a Link header)",
        first_page(ctx).await,
    );
    rec.record(
        "discovery.tags.n-last",
        P,
        "tags/list?n=2&last=<tag>: the two tags after <tag>",
        after(ctx, Some(2)).await,
    );
    rec.record(
        "discovery.tags.last",
        P,
        "tags/list?last=<tag> (n optional): every tag after <tag>",
        after(ctx, None).await,
    );
    rec.record(
        "discovery.tags.n-zero",
        P,
        "tags/list?n=0: an empty list and no Link header",
        n_zero(ctx).await,
    );
    rec.record(
        "discovery.tags.link-pagination",
        P,
        "following Link rel=\"next\" (or last=) with n=3 visits every tag once, in order",
        paginate(ctx).await,
    );
    rec.record(
        "discovery.tags.unknown-repository",
        P,
        "tags/list of an unknown repository: 404 with NAME_UNKNOWN",
        unknown_repository(ctx).await,
    );
    rec.record(
        "discovery.referrers.list",
        P,
        "referrers/<digest>: 200, an OCI index listing the artifact with its artifactType",
        referrers(ctx, None).await,
    );
    rec.record(
        "discovery.referrers.filter",
        P,
        "referrers?artifactType=: only matching descriptors; OCI-Filters-Applied when filtered",
        referrers(ctx, Some(ARTIFACT_TYPE)).await,
    );
    rec.record(
        "discovery.referrers.empty",
        P,
        "referrers of a digest nothing refers to: 200 with an empty index (never 404)",
        referrers_empty(ctx).await,
    );
    rec.record(
        "discovery.referrers.invalid-digest",
        P,
        "referrers with a malformed digest: 400",
        referrers_invalid(ctx).await,
    );
}

fn tags_of(answer: &Answer) -> Result<Vec<String>, String> {
    answer.expect(&[200])?;
    let list: oci::pagination::TagList = serde_json::from_slice(&answer.body)
        .map_err(|e| format!("{}: not a tag list: {e}", answer.line()))?;
    Ok(list.tags)
}

async fn tags(ctx: &Ctx, query: &str) -> Result<Answer, String> {
    let rest = if query.is_empty() {
        "tags/list".to_owned()
    } else {
        format!("tags/list?{query}")
    };
    read(ctx, Method::GET, &ctx.repo, &rest, &[]).await
}

fn link(answer: &Answer) -> Option<String> {
    answer
        .headers
        .get_all("link")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find_map(oci::pagination::parse_next_link)
        .map(str::to_owned)
}

async fn list(ctx: &Ctx) -> Result<(), String> {
    let answer = tags(ctx, "").await?;
    let list: oci::pagination::TagList = {
        answer.expect(&[200])?;
        serde_json::from_slice(&answer.body)
            .map_err(|e| format!("{}: not a tag list: {e}", answer.line()))?
    };
    ensure!(
        list.name == ctx.repo,
        "{}: name {:?}, expected {:?}",
        answer.line(),
        list.name,
        ctx.repo
    );
    let expected = ctx.fixtures.all_tags();
    ensure!(
        list.tags == expected,
        "{}: tags {:?}, expected {expected:?}",
        answer.line(),
        list.tags
    );
    Ok(())
}

async fn first_page(ctx: &Ctx) -> Result<(), String> {
    let answer = tags(ctx, "n=2").await?;
    let got = tags_of(&answer)?;
    let all = ctx.fixtures.all_tags();
    if got.len() < 2 {
        ensure!(
            link(&answer).is_some(),
            "{}: {got:?} is fewer than n=2 without a Link header",
            answer.line()
        );
    }
    ensure!(
        got == all[..got.len()],
        "{}: {got:?}, expected the first tags of {all:?}",
        answer.line()
    );
    ensure!(got.len() == 2, "{}: {got:?} is not two tags", answer.line());
    Ok(())
}

async fn after(ctx: &Ctx, n: Option<usize>) -> Result<(), String> {
    let all = ctx.fixtures.all_tags();
    let last = &all[1];
    let query = match n {
        Some(n) => format!("n={n}&last={last}"),
        None => format!("last={last}"),
    };
    let answer = tags(ctx, &query).await?;
    let got = tags_of(&answer)?;
    let rest = &all[2..];
    let expected = match n {
        Some(n) => &rest[..n.min(rest.len())],
        None => rest,
    };
    ensure!(
        got == expected,
        "{}: {got:?}, expected {expected:?}",
        answer.line()
    );
    Ok(())
}

async fn n_zero(ctx: &Ctx) -> Result<(), String> {
    let answer = tags(ctx, "n=0").await?;
    let got = tags_of(&answer)?;
    ensure!(got.is_empty(), "{}: {got:?}, expected []", answer.line());
    ensure!(
        link(&answer).is_none(),
        "{}: a Link header with n=0",
        answer.line()
    );
    Ok(())
}

async fn paginate(ctx: &Ctx) -> Result<(), String> {
    let all = ctx.fixtures.all_tags();
    let mut seen = Vec::new();
    let mut answer = tags(ctx, "n=3").await?;
    for _ in 0..all.len() + 2 {
        let page = tags_of(&answer)?;
        ensure!(
            page.len() <= 3,
            "{}: {} tags for n=3",
            answer.line(),
            page.len()
        );
        let done = page.is_empty();
        seen.extend(page);
        if done {
            break;
        }
        let next = match link(&answer) {
            Some(next) => next,
            None if seen.len() < all.len() => {
                // No Link: the client continues with last= (the spec's other mechanism).
                format!(
                    "/v2/{}/tags/list?n=3&last={}",
                    ctx.repo,
                    seen.last().cloned().unwrap_or_default()
                )
            }
            None => break,
        };
        answer = call(
            ctx,
            Method::GET,
            &next,
            &[],
            None,
            registry_client::Scope::pull(&ctx.repo),
        )
        .await?;
    }
    ensure!(seen == all, "pages gave {seen:?}, expected {all:?}");
    Ok(())
}

async fn unknown_repository(ctx: &Ctx) -> Result<(), String> {
    let repo = format!("{}-missing", ctx.repo);
    let answer = read(ctx, Method::GET, &repo, "tags/list", &[]).await?;
    answer.expect(&[404])?;
    answer.expect_code(ErrorCode::NameUnknown)
}

async fn referrers_of(
    ctx: &Ctx,
    digest: &str,
    artifact_type: Option<&str>,
) -> Result<Answer, String> {
    let rest = match artifact_type {
        // `+` in a query means a space (form encoding, as Go's and our parsers read it).
        Some(t) => format!("referrers/{digest}?artifactType={}", t.replace('+', "%2B")),
        None => format!("referrers/{digest}"),
    };
    read(ctx, Method::GET, &ctx.repo, &rest, &[]).await
}

fn index_of(answer: &Answer) -> Result<Vec<serde_json::Value>, String> {
    answer.expect(&[200])?;
    let media_type = answer.media_type();
    ensure!(
        media_type.as_deref() == Some(oci::media_type::OCI_INDEX),
        "{}: Content-Type {media_type:?}, expected an OCI index",
        answer.line()
    );
    let value: serde_json::Value = serde_json::from_slice(&answer.body)
        .map_err(|e| format!("{}: not JSON: {e}", answer.line()))?;
    value["manifests"]
        .as_array()
        .cloned()
        .ok_or_else(|| format!("{}: no manifests array", answer.line()))
}

async fn referrers(ctx: &Ctx, artifact_type: Option<&str>) -> Result<(), String> {
    let subject = ctx.fixtures.manifest.digest().to_string();
    let answer = referrers_of(ctx, &subject, artifact_type).await?;
    let manifests = index_of(&answer)?;
    let artifact = ctx.fixtures.artifact.digest().to_string();
    let entry = manifests
        .iter()
        .find(|m| m["digest"] == artifact.as_str())
        .ok_or_else(|| format!("{}: the artifact {artifact} is not listed", answer.line()))?;
    ensure!(
        entry["artifactType"] == ARTIFACT_TYPE,
        "{}: artifactType {}, expected {ARTIFACT_TYPE}",
        answer.line(),
        entry["artifactType"]
    );
    ensure!(
        entry["annotations"]["org.opencontainers.image.created"] == "2024-01-01T00:00:00Z",
        "{}: the artifact's annotations are not copied",
        answer.line()
    );
    if artifact_type.is_some() {
        let filtered = answer
            .header(oci::header::OCI_FILTERS_APPLIED)
            .is_some_and(|v| v.split(',').any(|f| f.trim() == "artifactType"));
        if filtered {
            ensure!(
                manifests.iter().all(|m| m["artifactType"] == ARTIFACT_TYPE),
                "{}: filter applied but other types listed",
                answer.line()
            );
        }
    }
    Ok(())
}

async fn referrers_empty(ctx: &Ctx) -> Result<(), String> {
    let digest = ctx.fixtures.layer.digest.to_string();
    let answer = referrers_of(ctx, &digest, None).await?;
    let manifests = index_of(&answer)?;
    ensure!(
        manifests.is_empty(),
        "{}: {} referrers listed for a plain blob",
        answer.line(),
        manifests.len()
    );
    Ok(())
}

async fn referrers_invalid(ctx: &Ctx) -> Result<(), String> {
    let answer = referrers_of(ctx, "sha256:not-hex", None).await?;
    answer.expect(&[400])
}
