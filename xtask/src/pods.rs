//! `cargo xtask pods`: what a standalone kubelet runs, as a person wants to see it — pod
//! phases, container states, pod IPs and the last log lines — read from the kubelet's
//! read-only `/pods` endpoint and the CRI log files.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// GETs `path` from the kubelet's read-only port and returns the JSON body.
async fn get_json(addr: &str, path: &str) -> Result<Value> {
    let mut stream = tokio::net::TcpStream::connect(addr)
        .await
        .with_context(|| format!("connecting to the kubelet at {addr}"))?;
    let request = format!("GET {path} HTTP/1.0\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await?;
    let mut response = Vec::new();
    stream.read_to_end(&mut response).await?;
    let text = String::from_utf8_lossy(&response);
    let (head, body) = text
        .split_once("\r\n\r\n")
        .context("malformed HTTP response")?;
    if !head.starts_with("HTTP/1.1 200") && !head.starts_with("HTTP/1.0 200") {
        bail!("GET {path}: {}", head.lines().next().unwrap_or(""));
    }
    serde_json::from_str(body).context("decoding the pod list")
}

fn str_at<'a>(v: &'a Value, path: &[&str]) -> &'a str {
    let mut cur = v;
    for p in path {
        cur = &cur[*p];
    }
    cur.as_str().unwrap_or("")
}

/// The last `n` lines of a CRI log file, without the timestamp and stream prefix.
fn last_log_lines(file: &PathBuf, n: usize) -> Vec<String> {
    let Ok(text) = std::fs::read_to_string(file) else {
        return Vec::new();
    };
    let lines: Vec<String> = text
        .lines()
        .map(|l| {
            // "<RFC3339 time> <stdout|stderr> <F|P> <message>"
            l.splitn(4, ' ').nth(3).unwrap_or(l).to_string()
        })
        .collect();
    lines[lines.len().saturating_sub(n)..].to_vec()
}

fn print(list: &Value, logs_dir: &str) {
    let empty = Vec::new();
    let items = list["items"].as_array().unwrap_or(&empty);
    println!("{:<28} {:<10} {:<15} CONTAINERS", "POD", "PHASE", "IP");
    for pod in items {
        let ns = str_at(pod, &["metadata", "namespace"]);
        let name = str_at(pod, &["metadata", "name"]);
        let uid = str_at(pod, &["metadata", "uid"]);
        let status = &pod["status"];
        let mut containers = Vec::new();
        for c in status["containerStatuses"].as_array().unwrap_or(&empty) {
            let state = c["state"]
                .as_object()
                .and_then(|o| o.iter().next())
                .map(|(k, v)| match v["reason"].as_str() {
                    Some(r) => format!("{k}({r})"),
                    None => k.clone(),
                })
                .unwrap_or_else(|| "unknown".into());
            containers.push(format!(
                "{}={} restarts={}",
                str_at(c, &["name"]),
                state,
                c["restartCount"]
            ));
        }
        println!(
            "{:<28} {:<10} {:<15} {}",
            format!("{ns}/{name}"),
            str_at(status, &["phase"]),
            str_at(status, &["podIP"]),
            containers.join(", ")
        );
        for c in status["containerStatuses"].as_array().unwrap_or(&empty) {
            let cname = str_at(c, &["name"]);
            let file = PathBuf::from(logs_dir)
                .join(format!("{ns}_{name}_{uid}"))
                .join(cname)
                .join(format!("{}.log", c["restartCount"].as_i64().unwrap_or(0)));
            for line in last_log_lines(&file, 3) {
                println!("    {cname} | {line}");
            }
        }
    }
}

/// Prints the pods; with `wait`, first waits until every pod is Running or finished.
pub async fn run(addr: &str, logs_dir: &str, wait: Option<Duration>) -> Result<()> {
    let start = kubelet_core::clock::monotonic_now();
    loop {
        let list = get_json(addr, "/pods").await;
        let ready = match &list {
            Ok(l) => {
                let empty = Vec::new();
                let items = l["items"].as_array().unwrap_or(&empty);
                !items.is_empty()
                    && items.iter().all(|p| {
                        matches!(
                            str_at(p, &["status", "phase"]),
                            "Running" | "Succeeded" | "Failed"
                        )
                    })
            }
            Err(_) => false,
        };
        match (wait, ready, list) {
            (_, true, Ok(l)) | (None, _, Ok(l)) => {
                if wait.is_some() {
                    println!(
                        "all pods running after {:.1}s",
                        kubelet_core::clock::elapsed(start).as_secs_f64()
                    );
                }
                print(&l, logs_dir);
                return Ok(());
            }
            (Some(limit), _, result) if kubelet_core::clock::elapsed(start) >= limit => {
                if let Ok(l) = result {
                    print(&l, logs_dir);
                }
                bail!("pods not all running after {limit:?}");
            }
            (None, _, Err(e)) => return Err(e),
            _ => tokio::time::sleep(Duration::from_millis(250)).await,
        }
    }
}
