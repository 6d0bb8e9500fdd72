//! The project's CSI node driver for tests (no CSI driver is packaged on this machine): the
//! `csi.v1` Identity and Node services on a unix socket doing real bind mounts, and beside
//! them the `pluginregistration` service a kubelet finds in its `plugins_registry` (what
//! `node-driver-registrar` serves for a real driver), so an unmodified kubelet — kubelet-rs
//! or the Go kubelet — registers and uses it.
//!
//! ```text
//! kubelet-rs-csi-test-driver --name csi.kubelet-rs.test --endpoint /var/lib/kubelet/plugins/t/csi.sock \
//!     --registration-dir /var/lib/kubelet/plugins_registry --node-id n1 --data-dir /srv/csi \
//!     [--no-stage] [--fail-publish-file F] [--calls F]
//! ```
//!
//! Volumes are directories `<data-dir>/<volume id>`: NodeStageVolume bind-mounts it on the
//! staging path, NodePublishVolume bind-mounts the staging path (or the directory, without
//! staging) on the target, read-only when asked; an inline (ephemeral) volume's directory is
//! made at publish. Each call is appended to `--calls` as one JSON line (method, volume,
//! paths, read-only, context, access mode, fs type, mount flags), for comparing kubelets.
//! While `--fail-publish-file` exists NodePublishVolume fails (`INTERNAL`). A raw block volume
//! (the `Block` access type) is a loop device over `<data-dir>/<volume id>.img`, attached at
//! stage (or first publish), bind-mounted on the publish target file, detached at unstage.
//! NodeExpandVolume (`EXPAND_VOLUME`) is logged and succeeds when the volume path is mounted
//! (a directory has nothing to grow). NodeGetVolumeStats (`GET_VOLUME_STATS`) answers the filesystem's capacity and free space
//! and inodes, and as used what the volume holds (its files' bytes, its entries); it is not
//! logged (kubelets call it on their own schedule).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use kubelet_cm::csi::api as csi;
use kubelet_cm::csi::api::identity_server::{Identity, IdentityServer};
use kubelet_cm::csi::api::node_server::{Node, NodeServer};
use kubelet_cm::plugin_manager::api as reg;
use kubelet_cm::plugin_manager::api::registration_server::{Registration, RegistrationServer};
use tokio::net::UnixListener;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tonic::{Request, Response, Status};

#[derive(Clone)]
struct Args {
    name: String,
    endpoint: PathBuf,
    registration_dir: PathBuf,
    node_id: String,
    data_dir: PathBuf,
    stage: bool,
    fail_publish_file: Option<PathBuf>,
    calls: Option<PathBuf>,
}

fn args() -> Args {
    let mut a = Args {
        name: "csi.kubelet-rs.test".into(),
        endpoint: PathBuf::new(),
        registration_dir: PathBuf::new(),
        node_id: String::new(),
        data_dir: PathBuf::new(),
        stage: true,
        fail_publish_file: None,
        calls: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().unwrap_or_else(|| panic!("{flag} needs a value"));
        match flag.as_str() {
            "--name" => a.name = value(),
            "--endpoint" => a.endpoint = value().into(),
            "--registration-dir" => a.registration_dir = value().into(),
            "--node-id" => a.node_id = value(),
            "--data-dir" => a.data_dir = value().into(),
            "--no-stage" => a.stage = false,
            "--fail-publish-file" => a.fail_publish_file = Some(value().into()),
            "--calls" => a.calls = Some(value().into()),
            other => panic!("unknown flag {other}"),
        }
    }
    assert!(!a.node_id.is_empty(), "--node-id is required");
    a
}

struct Driver {
    args: Args,
    log: Mutex<()>,
}

impl Driver {
    fn record(&self, call: serde_json::Value) {
        eprintln!("{call}");
        if let Some(path) = &self.args.calls {
            let _guard = self.log.lock().unwrap();
            let mut f = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .unwrap();
            writeln!(f, "{call}").unwrap();
        }
    }

    /// The loop device of the block volume `id` (over `<data-dir>/<id>.img`, 8 MiB, attached
    /// on first use and recorded in `<data-dir>/<id>.loop`).
    fn block_device(&self, id: &str) -> Result<String, Status> {
        let dir = self.volume_dir(id)?;
        let record = dir.with_extension("loop");
        if let Ok(dev) = std::fs::read_to_string(&record) {
            return Ok(dev);
        }
        let image = dir.with_extension("img");
        std::fs::create_dir_all(&self.args.data_dir).map_err(|e| internal("mkdir data", e))?;
        let f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&image)
            .map_err(|e| internal("image", e))?;
        f.set_len(8 << 20).map_err(|e| internal("image size", e))?;
        let out = std::process::Command::new("losetup")
            .args(["-f", "--show"])
            .arg(&image)
            .output()
            .map_err(|e| internal("losetup", e))?;
        if !out.status.success() {
            return Err(internal("losetup", String::from_utf8_lossy(&out.stderr)));
        }
        let dev = String::from_utf8_lossy(&out.stdout).trim().to_string();
        std::fs::write(&record, &dev).map_err(|e| internal("loop record", e))?;
        Ok(dev)
    }

    /// Detaches the block volume `id`'s loop device, if attached.
    fn release_block_device(&self, id: &str) -> Result<(), Status> {
        let record = self.volume_dir(id)?.with_extension("loop");
        if let Ok(dev) = std::fs::read_to_string(&record) {
            let _ = std::process::Command::new("losetup")
                .args(["-d", &dev])
                .status();
            let _ = std::fs::remove_file(&record);
        }
        Ok(())
    }

    fn volume_dir(&self, id: &str) -> Result<PathBuf, Status> {
        if id.is_empty() || id.contains('/') || id == "." || id == ".." {
            return Err(Status::invalid_argument(format!("bad volume id {id:?}")));
        }
        Ok(self.args.data_dir.join(id))
    }
}

fn mounted(path: &Path) -> bool {
    kubelet_core::mount::is_mount_point(path).unwrap_or(false)
}

fn internal(what: &str, e: impl std::fmt::Display) -> Status {
    Status::internal(format!("{what}: {e}"))
}

fn bind(source: &Path, target: &Path, read_only: bool) -> Result<(), Status> {
    std::fs::create_dir_all(target).map_err(|e| internal("mkdir target", e))?;
    if mounted(target) {
        return Ok(());
    }
    kubelet_core::mount::bind(source, target).map_err(|e| internal("bind mount", e))?;
    if read_only {
        let ok = std::process::Command::new("mount")
            .args(["-o", "remount,bind,ro"])
            .arg(target)
            .status()
            .map(|s| s.success())
            .unwrap_or(false);
        if !ok {
            let _ = kubelet_core::mount::unmount(target);
            return Err(Status::internal("remounting read-only failed"));
        }
    }
    Ok(())
}

fn unbind(target: &Path) -> Result<(), Status> {
    if mounted(target) {
        kubelet_core::mount::unmount(target).map_err(|e| internal("unmount", e))?;
    }
    Ok(())
}

/// Whether the capability is a raw block volume's.
fn is_block(cap: &Option<csi::VolumeCapability>) -> bool {
    matches!(
        cap.as_ref().and_then(|c| c.access_type.as_ref()),
        Some(csi::volume_capability::AccessType::Block(_))
    )
}

fn describe(cap: &Option<csi::VolumeCapability>) -> (i32, String, Vec<String>) {
    let Some(c) = cap else {
        return (0, String::new(), vec![]);
    };
    let mode = c.access_mode.as_ref().map(|m| m.mode).unwrap_or(0);
    match &c.access_type {
        Some(csi::volume_capability::AccessType::Mount(m)) => {
            (mode, m.fs_type.clone(), m.mount_flags.clone())
        }
        _ => (mode, String::new(), vec![]),
    }
}

#[tonic::async_trait]
impl Identity for Driver {
    async fn get_plugin_info(
        &self,
        _: Request<csi::GetPluginInfoRequest>,
    ) -> Result<Response<csi::GetPluginInfoResponse>, Status> {
        Ok(Response::new(csi::GetPluginInfoResponse {
            name: self.args.name.clone(),
            vendor_version: env!("CARGO_PKG_VERSION").into(),
            manifest: BTreeMap::new(),
        }))
    }
    async fn get_plugin_capabilities(
        &self,
        _: Request<csi::GetPluginCapabilitiesRequest>,
    ) -> Result<Response<csi::GetPluginCapabilitiesResponse>, Status> {
        Ok(Response::new(csi::GetPluginCapabilitiesResponse {
            capabilities: vec![],
        }))
    }
    async fn probe(
        &self,
        _: Request<csi::ProbeRequest>,
    ) -> Result<Response<csi::ProbeResponse>, Status> {
        Ok(Response::new(csi::ProbeResponse { ready: Some(true) }))
    }
}

#[tonic::async_trait]
impl Node for Driver {
    async fn node_stage_volume(
        &self,
        r: Request<csi::NodeStageVolumeRequest>,
    ) -> Result<Response<csi::NodeStageVolumeResponse>, Status> {
        let r = r.into_inner();
        let (mode, fs, flags) = describe(&r.volume_capability);
        self.record(serde_json::json!({"method": "NodeStageVolume", "volume": r.volume_id,
            "staging": r.staging_target_path, "context": r.volume_context, "publishContext": r.publish_context,
            "secrets": r.secrets.keys().collect::<Vec<_>>(), "accessMode": mode, "fsType": fs, "mountFlags": flags,
            "block": is_block(&r.volume_capability)}));
        if is_block(&r.volume_capability) {
            self.block_device(&r.volume_id)?;
            return Ok(Response::new(csi::NodeStageVolumeResponse {}));
        }
        let dir = self.volume_dir(&r.volume_id)?;
        std::fs::create_dir_all(&dir).map_err(|e| internal("mkdir volume", e))?;
        bind(&dir, Path::new(&r.staging_target_path), false)?;
        Ok(Response::new(csi::NodeStageVolumeResponse {}))
    }
    async fn node_unstage_volume(
        &self,
        r: Request<csi::NodeUnstageVolumeRequest>,
    ) -> Result<Response<csi::NodeUnstageVolumeResponse>, Status> {
        let r = r.into_inner();
        self.record(
            serde_json::json!({"method": "NodeUnstageVolume", "volume": r.volume_id,
            "staging": r.staging_target_path}),
        );
        unbind(Path::new(&r.staging_target_path))?;
        self.release_block_device(&r.volume_id)?;
        Ok(Response::new(csi::NodeUnstageVolumeResponse {}))
    }
    async fn node_publish_volume(
        &self,
        r: Request<csi::NodePublishVolumeRequest>,
    ) -> Result<Response<csi::NodePublishVolumeResponse>, Status> {
        let r = r.into_inner();
        let (mode, fs, flags) = describe(&r.volume_capability);
        self.record(serde_json::json!({"method": "NodePublishVolume", "volume": r.volume_id,
            "staging": r.staging_target_path, "target": r.target_path, "readonly": r.readonly,
            "context": r.volume_context, "publishContext": r.publish_context,
            "secrets": r.secrets.keys().collect::<Vec<_>>(), "accessMode": mode, "fsType": fs, "mountFlags": flags,
            "block": is_block(&r.volume_capability)}));
        if let Some(f) = &self.args.fail_publish_file {
            if f.exists() {
                return Err(Status::internal("injected NodePublishVolume failure"));
            }
        }
        if is_block(&r.volume_capability) {
            // The device node bind-mounted on a file at the target path.
            let device = self.block_device(&r.volume_id)?;
            let target = Path::new(&r.target_path);
            if !mounted(target) {
                std::fs::File::create(target).map_err(|e| internal("target file", e))?;
                kubelet_core::mount::bind(Path::new(&device), target)
                    .map_err(|e| internal("bind mount", e))?;
            }
            return Ok(Response::new(csi::NodePublishVolumeResponse {}));
        }
        let dir = self.volume_dir(&r.volume_id)?;
        let ephemeral = r
            .volume_context
            .get("csi.storage.k8s.io/ephemeral")
            .map(String::as_str)
            == Some("true");
        let source = if self.args.stage && !ephemeral {
            if !mounted(Path::new(&r.staging_target_path)) {
                return Err(Status::failed_precondition("volume is not staged"));
            }
            PathBuf::from(&r.staging_target_path)
        } else {
            std::fs::create_dir_all(&dir).map_err(|e| internal("mkdir volume", e))?;
            dir
        };
        bind(&source, Path::new(&r.target_path), r.readonly)?;
        Ok(Response::new(csi::NodePublishVolumeResponse {}))
    }
    async fn node_unpublish_volume(
        &self,
        r: Request<csi::NodeUnpublishVolumeRequest>,
    ) -> Result<Response<csi::NodeUnpublishVolumeResponse>, Status> {
        let r = r.into_inner();
        self.record(
            serde_json::json!({"method": "NodeUnpublishVolume", "volume": r.volume_id,
            "target": r.target_path}),
        );
        let target = Path::new(&r.target_path);
        unbind(target)?;
        let _ = std::fs::remove_dir(target);
        if target.is_file() {
            let _ = std::fs::remove_file(target);
        }
        Ok(Response::new(csi::NodeUnpublishVolumeResponse {}))
    }
    async fn node_get_volume_stats(
        &self,
        r: Request<csi::NodeGetVolumeStatsRequest>,
    ) -> Result<Response<csi::NodeGetVolumeStatsResponse>, Status> {
        // Not logged: kubelets call it on their own schedule, which is no part of a
        // comparison of their mount calls.
        let r = r.into_inner();
        let fs = statfs(&r.volume_path)?;
        let (bytes, entries) = held(Path::new(&r.volume_path));
        let usage = |unit: csi::volume_usage::Unit, available, total, used| csi::VolumeUsage {
            available,
            total,
            used,
            unit: unit as i32,
        };
        Ok(Response::new(csi::NodeGetVolumeStatsResponse {
            usage: vec![
                usage(
                    csi::volume_usage::Unit::Bytes,
                    fs.available,
                    fs.total,
                    bytes,
                ),
                usage(
                    csi::volume_usage::Unit::Inodes,
                    fs.inodes_free,
                    fs.inodes,
                    entries,
                ),
            ],
        }))
    }
    async fn node_expand_volume(
        &self,
        r: Request<csi::NodeExpandVolumeRequest>,
    ) -> Result<Response<csi::NodeExpandVolumeResponse>, Status> {
        let r = r.into_inner();
        let (mode, fs, flags) = describe(&r.volume_capability);
        let required = r.capacity_range.as_ref().map_or(0, |c| c.required_bytes);
        self.record(
            serde_json::json!({"method": "NodeExpandVolume", "volume": r.volume_id,
            "volumePath": r.volume_path, "staging": r.staging_target_path,
            "requiredBytes": required, "accessMode": mode, "fsType": fs, "mountFlags": flags}),
        );
        // A directory volume has nothing to grow; what is checked is that the kubelet names a
        // path where the volume is mounted.
        if !mounted(Path::new(&r.volume_path)) {
            return Err(Status::failed_precondition(format!(
                "{} is not mounted",
                r.volume_path
            )));
        }
        Ok(Response::new(csi::NodeExpandVolumeResponse {
            capacity_bytes: required,
        }))
    }
    async fn node_get_capabilities(
        &self,
        _: Request<csi::NodeGetCapabilitiesRequest>,
    ) -> Result<Response<csi::NodeGetCapabilitiesResponse>, Status> {
        use csi::node_service_capability::rpc::Type;
        let mut types = vec![Type::GetVolumeStats, Type::ExpandVolume];
        if self.args.stage {
            types.push(Type::StageUnstageVolume);
        }
        let capabilities = types
            .into_iter()
            .map(|t| csi::NodeServiceCapability {
                r#type: Some(csi::node_service_capability::Type::Rpc(
                    csi::node_service_capability::Rpc { r#type: t as i32 },
                )),
            })
            .collect();
        Ok(Response::new(csi::NodeGetCapabilitiesResponse {
            capabilities,
        }))
    }
    async fn node_get_info(
        &self,
        _: Request<csi::NodeGetInfoRequest>,
    ) -> Result<Response<csi::NodeGetInfoResponse>, Status> {
        self.record(serde_json::json!({"method": "NodeGetInfo"}));
        Ok(Response::new(csi::NodeGetInfoResponse {
            node_id: self.args.node_id.clone(),
            max_volumes_per_node: 8,
            accessible_topology: Some(csi::Topology {
                segments: BTreeMap::from([(
                    "topology.kubelet-rs.test/node".to_string(),
                    self.args.node_id.clone(),
                )]),
            }),
        }))
    }
}

/// (available, total) bytes of the filesystem at `path`.
/// The filesystem under a path (`stat -f`).
struct Fs {
    available: i64,
    total: i64,
    inodes_free: i64,
    inodes: i64,
}

fn statfs(path: &str) -> Result<Fs, Status> {
    let out = std::process::Command::new("stat")
        .args(["-f", "-c", "%a %b %S %d %c", path])
        .output()
        .map_err(|e| internal("stat", e))?;
    let text = String::from_utf8_lossy(&out.stdout);
    let v: Vec<i64> = text
        .split_whitespace()
        .filter_map(|s| s.parse().ok())
        .collect();
    match v.as_slice() {
        [avail, blocks, size, ffree, files] => Ok(Fs {
            available: avail * size,
            total: blocks * size,
            inodes_free: *ffree,
            inodes: *files,
        }),
        _ => Err(Status::not_found(format!("no filesystem at {path}"))),
    }
}

/// What a volume holds: the bytes of its files and its entries (the root included).
fn held(dir: &Path) -> (i64, i64) {
    let mut bytes = 0i64;
    let mut entries = 1i64;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            entries += 1;
            match e.metadata() {
                Ok(m) if m.is_dir() => stack.push(e.path()),
                Ok(m) => bytes += i64::try_from(m.len()).unwrap_or(i64::MAX),
                Err(_) => {}
            }
        }
    }
    (bytes, entries)
}

struct Registrar {
    args: Args,
}

#[tonic::async_trait]
impl Registration for Registrar {
    async fn get_info(
        &self,
        _: Request<reg::InfoRequest>,
    ) -> Result<Response<reg::PluginInfo>, Status> {
        Ok(Response::new(reg::PluginInfo {
            r#type: "CSIPlugin".into(),
            name: self.args.name.clone(),
            endpoint: self.args.endpoint.display().to_string(),
            supported_versions: vec!["1.0.0".into()],
        }))
    }
    async fn notify_registration_status(
        &self,
        r: Request<reg::RegistrationStatus>,
    ) -> Result<Response<reg::RegistrationStatusResponse>, Status> {
        let r = r.into_inner();
        eprintln!(
            "registration status: registered={} error={:?}",
            r.plugin_registered, r.error
        );
        Ok(Response::new(reg::RegistrationStatusResponse {}))
    }
}

/// The connections of a socket at `path`, through the kubelet's `:authority` rewriter: the
/// Go kubelet's gRPC client sends the socket's path as the authority, which tonic refuses.
fn listen(
    path: &Path,
    shutdown: &CancellationToken,
    tasks: &TaskTracker,
) -> impl futures::Stream<Item = std::io::Result<tokio::io::DuplexStream>> + Send + 'static {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).unwrap();
    }
    let _ = std::fs::remove_file(path);
    kubelet_core::grpc_uds::incoming(
        UnixListener::bind(path).unwrap(),
        shutdown.clone(),
        tasks.clone(),
    )
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let a = args();
    std::fs::create_dir_all(&a.data_dir).unwrap();
    let driver = std::sync::Arc::new(Driver {
        args: a.clone(),
        log: Mutex::new(()),
    });
    let (shutdown, tasks) = (CancellationToken::new(), TaskTracker::new());
    let csi = tonic::transport::Server::builder()
        .add_service(IdentityServer::from_arc(driver.clone()))
        .add_service(NodeServer::from_arc(driver))
        .serve_with_incoming(listen(&a.endpoint, &shutdown, &tasks));
    let reg_socket = a.registration_dir.join(format!("{}-reg.sock", a.name));
    let registration = tonic::transport::Server::builder()
        .add_service(RegistrationServer::new(Registrar { args: a.clone() }))
        .serve_with_incoming(listen(&reg_socket, &shutdown, &tasks));
    eprintln!(
        "serving {} on {} (registration {})",
        a.name,
        a.endpoint.display(),
        reg_socket.display()
    );
    let mut term =
        tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).unwrap();
    tokio::select! {
        r = csi => r.unwrap(),
        r = registration => r.unwrap(),
        _ = term.recv() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
    // Gone: the kubelet deregisters the driver when the registration socket goes.
    shutdown.cancel();
    let _ = std::fs::remove_file(&reg_socket);
    let _ = std::fs::remove_file(&a.endpoint);
}
