//! Static pods from a manifest URL: the real HTTP source polling a local test server, the
//! real engine and containerd.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use kubelet_core::PodSource;
use kubelet_sources::http::{Config as HttpConfig, HttpSource};
use kubelet_tests::engine::{running_and_ready, wait_until, EngineTest, NODE_NAME};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn manifest(namespace: &str, name: &str) -> String {
    format!(
        r#"apiVersion: v1
kind: Pod
metadata:
  name: {name}
  namespace: {namespace}
spec:
  terminationGracePeriodSeconds: 2
  containers:
  - name: c
    image: kubelet-rs.local/busybox:1.0
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c", "exec sleep 3600"]
"#
    )
}

/// Serves `body` (status 200, or 500 when it is None) to every request on 127.0.0.1.
async fn serve(body: Arc<Mutex<Option<String>>>) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((mut s, _)) = listener.accept().await else {
                return;
            };
            let body = body.lock().unwrap().clone();
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                let _ = s.read(&mut buf).await;
                let resp = match body {
                    Some(b) => format!(
                        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{b}",
                        b.len()
                    ),
                    None => "HTTP/1.1 500 Internal Server Error\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".to_string(),
                };
                let _ = s.write_all(resp.as_bytes()).await;
            });
        }
    });
    format!("http://{addr}/pods.yaml")
}

#[tokio::test(flavor = "multi_thread")]
async fn url_source_runs_pods_and_keeps_them_while_the_url_fails() {
    let Some(t) = EngineTest::new("urlsource").await else {
        return;
    };
    let body = Arc::new(Mutex::new(Some(manifest(&t.namespace, "fromurl"))));
    let url = serve(body.clone()).await;
    let mut config = HttpConfig::new(url, NODE_NAME);
    config.check_frequency = Duration::from_millis(500);
    let source: Arc<dyn PodSource> = Arc::new(HttpSource::new(config));
    let k = t.start(vec![source]);
    let full_name = format!("{}/fromurl-{NODE_NAME}", t.namespace);
    let uid = wait_until(Duration::from_secs(60), "pod from URL Running", || {
        let p = k.handle.pod_by_full_name(&full_name)?;
        let uid = p.metadata.uid.clone()?;
        k.handle.pod_status(&uid).filter(running_and_ready)?;
        Some(uid)
    })
    .await;

    // The URL fails for a while: the last good state is kept, the pod keeps running.
    *body.lock().unwrap() = None;
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(
        k.handle.pod(&uid).is_some(),
        "pod dropped while the URL failed"
    );
    assert!(k
        .handle
        .pod_status(&uid)
        .as_ref()
        .is_some_and(running_and_ready));
    assert_eq!(t.containers(&uid).await.len(), 1);

    // An empty manifest list removes the pod.
    *body.lock().unwrap() = Some(String::new());
    wait_until(Duration::from_secs(60), "pod removed", || {
        k.handle.pod(&uid).is_none().then_some(())
    })
    .await;
    kubelet_tests::engine::eventually(Duration::from_secs(30), "sandbox removed", || async {
        t.sandboxes(&uid).await.is_empty().then_some(())
    })
    .await;
    k.stop().await;
}
