//! What a CSI driver's `CSIDriver` object says and the checks made with it (Go's defaults
//! without one): whether its volumes need attaching, whether it wants the pod's attributes,
//! its `fsGroupPolicy`, and the lifecycle modes it takes.

/// What the driver's CSIDriver object says (Go's defaults without one).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DriverPolicy {
    /// `attachRequired` (true without the object).
    pub attach_required: bool,
    /// `podInfoOnMount`.
    pub pod_info_on_mount: bool,
    /// `fsGroupPolicy` (`ReadWriteOnceWithFSType` by default).
    pub fs_group_policy: String,
}

impl DriverPolicy {
    /// From the CSIDriver object, or Go's defaults without one.
    pub fn of(driver: Option<&k8s_openapi::api::storage::v1::CSIDriver>) -> Self {
        let spec = driver.map(|d| &d.spec);
        DriverPolicy {
            attach_required: spec.is_none_or(|s| s.attach_required.unwrap_or(true)),
            pod_info_on_mount: spec.and_then(|s| s.pod_info_on_mount).unwrap_or(false),
            fs_group_policy: spec
                .and_then(|s| s.fs_group_policy.clone())
                .unwrap_or_else(|| "ReadWriteOnceWithFSType".into()),
        }
    }

    /// Go's `supportsFSGroup`.
    pub fn applies_fs_group(&self, fs_type: &str, access_modes: Option<&[String]>) -> bool {
        match self.fs_group_policy.as_str() {
            "None" => false,
            "File" => true,
            _ => {
                !fs_type.is_empty()
                    && access_modes.is_some_and(|m| m.iter().any(|a| a == "ReadWriteOnce"))
            }
        }
    }
}

/// Go's check that the driver takes volumes of this lifecycle mode (`Persistent` or
/// `Ephemeral`): without a CSIDriver object only persistent ones; with one, the modes it
/// lists (`Persistent` when it lists none, the API server's default).
pub fn check_lifecycle_mode(
    driver: &str,
    object: Option<&k8s_openapi::api::storage::v1::CSIDriver>,
    mode: &str,
) -> Result<(), String> {
    let Some(object) = object else {
        if mode == "Persistent" {
            return Ok(());
        }
        return Err(format!(
            "volume mode {mode:?} not supported by driver {driver} (no CSIDriver object)"
        ));
    };
    let modes = object
        .spec
        .volume_lifecycle_modes
        .clone()
        .filter(|m| !m.is_empty())
        .unwrap_or_else(|| vec!["Persistent".to_string()]);
    if modes.iter().any(|m| m == mode) {
        return Ok(());
    }
    let quoted: Vec<String> = modes.iter().map(|m| format!("{m:?}")).collect();
    Err(format!(
        "volume mode {mode:?} not supported by driver {driver} (only supports [{}])",
        quoted.join(" ")
    ))
}
