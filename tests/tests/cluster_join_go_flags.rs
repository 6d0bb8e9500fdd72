//! Issue #33: a real node's Go kubelet 1.25 command line — all 164 flags it printed at
//! start-up (`kubelet-bin/testdata/go-1.25-flags.txt`) with that node's values, and its
//! `--config` file — joins the real control plane by bootstrap token and the node goes Ready.
//! Adapted to this machine only where the node's paths and ports are not ours: the
//! kubeconfigs, config file, cert and root dirs, containerd socket, static pod dir and client
//! CA are the test's, the node name and IP are set, the ports are free ones, and the config
//! file's `cgroupDriver: systemd` is `cgroupfs` (no systemd here).

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

mod join_common;

use join_common::{cleanup, free_port, join_setup, start, wait_ready, JoinSetup};
use k8s_openapi::api::core::v1::Node;
use kube::Api;
use kubelet_tests::seed_node;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_seed_nodes_164_flags_join_and_the_node_goes_ready() {
    let Some(JoinSetup {
        et,
        cp,
        admin,
        node,
        etc,
    }) = join_setup("join-go-flags", true, "").await
    else {
        return;
    };
    let manifests = etc.join("manifests");
    std::fs::create_dir_all(&manifests).unwrap();
    let config = etc.join("seed-kubelet-conf.yml");
    std::fs::write(
        &config,
        seed_node::config(&manifests)
            .replace(
                "/etc/kubernetes/pki/ca.pem",
                &cp.client_ca_path().display().to_string(),
            )
            .replace("port: 10250", &format!("port: {}", free_port()))
            .replace("readOnlyPort: 10255", "readOnlyPort: 0")
            .replace("healthzPort: 10248", "healthzPort: 0"),
    )
    .unwrap();
    let root = et.dir.path().join("kubelet");
    let ours = |name: &str| -> Option<String> {
        Some(match name {
            "bootstrap-kubeconfig" => etc
                .join("bootstrap-kubelet.kubeconfig")
                .display()
                .to_string(),
            "kubeconfig" => etc.join("kubelet.kubeconfig").display().to_string(),
            "config" => config.display().to_string(),
            "cert-dir" => root.join("pki").display().to_string(),
            "root-dir" => root.display().to_string(),
            "container-runtime-endpoint" => kubelet_tests::cri::endpoint(),
            "hostname-override" => node.clone(),
            "node-ip" => "127.0.0.1".into(),
            "port" => free_port().to_string(),
            "read-only-port" | "healthz-port" => "0".into(),
            _ => return None,
        })
    };
    let args = seed_node::command_line(ours);
    let k = start(&et, &args, false).await;
    // Go's own deprecation lines for what that node passed.
    let w = k.loaded.warnings.join("\n");
    for line in [
        "Flag --container-runtime has been deprecated, will be removed in 1.27 as the only valid value is 'remote'",
        "Flag --storage-driver-db has been deprecated, This is a cadvisor flag",
        "Flag --max-pods has been deprecated, This parameter should be set via the config file",
    ] {
        assert!(w.contains(line), "{line}: {w}");
    }
    let nodes: Api<Node> = Api::all(admin.clone());
    let ready = wait_ready(&nodes, &node).await;
    let labels = ready.metadata.labels.unwrap_or_default();
    assert_eq!(
        labels.get("node.kubernetes.io/node").map(String::as_str),
        Some(""),
        "--node-labels"
    );
    k.stop().await;
    cleanup(&cp, &node, &et.namespace);
}

/// `--cloud-provider=external` with `--provider-id`, as every node of a cloud cluster with a
/// cloud controller manager runs: the node registers with `spec.providerID`, the
/// `node.cloudprovider.kubernetes.io/uninitialized=true:NoSchedule` taint (for the cloud
/// controller manager to remove; this control plane has none, so it stays) and its
/// `--node-ip` annotated, and goes Ready.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_external_cloud_provider_node_registers_tainted_with_its_provider_id() {
    let Some(JoinSetup {
        et,
        cp,
        admin,
        node,
        etc,
    }) = join_setup("join-cloud-external", true, "").await
    else {
        return;
    };
    let provider_id = format!("kubelet-rs://lab/{node}");
    let mut args = join_common::command_line(&etc, &et.dir.path().join("kubelet"), &node);
    args.push("--cloud-provider=external".into());
    args.push(format!("--provider-id={provider_id}"));
    let k = start(&et, &args, false).await;
    assert!(
        !k.loaded
            .warnings
            .iter()
            .any(|w| w.contains("cloud-provider")),
        "{:?}",
        k.loaded.warnings
    );
    let nodes: Api<Node> = Api::all(admin.clone());
    let ready = wait_ready(&nodes, &node).await;
    let spec = ready.spec.clone().unwrap_or_default();
    assert_eq!(spec.provider_id.as_deref(), Some(provider_id.as_str()));
    let taints: Vec<(String, Option<String>, String)> = spec
        .taints
        .unwrap_or_default()
        .into_iter()
        .map(|t| (t.key, t.value, t.effect))
        .collect();
    assert!(
        taints.contains(&(
            "node.cloudprovider.kubernetes.io/uninitialized".into(),
            Some("true".into()),
            "NoSchedule".into()
        )),
        "{taints:?}"
    );
    let annotations = ready.metadata.annotations.unwrap_or_default();
    assert_eq!(
        annotations
            .get("alpha.kubernetes.io/provided-node-ip")
            .map(String::as_str),
        Some("127.0.0.1")
    );
    k.stop().await;
    cleanup(&cp, &node, &et.namespace);
}
