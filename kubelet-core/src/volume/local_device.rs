//! `local` PersistentVolumes on a block device (Go's local plugin's device mounter, with
//! mount-utils' `SafeFormatAndMount`): the device is mounted once per node at
//! `<root-dir>/plugins/kubernetes.io/local-volume/mounts/<pv-name>` (Go's path), and each
//! pod's directory is a bind mount of that ([`super::local::setup`]).
//!
//! States of a volume's device mount, one operation at a time per volume (the volume
//! manager's per-volume lock):
//! - absent → [`mount_device`]: the device is probed (`blkid -p`); one without a filesystem is
//!   formatted (`mkfs.<fsType>`, the PV's `fsType` or ext4, `-F -m0` for ext3/4) unless the
//!   volume is read-only or the disk carries a partition table; an existing filesystem is
//!   checked first (`fsck -a`, errors it cannot correct refuse the mount); then it is mounted
//!   with the PV's mount options → mounted. A failed mount leaves no directory behind.
//! - mounted → [`mount_device`] again (another pod, or after a kubelet restart): kept as it is.
//! - mounted → [`unmount_unused`]: once no pod's directory of that volume is a mount point
//!   (the last pod's teardown), unmounted and removed (Go's `UnmountDevice`).
//!
//! Every outside program runs with a timeout and is killed when it runs over.

use std::collections::HashSet;
use std::ffi::CString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use rustix::mount::MountFlags;

use super::{local, mount};

/// The device mounts' directory under the root dir (Go's
/// `plugins/kubernetes.io/local-volume/mounts`).
pub const DEVICE_MOUNTS_DIR: &str = "plugins/kubernetes.io/local-volume/mounts";

/// The filesystem type used when the PV names none (Go's `defaultFSType`).
pub const DEFAULT_FS_TYPE: &str = "ext4";

/// How long `blkid`, `fsck` or `mkfs` may run.
pub const COMMAND_TIMEOUT: Duration = Duration::from_secs(120);

/// Why a block device could not be mounted.
#[derive(Debug, thiserror::Error)]
pub enum DeviceError {
    /// An outside program failed to run or returned an error.
    #[error("{program} {device}: {message}")]
    Command {
        /// The program.
        program: String,
        /// The device.
        device: String,
        /// Its exit status and output, or why it could not run.
        message: String,
    },
    /// `blkid` printed something that is not `KEY=value` lines.
    #[error("blkid returns invalid output: {0}")]
    BlkidOutput(String),
    /// The device has no filesystem and the volume is read-only (Go's `UnformattedReadOnly`).
    #[error("cannot mount unformatted disk {0} as we are manipulating it in read-only mode")]
    UnformattedReadOnly(String),
    /// `fsck` found errors it could not correct (Go's `HasFilesystemErrors`).
    #[error("'fsck' found errors on device {device} but could not correct them: {output}")]
    FilesystemErrors {
        /// The device.
        device: String,
        /// fsck's output.
        output: String,
    },
    /// The mount itself failed.
    #[error(
        "local: failed to mount device {device} at {target} (fstype: {fs_type}), error {error}"
    )]
    Mount {
        /// The device.
        device: String,
        /// The device mount path.
        target: String,
        /// The filesystem type.
        fs_type: String,
        /// The error.
        error: std::io::Error,
    },
    /// A file operation on the device mount path failed.
    #[error("{op} {path}: {error}")]
    Io {
        /// What failed.
        op: &'static str,
        /// Where.
        path: String,
        /// The error.
        error: std::io::Error,
    },
}

fn io(op: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> DeviceError {
    let path = path.display().to_string();
    move |error| DeviceError::Io { op, path, error }
}

/// The device mount path of the PersistentVolume `pv` under `root_dir`.
pub fn device_mount_path(root_dir: &Path, pv: &str) -> PathBuf {
    root_dir.join(DEVICE_MOUNTS_DIR).join(pv)
}

/// What `blkid` found on a device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DiskFormat {
    /// Nothing: the device may be formatted.
    Unformatted,
    /// A filesystem of this type.
    Filesystem(String),
    /// A partition table (Go never formats such a disk: "unknown data, probably partitions").
    Partitioned,
}

/// Reads `blkid -p -s TYPE -s PTTYPE -o export` (Go's `GetDiskFormat`): exit status 2 is an
/// unformatted device, 0 the `TYPE=`/`PTTYPE=` lines; `None` when blkid failed otherwise.
pub fn parse_blkid(status: Option<i32>, output: &str) -> Option<Result<DiskFormat, DeviceError>> {
    match status {
        Some(2) => return Some(Ok(DiskFormat::Unformatted)),
        Some(0) => {}
        _ => return None,
    }
    let (mut fs_type, mut pt_type) = (String::new(), String::new());
    for line in output.lines().filter(|l| !l.is_empty()) {
        let Some((key, value)) = line.split_once('=').filter(|(_, v)| !v.contains('=')) else {
            return Some(Err(DeviceError::BlkidOutput(output.to_string())));
        };
        match key {
            "TYPE" => fs_type = value.to_string(),
            "PTTYPE" => pt_type = value.to_string(),
            _ => {}
        }
    }
    Some(Ok(if !pt_type.is_empty() {
        DiskFormat::Partitioned
    } else if fs_type.is_empty() {
        DiskFormat::Unformatted
    } else {
        DiskFormat::Filesystem(fs_type)
    }))
}

/// The `mkfs` program and arguments for `fs_type` on `device` (Go: ext3/ext4 get `-F -m0`,
/// forced and with no blocks reserved for root).
pub fn mkfs_command(fs_type: &str, device: &str) -> (String, Vec<String>) {
    let mut args = Vec::new();
    if matches!(fs_type, "ext3" | "ext4") {
        args.extend(["-F".to_string(), "-m0".to_string()]);
    }
    args.push(device.to_string());
    (format!("mkfs.{fs_type}"), args)
}

/// Mount options as mount(8) splits them: the generic ones become flags, the rest the
/// filesystem's data string (comma-separated, in order).
pub fn split_mount_options(options: &[String]) -> (MountFlags, String) {
    let mut flags = MountFlags::empty();
    let mut data: Vec<&str> = Vec::new();
    for o in options.iter().map(|o| o.trim()).filter(|o| !o.is_empty()) {
        match o {
            "defaults" | "rw" => {}
            "ro" => flags |= MountFlags::RDONLY,
            "nosuid" => flags |= MountFlags::NOSUID,
            "nodev" => flags |= MountFlags::NODEV,
            "noexec" => flags |= MountFlags::NOEXEC,
            "sync" => flags |= MountFlags::SYNCHRONOUS,
            "dirsync" => flags |= MountFlags::DIRSYNC,
            "noatime" => flags |= MountFlags::NOATIME,
            "nodiratime" => flags |= MountFlags::NODIRATIME,
            "relatime" => flags |= MountFlags::RELATIME,
            other => data.push(other),
        }
    }
    (flags, data.join(","))
}

/// Runs `program args` with [`COMMAND_TIMEOUT`]: its exit status (`None` when killed by a
/// signal) and its combined output; `Err` when it could not run (`NotFound` when it is not
/// installed) or ran over.
async fn run(program: &str, args: &[String]) -> std::io::Result<(Option<i32>, String)> {
    let child = tokio::process::Command::new(program)
        .args(args)
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(COMMAND_TIMEOUT, child)
        .await
        .map_err(|_| {
            std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                format!("did not finish in {COMMAND_TIMEOUT:?}"),
            )
        })??;
    let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.push_str(&String::from_utf8_lossy(&out.stderr));
    Ok((out.status.code(), text))
}

fn command_error(program: &str, device: &str, message: impl ToString) -> DeviceError {
    DeviceError::Command {
        program: program.to_string(),
        device: device.to_string(),
        message: message.to_string(),
    }
}

async fn disk_format(device: &str) -> Result<DiskFormat, DeviceError> {
    let args = ["-p", "-s", "TYPE", "-s", "PTTYPE", "-o", "export", device].map(String::from);
    let (status, output) = run("blkid", &args)
        .await
        .map_err(|e| command_error("blkid", device, e))?;
    parse_blkid(status, &output).unwrap_or_else(|| {
        Err(command_error(
            "blkid",
            device,
            format!("exit status {status:?}: {}", output.trim()),
        ))
    })
}

/// Go's `checkAndRepairFilesystem`: `fsck -a`; corrected errors (1) and a missing fsck pass,
/// uncorrected ones (4) refuse the mount, anything else is logged and passes.
async fn check_filesystem(device: &str) -> Result<(), DeviceError> {
    match run("fsck", &["-a".to_string(), device.to_string()]).await {
        Ok((Some(0 | 1), _)) => Ok(()),
        Ok((Some(4), output)) => Err(DeviceError::FilesystemErrors {
            device: device.to_string(),
            output,
        }),
        Ok((status, output)) => {
            tracing::warn!(device, ?status, output = %output.trim(), "fsck failed; mounting anyway (as Go)");
            Ok(())
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(command_error("fsck", device, e)),
    }
}

/// Mounts the block device `device` at `target` (see the module docs), formatting it first
/// when it has no filesystem. `fs_type` is the PV's (`None` or empty: ext4). Returns whether
/// it mounted now (false: it was mounted already).
pub async fn mount_device(
    device: &str,
    target: &Path,
    fs_type: Option<&str>,
    read_only: bool,
    options: &[String],
) -> Result<bool, DeviceError> {
    let t = target.to_path_buf();
    let mounted = tokio::task::spawn_blocking(move || mount::is_mount_point(&t))
        .await
        .map_err(|e| io("reading mountinfo for", target)(std::io::Error::other(e)))?
        .map_err(io("reading mountinfo for", target))?;
    if mounted {
        return Ok(false);
    }
    let fs_type = fs_type
        .filter(|f| !f.is_empty())
        .unwrap_or(DEFAULT_FS_TYPE)
        .to_string();
    let read_only = read_only || options.iter().any(|o| o.trim() == "ro");
    match disk_format(device).await? {
        DiskFormat::Unformatted if read_only => {
            return Err(DeviceError::UnformattedReadOnly(device.to_string()))
        }
        DiskFormat::Unformatted => {
            let (program, args) = mkfs_command(&fs_type, device);
            tracing::info!(device, fs_type = %fs_type, "formatting the local volume's device");
            match run(&program, &args).await {
                Ok((Some(0), _)) => {}
                Ok((status, output)) => {
                    return Err(command_error(
                        &program,
                        device,
                        format!("format failed: exit status {status:?}: {}", output.trim()),
                    ))
                }
                Err(e) => return Err(command_error(&program, device, e)),
            }
        }
        DiskFormat::Filesystem(found) => {
            if found != fs_type {
                tracing::warn!(device, found = %found, wanted = %fs_type, "the device's filesystem is not the volume's fsType");
            }
            if !read_only {
                check_filesystem(device).await?;
            }
        }
        DiskFormat::Partitioned => {
            return Err(command_error(
                "mount",
                device,
                "unknown data, probably partitions: not formatted, not mounted",
            ))
        }
    }
    let (mut flags, data) = split_mount_options(options);
    if read_only {
        flags |= MountFlags::RDONLY;
    }
    let (device, target) = (device.to_string(), target.to_path_buf());
    tokio::task::spawn_blocking(move || mount_at(&device, &target, &fs_type, flags, &data))
        .await
        .map_err(|e| DeviceError::Io {
            op: "mounting",
            path: String::new(),
            error: std::io::Error::other(e),
        })??;
    Ok(true)
}

fn mount_at(
    device: &str,
    target: &Path,
    fs_type: &str,
    flags: MountFlags,
    data: &str,
) -> Result<(), DeviceError> {
    std::fs::create_dir_all(target).map_err(io("creating directory", target))?;
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(target, std::fs::Permissions::from_mode(0o750))
            .map_err(io("setting the mode of", target))?;
    }
    let result = CString::new(data)
        .map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))
        .and_then(|data| {
            rustix::mount::mount(device, target, fs_type, flags, data.as_c_str())
                .map_err(std::io::Error::from)
        });
    result.map_err(|error| {
        if let Err(e) = std::fs::remove_dir(target) {
            tracing::warn!(path = %target.display(), error = %e, "local: failed to remove the device mount path");
        }
        DeviceError::Mount {
            device: device.to_string(),
            target: target.display().to_string(),
            fs_type: fs_type.to_string(),
            error,
        }
    })
}

/// The device mounts under `root_dir` (PV names) that no pod under `pods_dir` has bind-mounted
/// (`<pod>/volumes/kubernetes.io~local-volume/<pv>` is no mount point).
pub fn unused_device_mounts(root_dir: &Path, pods_dir: &Path) -> std::io::Result<Vec<String>> {
    let base = root_dir.join(DEVICE_MOUNTS_DIR);
    let Ok(entries) = std::fs::read_dir(&base) else {
        return Ok(Vec::new());
    };
    let mounts: HashSet<PathBuf> = mount::mount_points()?.into_iter().collect();
    let plugin = format!("kubernetes.io~{}", local::PLUGIN_DIR);
    let pods: Vec<PathBuf> = std::fs::read_dir(pods_dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path().join("volumes").join(&plugin))
        .collect();
    Ok(entries
        .flatten()
        .filter_map(|e| e.file_name().to_str().map(str::to_string))
        .filter(|pv| !pods.iter().any(|p| mounts.contains(&p.join(pv))))
        .collect())
}

/// Unmounts the device mount of `pv` (when mounted) and removes its directory: for a volume
/// [`unused_device_mounts`] listed, under the volume's lock.
pub fn unmount_device(root_dir: &Path, pv: &str) -> Result<(), DeviceError> {
    let path = device_mount_path(root_dir, pv);
    if mount::is_mount_point(&path).map_err(io("reading mountinfo for", &path))? {
        mount::unmount(&path).map_err(io("unmounting", &path))?;
    }
    match std::fs::remove_dir(&path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(io("removing", &path)(e)),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blkid_output_is_read_as_go_reads_it() {
        let table: [(Option<i32>, &str, Option<DiskFormat>); 6] = [
            (Some(2), "", Some(DiskFormat::Unformatted)),
            (
                Some(0),
                "TYPE=ext4\n",
                Some(DiskFormat::Filesystem("ext4".into())),
            ),
            (Some(0), "PTTYPE=gpt\n", Some(DiskFormat::Partitioned)),
            (
                Some(0),
                "TYPE=xfs\nPTTYPE=dos\n",
                Some(DiskFormat::Partitioned),
            ),
            (Some(0), "\n", Some(DiskFormat::Unformatted)),
            (
                Some(0),
                "DEVNAME=/dev/loop0\nTYPE=xfs\n",
                Some(DiskFormat::Filesystem("xfs".into())),
            ),
        ];
        for (status, out, want) in table {
            let got = parse_blkid(status, out).map(|r| r.ok());
            assert_eq!(got, want.map(Some), "{status:?} {out:?}");
        }
        assert!(parse_blkid(Some(4), "").is_none());
        assert!(parse_blkid(None, "").is_none());
        assert!(matches!(
            parse_blkid(Some(0), "garbage line\n"),
            Some(Err(DeviceError::BlkidOutput(_)))
        ));
        assert!(matches!(
            parse_blkid(Some(0), "TYPE=a=b\n"),
            Some(Err(DeviceError::BlkidOutput(_)))
        ));
    }

    #[test]
    fn mkfs_gets_go_arguments() {
        assert_eq!(
            mkfs_command("ext4", "/dev/loop1"),
            (
                "mkfs.ext4".to_string(),
                vec!["-F".into(), "-m0".into(), "/dev/loop1".into()]
            )
        );
        assert_eq!(
            mkfs_command("xfs", "/dev/loop1"),
            ("mkfs.xfs".to_string(), vec!["/dev/loop1".to_string()])
        );
    }

    #[test]
    fn options_split_into_flags_and_data() {
        let opts: Vec<String> = [
            "ro",
            " noatime",
            "discard",
            "defaults",
            "",
            "errors=remount-ro",
        ]
        .map(String::from)
        .to_vec();
        let (flags, data) = split_mount_options(&opts);
        assert_eq!(flags, MountFlags::RDONLY | MountFlags::NOATIME);
        assert_eq!(data, "discard,errors=remount-ro");
        assert_eq!(
            split_mount_options(&[]),
            (MountFlags::empty(), String::new())
        );
    }

    #[test]
    fn unused_device_mounts_are_those_no_pod_has_mounted() {
        let root = tempfile::tempdir().unwrap();
        let pods = root.path().join("pods");
        std::fs::create_dir_all(root.path().join(DEVICE_MOUNTS_DIR).join("pv-a")).unwrap();
        // A pod directory for the volume that is no mount point does not keep it.
        std::fs::create_dir_all(pods.join("uid-1/volumes/kubernetes.io~local-volume/pv-a"))
            .unwrap();
        assert_eq!(
            unused_device_mounts(root.path(), &pods).unwrap(),
            vec!["pv-a"]
        );
        unmount_device(root.path(), "pv-a").unwrap();
        assert!(!device_mount_path(root.path(), "pv-a").exists());
        // Nothing mounted at all: nothing listed, and removing again is no error.
        assert!(unused_device_mounts(root.path(), &pods).unwrap().is_empty());
        unmount_device(root.path(), "pv-a").unwrap();
    }
}
