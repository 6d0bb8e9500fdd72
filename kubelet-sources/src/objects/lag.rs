//! Reads the API server refuses only because its own caches lag a pod just created. The Node
//! authorizer's graph (which lets a node read the secrets and config maps its pods reference)
//! and NodeRestriction admission's pod informer (which a TokenRequest bound to the pod must
//! pass) take in a new pod a moment after the kubelet's watch has delivered it; a read in that
//! moment is refused — 403 "no relationship found between node …", or the TokenRequest's 404
//! `pod "NAME" not found` — and the same read passes a few milliseconds later (seen in bursts
//! of pods, and now and then for one pod). Such a refusal is retried here after
//! [`LAG_RETRIES`] (70 ms in all); any other failure, and a refusal that outlasts them, is
//! returned at once, and the pod's sync retries its volumes after its own back-off.

use std::future::Future;
use std::time::Duration;

/// The waits before each retry of a read refused for the API server's lag.
pub(super) const LAG_RETRIES: [Duration; 3] = [
    Duration::from_millis(10),
    Duration::from_millis(20),
    Duration::from_millis(40),
];

/// Whether `e` is the API server not having taken in a new pod yet; `bound_pod` is the pod
/// a TokenRequest is bound to.
pub(super) fn is_lag(e: &kube::Error, bound_pod: Option<&str>) -> bool {
    let kube::Error::Api(s) = e else {
        return false;
    };
    match s.code {
        403 => s.message.contains("no relationship found between node"),
        404 => bound_pod.is_some_and(|p| {
            let m = &s.message;
            (m.starts_with("pod ") || m.starts_with("pods "))
                && m.contains(&format!("\"{p}\" not found"))
        }),
        _ => false,
    }
}

/// `call`, made again after each of [`LAG_RETRIES`] while it is refused for the lag.
pub(super) async fn retrying_lag<T, F, Fut>(
    what: &str,
    bound_pod: Option<&str>,
    mut call: F,
) -> Result<T, kube::Error>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, kube::Error>>,
{
    let mut waits = LAG_RETRIES.iter();
    loop {
        match call().await {
            Err(e) if is_lag(&e, bound_pod) => match waits.next() {
                Some(wait) => {
                    tracing::debug!(what, error = %e, ?wait, "the API server has not taken in the pod yet; retrying");
                    tokio::time::sleep(*wait).await;
                }
                None => return Err(e),
            },
            other => return other,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    fn api(code: u16, message: &str) -> kube::Error {
        kube::Error::Api(
            kube::core::Status::failure(message, "x")
                .with_code(code)
                .boxed(),
        )
    }

    #[test]
    fn only_the_lag_of_a_new_pod_is_lag() {
        let forbidden = r#"secrets "s" is forbidden: User "system:node:n" cannot get resource "secrets" in API group "" in the namespace "ns": no relationship found between node 'n' and this object"#;
        let table = [
            (api(403, forbidden), None, true),
            (api(403, "secrets \"s\" is forbidden: other"), None, false),
            (api(404, r#"pod "p" not found"#), Some("p"), true),
            (api(404, r#"pods "p" not found"#), Some("p"), true),
            // The account missing, or another pod: not the lag.
            (
                api(404, r#"serviceaccounts "p" not found"#),
                Some("p"),
                false,
            ),
            (api(404, r#"pod "q" not found"#), Some("p"), false),
            (api(404, r#"pod "p" not found"#), None, false),
            (api(500, forbidden), None, false),
        ];
        for (i, (e, pod, want)) in table.iter().enumerate() {
            assert_eq!(is_lag(e, *pod), *want, "case {i}: {e}");
        }
    }

    /// Calls until `lagging` refusals have been answered, then succeeds: (calls, time taken).
    async fn run(lagging: usize, other: bool) -> (usize, Duration, bool) {
        let calls = AtomicUsize::new(0);
        let start = tokio::time::Instant::now();
        let result = retrying_lag("secret", None, || {
            let n = calls.fetch_add(1, Ordering::SeqCst);
            async move {
                match n < lagging {
                    true if other => Err(api(403, "forbidden for another reason")),
                    true => Err(api(
                        403,
                        "no relationship found between node 'n' and this object",
                    )),
                    false => Ok(()),
                }
            }
        })
        .await;
        (
            calls.load(Ordering::SeqCst),
            start.elapsed(),
            result.is_ok(),
        )
    }

    #[tokio::test(start_paused = true)]
    async fn a_lagging_read_is_retried_for_70_ms_at_most() {
        let ms = Duration::from_millis;
        assert_eq!(run(0, false).await, (1, ms(0), true));
        assert_eq!(run(2, false).await, (3, ms(30), true));
        assert_eq!(run(3, false).await, (4, ms(70), true));
        // Still refused after the last wait: the refusal is returned.
        assert_eq!(run(9, false).await, (4, ms(70), false));
        // Any other failure at once.
        assert_eq!(run(9, true).await, (1, ms(0), false));
    }
}
