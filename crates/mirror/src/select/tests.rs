use super::*;

fn v(s: &str) -> Version {
    parse_release(s).expect("version")
}

fn tags(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| (*s).to_owned()).collect()
}

fn channels(list: &[(&str, &str)]) -> BTreeMap<String, Version> {
    list.iter()
        .map(|(c, ver)| ((*c).to_owned(), v(ver)))
        .collect()
}

#[test]
fn releases_parse_with_or_without_v_and_never_as_prereleases() {
    assert_eq!(parse_release("v1.2.3"), Some(Version::new(1, 2, 3)));
    assert_eq!(parse_release("1.2.3"), Some(Version::new(1, 2, 3)));
    assert_eq!(parse_release("v1.2.3-rc.1"), None);
    assert_eq!(parse_release("stable"), None);
    assert_eq!(parse_release("v1.2"), None);
}

#[test]
fn ranges_keep_the_newest_patch_of_each_minor_and_inclusive_anchors() {
    // The README example of `d8 mirror`: versions v1.0.0 v1.1.0 v1.1.2 v1.2.0 v1.2.4 v1.3.0,
    // constraint >=1.1.0 <1.3.0 gives v1.1.0 (anchor), v1.1.2, v1.2.4.
    let available = tags(&["v1.0.0", "v1.1.0", "v1.1.2", "v1.2.0", "v1.2.4", "v1.3.0"]);
    let c = Constraint::parse(">=1.1.0 <1.3.0").unwrap();
    let got: Vec<String> = c.select(&available).iter().map(release_tag).collect();
    assert_eq!(got, ["v1.1.0", "v1.1.2", "v1.2.4"]);

    // Caret: no anchor, newest patch per minor.
    let available = tags(&["v1.0.0", "v1.1.0", "v1.2.0", "v1.3.0", "v1.3.3", "v1.4.1"]);
    let c = Constraint::parse("1.3.0").unwrap();
    let got: Vec<String> = c.select(&available).iter().map(release_tag).collect();
    assert_eq!(got, ["v1.3.3", "v1.4.1"]);
    let c = Constraint::parse("~1.3.0").unwrap();
    let got: Vec<String> = c.select(&available).iter().map(release_tag).collect();
    assert_eq!(got, ["v1.3.3"]);
}

#[test]
fn masterminds_spellings_parse() {
    for text in [
        ">=1.64 <=1.68",
        ">= 1.64, <= 1.68",
        "^v1.65.0",
        "~1.65",
        ">1.0 || <0.5",
    ] {
        assert!(
            matches!(Constraint::parse(text), Ok(Constraint::Range { .. })),
            "{text}"
        );
    }
    assert_eq!(
        Constraint::parse("=v1.3.0+stable").unwrap(),
        Constraint::Exact {
            tag: "v1.3.0".into(),
            channel: Some("stable".into())
        }
    );
    assert_eq!(
        Constraint::parse("=bobV1").unwrap(),
        Constraint::Exact {
            tag: "bobV1".into(),
            channel: None
        }
    );
    for bad in ["", ">=", "=../x", ">=1.x.y.z", "1.0 ||"] {
        assert!(Constraint::parse(bad).is_err(), "{bad:?} must be refused");
    }
}

#[test]
fn default_platform_plan_spans_rock_solid_to_alpha() {
    let ch = channels(&[
        ("alpha", "v1.68.2"),
        ("beta", "v1.68.1"),
        ("early-access", "v1.67.5"),
        ("stable", "v1.67.5"),
        ("rock-solid", "v1.66.3"),
    ]);
    let t = tags(&[
        "v1.65.9", "v1.66.1", "v1.66.3", "v1.66.4", "v1.67.1", "v1.67.5", "v1.68.0", "v1.68.1",
        "v1.68.2", "v1.69.0",
    ]);
    let plan = plan_platform(&PlatformSelection::Channels, &ch, &t).unwrap();
    let got: Vec<String> = plan.tags();
    assert_eq!(got, ["v1.66.3", "v1.66.4", "v1.67.5", "v1.68.1", "v1.68.2"]);
    assert_eq!(plan.channels.len(), 5);
    assert_eq!(plan.retag_channels_to, None);

    // --since-version above rock-solid drops the older channel and versions.
    let plan = plan_platform(&PlatformSelection::Since(v("1.67.0")), &ch, &t).unwrap();
    assert_eq!(plan.tags(), ["v1.67.5", "v1.68.1", "v1.68.2"]);
    assert!(!plan.channels.contains("rock-solid"));
}

#[test]
fn a_single_tag_points_every_channel_at_itself() {
    let ch = channels(&[("alpha", "v1.68.2"), ("stable", "v1.67.5")]);
    let plan = plan_platform(&PlatformSelection::Tag("v1.67.5".into()), &ch, &[]).unwrap();
    assert_eq!(plan.tags(), ["v1.67.5"]);
    assert_eq!(plan.channels, BTreeSet::from(["stable".to_owned()]));
    assert_eq!(plan.retag_channels_to.as_deref(), Some("v1.67.5"));

    let plan = plan_platform(&PlatformSelection::Tag("pr123".into()), &ch, &[]).unwrap();
    assert_eq!(plan.tags(), ["pr123"]);

    let plan = plan_platform(&PlatformSelection::Tag("alpha".into()), &ch, &[]).unwrap();
    assert_eq!(plan.tags(), ["v1.68.2"]);
    assert_eq!(plan.retag_channels_to, None);
}

#[test]
fn a_constraint_drops_channels_outside_its_window() {
    let ch = channels(&[("alpha", "v1.69.0"), ("stable", "v1.66.3")]);
    let t = tags(&["v1.66.3", "v1.67.1", "v1.67.2", "v1.69.0"]);
    let c = Constraint::parse(">=1.67 <1.69").unwrap();
    let plan = plan_platform(&PlatformSelection::Constraint(c), &ch, &t).unwrap();
    assert_eq!(plan.tags(), ["v1.67.2"]);
    assert!(plan.channels.is_empty());
}

#[test]
fn nothing_to_pull_is_an_error_not_an_empty_bundle() {
    assert!(matches!(
        plan_platform(&PlatformSelection::Channels, &BTreeMap::new(), &[]),
        Err(Error::NoChannels)
    ));
    let c = Constraint::parse(">=9.0").unwrap();
    assert!(plan_platform(&PlatformSelection::Constraint(c), &BTreeMap::new(), &[]).is_err());
}

#[test]
fn module_filters_whitelist_blacklist_and_versions() {
    let include = ModuleFilter {
        include: vec![ModuleSpec::parse("neuvector@~1.2.0").unwrap()],
        exclude: vec![ModuleSpec::parse("neuvector").unwrap()],
    };
    assert!(include.wants("neuvector"), "include overrides exclude");
    assert!(!include.wants("prometheus"));
    let chv = channels(&[("stable", "v1.1.0")]);
    let versions = include.versions("neuvector", &chv, &tags(&["v1.2.0", "v1.2.3", "v1.3.0"]));
    assert_eq!(
        versions.tags,
        BTreeSet::from(["v1.1.0".to_owned(), "v1.2.3".to_owned()])
    );

    let exclude = ModuleFilter {
        include: vec![],
        exclude: vec![
            ModuleSpec::parse("a").unwrap(),
            ModuleSpec::parse("b@=v1.0.0").unwrap(),
        ],
    };
    assert!(!exclude.wants("a"));
    assert!(exclude.wants("b"));
    let chv = channels(&[("stable", "v1.0.0"), ("alpha", "v1.1.0")]);
    let versions = exclude.versions("b", &chv, &[]);
    assert_eq!(versions.tags, BTreeSet::from(["v1.1.0".to_owned()]));
    assert_eq!(versions.channels, BTreeSet::from(["alpha".to_owned()]));

    let exact = ModuleFilter {
        include: vec![ModuleSpec::parse("m@=v1.3.0+stable").unwrap()],
        exclude: vec![],
    };
    let versions = exact.versions("m", &chv, &[]);
    assert_eq!(versions.tags, BTreeSet::from(["v1.3.0".to_owned()]));
    assert_eq!(versions.retag_channels, ["stable"]);
    assert!(versions.channels.is_empty());

    assert!(ModuleSpec::parse("Bad Name").is_err());
    assert!(ModuleSpec::parse("m@>=").is_err());
}

#[test]
fn image_lists_are_read_at_any_nesting() {
    let d1 = oci::Digest::sha256(b"1");
    let d2 = oci::Digest::sha256(b"2");
    let json =
        format!(r#"{{"common": {{"a": "{d1}", "b": "{d2}"}}, "x": {{"c": "{d1}", "n": 3}}}}"#);
    assert_eq!(
        digests_in(json.as_bytes()).unwrap(),
        BTreeSet::from([d1, d2])
    );
    let tags = tags_in(br#"{"m": {"a": "a-1f2e", "b": "bad tag"}}"#).unwrap();
    assert_eq!(tags, BTreeSet::from(["a-1f2e".to_owned()]));
    assert!(digests_in(b"not json").is_err());
}

#[test]
fn version_json_is_read_with_its_suspend_flag() {
    let info = parse_version_json(br#"{"version":"v1.2.3","suspend":true,"canary":{}}"#).unwrap();
    assert_eq!(info.version, Version::new(1, 2, 3));
    assert!(info.suspended);
    assert!(parse_version_json(br#"{"version":"main"}"#).is_err());
}
