//! The kubelet's client of a plugin's registration socket (`pluginregistration.Registration`):
//! `GetInfo` and `NotifyRegistrationStatus`, each under its deadline.

use std::path::Path;
use std::time::Duration;

use tonic::transport::Channel;

use super::api;
use super::api::registration_client::RegistrationClient as GeneratedClient;

/// A connection to one plugin's registration socket.
pub(crate) struct RegistrationClient {
    client: GeneratedClient<Channel>,
}

impl RegistrationClient {
    /// Connects to `socket`, trying until `timeout` (Go's `dial` with `WithBlock`).
    pub async fn dial(socket: &Path, timeout: Duration) -> Result<RegistrationClient, String> {
        let channel = crate::uds::dial(socket, timeout).await?;
        Ok(RegistrationClient {
            client: GeneratedClient::new(channel),
        })
    }

    /// Asks the plugin who it is.
    pub async fn get_info(&mut self, timeout: Duration) -> Result<api::PluginInfo, String> {
        let request = with_deadline(api::InfoRequest {}, timeout);
        call(timeout, self.client.get_info(request)).await
    }

    /// Tells the plugin whether it was registered, and why not.
    pub async fn notify(
        &mut self,
        registered: bool,
        error: &str,
        timeout: Duration,
    ) -> Result<(), String> {
        let status = api::RegistrationStatus {
            plugin_registered: registered,
            error: error.to_string(),
        };
        let request = with_deadline(status, timeout);
        call(timeout, self.client.notify_registration_status(request))
            .await
            .map(|_| ())
    }
}

/// `message` carrying the call's deadline, for the plugin to see.
fn with_deadline<T>(message: T, timeout: Duration) -> tonic::Request<T> {
    let mut request = tonic::Request::new(message);
    request.set_timeout(timeout);
    request
}

/// Awaits a call for at most `timeout`; failures read as Go prints them.
async fn call<T>(
    timeout: Duration,
    call: impl std::future::Future<Output = Result<tonic::Response<T>, tonic::Status>>,
) -> Result<T, String> {
    match tokio::time::timeout(timeout, call).await {
        Ok(Ok(response)) => Ok(response.into_inner()),
        Ok(Err(status)) => Err(crate::uds::status_message(&status)),
        Err(_) => Err(format!(
            "rpc error: code = DeadlineExceeded desc = context deadline exceeded (no answer within {}s)",
            timeout.as_secs_f64()
        )),
    }
}
