//! Property tests of the static pod decoder: any input gives pods or errors — never a panic —
//! in bounded time.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::time::Duration;

use kubelet_sources::static_pod::{parse_manifest, Context, FILE_SOURCE};
use proptest::prelude::*;
use serde_json::{Map, Value};

const CTX: Context<'static> = Context {
    source: FILE_SOURCE,
    origin: "/m/p.yaml",
    node_name: "node-1",
};

/// Keys a pod manifest uses, so random documents reach deep into the decoder and validation.
const KEYS: &[&str] = &[
    "apiVersion",
    "kind",
    "metadata",
    "name",
    "namespace",
    "labels",
    "annotations",
    "spec",
    "containers",
    "initContainers",
    "image",
    "ports",
    "containerPort",
    "hostPort",
    "env",
    "value",
    "valueFrom",
    "fieldRef",
    "fieldPath",
    "volumes",
    "emptyDir",
    "hostPath",
    "path",
    "volumeMounts",
    "mountPath",
    "subPath",
    "resources",
    "limits",
    "requests",
    "cpu",
    "memory",
    "livenessProbe",
    "exec",
    "command",
    "httpGet",
    "port",
    "restartPolicy",
    "dnsPolicy",
    "tolerations",
    "key",
    "operator",
    "affinity",
    "securityContext",
    "runAsUser",
    "items",
    "configMap",
    "secret",
    "secretName",
    "sizeLimit",
    "generateName",
    "hostAliases",
    "ip",
];

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<f64>()
            .prop_map(|f| serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)),
        "[a-zA-Z0-9./_ -]{0,12}".prop_map(Value::String),
        prop_oneof![
            Just("v1"),
            Just("Pod"),
            Just("PodList"),
            Just("1e2147483647"),
            Just("100m"),
            Just("/tmp/x"),
            Just("../x")
        ]
        .prop_map(|s| Value::String(s.to_string())),
    ];
    leaf.prop_recursive(6, 64, 8, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::vec((prop::sample::select(KEYS), inner), 0..8).prop_map(|kv| {
                let mut m = Map::new();
                for (k, v) in kv {
                    m.insert(k.to_string(), v);
                }
                Value::Object(m)
            }),
        ]
    })
}

fn pod_shaped() -> impl Strategy<Value = Value> {
    (json_value(), json_value(), json_value()).prop_map(|(meta, spec, container)| {
        let mut spec = match spec {
            Value::Object(m) => m,
            _ => Map::new(),
        };
        spec.insert("containers".into(), Value::Array(vec![container]));
        serde_json::json!({"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec})
    })
}

fn check(bytes: &[u8]) -> Result<(), TestCaseError> {
    let started = kubelet_core::clock::monotonic_now();
    let m = parse_manifest(bytes, &CTX);
    prop_assert!(kubelet_core::clock::elapsed(started) < Duration::from_secs(2));
    // Every accepted pod has the generated name and UID.
    for p in &m.pods {
        prop_assert!(p.metadata.uid.as_deref().is_some_and(|u| !u.is_empty()));
        prop_assert!(p
            .metadata
            .name
            .as_deref()
            .is_some_and(|n| n.ends_with("-node-1")));
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn any_bytes(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        check(&bytes)?;
    }

    #[test]
    fn yaml_like_text(text in "([a-z]{1,6}: (&a|\\*a|\\[|\\]|\\{|\\}|-|[a-z0-9]{1,5}|\"x\")?\n( {0,4}))*") {
        check(text.as_bytes())?;
    }

    #[test]
    fn pod_shaped_json(pod in pod_shaped()) {
        check(&serde_json::to_vec(&pod).unwrap())?;
    }

    #[test]
    fn pod_shaped_yaml(pod in pod_shaped()) {
        check(serde_yaml_ng::to_string(&pod).unwrap().as_bytes())?;
    }
}
