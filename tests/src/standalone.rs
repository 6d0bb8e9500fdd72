//! Kubelet processes in standalone mode (no API server) for the tests that run the real
//! binaries — kubelet-rs's and the Go kubelet v1.20.2's — each on a node environment instance
//! of its own (`scripts/node-env.sh` with `KUBELET_RS_NODE_INSTANCE`: a real kubelet lists
//! every sandbox of its runtime and would remove other tests' pods as orphans).
#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::Duration;

/// A node environment instance, brought down when dropped, whatever happened.
pub struct NodeInstance {
    name: String,
    env: String,
}

impl NodeInstance {
    /// Brings the instance up (containerd of its own, images imported).
    pub fn up(name: &str) -> NodeInstance {
        let mut instance = NodeInstance {
            name: name.to_string(),
            env: String::new(),
        };
        instance.node_env(&["up"]);
        instance.env = instance.node_env(&["env"]);
        instance
    }

    /// Runs `scripts/node-env.sh` for this instance; its standard output.
    pub fn node_env(&self, args: &[&str]) -> String {
        let out = Command::new("bash")
            .arg(crate::scripts::script("node-env.sh"))
            .args(args)
            .env("KUBELET_RS_NODE_INSTANCE", &self.name)
            .output()
            .expect("running node-env.sh");
        assert!(
            out.status.success(),
            "node-env.sh {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// A setting of `node-env.sh env` (`KUBELET_RS_CRI_ENDPOINT`, `KUBELET_RS_RUN_DIR`, …).
    pub fn setting(&self, key: &str) -> String {
        self.env
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{key}=")))
            .unwrap_or_else(|| panic!("{key} in {}", self.env))
            .to_string()
    }

    /// The CRI endpoint of its containerd.
    pub fn endpoint(&self) -> String {
        self.setting("KUBELET_RS_CRI_ENDPOINT")
    }

    /// The pid of its containerd.
    pub fn containerd_pid(&self) -> u32 {
        let run_dir = self.setting("KUBELET_RS_RUN_DIR");
        std::fs::read_to_string(format!("{run_dir}/containerd/containerd.pid"))
            .unwrap()
            .trim()
            .parse()
            .unwrap()
    }
}

impl Drop for NodeInstance {
    fn drop(&mut self) {
        let _ = Command::new("bash")
            .arg(crate::scripts::script("node-env.sh"))
            .arg("down")
            .env("KUBELET_RS_NODE_INSTANCE", &self.name)
            .output();
    }
}

/// A kubelet process, stopped when dropped (SIGTERM, then SIGKILL after 10 s).
pub struct KubeletProcess(pub Child);

impl KubeletProcess {
    /// Starts `binary` with `args`, its standard error (the log) into the file `log`.
    pub fn spawn(binary: &Path, args: &[String], log: &Path) -> KubeletProcess {
        let child = Command::new(binary)
            .args(args)
            .stdout(std::process::Stdio::null())
            .stderr(std::fs::File::create(log).unwrap())
            .spawn()
            .unwrap_or_else(|e| panic!("starting {}: {e}", binary.display()));
        KubeletProcess(child)
    }
}

impl Drop for KubeletProcess {
    fn drop(&mut self) {
        let pid = self.0.id().to_string();
        let _ = Command::new("kill").args(["-TERM", &pid]).status();
        for _ in 0..100 {
            if matches!(self.0.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A TCP port free on 127.0.0.1 right now.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("free port")
}

/// The `kubelet` binary of this checkout, built in the running test's profile if it is not
/// (a no-op when fresh).
pub fn kubelet_binary() -> PathBuf {
    // deps/<test binary> → the profile's directory (`debug` is the `dev` profile's).
    let exe = std::env::current_exe().unwrap();
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("the profile directory")
        .to_path_buf();
    let profile = match profile_dir.file_name().and_then(|n| n.to_str()) {
        Some("debug") | None => "dev".to_string(),
        Some(name) => name.to_string(),
    };
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut build = Command::new(cargo);
    // Without the variables `cargo test` set for this package: ring's build script reruns when
    // `CARGO_PKG_NAME`/`CARGO_MANIFEST_DIR` differ from the last build's, which would rebuild
    // ring and everything above it here and again at the next `cargo build` from a shell. The
    // same list as xtask's `nested_cargo` (a binary crate this one cannot use): keep them alike.
    for (name, _) in std::env::vars_os() {
        let ours = name.to_str().is_some_and(|n| {
            [
                "CARGO_PKG_",
                "CARGO_MANIFEST_",
                "CARGO_CRATE_",
                "CARGO_BIN_",
            ]
            .iter()
            .any(|p| n.starts_with(p))
                || matches!(
                    n,
                    "CARGO_PRIMARY_PACKAGE"
                        | "CARGO_TARGET_TMPDIR"
                        | "CARGO_RUSTC_CURRENT_DIR"
                        | "OUT_DIR"
                )
        });
        if ours {
            build.env_remove(name);
        }
    }
    let status = build
        .args([
            "build",
            "-q",
            "-p",
            "kubelet-bin",
            "--bin",
            "kubelet",
            "--profile",
        ])
        .arg(&profile)
        .status()
        .expect("cargo build");
    assert!(status.success(), "building the kubelet binary");
    profile_dir.join("kubelet")
}

/// The Go kubelet v1.20.2 of the control plane's tree (`scripts/node-e2e.sh go-kubelet`
/// builds it once per machine).
pub fn go_kubelet_binary() -> PathBuf {
    let out = Command::new("bash")
        .arg(crate::scripts::script("node-e2e.sh"))
        .arg("go-kubelet")
        .output()
        .expect("running node-e2e.sh go-kubelet");
    assert!(
        out.status.success(),
        "building the Go kubelet: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
}

/// The body of a successful GET, `None` otherwise.
pub async fn http_get(url: &str) -> Option<String> {
    let r = reqwest::get(url).await.ok()?;
    r.status().is_success().then_some(())?;
    r.text().await.ok()
}

/// One standalone kubelet's command line and files, the same for kubelet-rs and the Go
/// kubelet v1.20.2 (`go`: its extra flags for a remote runtime): `<dir>/config.yaml` holds
/// `config`, `<dir>/manifests` the static pods, the cgroup root `/kubelet-rs-<tag>-go|rs`
/// exists in every hierarchy, and every port is free.
pub struct StandaloneLaunch {
    /// The flags.
    pub args: Vec<String>,
    /// The static pod directory (created).
    pub manifests: PathBuf,
    /// The log file for the process's standard error.
    pub log: PathBuf,
    /// The read-only port (`/pods`).
    pub read_only_port: u16,
}

impl StandaloneLaunch {
    /// See the type's docs; `endpoint` is the CRI socket, `node` the node name.
    pub fn new(
        tag: &str,
        go: bool,
        config: &str,
        dir: &Path,
        root: &Path,
        endpoint: &str,
        node: &str,
    ) -> StandaloneLaunch {
        let manifests = dir.join("manifests");
        std::fs::create_dir_all(&manifests).unwrap();
        let config_file = dir.join("config.yaml");
        std::fs::write(&config_file, config).unwrap();
        let cgroup_root = format!("/kubelet-rs-{tag}-{}", if go { "go" } else { "rs" });
        for h in crate::engine::hierarchies() {
            std::fs::create_dir_all(h.join(&cgroup_root[1..])).unwrap();
        }
        let (port, read_only, healthz) = (free_port(), free_port(), free_port());
        let mut args: Vec<String> = vec![
            format!("--config={}", config_file.display()),
            format!("--pod-manifest-path={}", manifests.display()),
            format!("--container-runtime-endpoint={endpoint}"),
            format!("--root-dir={}", root.display()),
            format!("--cgroup-root={cgroup_root}"),
            format!("--hostname-override={node}"),
            format!("--port={port}"),
            format!("--read-only-port={read_only}"),
            format!("--healthz-port={healthz}"),
            "--pod-infra-container-image=kubelet-rs.local/pause:1.0".into(),
        ];
        if go {
            args.extend(
                [
                    "--container-runtime=remote",
                    "--image-service-endpoint=",
                    "--v=2",
                ]
                .map(String::from),
            );
        }
        let log = dir.join(if go {
            "go-kubelet.log"
        } else {
            "kubelet-rs.log"
        });
        StandaloneLaunch {
            args,
            manifests,
            log,
            read_only_port: read_only,
        }
    }
}
