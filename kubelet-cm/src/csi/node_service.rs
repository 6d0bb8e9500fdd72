//! The [`CsiNodeService`] the volume manager calls: each call goes to the registered driver
//! of that name ([`CsiDrivers`]), over a connection made for the call, under Go's CSI
//! timeout.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use kubelet_core::csi::{
    CsiCallError, CsiExpandRequest, CsiMountRequest, CsiNodeService, CsiVolumeUsage,
};

use super::client::{CsiError, CsiNodeClient};
use super::CsiDrivers;

/// The longest one call to a driver takes (Go's `csiTimeout`).
pub const CSI_TIMEOUT: Duration = Duration::from_secs(120);
/// The longest the driver's socket takes to accept.
const DIAL_TIMEOUT: Duration = Duration::from_secs(10);

/// Calls registered CSI drivers over gRPC. See the module docs.
#[derive(Debug, Clone)]
pub struct GrpcCsiNodeService {
    drivers: Arc<CsiDrivers>,
}

impl GrpcCsiNodeService {
    /// A service over the drivers registered in `drivers`.
    pub fn new(drivers: Arc<CsiDrivers>) -> Self {
        GrpcCsiNodeService { drivers }
    }

    async fn client(&self, driver: &str) -> Result<CsiNodeClient, CsiCallError> {
        let d = self
            .drivers
            .get(driver)
            .ok_or_else(|| CsiCallError::NotRegistered(driver.to_string()))?;
        CsiNodeClient::dial(&d.endpoint, DIAL_TIMEOUT)
            .await
            .map_err(driver_error)
    }
}

fn driver_error(e: CsiError) -> CsiCallError {
    CsiCallError::Driver(e.to_string())
}

#[async_trait]
impl CsiNodeService for GrpcCsiNodeService {
    async fn supports_stage(&self, driver: &str) -> Result<bool, CsiCallError> {
        let mut c = self.client(driver).await?;
        c.supports_stage(CSI_TIMEOUT).await.map_err(driver_error)
    }

    async fn stage(&self, driver: &str, request: &CsiMountRequest) -> Result<(), CsiCallError> {
        let mut c = self.client(driver).await?;
        c.stage(request, CSI_TIMEOUT).await.map_err(driver_error)
    }

    async fn publish(&self, driver: &str, request: &CsiMountRequest) -> Result<(), CsiCallError> {
        let mut c = self.client(driver).await?;
        c.publish(request, CSI_TIMEOUT).await.map_err(driver_error)
    }

    async fn unpublish(
        &self,
        driver: &str,
        volume_id: &str,
        target_path: &str,
    ) -> Result<(), CsiCallError> {
        let mut c = self.client(driver).await?;
        c.unpublish(volume_id, target_path, CSI_TIMEOUT)
            .await
            .map_err(driver_error)
    }

    async fn unstage(
        &self,
        driver: &str,
        volume_id: &str,
        staging_path: &str,
    ) -> Result<(), CsiCallError> {
        let mut c = self.client(driver).await?;
        c.unstage(volume_id, staging_path, CSI_TIMEOUT)
            .await
            .map_err(driver_error)
    }

    async fn expand(&self, driver: &str, request: &CsiExpandRequest) -> Result<bool, CsiCallError> {
        let mut c = self.client(driver).await?;
        c.expand(request, CSI_TIMEOUT).await.map_err(driver_error)
    }

    async fn volume_stats(
        &self,
        driver: &str,
        volume_id: &str,
        volume_path: &str,
    ) -> Result<Option<CsiVolumeUsage>, CsiCallError> {
        let mut c = self.client(driver).await?;
        c.volume_stats(volume_id, volume_path, CSI_TIMEOUT)
            .await
            .map_err(driver_error)
    }
}
