//! Issue #33: the seed node's Go kubelet 1.25 command line — all 164 flags it printed at
//! start-up (`kubelet-bin/testdata/go-1.25-flags.txt`) and its `--config` file — starts the
//! real `kubelet` binary in standalone mode: its static pod runs, `/healthz` answers, and
//! `/stats/summary` reports the system containers the cgroup flags name.
//!
//! Adapted to this machine only where the node's paths and ports are not ours: no kubeconfigs
//! (standalone), the test's config file, cert, root and static pod dirs, the containerd of a
//! node environment instance of its own (`KUBELET_RS_NODE_INSTANCE=flags`: a real kubelet
//! lists every sandbox of its runtime, and would remove other tests' pods as orphans), free
//! ports, a cgroup root of that instance, and the three system cgroups (the seed's are empty)
//! with processes moved into them. The config file's `cgroupDriver: systemd` is `cgroupfs`
//! (no systemd here).

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use std::path::PathBuf;
use std::time::Duration;

use kubelet_core::testing::poll_until;
use kubelet_tests::seed_node;
use kubelet_tests::standalone::{
    free_port, http_get, kubelet_binary, KubeletProcess, NodeInstance,
};

const INSTANCE: &str = "flags";
const CGROUP_ROOT: &str = "/kubelet-rs-flags";

/// Every mounted cgroup hierarchy (v1 controllers, and the unified one).
fn hierarchies() -> Vec<PathBuf> {
    let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap();
    mounts
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() > 2 && (f[2] == "cgroup" || f[2] == "cgroup2")).then(|| PathBuf::from(f[1]))
        })
        .collect()
}

/// Creates `cgroup` in every hierarchy and moves `pid` into it in each.
fn move_into(cgroup: &str, pid: u32) {
    for h in hierarchies() {
        let dir = h.join(cgroup.trim_start_matches('/'));
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        if pid != 0 {
            // Some v1 hierarchies refuse a task (e.g. a cpuset without cpus): the ones that
            // account CPU and memory must take it.
            let moved = std::fs::write(dir.join("cgroup.procs"), pid.to_string());
            let name = h.display().to_string();
            if name.contains("cpuacct") || name.contains("memory") || name.ends_with("cgroup") {
                moved.unwrap_or_else(|e| panic!("moving {pid} into {}: {e}", dir.display()));
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_seed_nodes_164_flags_start_the_binary_standalone() {
    // The shared node environment stands for "this machine can run containerd" (skipped
    // without it, a failure in CI).
    if kubelet_tests::cri::runtime_or_skip("standalone-go-flags")
        .await
        .is_none()
    {
        return;
    }
    let binary = kubelet_binary();
    let instance = NodeInstance::up(INSTANCE);
    let endpoint = instance.endpoint();
    let containerd_pid = instance.containerd_pid();

    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let manifests = dir.join("manifests");
    std::fs::create_dir_all(&manifests).unwrap();
    std::fs::write(
        manifests.join("web.yaml"),
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\n  namespace: default\nspec:\n  \
         containers:\n  - name: app\n    image: kubelet-rs.local/busybox:1.0\n    \
         imagePullPolicy: Never\n    command: [sh, -c, 'while true; do sleep 1; done']\n",
    )
    .unwrap();
    let (port, read_only, healthz) = (free_port(), free_port(), free_port());
    let config = dir.join("kubelet-conf.yml");
    std::fs::write(&config, seed_node::config(&manifests)).unwrap();
    // The cgroup root and two system cgroups (the seed node's flags leave them empty): the
    // runtime's holds the instance's containerd, the kubelet's the kubelet (which moves
    // itself in). Not --system-cgroups: on this host (no cgroup namespace of the test's own)
    // the kubelet would move every process of the root cgroup into it, as Go's does; the
    // node e2e suite runs it in a namespace of its own (scripts/node-e2e.sh).
    move_into(CGROUP_ROOT, 0);
    move_into(&format!("{CGROUP_ROOT}/runtime"), containerd_pid);
    let root = dir.join("kubelet");
    let ours = |name: &str| -> Option<String> {
        Some(match name {
            "bootstrap-kubeconfig" | "kubeconfig" => String::new(),
            "config" => config.display().to_string(),
            "cert-dir" => root.join("pki").display().to_string(),
            "root-dir" => root.display().to_string(),
            "pod-manifest-path" => manifests.display().to_string(),
            "container-runtime-endpoint" => endpoint.clone(),
            "hostname-override" => "standalone-flags".into(),
            "node-ip" => "127.0.0.1".into(),
            "port" => port.to_string(),
            "read-only-port" => read_only.to_string(),
            "healthz-port" => healthz.to_string(),
            "cgroup-root" => CGROUP_ROOT.into(),
            "kubelet-cgroups" => format!("{CGROUP_ROOT}/kubelet"),
            "runtime-cgroups" => format!("{CGROUP_ROOT}/runtime"),
            _ => return None,
        })
    };
    let args = seed_node::command_line(ours);
    let log = dir.join("kubelet.log");
    let kubelet = KubeletProcess::spawn(&binary, &args, &log);
    let log_text = || std::fs::read_to_string(&log).unwrap_or_default();
    let tail = |text: String| text.lines().rev().take(60).collect::<Vec<_>>().join("\n");

    let healthy = poll_until(Duration::from_secs(60), || async {
        http_get(&format!("http://127.0.0.1:{healthz}/healthz")).await
    })
    .await;
    assert_eq!(healthy.as_deref(), Some("ok"), "{}", tail(log_text()));
    let pods_url = format!("http://127.0.0.1:{read_only}/pods");
    let running = poll_until(Duration::from_secs(90), || async {
        let text = http_get(&pods_url).await?;
        let v: serde_json::Value = serde_json::from_str(&text).ok()?;
        let items = v["items"].as_array()?;
        items
            .iter()
            .any(|p| {
                p["metadata"]["name"] == "web-standalone-flags" && p["status"]["phase"] == "Running"
            })
            .then_some(())
    })
    .await;
    assert!(
        running.is_some(),
        "static pod not running: {}",
        tail(log_text())
    );

    // The system containers, from the cgroups the flags name.
    let summary_url = format!("http://127.0.0.1:{read_only}/stats/summary");
    let summary = poll_until(Duration::from_secs(30), || async {
        let v: serde_json::Value = serde_json::from_str(&http_get(&summary_url).await?).ok()?;
        let all_rated = ["kubelet", "runtime", "pods"].iter().all(|name| {
            v["node"]["systemContainers"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|c| c["name"] == *name && c["cpu"]["usageNanoCores"].is_u64())
        });
        if !all_rated {
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        all_rated.then_some(v)
    })
    .await
    .unwrap_or_else(|| panic!("system containers with CPU rates: {}", tail(log_text())));
    // The kubelet moved itself into --kubelet-cgroups, in every hierarchy it drives.
    let kubelet_pid = kubelet.0.id().to_string();
    let hierarchy = hierarchies()
        .into_iter()
        .find(|h| h.ends_with("memory"))
        .unwrap_or_else(|| PathBuf::from("/sys/fs/cgroup"));
    let memory = hierarchy.join(format!("{}/kubelet/cgroup.procs", &CGROUP_ROOT[1..]));
    let procs = std::fs::read_to_string(&memory).unwrap_or_default();
    assert!(
        procs.lines().any(|l| l == kubelet_pid),
        "{}: {procs:?}",
        memory.display()
    );
    let containers = summary["node"]["systemContainers"].as_array().unwrap();
    let of = |name: &str| containers.iter().find(|c| c["name"] == name).unwrap();
    for name in ["kubelet", "runtime"] {
        let c = of(name);
        assert!(
            c["cpu"]["usageCoreNanoSeconds"].as_u64().unwrap() > 0,
            "{c}"
        );
        assert!(c["memory"]["workingSetBytes"].as_u64().unwrap() > 0, "{c}");
        // The processes moved in fault pages in that cgroup (memory.stat pgfault, the
        // cgroup's own as cAdvisor reads it); no memory limit, so nothing available.
        assert!(c["memory"]["pageFaults"].as_u64().unwrap() > 0, "{c}");
        if name == "kubelet" {
            // The kubelet started over in its cgroup: its start-up is accounted there (the
            // node e2e suite's Summary API spec wants at least 1000 faults and 1 MB RSS).
            assert!(c["memory"]["pageFaults"].as_u64().unwrap() >= 1000, "{c}");
            assert!(c["memory"]["rssBytes"].as_u64().unwrap() >= 1 << 20, "{c}");
        }
        assert!(c["memory"]["majorPageFaults"].is_u64(), "{c}");
        assert!(c["memory"].get("availableBytes").is_none(), "{c}");
        assert!(c.get("rootfs").is_none() && c.get("logs").is_none(), "{c}");
    }
    assert!(
        of("pods")["memory"]["availableBytes"].is_u64(),
        "{}",
        of("pods")
    );

    // Go's own deprecation lines for what that node passed.
    let text = log_text();
    for line in [
        "Flag --container-runtime has been deprecated, will be removed in 1.27 as the only valid value is 'remote'",
        "Flag --storage-driver-db has been deprecated, This is a cadvisor flag",
        "Flag --kubelet-cgroups has been deprecated, This parameter should be set via the config file",
    ] {
        assert!(text.contains(line), "{line}: {}", tail(text.clone()));
    }
    drop(kubelet);
}
