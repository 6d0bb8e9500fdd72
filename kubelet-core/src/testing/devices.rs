//! A device plugin that answers every call with nothing, for tests of the device manager's
//! bookkeeping (allocations, capacity, accessors) where the plugin's answers do not matter.

use async_trait::async_trait;

use crate::devices::{ContainerAllocation, DevicePlugin, DevicePluginError};

/// `Allocate` answers an empty allocation, `PreStartContainer` succeeds,
/// `GetPreferredAllocation` prefers nothing.
#[derive(Debug, Default)]
pub struct NoopDevicePlugin;

#[async_trait]
impl DevicePlugin for NoopDevicePlugin {
    async fn allocate(&self, _: &[String]) -> Result<ContainerAllocation, DevicePluginError> {
        Ok(ContainerAllocation::default())
    }
    async fn pre_start_container(&self, _: &[String]) -> Result<(), DevicePluginError> {
        Ok(())
    }
    async fn preferred_allocation(
        &self,
        _: &[String],
        _: &[String],
        _: usize,
    ) -> Result<Vec<String>, DevicePluginError> {
        Ok(Vec::new())
    }
}
