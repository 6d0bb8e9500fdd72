//! Registry credentials against the authenticated test registry (`scripts/registry.sh`:
//! docker-registry 2.8, TLS from a throwaway CA that containerd trusts through its hosts
//! directory, htpasswd) and the shared control plane: a pod with an image pull secret runs;
//! without one, or with a wrong one, it is in ErrImagePull/ImagePullBackOff with the
//! registry's 401 in its events, while other pods start; the service account's pull secrets
//! reach the pod (the apiserver's ServiceAccount admission adds them, as for the Go kubelet);
//! a credential provider plugin (a shell script) supplies the credentials of a matching image.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

mod join_common;

use std::collections::BTreeMap;
use std::time::Duration;

use join_common::{cleanup, create_namespace, eventually, start, write_config};
use k8s_openapi::api::core::v1::{
    Container, Event, LocalObjectReference, Pod, PodSpec, Secret, ServiceAccount,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::ByteString;
use kube::api::PostParams;
use kube::Api;
use kubelet_tests::cluster::ControlPlane;
use kubelet_tests::cri::{endpoint, BUSYBOX_IMAGE};
use kubelet_tests::engine::EngineTest;
use kubelet_tests::registry::Registry;

fn pull_secret(namespace: &str, name: &str, json: &str) -> Secret {
    Secret {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some(namespace.into()),
            ..Default::default()
        },
        type_: Some("kubernetes.io/dockerconfigjson".into()),
        data: Some(BTreeMap::from([(
            ".dockerconfigjson".to_string(),
            ByteString(json.as_bytes().to_vec()),
        )])),
        ..Default::default()
    }
}

/// A pod pulling `image` every time (so every start asks the registry).
fn registry_pod(
    namespace: &str,
    node: &str,
    name: &str,
    image: &str,
    secrets: &[&str],
    service_account: Option<&str>,
    command: bool,
) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some(namespace.into()),
            ..Default::default()
        },
        spec: Some(PodSpec {
            node_name: Some(node.into()),
            automount_service_account_token: Some(false),
            termination_grace_period_seconds: Some(1),
            service_account_name: service_account.map(str::to_string),
            image_pull_secrets: (!secrets.is_empty()).then(|| {
                secrets
                    .iter()
                    .map(|s| LocalObjectReference {
                        name: s.to_string(),
                    })
                    .collect()
            }),
            containers: vec![Container {
                name: "main".into(),
                image: Some(image.into()),
                image_pull_policy: Some("Always".into()),
                command: command.then(|| vec!["sh".into(), "-c".into(), "exec sleep 3600".into()]),
                ..Default::default()
            }],
            ..Default::default()
        }),
        ..Default::default()
    }
}

async fn phase_is(pods: &Api<Pod>, name: &str, want: &str) -> Option<Pod> {
    let p = pods.get(name).await.ok()?;
    (p.status.as_ref()?.phase.as_deref() == Some(want)).then_some(p)
}

/// The waiting reason of the pod's container, if any.
fn waiting(p: &Pod) -> Option<(String, String)> {
    let cs = p.status.as_ref()?.container_statuses.as_ref()?.first()?;
    let w = cs.state.as_ref()?.waiting.as_ref()?;
    Some((w.reason.clone()?, w.message.clone().unwrap_or_default()))
}

/// Event messages of `reason` for pod `name`.
async fn events_of(admin: &kube::Client, ns: &str, name: &str, reason: &str) -> Vec<String> {
    Api::<Event>::namespaced(admin.clone(), ns)
        .list(&Default::default())
        .await
        .map(|l| l.items)
        .unwrap_or_default()
        .into_iter()
        .filter(|e| {
            e.involved_object.name.as_deref() == Some(name) && e.reason.as_deref() == Some(reason)
        })
        .filter_map(|e| e.message)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pulls_with_secrets_service_accounts_and_a_plugin() {
    let Some(et) = EngineTest::new("registry").await else {
        return;
    };
    let registry = match Registry::ensure().await {
        Ok(r) => r,
        Err(e) if std::env::var_os("CI").is_none() => {
            eprintln!("SKIPPED registry: {e}");
            return;
        }
        Err(e) => panic!("registry unavailable under CI: {e}"),
    };
    let Some(cp) = ControlPlane::ensure_or_skip("registry")
        .await
        .expect("control plane under CI")
    else {
        return;
    };
    let admin = cp.admin_client().await.unwrap();
    let ns = et.namespace.clone();
    let node = format!("n-{ns}");
    create_namespace(&admin, &ns).await;

    // The plugin serves the registry's credentials for its pause image only.
    let dir = et.dir.path().to_path_buf();
    let bin = dir.join("plugins");
    std::fs::create_dir_all(&bin).unwrap();
    let calls = dir.join("plugin-calls");
    let plugin = bin.join("test-registry-plugin");
    std::fs::write(
        &plugin,
        format!(
            "#!/bin/sh\ncat >> {}\necho >> {}\ncat <<JSON\n{{\"apiVersion\":\"credentialprovider.kubelet.k8s.io/v1\",\"kind\":\"CredentialProviderResponse\",\"cacheKeyType\":\"Registry\",\"cacheDuration\":\"1m\",\"auth\":{{\"{}\":{{\"username\":\"{}\",\"password\":\"{}\"}}}}}}\nJSON\n",
            calls.display(),
            calls.display(),
            registry.address,
            registry.user,
            registry.password
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&plugin, std::fs::Permissions::from_mode(0o755)).unwrap();
    let plugin_config = dir.join("credential-providers.yaml");
    std::fs::write(
        &plugin_config,
        format!(
            "apiVersion: kubelet.config.k8s.io/v1\nkind: CredentialProviderConfig\nproviders:\n- name: test-registry-plugin\n  matchImages: [\"{}/kubelet-rs/pause\"]\n  defaultCacheDuration: 1m\n  apiVersion: credentialprovider.kubelet.k8s.io/v1\n",
            registry.address
        ),
    )
    .unwrap();
    write_config(&dir, &cp, "");
    let args = vec![
        format!(
            "--kubeconfig={}",
            cp.node_kubeconfig(&node).await.unwrap().display()
        ),
        format!("--config={}", dir.join("kubelet-conf.yml").display()),
        format!("--container-runtime-endpoint={}", endpoint()),
        format!("--hostname-override={node}"),
        "--node-ip=127.0.0.1".into(),
        format!("--root-dir={}", dir.join("kubelet").display()),
        format!(
            "--image-credential-provider-config={}",
            plugin_config.display()
        ),
        format!("--image-credential-provider-bin-dir={}", bin.display()),
    ];
    let k = start(&et, &args, false).await;

    let secrets: Api<Secret> = Api::namespaced(admin.clone(), &ns);
    let good = Registry::docker_config_json(&registry.address, &registry.user, &registry.password);
    let wrong = Registry::docker_config_json(&registry.address, &registry.user, "not-the-password");
    for (name, json) in [("good", &good), ("wrong", &wrong)] {
        secrets
            .create(&PostParams::default(), &pull_secret(&ns, name, json))
            .await
            .unwrap();
    }
    let sas: Api<ServiceAccount> = Api::namespaced(admin.clone(), &ns);
    sas.create(
        &PostParams::default(),
        &ServiceAccount {
            metadata: ObjectMeta {
                name: Some("puller".into()),
                namespace: Some(ns.clone()),
                ..Default::default()
            },
            image_pull_secrets: Some(vec![LocalObjectReference {
                name: "good".into(),
            }]),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    let pods: Api<Pod> = Api::namespaced(admin.clone(), &ns);
    let image = registry.busybox();
    let pause = format!("{}/kubelet-rs/pause:1.0", registry.address);
    for p in [
        registry_pod(&ns, &node, "no-secret", &image, &[], None, true),
        registry_pod(&ns, &node, "wrong-secret", &image, &["wrong"], None, true),
        registry_pod(
            &ns,
            &node,
            "with-secret",
            &image,
            &["missing", "good"],
            None,
            true,
        ),
        registry_pod(&ns, &node, "from-sa", &image, &[], Some("puller"), true),
        registry_pod(&ns, &node, "from-plugin", &pause, &[], None, false),
        // A local image: never held up by the failing pulls.
        join_common::pod(&ns, &node, "local", BUSYBOX_IMAGE, "exec sleep 3600"),
    ] {
        pods.create(&PostParams::default(), &p).await.unwrap();
    }
    for name in ["local", "with-secret", "from-sa", "from-plugin"] {
        eventually(Duration::from_secs(120), &format!("{name} Running"), || {
            phase_is(&pods, name, "Running")
        })
        .await;
    }
    // The service account's secret came through admission, as it does for Go's kubelet.
    let from_sa = pods.get("from-sa").await.unwrap();
    let refs = from_sa.spec.unwrap().image_pull_secrets.unwrap();
    assert_eq!(refs[0].name, "good");
    // The plugin was asked about the pause repository only.
    let asked = std::fs::read_to_string(&calls).unwrap();
    assert!(
        asked.contains(&format!(
            "\"image\":\"{}/kubelet-rs/pause\"",
            registry.address
        )),
        "{asked}"
    );
    assert!(!asked.contains("busybox"), "{asked}");

    for name in ["no-secret", "wrong-secret"] {
        let (reason, message) =
            eventually(Duration::from_secs(90), &format!("{name} waiting"), || {
                let pods = pods.clone();
                async move {
                    let p = pods.get(name).await.ok()?;
                    waiting(&p).filter(|(r, _)| r == "ErrImagePull" || r == "ImagePullBackOff")
                }
            })
            .await;
        eprintln!("{name}: {reason}: {message}");
        let failed = eventually(
            Duration::from_secs(30),
            "a Failed event with the 401",
            || {
                let admin = admin.clone();
                let ns = ns.clone();
                async move {
                    let m = events_of(&admin, &ns, name, "Failed").await;
                    m.iter()
                        .any(|m| m.contains("401 Unauthorized"))
                        .then_some(m)
                }
            },
        )
        .await;
        assert!(failed[0].starts_with("Failed to pull image"), "{failed:?}");
        assert_eq!(
            pods.get(name)
                .await
                .unwrap()
                .status
                .unwrap()
                .phase
                .as_deref(),
            Some("Pending")
        );
    }
    // The failed pulls are backed off: a sync inside the backoff window answers
    // ImagePullBackOff without asking the registry. (As Go's pod worker, kubelet-rs syncs a
    // pod again a back-off period plus jitter after a failed image step, 1-1.5s in the
    // harness, so the syncs inside the window show it; either failing pod does.)
    eventually(Duration::from_secs(90), "ImagePullBackOff", || {
        let pods = pods.clone();
        async move {
            for name in ["no-secret", "wrong-secret"] {
                let p = pods.get(name).await.ok()?;
                if let Some(w) = waiting(&p).filter(|(r, _)| r == "ImagePullBackOff") {
                    return Some(w);
                }
            }
            None
        }
    })
    .await;
    let missing = events_of(
        &admin,
        &ns,
        "with-secret",
        "FailedToRetrieveImagePullSecret",
    )
    .await;
    assert!(!missing.is_empty(), "the missing secret is reported");
    k.stop().await;
    // Only the registry's names go: a CRI RemoveImage removes the image with all its names,
    // the node's local kubelet-rs.local ones too (same digests), which later tests need.
    let address = endpoint().trim_start_matches("unix://").to_string();
    for img in [&image, &pause] {
        let _ = std::process::Command::new("ctr")
            .args(["-a", &address, "-n", "k8s.io", "images", "rm", img.as_str()])
            .output();
    }
    cleanup(&cp, &node, &ns);
}
