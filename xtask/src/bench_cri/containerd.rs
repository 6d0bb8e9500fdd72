//! The benchmark's private containerd (socket `/run/kubelet-rs-bench/containerd.sock`, bridge
//! `kubeletrsb0`, pods in 10.89.0.0/16) with the node environment's images copied in: a kubelet
//! removes every sandbox it does not know, so it must not run on a shared containerd.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use kubelet_core::runtime::ContainerRuntime;
use kubelet_runtime_cri::CriRuntime;

use super::backend::{cleanup_prefix, connect_backend, cri_config};
use super::{BENCH_BRIDGE, BENCH_DIR, BENCH_RUN_DIR, BENCH_SUBNET, BUSYBOX_IMAGE, PAUSE_IMAGE};

pub(super) struct PrivateContainerd {
    child: tokio::process::Child,
    socket: PathBuf,
}

impl PrivateContainerd {
    pub(super) fn endpoint(&self) -> String {
        format!("unix://{}", self.socket.display())
    }

    pub(super) async fn start(node_endpoint: &str) -> Result<PrivateContainerd> {
        let base = Path::new(BENCH_DIR).join("containerd");
        let cni_conf = base.join("net.d");
        let cni_data = base.join("networks");
        let socket = Path::new(BENCH_RUN_DIR).join("containerd.sock");
        for d in [
            base.join("root"),
            base.join("state"),
            cni_conf.clone(),
            cni_data.clone(),
        ] {
            tokio::fs::create_dir_all(&d).await?;
        }
        tokio::fs::create_dir_all(BENCH_RUN_DIR).await?;
        let config = format!(
            r#"# Written by cargo xtask bench-cri: a private containerd for benchmarks.
version = 2
root = "{root}"
state = "{state}"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper"]

[grpc]
  address = "{sock}"
  max_recv_message_size = 16777216
  max_send_message_size = 16777216

[ttrpc]
  address = "{sock}.ttrpc"

[debug]
  level = "warn"

[metrics]
  address = ""

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{pause}"
  restrict_oom_score_adj = true
  enable_selinux = false
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "{cni_conf}"
    max_conf_num = 1
"#,
            root = base.join("root").display(),
            state = base.join("state").display(),
            sock = socket.display(),
            pause = PAUSE_IMAGE,
            cni_conf = cni_conf.display(),
        );
        tokio::fs::write(base.join("config.toml"), config).await?;
        let conflist = serde_json::json!({
            "cniVersion": "0.4.0",
            "name": "kubelet-rs-bench",
            "plugins": [
                {
                    "type": "bridge", "bridge": BENCH_BRIDGE, "isGateway": true, "ipMasq": true,
                    "hairpinMode": true,
                    "ipam": {
                        "type": "host-local",
                        "ranges": [[{ "subnet": BENCH_SUBNET }]],
                        "routes": [{ "dst": "0.0.0.0/0" }],
                        "dataDir": cni_data.display().to_string(),
                    }
                },
                { "type": "portmap", "capabilities": { "portMappings": true } }
            ]
        });
        tokio::fs::write(
            cni_conf.join("10-kubelet-rs-bench.conflist"),
            serde_json::to_string_pretty(&conflist)?,
        )
        .await?;

        let _ = tokio::fs::remove_file(&socket).await;
        let log = std::fs::File::create(base.join("containerd.log"))?;
        let child = tokio::process::Command::new("containerd")
            .arg("--config")
            .arg(base.join("config.toml"))
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .process_group(0)
            .kill_on_drop(true)
            .spawn()
            .context("starting containerd")?;
        let me = PrivateContainerd { child, socket };
        eprintln!("[bench] private containerd at {}", me.endpoint());
        me.wait_ready().await?;
        me.copy_images(node_endpoint).await?;
        Ok(me)
    }

    async fn wait_ready(&self) -> Result<()> {
        let t = kubelet_core::clock::monotonic_now();
        let mut last = String::new();
        while kubelet_core::clock::elapsed(t) < Duration::from_secs(60) {
            match CriRuntime::connect(cri_config(&self.endpoint())).await {
                Ok(rt) => match rt.status().await {
                    Ok(s) if s.runtime_ready && s.network_ready => return Ok(()),
                    Ok(s) => last = s.message,
                    Err(e) => last = e.to_string(),
                },
                Err(e) => last = e.to_string(),
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        bail!("private containerd not ready: {last}")
    }

    async fn copy_images(&self, node_endpoint: &str) -> Result<()> {
        let rt = connect_backend(&self.endpoint()).await?;
        let mut missing = Vec::new();
        for image in [BUSYBOX_IMAGE, PAUSE_IMAGE] {
            if rt.image_status(image).await?.is_none() {
                missing.push(image);
            }
        }
        if missing.is_empty() {
            return Ok(());
        }
        let node_sock = kubelet_runtime_cri::socket_path(node_endpoint)?;
        let tar = Path::new(BENCH_DIR).join("images.tar");
        let ctr = |sock: &Path, args: &[&str]| {
            let mut c = std::process::Command::new("ctr");
            c.arg("-a").arg(sock).args(["-n", "k8s.io"]).args(args);
            c
        };
        let tar_s = tar.display().to_string();
        let mut export = vec!["images", "export", tar_s.as_str()];
        export.extend(missing.iter().copied());
        let st = ctr(&node_sock, &export)
            .status()
            .context("ctr images export")?;
        if !st.success() {
            bail!("exporting {missing:?} from {node_endpoint} failed (is `cargo xtask node-up` done?)");
        }
        let st = ctr(&self.socket, &["images", "import", tar_s.as_str()])
            .status()
            .context("ctr images import")?;
        if !st.success() {
            bail!("importing images into the private containerd failed");
        }
        let _ = std::fs::remove_file(&tar);
        Ok(())
    }

    pub(super) async fn stop(mut self) {
        if let Ok(rt) = connect_backend(&self.endpoint()).await {
            cleanup_prefix(&Arc::new(rt), "bench-").await;
        }
        if let Some(pid) = self.child.id() {
            let _ = tokio::process::Command::new("kill")
                .args(["-TERM", &pid.to_string()])
                .status()
                .await;
        }
        if tokio::time::timeout(Duration::from_secs(15), self.child.wait())
            .await
            .is_err()
        {
            let _ = self.child.kill().await;
        }
        let _ = tokio::process::Command::new("ip")
            .args(["link", "del", BENCH_BRIDGE])
            .stderr(Stdio::null())
            .status()
            .await;
    }
}
