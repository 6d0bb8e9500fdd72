//! Volumes and environment on the real engine and containerd: emptyDir (disk shared between
//! an init and the main container, memory over its sizeLimit), hostPath type checks, subPath
//! escapes, the managed /etc/hosts, env from fieldRef/resourceFieldRef, config maps and
//! secrets from an object store (updated in place), projected tokens, standalone errors and
//! pod directory cleanup.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{
    ConfigMap, ConfigMapKeySelector, ConfigMapVolumeSource, Container, EmptyDirVolumeSource,
    EnvVar, EnvVarSource, HostAlias, HostPathVolumeSource, KeyToPath, ObjectFieldSelector, Pod,
    PodStatus, ProjectedVolumeSource, ResourceFieldSelector, Secret, SecretVolumeSource,
    ServiceAccountTokenProjection, Volume, VolumeMount, VolumeProjection,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::ByteString;
use kubelet_core::objects::{MemoryObjectStore, ObjectStore};
use kubelet_core::testing::{RecordingSink, StaticSource};
use kubelet_core::{KubeletHandle, PodSource, StatusSink};
use kubelet_tests::engine::{
    busybox, container_status, resources, wait_running, wait_until, waiting_reason, EngineTest,
    RunningKubelet,
};

const LONG: Duration = Duration::from_secs(90);

fn volume(name: &str) -> Volume {
    Volume {
        name: name.into(),
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

fn with_mounts(mut c: Container, mounts: Vec<VolumeMount>) -> Container {
    c.volume_mounts = Some(mounts);
    c
}

fn with_volumes(mut p: Pod, volumes: Vec<Volume>) -> Pod {
    p.spec.as_mut().unwrap().volumes = Some(volumes);
    p
}

/// Starts an engine with an object store and a recording sink.
fn start(
    t: &EngineTest,
    pods: Vec<Pod>,
    store: Option<Arc<dyn ObjectStore>>,
    sync_frequency: Option<Duration>,
) -> (RunningKubelet, Arc<StaticSource>, Arc<RecordingSink>) {
    let source = Arc::new(StaticSource::new("file", pods));
    let sink = Arc::new(RecordingSink::default());
    let mut config = t.config();
    if let Some(f) = sync_frequency {
        config.sync_frequency = f;
    }
    let sink2 = sink.clone();
    let k = t.start_customized(
        config,
        vec![source.clone() as Arc<dyn PodSource>],
        move |b| {
            let b = b.status_sink(sink2 as Arc<dyn StatusSink>);
            match store {
                Some(s) => b.object_store(s),
                None => b,
            }
        },
    );
    (k, source, sink)
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

/// Waits until container `name` waits with `reason` and a message containing `text`.
async fn wait_waiting(
    h: &KubeletHandle,
    uid: &str,
    name: &str,
    reason: &str,
    text: &str,
) -> String {
    wait_until(
        LONG,
        &format!("{name} waiting with {reason}: {text}"),
        || {
            let s = h.pod_status(uid)?;
            let st = container_status(&s, name)?;
            let w = st.state.as_ref()?.waiting.as_ref()?;
            let msg = w.message.clone().unwrap_or_default();
            (waiting_reason(&s, name).as_deref() == Some(reason) && msg.contains(text))
                .then_some(msg)
        },
    )
    .await
}

fn is_mounted(path: &Path) -> bool {
    kubelet_core::mount::mount_points()
        .unwrap()
        .iter()
        .any(|m| m == path)
}

fn pod_dir(t: &EngineTest, uid: &str) -> PathBuf {
    t.dir.path().join("root/pods").join(uid)
}

#[tokio::test(flavor = "multi_thread")]
async fn empty_dir_shared_by_init_and_main_then_torn_down() {
    let Some(t) = EngineTest::new("vol-emptydir").await else {
        return;
    };
    let uid = t.uid("ed");
    let mut p = t.pod(
        "ed",
        &uid,
        vec![with_mounts(
            busybox("main", "exec sleep 3600"),
            vec![mount("scratch", "/scratch")],
        )],
    );
    p.spec.as_mut().unwrap().init_containers = Some(vec![with_mounts(
        busybox("init", "echo from-init > /scratch/msg"),
        vec![mount("scratch", "/scratch")],
    )]);
    let p = with_volumes(
        p,
        vec![Volume {
            empty_dir: Some(EmptyDirVolumeSource::default()),
            ..volume("scratch")
        }],
    );
    let (k, source, _) = start(&t, vec![p], None, None);
    let status = wait_running(&k.handle, &uid, LONG).await;
    assert_eq!(
        exec(&k.handle, &status, "main", "cat /scratch/msg").await,
        "from-init\n"
    );
    let dir = pod_dir(&t, &uid).join("volumes/kubernetes.io~empty-dir/scratch");
    assert_eq!(
        std::fs::read_to_string(dir.join("msg")).unwrap(),
        "from-init\n"
    );

    // Removed from the source: the pod directory goes away with it.
    source.set(vec![]);
    wait_until(LONG, "pod directory removed", || {
        (!pod_dir(&t, &uid).exists()).then_some(())
    })
    .await;
    k.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn memory_empty_dir_is_a_tmpfs_limited_to_its_size_limit() {
    let Some(t) = EngineTest::new("vol-memory").await else {
        return;
    };
    let uid = t.uid("mem");
    let p = with_volumes(
        t.pod(
            "mem",
            &uid,
            vec![with_mounts(
                busybox("main", "exec sleep 3600"),
                vec![mount("ram", "/ram")],
            )],
        ),
        vec![Volume {
            empty_dir: Some(EmptyDirVolumeSource {
                medium: Some("Memory".into()),
                size_limit: Some(Quantity("1Mi".into())),
                ..Default::default()
            }),
            ..volume("ram")
        }],
    );
    let (k, source, _) = start(&t, vec![p], None, None);
    let status = wait_running(&k.handle, &uid, LONG).await;
    let dir = pod_dir(&t, &uid).join("volumes/kubernetes.io~empty-dir/ram");
    assert!(is_mounted(&dir), "tmpfs mounted at {}", dir.display());
    let out = exec(
        &k.handle,
        &status,
        "main",
        "dd if=/dev/zero of=/ram/fill bs=1024 count=2048; echo rc=$?",
    )
    .await;
    assert!(out.contains("No space left on device"), "{out}");
    assert!(!out.contains("rc=0"), "{out}");
    let out = exec(
        &k.handle,
        &status,
        "main",
        "rm /ram/fill && dd if=/dev/zero of=/ram/small bs=1024 count=100 && echo ok",
    )
    .await;
    assert!(out.contains("ok"), "{out}");

    source.set(vec![]);
    wait_until(LONG, "tmpfs unmounted and directory removed", || {
        (!is_mounted(&dir) && !pod_dir(&t, &uid).exists()).then_some(())
    })
    .await;
    k.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn host_path_types_are_checked() {
    let Some(t) = EngineTest::new("vol-hostpath").await else {
        return;
    };
    let host = tempfile::tempdir().unwrap();
    let dir = host.path().join("dir");
    let file = host.path().join("file");
    let sock = host.path().join("sock");
    std::fs::create_dir(&dir).unwrap();
    std::fs::write(&file, "host-file").unwrap();
    let _listener = std::os::unix::net::UnixListener::bind(&sock).unwrap();
    let s = |p: &Path| p.to_string_lossy().into_owned();
    // (pod tag, path, type, expected error or None when the pod must run)
    let cases: Vec<(&str, String, &str, Option<&str>)> = vec![
        ("dir-ok", s(&dir), "Directory", None),
        (
            "dir-create",
            s(&host.path().join("made/here")),
            "DirectoryOrCreate",
            None,
        ),
        ("file-ok", s(&file), "File", None),
        (
            "file-create",
            s(&host.path().join("newfile")),
            "FileOrCreate",
            None,
        ),
        ("sock-ok", s(&sock), "Socket", None),
        ("chr-ok", "/dev/null".into(), "CharDevice", None),
        ("dir-bad", s(&file), "Directory", Some("is not a directory")),
        (
            "dir-missing",
            s(&host.path().join("nope")),
            "Directory",
            Some("is not a directory"),
        ),
        (
            "dircreate-bad",
            s(&file),
            "DirectoryOrCreate",
            Some("is not a directory"),
        ),
        ("file-bad", s(&dir), "File", Some("is not a file")),
        (
            "filecreate-bad",
            s(&dir),
            "FileOrCreate",
            Some("is not a file"),
        ),
        ("sock-bad", s(&file), "Socket", Some("is not a socket file")),
        (
            "chr-bad",
            s(&dir),
            "CharDevice",
            Some("is not a character device"),
        ),
        (
            "blk-bad",
            "/dev/null".into(),
            "BlockDevice",
            Some("is not a block device"),
        ),
    ];
    let mut pods = Vec::new();
    let mut uids = Vec::new();
    for (tag, path, type_, _) in &cases {
        let uid = t.uid(tag);
        uids.push(uid.clone());
        pods.push(with_volumes(
            t.pod(
                tag,
                &uid,
                vec![with_mounts(
                    busybox("main", "exec sleep 3600"),
                    vec![mount("h", "/h")],
                )],
            ),
            vec![Volume {
                host_path: Some(HostPathVolumeSource {
                    path: path.clone(),
                    type_: Some(type_.to_string()),
                }),
                ..volume("h")
            }],
        ));
    }
    let (k, _source, sink) = start(&t, pods, None, None);
    for ((tag, path, type_, err), uid) in cases.iter().zip(&uids) {
        match err {
            None => {
                let status = wait_running(&k.handle, uid, LONG).await;
                if *type_ == "File" {
                    assert_eq!(
                        exec(&k.handle, &status, "main", "cat /h").await,
                        "host-file"
                    );
                }
            }
            Some(e) => {
                let want = format!("hostPath type check failed: {path} {e}");
                let msg = wait_waiting(&k.handle, uid, "main", "ContainerCreating", &want).await;
                assert!(
                    msg.contains("Unable to attach or mount volumes"),
                    "{tag}: {msg}"
                );
                assert!(
                    t.containers(uid).await.is_empty(),
                    "{tag}: no container created"
                );
            }
        }
    }
    assert!(host.path().join("made/here").is_dir());
    assert!(host.path().join("newfile").is_file());
    let failed_mounts = sink
        .events()
        .iter()
        .filter(|e| e.reason == "FailedMount")
        .count();
    assert!(failed_mounts >= 8, "FailedMount events: {failed_mounts}");
    k.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn subpath_symlink_escape_is_refused() {
    let Some(t) = EngineTest::new("vol-subpath").await else {
        return;
    };
    let uid = t.uid("sp");
    let mut p = t.pod(
        "sp",
        &uid,
        vec![
            with_mounts(
                busybox("good", "exec sleep 3600"),
                vec![VolumeMount {
                    sub_path: Some("data/inner".into()),
                    ..mount("v", "/data")
                }],
            ),
            with_mounts(
                busybox("evil", "exec sleep 3600"),
                vec![VolumeMount {
                    sub_path: Some("escape/etc".into()),
                    ..mount("v", "/stolen")
                }],
            ),
        ],
    );
    p.spec.as_mut().unwrap().init_containers = Some(vec![with_mounts(
        busybox(
            "attacker",
            "mkdir -p /v/data/inner && echo ok > /v/data/inner/f && ln -s / /v/escape",
        ),
        vec![mount("v", "/v")],
    )]);
    let p = with_volumes(
        p,
        vec![Volume {
            empty_dir: Some(EmptyDirVolumeSource::default()),
            ..volume("v")
        }],
    );
    let (k, _source, _) = start(&t, vec![p], None, None);
    let msg = wait_waiting(
        &k.handle,
        &uid,
        "evil",
        "CreateContainerConfigError",
        "resolves outside the volume",
    )
    .await;
    assert!(msg.contains("escape/etc"), "{msg}");
    let status = wait_until(LONG, "good container running", || {
        let s = k.handle.pod_status(&uid)?;
        let c = container_status(&s, "good")?;
        c.state.as_ref()?.running.as_ref()?;
        Some(s)
    })
    .await;
    assert_eq!(
        exec(&k.handle, &status, "good", "cat /data/f").await,
        "ok\n"
    );
    // Nothing of the host's / was bind-mounted for the pod.
    let subpaths = pod_dir(&t, &uid).join("volume-subpaths");
    let mounted: Vec<PathBuf> = kubelet_core::mount::mount_points_under(&subpaths).unwrap();
    assert_eq!(mounted, vec![subpaths.join("v/good/0")]);
    k.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn etc_hosts_and_env_from_fields_and_resources() {
    let Some(t) = EngineTest::new("vol-hosts-env").await else {
        return;
    };
    let uid = t.uid("he");
    let field = |name: &str, path: &str| EnvVar {
        name: name.into(),
        value_from: Some(EnvVarSource {
            field_ref: Some(ObjectFieldSelector {
                field_path: path.into(),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    };
    let res = |name: &str, r: &str, divisor: &str| EnvVar {
        name: name.into(),
        value_from: Some(EnvVarSource {
            resource_field_ref: Some(ResourceFieldSelector {
                resource: r.into(),
                divisor: Some(Quantity(divisor.into())),
                container_name: None,
            }),
            ..Default::default()
        }),
        ..Default::default()
    };
    let mut c = with_mounts(
        busybox("main", "exec sleep 3600"),
        vec![VolumeMount {
            sub_path_expr: Some("$(POD_NAME)".into()),
            ..mount("logs", "/logs")
        }],
    );
    c.resources = Some(resources(&[("cpu", "250m")], &[("memory", "64Mi")]));
    c.env = Some(vec![
        field("POD_NAME", "metadata.name"),
        field("POD_NS", "metadata.namespace"),
        field("POD_UID", "metadata.uid"),
        field("POD_IP", "status.podIP"),
        field("HOST_IP", "status.hostIP"),
        field("NODE", "spec.nodeName"),
        res("MEM_MI", "limits.memory", "1Mi"),
        res("CPU_M", "requests.cpu", "1m"),
        EnvVar {
            name: "GREETING".into(),
            value: Some("hi-$(POD_NAME)-$$(POD_NAME)".into()),
            ..Default::default()
        },
    ]);
    let mut p = with_volumes(
        t.pod("he", &uid, vec![c]),
        vec![Volume {
            empty_dir: Some(EmptyDirVolumeSource::default()),
            ..volume("logs")
        }],
    );
    let spec = p.spec.as_mut().unwrap();
    spec.hostname = Some("web-0".into());
    spec.subdomain = Some("web".into());
    spec.host_aliases = Some(vec![HostAlias {
        ip: "10.9.8.7".into(),
        hostnames: Some(vec!["alias-a".into(), "alias-b".into()]),
    }]);
    let (k, _source, _) = start(&t, vec![p], None, None);
    let status = wait_running(&k.handle, &uid, LONG).await;
    let ip = status.pod_ip.clone().unwrap();
    let hosts = exec(&k.handle, &status, "main", "cat /etc/hosts").await;
    // No cluster domain: the FQDN ends in `svc.`, as Go writes it.
    let want = format!(
        "# Kubernetes-managed hosts file.\n127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n\
         fe00::0\tip6-localnet\nfe00::0\tip6-mcastprefix\nfe00::1\tip6-allnodes\nfe00::2\tip6-allrouters\n\
         {ip}\tweb-0.web.{}.svc.\tweb-0\n\n# Entries added by HostAliases.\n10.9.8.7\talias-a\talias-b\n",
        t.namespace
    );
    assert_eq!(hosts, want);
    let env = exec(&k.handle, &status, "main", "env").await;
    for line in [
        "POD_NAME=he".to_string(),
        format!("POD_NS={}", t.namespace),
        format!("POD_UID={uid}"),
        format!("POD_IP={ip}"),
        "HOST_IP=127.0.0.1".into(),
        "NODE=kubelet-rs-itest".into(),
        "MEM_MI=64".into(),
        "CPU_M=250".into(),
        "GREETING=hi-he-$(POD_NAME)".into(),
    ] {
        assert!(env.lines().any(|l| l == line), "{line} missing in\n{env}");
    }
    // subPathExpr expanded with the container's environment.
    exec(&k.handle, &status, "main", "echo x > /logs/f").await;
    let f = pod_dir(&t, &uid).join("volumes/kubernetes.io~empty-dir/logs/he/f");
    assert_eq!(std::fs::read_to_string(f).unwrap(), "x\n");
    k.stop().await;
}

fn config_map(ns: &str, name: &str, value: &str) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some(ns.into()),
            ..Default::default()
        },
        data: Some([("greeting".to_string(), value.to_string())].into()),
        ..Default::default()
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn config_map_secret_and_token_from_the_object_store() {
    let Some(t) = EngineTest::new("vol-objects").await else {
        return;
    };
    let store = Arc::new(MemoryObjectStore::new());
    let ns = t.namespace.clone();
    store.put_config_map(config_map(&ns, "cfg", "hello"));
    store.put_secret(Secret {
        metadata: ObjectMeta {
            name: Some("sec".into()),
            namespace: Some(ns.clone()),
            ..Default::default()
        },
        data: Some([("password".to_string(), ByteString(b"s3cret".to_vec()))].into()),
        ..Default::default()
    });
    let uid = t.uid("obj");
    let mut c = with_mounts(
        busybox("main", "exec sleep 3600"),
        vec![
            mount("cfg", "/cfg"),
            mount("sec", "/sec"),
            mount("token", "/var/run/secrets/tokens"),
        ],
    );
    c.env = Some(vec![EnvVar {
        name: "GREETING".into(),
        value_from: Some(EnvVarSource {
            config_map_key_ref: Some(ConfigMapKeySelector {
                name: "cfg".into(),
                key: "greeting".into(),
                optional: None,
            }),
            ..Default::default()
        }),
        ..Default::default()
    }]);
    let p = with_volumes(
        t.pod("obj", &uid, vec![c]),
        vec![
            Volume {
                config_map: Some(ConfigMapVolumeSource {
                    name: "cfg".into(),
                    ..Default::default()
                }),
                ..volume("cfg")
            },
            Volume {
                secret: Some(SecretVolumeSource {
                    secret_name: Some("sec".into()),
                    items: Some(vec![KeyToPath {
                        key: "password".into(),
                        path: "pw".into(),
                        mode: Some(0o400),
                        ..Default::default()
                    }]),
                    ..Default::default()
                }),
                ..volume("sec")
            },
            Volume {
                projected: Some(ProjectedVolumeSource {
                    sources: Some(vec![VolumeProjection {
                        service_account_token: Some(ServiceAccountTokenProjection {
                            audience: Some("vault".into()),
                            expiration_seconds: Some(5),
                            path: "token".into(),
                            ..Default::default()
                        }),
                        ..Default::default()
                    }]),
                    ..Default::default()
                }),
                ..volume("token")
            },
        ],
    );
    let (k, _source, _) = start(
        &t,
        vec![p],
        Some(store.clone() as Arc<dyn ObjectStore>),
        Some(Duration::from_secs(1)),
    );
    let status = wait_running(&k.handle, &uid, LONG).await;
    let env = exec(&k.handle, &status, "main", "echo $GREETING").await;
    assert_eq!(env, "hello\n");
    assert_eq!(
        exec(&k.handle, &status, "main", "cat /cfg/greeting").await,
        "hello"
    );
    let out = exec(
        &k.handle,
        &status,
        "main",
        "cat /sec/pw; stat -L -c ' %a' /sec/pw",
    )
    .await;
    assert_eq!(out, "s3cret 400\n");
    // API data volumes are read-only in the container.
    let out = exec(&k.handle, &status, "main", "touch /cfg/x 2>&1; echo rc=$?").await;
    assert!(out.contains("Read-only file system"), "{out}");
    let first = exec(
        &k.handle,
        &status,
        "main",
        "cat /var/run/secrets/tokens/token",
    )
    .await;
    assert!(first.starts_with(&format!("{ns}/default/")), "{first}");
    let req = &store.token_requests()[0];
    assert_eq!(req.audiences, vec!["vault".to_string()]);
    assert_eq!(req.pod_uid, uid);

    // The config map changes: the file follows in place (the env of the running container
    // does not, as in Kubernetes).
    store.put_config_map(config_map(&ns, "cfg", "bonjour"));
    let h = k.handle.clone();
    let s2 = status.clone();
    kubelet_core::testing::poll_until(LONG, || {
        let (h, s2) = (h.clone(), s2.clone());
        async move { (exec(&h, &s2, "main", "cat /cfg/greeting").await == "bonjour").then_some(()) }
    })
    .await
    .expect("config map update reached the file");
    assert_eq!(
        exec(&k.handle, &status, "main", "echo $GREETING").await,
        "hello\n"
    );
    // The 5s token is replaced once 80% of its lifetime passed.
    let s3 = status.clone();
    let newer = kubelet_core::testing::poll_until(LONG, || {
        let (h, s3, first) = (h.clone(), s3.clone(), first.clone());
        async move {
            let now = exec(&h, &s3, "main", "cat /var/run/secrets/tokens/token").await;
            (now != first).then_some(now)
        }
    })
    .await
    .expect("token refreshed");
    assert!(newer.starts_with(&format!("{ns}/default/")), "{newer}");
    k.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn standalone_objects_are_a_clear_error_and_other_pods_run() {
    let Some(t) = EngineTest::new("vol-standalone").await else {
        return;
    };
    let bad = t.uid("bad");
    let good = t.uid("good");
    let p = with_volumes(
        t.pod(
            "bad",
            &bad,
            vec![with_mounts(
                busybox("main", "exec sleep 3600"),
                vec![mount("cfg", "/cfg")],
            )],
        ),
        vec![Volume {
            config_map: Some(ConfigMapVolumeSource {
                name: "cfg".into(),
                ..Default::default()
            }),
            ..volume("cfg")
        }],
    );
    let ok = t.pod("good", &good, vec![busybox("main", "exec sleep 3600")]);
    let (k, _source, sink) = start(&t, vec![p, ok], None, None);
    wait_running(&k.handle, &good, LONG).await;
    let msg = wait_waiting(
        &k.handle,
        &bad,
        "main",
        "ContainerCreating",
        "not available in standalone mode",
    )
    .await;
    assert!(msg.contains("unmounted volumes=[cfg]"), "{msg}");
    assert!(sink.events().iter().any(
        |e| e.reason == "FailedMount" && e.message.contains("not available in standalone mode")
    ));
    k.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn orphaned_pod_directories_are_cleaned_at_housekeeping() {
    let Some(t) = EngineTest::new("vol-orphans").await else {
        return;
    };
    // A directory a previous kubelet left, with a tmpfs still mounted in it.
    let orphan = pod_dir(&t, "orphan-uid");
    let ram = orphan.join("volumes/kubernetes.io~empty-dir/ram");
    std::fs::create_dir_all(&ram).unwrap();
    kubelet_core::mount::mount_tmpfs(&ram, "size=65536").unwrap();
    std::fs::write(ram.join("f"), "x").unwrap();
    let uid = t.uid("live");
    let (k, _source, _) = start(
        &t,
        vec![t.pod("live", &uid, vec![busybox("main", "exec sleep 3600")])],
        None,
        None,
    );
    wait_running(&k.handle, &uid, LONG).await;
    wait_until(LONG, "orphaned directory removed", || {
        (!orphan.exists() && !is_mounted(&ram)).then_some(())
    })
    .await;
    assert!(
        pod_dir(&t, &uid).join("etc-hosts").is_file(),
        "live pod kept"
    );
    k.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn volumes_of_a_completed_pod_are_torn_down() {
    let Some(t) = EngineTest::new("vol-completed").await else {
        return;
    };
    let uid = t.uid("done");
    let mut p = with_volumes(
        t.pod(
            "done",
            &uid,
            vec![with_mounts(
                busybox("main", "echo x > /ram/f; sleep 2"),
                vec![mount("ram", "/ram")],
            )],
        ),
        vec![Volume {
            empty_dir: Some(EmptyDirVolumeSource {
                medium: Some("Memory".into()),
                ..Default::default()
            }),
            ..volume("ram")
        }],
    );
    p.spec.as_mut().unwrap().restart_policy = Some("Never".into());
    let (k, _source, _) = start(&t, vec![p], None, None);
    let dir = pod_dir(&t, &uid).join("volumes/kubernetes.io~empty-dir/ram");
    wait_until(LONG, "tmpfs mounted while the pod runs", || {
        is_mounted(&dir).then_some(())
    })
    .await;
    wait_until(LONG, "pod Succeeded", || {
        let s = k.handle.pod_status(&uid)?;
        (s.phase.as_deref() == Some("Succeeded")).then_some(())
    })
    .await;
    wait_until(LONG, "tmpfs unmounted after termination", || {
        (!is_mounted(&dir)).then_some(())
    })
    .await;
    k.stop().await;
}
