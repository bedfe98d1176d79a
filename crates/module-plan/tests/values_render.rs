//! A realistic module directory — `openapi/config-values.yaml` with a conversion,
//! `openapi/values.yaml` extending it with hook-filled `internal` values required for Helm,
//! a static `values.yaml` — and its ModuleConfig: the values built here, patched as a hook
//! would, and rendered through `helm_render` with a small chart give the expected manifest.

use std::sync::Arc;

use api::module_config::ModuleConfigSpec;
use helm_render::{RenderOptions, ValueSources, load_files, render};
use module_plan::config::ModuleSettings;
use module_plan::values::{
    Discovery, GlobalFacts, GlobalRegistry, ModuleValues, ModulesImages, ValuesDefinition,
    ValuesPatch, helm_values,
};
use serde_json::{Value, json};

const CONFIG_VALUES: &str = r#"
type: object
x-config-version: 2
properties:
  replicas:
    type: integer
    default: 1
    minimum: 1
  logLevel:
    type: string
    enum: [Debug, Info]
    default: Info
  https:
    type: object
    default: {}
    properties:
      mode:
        type: string
        enum: [CertManager, Disabled]
        default: CertManager
"#;

const CONVERSION_V2: &str = r#"
version: 2
conversions:
  - 'if has("debug") then .logLevel = (if .debug then "Debug" else "Info" end) | del(.debug) else . end'
"#;

const VALUES_SCHEMA: &str = r#"
x-extend:
  schema: config-values.yaml
type: object
x-required-for-helm: [internal]
properties:
  image:
    type: string
  internal:
    type: object
    default: {}
    x-required-for-helm: [token]
    properties:
      token:
        type: string
      peers:
        type: array
        default: []
        items: {type: string}
"#;

const STATIC_VALUES: &str = "echoServer:\n  image: server\n";

const CHART: &[(&str, &str)] = &[
    ("Chart.yaml", "name: echo-server\nversion: 0.2.0\n"),
    (
        "templates/deployment.yaml",
        r#"apiVersion: apps/v1
kind: Deployment
metadata:
  name: echo
  namespace: d8-{{ .Chart.Name }}
spec:
  replicas: {{ .Values.echoServer.replicas }}
  template:
    spec:
      containers:
      - name: server
        image: {{ .Values.global.modulesImages.registry.base }}@{{ index .Values.global.modulesImages.digests.echoServer .Values.echoServer.image }}
        args:
        - --log-level={{ .Values.echoServer.logLevel | lower }}
        - --domain={{ .Values.global.discovery.clusterDomain }}
        - --https={{ .Values.echoServer.https.mode }}
        {{- range .Values.echoServer.internal.peers }}
        - --peer={{ . }}
        {{- end }}
        env:
        - name: TOKEN
          value: {{ .Values.echoServer.internal.token | quote }}
        - name: MODULES
          value: {{ .Values.global.enabledModules | join "," | quote }}
"#,
    ),
];

const EXPECTED: &str = r#"---
# Source: echo-server/templates/deployment.yaml
apiVersion: apps/v1
kind: Deployment
metadata:
  name: echo
  namespace: d8-echo-server
spec:
  replicas: 3
  template:
    spec:
      containers:
      - name: server
        image: registry.example.com/deckhouse@sha256:0123
        args:
        - --log-level=debug
        - --domain=cluster.local
        - --https=CertManager
        - --peer=10.0.0.1
        - --peer=10.0.0.2
        env:
        - name: TOKEN
          value: "s3cr3t"
        - name: MODULES
          value: "echo-server,prometheus"
"#;

fn render_chart(values: &Value) -> Result<String, String> {
    let files: Vec<(String, Vec<u8>)> = CHART
        .iter()
        .map(|(n, t)| ((*n).to_owned(), t.as_bytes().to_vec()))
        .collect();
    // addon-operator hands Helm the values as a values file.
    let sources = ValueSources {
        files: vec![("values.yaml".into(), values.to_string())],
        ..Default::default()
    };
    let opts = RenderOptions {
        release_name: "echo-server".into(),
        namespace: "d8-echo-server".into(),
        ..Default::default()
    };
    std::thread::Builder::new()
        .stack_size(helm_render::engine::RENDER_THREAD_STACK)
        .spawn(move || {
            let user = sources.merge(&|p| Err(format!("open {p}")))?;
            let chart = load_files(files).map_err(|e| e.to_string())?;
            render(chart, &user, &opts).map_err(|e| e.to_string())
        })
        .map_err(|e| e.to_string())?
        .join()
        .map_err(|_| "render thread panicked".to_owned())?
}

#[test]
fn module_values_render_through_the_chart() {
    let settings = ModuleSettings::from_files(
        "echo-server",
        Some(CONFIG_VALUES),
        &[("openapi/conversions/v2.yaml".into(), CONVERSION_V2.into())],
    )
    .unwrap();
    let definition = Arc::new(
        ValuesDefinition::new(settings, Some(VALUES_SCHEMA), Some(STATIC_VALUES)).unwrap(),
    );
    let global_definition = Arc::new(
        ValuesDefinition::new(
            ModuleSettings::from_files("global", None, &[]).unwrap(),
            None,
            None,
        )
        .unwrap(),
    );
    let facts = GlobalFacts {
        enabled_modules: vec!["prometheus".into(), "echo-server".into()],
        modules_images: ModulesImages {
            registry: GlobalRegistry {
                base: Some("registry.example.com/deckhouse".into()),
                ..Default::default()
            },
            digests: [(
                "echoServer".to_owned(),
                [("server".to_owned(), "sha256:0123".to_owned())].into(),
            )]
            .into(),
        },
        discovery: Discovery {
            cluster_domain: Some("cluster.local".into()),
            ..Default::default()
        },
        ..Default::default()
    };
    let global = ModuleValues::build_global(global_definition, None, &facts).unwrap();

    // A ModuleConfig written for version 1 (`debug: true` became `logLevel: Debug` in v2).
    let config = ModuleConfigSpec {
        enabled: Some(true),
        version: Some(1),
        settings: Some(json!({"replicas": 3, "debug": true})),
        ..Default::default()
    };
    let module = ModuleValues::build(definition, Some(&config), None).unwrap();
    assert_eq!(
        module.config_values(),
        &json!({"replicas": 3, "logLevel": "Debug"})
    );

    // Before any hook ran, the chart may not render: internal.token is required for Helm.
    assert_eq!(
        module.check_helm().unwrap_err().to_string(),
        "check helm values: 1 error occurred:\n\t* echoServer.internal.token is required\n\n"
    );

    // A hook fills internal values through VALUES_JSON_PATCH_PATH.
    let patch = ValuesPatch::parse(
        br#"[{"op":"add","path":"/echoServer/internal/token","value":"s3cr3t"}]
{"op":"add","path":"/echoServer/internal/peers","value":["10.0.0.1","10.0.0.2"]}"#,
    )
    .unwrap();
    let module = module.apply_values_patch(&patch).unwrap();
    module.check_helm().unwrap();

    let values = helm_values(&global, &module);
    assert_eq!(
        values["echoServer"],
        json!({
            "image": "server",
            "replicas": 3,
            "logLevel": "Debug",
            "https": {"mode": "CertManager"},
            "internal": {"token": "s3cr3t", "peers": ["10.0.0.1", "10.0.0.2"]}
        })
    );
    let manifest = render_chart(&values).unwrap();
    assert_eq!(manifest, EXPECTED);

    // The same values give the same checksum; a settings change gives another one and another
    // manifest, the hook's values staying.
    let again = helm_values(&global, &module.with_config(Some(&config)).unwrap());
    assert_eq!(
        module_plan::values::checksum(&again),
        module_plan::values::checksum(&values)
    );
    let scaled = module
        .with_config(Some(&ModuleConfigSpec {
            version: Some(2),
            settings: Some(json!({"replicas": 5, "logLevel": "Info"})),
            ..config.clone()
        }))
        .unwrap();
    let scaled_values = helm_values(&global, &scaled);
    assert_ne!(
        module_plan::values::checksum(&scaled_values),
        module_plan::values::checksum(&values)
    );
    let manifest = render_chart(&scaled_values).unwrap();
    assert!(manifest.contains("  replicas: 5\n"), "{manifest}");
    assert!(manifest.contains("--log-level=info"), "{manifest}");
    assert!(manifest.contains("value: \"s3cr3t\""), "{manifest}");
}
