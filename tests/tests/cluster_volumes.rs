//! Volumes and env from the real API server (scripts/control-plane.sh): the engine runs, on
//! containerd, a pod the API server has bound to a test node, and reads its config map,
//! secret and service-account token through `ApiObjectStore` with that node's identity (so the
//! Node authorizer decides what it may read). The config map reaches env and a file and the
//! file follows an update in place; the secret file has mode 0400; the projected token (the
//! volume `kubectl run` pods get: token, kube-root-ca.crt, namespace) passes a TokenReview
//! bound to the pod; an object the pod does not reference is refused.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use k8s_openapi::api::core::v1::{
    ConfigMap, ConfigMapKeySelector, ConfigMapProjection, ConfigMapVolumeSource,
    DownwardAPIProjection, DownwardAPIVolumeFile, EnvVar, EnvVarSource, KeyToPath, Namespace, Node,
    ObjectFieldSelector, Pod, PodStatus, ProjectedVolumeSource, Secret, SecretVolumeSource,
    ServiceAccount, ServiceAccountTokenProjection, Volume, VolumeMount, VolumeProjection,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::ByteString;
use kube::api::{Api, DeleteParams, PostParams};
use kubelet_core::objects::ObjectStore;
use kubelet_core::testing::StaticSource;
use kubelet_core::{KubeletHandle, PodSource};
use kubelet_sources::objects::ApiObjectStore;
use kubelet_tests::cluster::ControlPlane;
use kubelet_tests::engine::{busybox, container_status, wait_running, EngineTest};

const LONG: Duration = Duration::from_secs(90);

fn meta(name: &str, ns: Option<&str>) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.into()),
        namespace: ns.map(str::to_string),
        ..Default::default()
    }
}

fn mount(name: &str, path: &str) -> VolumeMount {
    VolumeMount {
        name: name.into(),
        mount_path: path.into(),
        ..Default::default()
    }
}

async fn exec(h: &KubeletHandle, status: &PodStatus, container: &str, script: &str) -> String {
    let id = container_status(status, container)
        .and_then(|c| c.container_id.clone())
        .expect("container id");
    let id = id.split("://").last().unwrap().to_string();
    let out = h
        .runtime()
        .exec_sync(
            &id,
            &["sh".into(), "-c".into(), script.into()],
            Duration::from_secs(30),
        )
        .await
        .expect("exec");
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// The kube-api-access volume the ServiceAccount admission plugin of newer API servers adds.
fn api_access_volume() -> Volume {
    Volume {
        name: "kube-api-access".into(),
        projected: Some(ProjectedVolumeSource {
            default_mode: Some(0o644),
            sources: Some(vec![
                VolumeProjection {
                    service_account_token: Some(ServiceAccountTokenProjection {
                        expiration_seconds: Some(3607),
                        path: "token".into(),
                        ..Default::default()
                    }),
                    ..Default::default()
                },
                VolumeProjection {
                    config_map: Some(ConfigMapProjection {
                        name: "kube-root-ca.crt".into(),
                        items: Some(vec![KeyToPath {
                            key: "ca.crt".into(),
                            path: "ca.crt".into(),
                            ..Default::default()
                        }]),
                        ..Default::default()
                    }),
                    ..Default::default()
                },
                VolumeProjection {
                    downward_api: Some(DownwardAPIProjection {
                        items: Some(vec![DownwardAPIVolumeFile {
                            path: "namespace".into(),
                            field_ref: Some(ObjectFieldSelector {
                                field_path: "metadata.namespace".into(),
                                ..Default::default()
                            }),
                            ..Default::default()
                        }]),
                    }),
                    ..Default::default()
                },
            ]),
            ..Default::default()
        }),
        ..Default::default()
    }
}

async fn eventually<T, F, Fut>(what: &str, check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    kubelet_core::testing::eventually(LONG, what, check).await
}

#[tokio::test(flavor = "multi_thread")]
async fn objects_from_the_api_server_with_the_node_identity() {
    let Some(t) = EngineTest::new("cluster-volumes").await else {
        return;
    };
    let Some(cp) = ControlPlane::ensure_or_skip("volumes")
        .await
        .expect("control plane under CI")
    else {
        return;
    };
    let admin = cp.admin_client().await.unwrap();
    let ns = t.namespace.clone();
    let node_name = format!("vol-{}", ns.trim_start_matches("it-"));
    // Namespace (the test's engine namespace) and its default service account.
    Api::<Namespace>::all(admin.clone())
        .create(
            &PostParams::default(),
            &Namespace {
                metadata: meta(&ns, None),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    let sas: Api<ServiceAccount> = Api::namespaced(admin.clone(), &ns);
    // The account's token secret too: v1.20's ServiceAccount admission refuses a pod of an
    // account whose token the controller has not added yet ("No API token found").
    eventually(
        "default service account, its token and kube-root-ca.crt",
        || {
            let (sas, cms) = (
                sas.clone(),
                Api::<ConfigMap>::namespaced(admin.clone(), &ns),
            );
            async move {
                sas.get("default")
                    .await
                    .ok()?
                    .secrets
                    .filter(|s| !s.is_empty())?;
                cms.get("kube-root-ca.crt").await.ok()
            }
        },
    )
    .await;
    let nodes: Api<Node> = Api::all(admin.clone());
    let _ = nodes
        .create(
            &PostParams::default(),
            &Node {
                metadata: meta(&node_name, None),
                ..Default::default()
            },
        )
        .await;
    let cms: Api<ConfigMap> = Api::namespaced(admin.clone(), &ns);
    let config = |v: &str| ConfigMap {
        metadata: meta("app-config", Some(&ns)),
        data: Some([("greeting".to_string(), v.to_string())].into()),
        ..Default::default()
    };
    cms.create(&PostParams::default(), &config("hello"))
        .await
        .unwrap();
    cms.create(
        &PostParams::default(),
        &ConfigMap {
            metadata: meta("unreferenced", Some(&ns)),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    let secrets: Api<Secret> = Api::namespaced(admin.clone(), &ns);
    secrets
        .create(
            &PostParams::default(),
            &Secret {
                metadata: meta("app-secret", Some(&ns)),
                data: Some([("password".to_string(), ByteString(b"s3cret".to_vec()))].into()),
                ..Default::default()
            },
        )
        .await
        .unwrap();

    // The pod, bound to the test node by the API server.
    let mut c = busybox("main", "exec sleep 3600");
    c.volume_mounts = Some(vec![
        mount("cfg", "/cfg"),
        mount("sec", "/sec"),
        mount(
            "kube-api-access",
            "/var/run/secrets/kubernetes.io/serviceaccount",
        ),
    ]);
    c.env = Some(vec![EnvVar {
        name: "GREETING".into(),
        value_from: Some(EnvVarSource {
            config_map_key_ref: Some(ConfigMapKeySelector {
                name: "app-config".into(),
                key: "greeting".into(),
                optional: None,
            }),
            ..Default::default()
        }),
        ..Default::default()
    }]);
    let mut pod = t.pod("app", "ignored", vec![c]);
    pod.metadata.uid = None;
    let spec = pod.spec.as_mut().unwrap();
    spec.node_name = Some(node_name.clone());
    spec.volumes = Some(vec![
        Volume {
            name: "cfg".into(),
            config_map: Some(ConfigMapVolumeSource {
                name: "app-config".into(),
                ..Default::default()
            }),
            ..Default::default()
        },
        Volume {
            name: "sec".into(),
            secret: Some(SecretVolumeSource {
                secret_name: Some("app-secret".into()),
                default_mode: Some(0o400),
                ..Default::default()
            }),
            ..Default::default()
        },
        api_access_volume(),
    ]);
    let pods: Api<Pod> = Api::namespaced(admin.clone(), &ns);
    let created = pods.create(&PostParams::default(), &pod).await.unwrap();
    let uid = created.metadata.uid.clone().unwrap();

    // The node's view: only what its pods reference.
    let node_client = cp.node_client(&node_name).await.unwrap();
    let store = Arc::new(ApiObjectStore::new(node_client, Duration::from_secs(1)));
    let refused = store.config_map(&ns, "unreferenced").await.unwrap_err();
    assert!(!refused.is_not_found(), "forbidden, not missing: {refused}");

    let source = Arc::new(StaticSource::new("api", vec![created.clone()]));
    let mut engine_config = t.config();
    engine_config.node_name = node_name.clone();
    engine_config.sync_frequency = Duration::from_secs(1);
    let k = t.start_customized(
        engine_config,
        vec![source.clone() as Arc<dyn PodSource>],
        |b| b.object_store(store.clone() as Arc<dyn ObjectStore>),
    );
    let status = wait_running(&k.handle, &uid, LONG).await;
    assert_eq!(
        exec(&k.handle, &status, "main", "echo $GREETING").await,
        "hello\n"
    );
    assert_eq!(
        exec(&k.handle, &status, "main", "cat /cfg/greeting").await,
        "hello"
    );
    assert_eq!(
        exec(
            &k.handle,
            &status,
            "main",
            "cat /sec/password; stat -L -c ' %a' /sec/password"
        )
        .await,
        "s3cret 400\n"
    );
    // Service variables of the master service (enableServiceLinks is defaulted on).
    let master = Api::<k8s_openapi::api::core::v1::Service>::namespaced(admin.clone(), "default")
        .get("kubernetes")
        .await
        .unwrap();
    let ip = master.spec.unwrap().cluster_ip.unwrap();
    let env = exec(&k.handle, &status, "main", "env").await;
    for line in [
        format!("KUBERNETES_SERVICE_HOST={ip}"),
        "KUBERNETES_SERVICE_PORT=443".to_string(),
        "KUBERNETES_SERVICE_PORT_HTTPS=443".to_string(),
        format!("KUBERNETES_PORT_443_TCP=tcp://{ip}:443"),
    ] {
        assert!(env.lines().any(|l| l == line), "{line} missing in\n{env}");
    }
    let sa = "/var/run/secrets/kubernetes.io/serviceaccount";
    assert_eq!(
        exec(&k.handle, &status, "main", &format!("cat {sa}/namespace")).await,
        ns
    );
    let ca = exec(&k.handle, &status, "main", &format!("cat {sa}/ca.crt")).await;
    assert!(ca.contains("BEGIN CERTIFICATE"), "{ca}");
    let token = exec(&k.handle, &status, "main", &format!("cat {sa}/token")).await;

    // The API server accepts the token, bound to the pod.
    let review = Api::<TokenReview>::all(admin.clone())
        .create(
            &PostParams::default(),
            &TokenReview {
                spec: TokenReviewSpec {
                    token: token.clone(),
                    ..Default::default()
                },
                ..Default::default()
            },
        )
        .await
        .unwrap()
        .status
        .unwrap();
    assert_eq!(review.authenticated, Some(true), "{review:?}");
    let user = review.user.unwrap();
    assert_eq!(
        user.username.as_deref(),
        Some(format!("system:serviceaccount:{ns}:default").as_str())
    );
    let extra = user.extra.unwrap_or_default();
    assert_eq!(
        extra.get("authentication.kubernetes.io/pod-uid"),
        Some(&vec![uid.clone()]),
        "{extra:?}"
    );

    // The config map changes in the API server: the file follows in place.
    cms.replace("app-config", &PostParams::default(), &config("bonjour"))
        .await
        .unwrap();
    let h = k.handle.clone();
    eventually("config map update in the file", || {
        let (h, s) = (h.clone(), status.clone());
        async move { (exec(&h, &s, "main", "cat /cfg/greeting").await == "bonjour").then_some(()) }
    })
    .await;

    // A `kubectl run` pod: the API server's ServiceAccount admission gives it its default
    // token volume; it starts and its token is accepted.
    let overrides = format!("{{\"spec\":{{\"nodeName\":\"{node_name}\"}}}}");
    let out = cp
        .kubectl(&[
            "run",
            "kubectl-run",
            "-n",
            &ns,
            "--image=kubelet-rs.local/busybox:1.0",
            "--image-pull-policy=IfNotPresent",
            "--restart=Never",
            &format!("--overrides={overrides}"),
            "--command",
            "--",
            "sleep",
            "3600",
        ])
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let run_pod = pods.get("kubectl-run").await.unwrap();
    let run_uid = run_pod.metadata.uid.clone().unwrap();
    let volumes: Vec<String> = run_pod
        .spec
        .as_ref()
        .and_then(|s| s.volumes.clone())
        .unwrap_or_default()
        .into_iter()
        .map(|v| v.name)
        .collect();
    assert!(!volumes.is_empty(), "the token volume was added");
    source.set(vec![created.clone(), run_pod]);
    let run_status = wait_running(&k.handle, &run_uid, LONG).await;
    let token = exec(
        &k.handle,
        &run_status,
        "kubectl-run",
        &format!("cat {sa}/token"),
    )
    .await;
    let review = Api::<TokenReview>::all(admin.clone())
        .create(
            &PostParams::default(),
            &TokenReview {
                spec: TokenReviewSpec {
                    token,
                    ..Default::default()
                },
                ..Default::default()
            },
        )
        .await
        .unwrap()
        .status
        .unwrap();
    assert_eq!(review.authenticated, Some(true), "{volumes:?}: {review:?}");

    k.stop().await;
    let _ = pods.delete("kubectl-run", &DeleteParams::default()).await;
    let _ = pods.delete("app", &DeleteParams::default()).await;
    let _ = Api::<Namespace>::all(admin.clone())
        .delete(&ns, &DeleteParams::default())
        .await;
    let _ = nodes.delete(&node_name, &DeleteParams::default()).await;
}
