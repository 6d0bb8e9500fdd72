//! Networking of pods on the real containerd: a host-network pod (and an exec that times
//! out in it), a pod IP and a host port serving HTTP.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn host_network_pod_and_exec_timeout() {
    let Some(t) = runtime_or_skip("host_network_pod").await else {
        return;
    };
    let rt = &t.runtime;
    let image_ref = busybox_ref(rt).await;
    let images = rt.list_images().await.unwrap();
    assert!(images
        .iter()
        .any(|i| i.repo_tags.iter().any(|t| t == BUSYBOX_IMAGE) && i.size_bytes > 0));

    let uid = unique_uid("hostnet");
    let mut p = (*pod("host-net", &uid, vec![busybox("main", "exec sleep 3600")])).clone();
    if let Some(spec) = p.spec.as_mut() {
        spec.host_network = Some(true);
    }
    let p = std::sync::Arc::new(p);
    let sandbox = sandbox_config(&t, &p);
    let sandbox_id = rt.run_pod_sandbox(&sandbox).await.unwrap();
    let status = rt.pod_sandbox_status(&sandbox_id).await;
    let cfg = container_config(&p, 0, &image_ref);
    let id = rt
        .create_container(&sandbox_id, &cfg, &sandbox)
        .await
        .unwrap();
    rt.start_container(&id).await.unwrap();
    let host_ns = std::fs::read_link("/proc/self/ns/net").unwrap();
    let ns = rt
        .exec_sync(
            &id,
            &["readlink".into(), "/proc/self/ns/net".into()],
            Duration::from_secs(10),
        )
        .await;
    let timed_out = rt
        .exec_sync(&id, &["sleep".into(), "30".into()], Duration::from_secs(1))
        .await;
    cleanup_pod(rt, &uid).await;

    let status = status.unwrap();
    assert!(status.host_network);
    let ns = ns.unwrap();
    assert_eq!(
        String::from_utf8_lossy(&ns.stdout).trim(),
        host_ns.to_string_lossy()
    );
    // The command outlives its timeout: the call fails instead of hanging for 30s.
    let err = timed_out.expect_err("exec_sync past its timeout must fail");
    assert!(
        matches!(
            err,
            RuntimeError::DeadlineExceeded {
                operation: "ExecSync"
            }
        ),
        "{err:?}"
    );
}

/// Sends `GET /` to addr and returns the response.
async fn http_get(addr: &str) -> Option<String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::time::timeout(Duration::from_secs(2), tokio::net::TcpStream::connect(addr))
        .await
        .ok()?
        .ok()?;
    s.write_all(b"GET /index.html HTTP/1.0\r\nHost: test\r\n\r\n")
        .await
        .ok()?;
    let mut buf = Vec::new();
    tokio::time::timeout(Duration::from_secs(2), s.read_to_end(&mut buf))
        .await
        .ok()?
        .ok()?;
    Some(String::from_utf8_lossy(&buf).to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pod_ip_and_host_port_serve_http() {
    let Some(t) = runtime_or_skip("pod_ip_and_host_port").await else {
        return;
    };
    let rt = &t.runtime;
    let image_ref = busybox_ref(rt).await;
    let uid = unique_uid("http");
    let mut web = busybox(
        "web",
        "mkdir -p /www && echo served-by-$(hostname) > /www/index.html && exec httpd -f -p 80 -h /www",
    );
    web.ports = Some(vec![k8s_openapi::api::core::v1::ContainerPort {
        container_port: 80,
        host_port: Some(18081),
        protocol: Some("TCP".into()),
        ..Default::default()
    }]);
    let p = pod("web-pod", &uid, vec![web]);
    let sandbox = sandbox_config(&t, &p);
    let sandbox_id = rt.run_pod_sandbox(&sandbox).await.unwrap();
    let ip = rt.pod_sandbox_status(&sandbox_id).await.unwrap().ip;
    let cfg = container_config(&p, 0, &image_ref);
    let id = rt
        .create_container(&sandbox_id, &cfg, &sandbox)
        .await
        .unwrap();
    rt.start_container(&id).await.unwrap();
    let ip = ip.expect("pod IP");
    let via_pod_ip = poll_until(WAIT, || http_get_owned(format!("{ip}:80"))).await;
    let via_host_port = poll_until(WAIT, || http_get_owned("127.0.0.1:18081".to_string())).await;
    cleanup_pod(rt, &uid).await;
    let body = via_pod_ip.expect("no HTTP answer on the pod IP");
    assert!(body.contains("served-by-web-pod"), "{body}");
    let body = via_host_port.expect("no HTTP answer on the host port");
    assert!(body.contains("served-by-web-pod"), "{body}");
}

async fn http_get_owned(addr: String) -> Option<String> {
    http_get(&addr).await.filter(|r| r.contains("200 OK"))
}
