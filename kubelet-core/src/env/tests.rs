//! Environment building, expansion and service variables, as Go computes them.

use super::*;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use crate::objects::MemoryObjectStore;
use k8s_openapi::api::core::v1::{
    ConfigMap, ConfigMapEnvSource, ConfigMapKeySelector, EnvFromSource, EnvVar as ApiEnvVar,
    EnvVarSource, ObjectFieldSelector, PodSpec, ResourceFieldSelector, ResourceRequirements,
    SecretKeySelector, ServicePort, ServiceSpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::ByteString;

fn meta(ns: &str, name: &str) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.into()),
        namespace: Some(ns.into()),
        ..Default::default()
    }
}

fn literal(name: &str, value: &str) -> ApiEnvVar {
    ApiEnvVar {
        name: name.into(),
        value: Some(value.into()),
        value_from: None,
    }
}

fn from(name: &str, src: EnvVarSource) -> ApiEnvVar {
    ApiEnvVar {
        name: name.into(),
        value: None,
        value_from: Some(src),
    }
}

fn store() -> MemoryObjectStore {
    let s = MemoryObjectStore::new();
    s.put_config_map(ConfigMap {
        metadata: meta("ns", "cfg"),
        data: Some(
            [
                ("GOOD", "g"),
                ("1BAD", "b"),
                ("also bad", "b"),
                ("key", "from-cm"),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        ),
        ..Default::default()
    });
    s.put_secret(Secret {
        metadata: meta("ns", "sec"),
        data: Some([("pw".to_string(), ByteString(b"hunter2".to_vec()))].into()),
        ..Default::default()
    });
    s.put_service(Service {
        metadata: meta("ns", "my-db"),
        spec: Some(ServiceSpec {
            cluster_ip: Some("10.0.0.7".into()),
            ports: Some(vec![ServicePort {
                port: 5432,
                name: Some("sql".into()),
                ..Default::default()
            }]),
            ..Default::default()
        }),
        ..Default::default()
    });
    s.put_service(Service {
        metadata: meta("default", "kubernetes"),
        spec: Some(ServiceSpec {
            cluster_ip: Some("10.0.0.1".into()),
            ports: Some(vec![ServicePort {
                port: 443,
                name: Some("https".into()),
                ..Default::default()
            }]),
            ..Default::default()
        }),
        ..Default::default()
    });
    s.put_service(Service {
        metadata: meta("default", "other"),
        spec: Some(ServiceSpec {
            cluster_ip: Some("10.0.0.2".into()),
            ports: Some(vec![ServicePort {
                port: 80,
                ..Default::default()
            }]),
            ..Default::default()
        }),
        ..Default::default()
    });
    s
}

fn pod_with(c: Container, links: Option<bool>) -> Pod {
    Pod {
        metadata: ObjectMeta {
            labels: Some([("app".to_string(), "web".to_string())].into()),
            ..meta("ns", "p")
        },
        spec: Some(PodSpec {
            containers: vec![c],
            enable_service_links: links,
            service_account_name: Some("sa".into()),
            ..Default::default()
        }),
        ..Default::default()
    }
}

async fn env_of(c: Container, links: Option<bool>) -> Result<EnvOutput, EnvError> {
    let p = pod_with(c, links);
    let store = store();
    let alloc: ResourceList = [
        ("cpu".to_string(), Quantity("4".into())),
        ("memory".to_string(), Quantity("8Gi".into())),
    ]
    .into();
    let fields = FieldValues {
        pod_ip: "10.1.0.9".into(),
        host_ip: "192.168.1.2".into(),
        node_name: "node-a".into(),
        host_ips: vec!["192.168.1.2".into(), "fd00::2".into()],
    };
    make_environment(&EnvInputs {
        pod: &p,
        container: &p.spec.as_ref().unwrap().containers[0],
        fields: &fields,
        allocatable: &alloc,
        store: &store,
    })
    .await
}

fn get<'a>(out: &'a EnvOutput, name: &str) -> Option<&'a str> {
    out.env
        .iter()
        .find(|e| e.name == name)
        .map(|e| e.value.as_str())
}

fn field(path: &str) -> EnvVarSource {
    EnvVarSource {
        field_ref: Some(ObjectFieldSelector {
            field_path: path.into(),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn resource(res: &str, divisor: Option<&str>) -> EnvVarSource {
    EnvVarSource {
        resource_field_ref: Some(ResourceFieldSelector {
            resource: res.into(),
            divisor: divisor.map(|d| Quantity(d.into())),
            container_name: None,
        }),
        ..Default::default()
    }
}

#[tokio::test]
async fn sources_of_values() {
    let c = Container {
        name: "c".into(),
        resources: Some(ResourceRequirements {
            limits: Some([("memory".to_string(), Quantity("64Mi".into()))].into()),
            requests: Some([("cpu".to_string(), Quantity("250m".into()))].into()),
            ..Default::default()
        }),
        env_from: Some(vec![EnvFromSource {
            config_map_ref: Some(ConfigMapEnvSource {
                name: "cfg".into(),
                optional: None,
            }),
            prefix: Some("P_".into()),
            secret_ref: None,
        }]),
        env: Some(vec![
            from("NAME", field("metadata.name")),
            from("NS", field("metadata.namespace")),
            from("APP", field("metadata.labels['app']")),
            from("NODE", field("spec.nodeName")),
            from("SA", field("spec.serviceAccountName")),
            from("POD_IP", field("status.podIP")),
            from("HOST_IPS", field("status.hostIPs")),
            from("MEM_MI", resource("limits.memory", Some("1Mi"))),
            from("CPU_LIMIT", resource("limits.cpu", None)),
            from("CPU_REQ_M", resource("requests.cpu", Some("1m"))),
            from("CPU_REQ", resource("requests.cpu", None)),
            from(
                "CM",
                EnvVarSource {
                    config_map_key_ref: Some(ConfigMapKeySelector {
                        name: "cfg".into(),
                        key: "key".into(),
                        optional: None,
                    }),
                    ..Default::default()
                },
            ),
            from(
                "PW",
                EnvVarSource {
                    secret_key_ref: Some(SecretKeySelector {
                        name: "sec".into(),
                        key: "pw".into(),
                        optional: None,
                    }),
                    ..Default::default()
                },
            ),
            from(
                "OPT",
                EnvVarSource {
                    config_map_key_ref: Some(ConfigMapKeySelector {
                        name: "absent".into(),
                        key: "k".into(),
                        optional: Some(true),
                    }),
                    ..Default::default()
                },
            ),
            literal("URL", "$(P_GOOD)-$(NAME):$(MY_DB_SERVICE_PORT)/$(UNSET)"),
        ]),
        ..Default::default()
    };
    let out = env_of(c, None).await.unwrap();
    for (name, want) in [
        ("P_GOOD", "g"),
        ("NAME", "p"),
        ("NS", "ns"),
        ("APP", "web"),
        ("NODE", "node-a"),
        ("SA", "sa"),
        ("POD_IP", "10.1.0.9"),
        ("HOST_IPS", "192.168.1.2,fd00::2"),
        ("MEM_MI", "64"),
        ("CPU_LIMIT", "4"),
        ("CPU_REQ_M", "250"),
        ("CPU_REQ", "1"),
        ("CM", "from-cm"),
        ("PW", "hunter2"),
        ("URL", "g-p:5432/$(UNSET)"),
        ("MY_DB_SERVICE_HOST", "10.0.0.7"),
        ("KUBERNETES_SERVICE_HOST", "10.0.0.1"),
        ("KUBERNETES_SERVICE_PORT", "443"),
    ] {
        assert_eq!(get(&out, name), Some(want), "{name}");
    }
    assert_eq!(get(&out, "OPT"), None, "optional and missing: skipped");
    assert_eq!(
        get(&out, "OTHER_SERVICE_HOST"),
        None,
        "only the master service of default"
    );
    assert_eq!(
        out.invalid_keys,
        vec!["Keys [P_also bad] from the EnvFrom configMap ns/cfg were skipped since they are considered invalid environment variable names."]
    );
}

#[tokio::test]
async fn service_links_off_keeps_the_master_service() {
    let out = env_of(
        Container {
            name: "c".into(),
            ..Default::default()
        },
        Some(false),
    )
    .await
    .unwrap();
    assert_eq!(get(&out, "MY_DB_SERVICE_HOST"), None);
    assert_eq!(
        get(&out, "KUBERNETES_PORT_443_TCP"),
        Some("tcp://10.0.0.1:443")
    );
}

#[tokio::test]
async fn missing_references_fail() {
    let key = |name: &str, key: &str| {
        from(
            "X",
            EnvVarSource {
                config_map_key_ref: Some(ConfigMapKeySelector {
                    name: name.into(),
                    key: key.into(),
                    optional: None,
                }),
                ..Default::default()
            },
        )
    };
    for (env, want) in [
        (key("absent", "k"), "not found"),
        (
            key("cfg", "nokey"),
            "couldn't find key nokey in ConfigMap ns/cfg",
        ),
        (from("X", field("status.bogus")), "unsupported fieldRef"),
        (
            from("X", resource("limits.gpu", None)),
            "unsupported resource",
        ),
    ] {
        let c = Container {
            name: "c".into(),
            env: Some(vec![env]),
            ..Default::default()
        };
        let e = env_of(c, None).await.unwrap_err().to_string();
        assert!(e.contains(want), "{e} should contain {want}");
    }
}

#[test]
fn service_variables_as_go_names_them() {
    let svc = Service {
        metadata: meta("ns", "web-front"),
        spec: Some(ServiceSpec {
            cluster_ip: Some("10.0.0.9".into()),
            ports: Some(vec![
                ServicePort {
                    port: 80,
                    ..Default::default()
                },
                ServicePort {
                    port: 53,
                    name: Some("dns-udp".into()),
                    protocol: Some("UDP".into()),
                    ..Default::default()
                },
            ]),
            ..Default::default()
        }),
        ..Default::default()
    };
    let headless = Service {
        metadata: meta("ns", "headless"),
        spec: Some(ServiceSpec {
            cluster_ip: Some("None".into()),
            ..Default::default()
        }),
        ..Default::default()
    };
    let got: Vec<(String, String)> = service_env(&[svc, headless])
        .into_iter()
        .map(|e| (e.name, e.value))
        .collect();
    let want: Vec<(&str, &str)> = vec![
        ("WEB_FRONT_SERVICE_HOST", "10.0.0.9"),
        ("WEB_FRONT_SERVICE_PORT", "80"),
        ("WEB_FRONT_SERVICE_PORT_DNS_UDP", "53"),
        ("WEB_FRONT_PORT", "tcp://10.0.0.9:80"),
        ("WEB_FRONT_PORT_80_TCP", "tcp://10.0.0.9:80"),
        ("WEB_FRONT_PORT_80_TCP_PROTO", "tcp"),
        ("WEB_FRONT_PORT_80_TCP_PORT", "80"),
        ("WEB_FRONT_PORT_80_TCP_ADDR", "10.0.0.9"),
        ("WEB_FRONT_PORT_53_UDP", "udp://10.0.0.9:53"),
        ("WEB_FRONT_PORT_53_UDP_PROTO", "udp"),
        ("WEB_FRONT_PORT_53_UDP_PORT", "53"),
        ("WEB_FRONT_PORT_53_UDP_ADDR", "10.0.0.9"),
    ];
    let got: Vec<(&str, &str)> = got.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect();
    assert_eq!(got, want);
}

#[test]
fn env_var_names() {
    for ok in ["A", "_a", "a.b-c", "-x", ".x", "A1"] {
        assert!(is_env_var_name(ok), "{ok}");
    }
    for bad in ["", "1A", "a b", "a=b", "ä"] {
        assert!(!is_env_var_name(bad), "{bad}");
    }
}

#[test]
fn expansion_table() {
    let vars: HashMap<&str, &str> = [("VAR_A", "A"), ("VAR_B", "B"), ("EMPTY", "")]
        .into_iter()
        .collect();
    let lookup = |n: &str| vars.get(n).map(|v| v.to_string());
    // Cases from the Kubernetes documentation and expansion tests.
    for (input, want) in [
        ("$(VAR_A)", "A"),
        ("___$(VAR_A)___", "___A___"),
        ("$(VAR_A)-$(VAR_B)", "A-B"),
        ("$(UNKNOWN)", "$(UNKNOWN)"),
        ("$$(VAR_A)", "$(VAR_A)"),
        ("$$$(VAR_A)", "$A"),
        ("$$$$(VAR_A)", "$$(VAR_A)"),
        ("$(EMPTY)x", "x"),
        ("$VAR_A", "$VAR_A"),
        ("$(VAR_A", "$(VAR_A"),
        ("tail$", "tail$"),
        ("$()", "$()"),
        ("no refs", "no refs"),
    ] {
        assert_eq!(expand(input, &lookup), want, "{input}");
    }
}

#[test]
fn a_zero_divisor_is_an_unset_one() {
    let c = Container {
        name: "c".into(),
        resources: Some(ResourceRequirements {
            limits: Some([("memory".to_string(), Quantity("64Mi".into()))].into()),
            requests: Some([("cpu".to_string(), Quantity("250m".into()))].into()),
            ..Default::default()
        }),
        ..Default::default()
    };
    let allocatable: ResourceList = [("cpu".to_string(), Quantity("2".into()))].into();
    for (resource, divisor, want) in [
        ("limits.memory", Some("0"), Ok("67108864")),
        ("limits.memory", None, Ok("67108864")),
        ("limits.memory", Some("1Mi"), Ok("64")),
        ("requests.cpu", Some("0"), Ok("1")),
        ("requests.cpu", None, Ok("1")),
        ("requests.cpu", Some("1m"), Ok("250")),
        // No CPU limit: the node's allocatable.
        ("limits.cpu", Some("0"), Ok("2")),
        (
            "limits.memory",
            Some("-1"),
            Err("divisor must be greater than 0".to_string()),
        ),
    ] {
        let d = divisor.map(|d| Quantity(d.into()));
        let got = resource_field_value(&c, resource, d.as_ref(), &allocatable);
        let got = got.as_deref().map_err(|e| e.to_string());
        assert_eq!(got, want, "{resource} divisor {divisor:?}");
    }
}
