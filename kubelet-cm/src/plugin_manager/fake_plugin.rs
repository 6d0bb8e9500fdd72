//! A fake plugin for the tests: the `pluginregistration.Registration` service on a real
//! unix socket, answering `GetInfo` with a set [`api::PluginInfo`] and passing on every
//! `NotifyRegistrationStatus` it gets.

use std::path::PathBuf;
use std::time::Duration;

use tokio::net::UnixListener;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_stream::wrappers::UnixListenerStream;
use tokio_util::sync::CancellationToken;
use tonic::{Request, Response, Status};

use super::api;
use super::api::registration_server::{Registration, RegistrationServer};

/// The longest a test waits for a notification.
const WAIT: Duration = Duration::from_secs(15);

/// The `Registration` service of a fake plugin.
pub(crate) struct FakeRegistration {
    info: api::PluginInfo,
    statuses: mpsc::Sender<api::RegistrationStatus>,
}

/// What the fake's plugin was told.
pub(crate) struct Statuses(mpsc::Receiver<api::RegistrationStatus>);

impl Statuses {
    /// The next `NotifyRegistrationStatus`; fails the test after a while.
    pub async fn next(&mut self) -> api::RegistrationStatus {
        tokio::time::timeout(WAIT, self.0.recv())
            .await
            .expect("no registration status in time")
            .expect("the fake plugin is gone")
    }

    /// Nothing more was notified.
    pub fn none_yet(&mut self) -> bool {
        self.0.try_recv().is_err()
    }
}

/// The service answering `GetInfo` with `info`, and where its notifications go.
pub(crate) fn service(info: api::PluginInfo) -> (RegistrationServer<FakeRegistration>, Statuses) {
    let (tx, rx) = mpsc::channel(64);
    let service = FakeRegistration { info, statuses: tx };
    (RegistrationServer::new(service), Statuses(rx))
}

/// `PluginInfo` of a plugin.
pub(crate) fn info(
    plugin_type: &str,
    name: &str,
    endpoint: &str,
    versions: &[&str],
) -> api::PluginInfo {
    api::PluginInfo {
        r#type: plugin_type.to_string(),
        name: name.to_string(),
        endpoint: endpoint.to_string(),
        supported_versions: versions.iter().map(|v| v.to_string()).collect(),
    }
}

#[tonic::async_trait]
impl Registration for FakeRegistration {
    async fn get_info(
        &self,
        _: Request<api::InfoRequest>,
    ) -> Result<Response<api::PluginInfo>, Status> {
        Ok(Response::new(self.info.clone()))
    }

    async fn notify_registration_status(
        &self,
        request: Request<api::RegistrationStatus>,
    ) -> Result<Response<api::RegistrationStatusResponse>, Status> {
        let _ = self.statuses.try_send(request.into_inner());
        Ok(Response::new(api::RegistrationStatusResponse {}))
    }
}

/// A fake plugin serving only `Registration`.
pub(crate) struct FakeRegistrar {
    pub socket: PathBuf,
    pub statuses: Statuses,
    shutdown: CancellationToken,
    server: JoinHandle<()>,
}

impl FakeRegistrar {
    /// Serves on `socket` (binding creates it).
    pub async fn serve(socket: PathBuf, info: api::PluginInfo) -> FakeRegistrar {
        let (service, statuses) = service(info);
        let listener = UnixListener::bind(&socket).unwrap();
        let shutdown = CancellationToken::new();
        let server = tonic::transport::Server::builder()
            .add_service(service)
            .serve_with_incoming_shutdown(
                UnixListenerStream::new(listener),
                shutdown.clone().cancelled_owned(),
            );
        let server = tokio::spawn(async move { server.await.unwrap() });
        FakeRegistrar {
            socket,
            statuses,
            shutdown,
            server,
        }
    }

    /// Removes the socket and stops serving: the plugin is gone.
    pub async fn stop(self) {
        let _ = std::fs::remove_file(&self.socket);
        self.shutdown.cancel();
        tokio::time::timeout(WAIT, self.server)
            .await
            .expect("the fake plugin did not stop")
            .unwrap();
    }
}
