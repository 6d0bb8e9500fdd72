//! Every feature gate the Go kubelet accepts in a release from 1.25 to 1.37, with its spec in
//! the newest release that has it (generated from `pkg/features/kube_features.go` and the
//! component-base, generic-apiserver and client-go gates the kubelet registers; see
//! [`super`] for how it is used). A trailing comment marks a row whose data was inferred
//! rather than read from that release's source.
//!
//! Fields: name, default, pre-release stage, locked to its default, the first release in
//! 1.25..1.37 that has it, the first release that no longer does.

use super::{gate, Gate, Stage::*};

/// Every gate, sorted by name (byte order).
#[rustfmt::skip]
pub const GATES: &[Gate] = &[
    gate("APIListChunking", true, Ga, true, "1.25", Some("1.32")), // removed between snapshots 1.31-dev and 1.34-dev; version inferred ('remove in 1.32')
    gate("APIPriorityAndFairness", true, Ga, true, "1.25", Some("1.31")),
    gate("APIResponseCompression", true, Beta, false, "1.25", None), // generic apiserver
    gate("APISelfSubjectReview", true, Ga, true, "1.26", Some("1.30")), // removed between snapshots 1.28.x and 1.30-dev; version inferred
    gate("APIServerIdentity", true, Beta, false, "1.25", None), // generic apiserver
    gate("APIServerTracing", true, Ga, true, "1.25", Some("1.37")), // CHANGELOG-1.37
    gate("APIServerWebhookAuthenticationToken", false, Alpha, false, "1.37", None), // from 1.37 docs only
    gate("APIServingWithRoutine", false, Alpha, false, "1.30", None), // generic apiserver
    gate("AdmissionWebhookMatchConditions", true, Ga, true, "1.27", Some("1.33")), // removed between snapshots 1.31-dev and 1.34-dev; version inferred
    gate("AdvancedAuditing", true, Ga, true, "1.25", Some("1.28")),
    gate("AggregatedDiscoveryEndpoint", true, Ga, true, "1.26", Some("1.33")), // removed between snapshots 1.31-dev and 1.34-dev; version inferred
    gate("AggregatedDiscoveryRemoveBetaType", true, Deprecated, true, "1.33", None), // generic apiserver
    gate("AllAlpha", false, Alpha, false, "1.25", None), // featuregate built-in (Version 0.0)
    gate("AllBeta", false, Beta, false, "1.25", None), // featuregate built-in (Version 0.0)
    gate("AllowDNSOnlyNodeCSR", false, Deprecated, false, "1.31", None),
    gate("AllowInsecureBackendProxy", true, Ga, true, "1.25", Some("1.26")), // removal version from website 'Feature gates (removed)' table; not seen in any code snapshot; lock assumed
    gate("AllowInsecureKubeletCertificateSigningRequests", false, Deprecated, false, "1.31", None), // may have been named DisableKubeletCSRAdmissionValidation during 1.31 dev
    gate("AllowOverwriteTerminationGracePeriodSeconds", false, Deprecated, true, "1.32", None),
    gate("AllowParsingUserUIDFromCertAuth", true, Beta, false, "1.33", None), // generic apiserver
    gate("AllowServiceLBStatusOnNonLB", false, Deprecated, true, "1.29", Some("1.35")), // removed between snapshots 1.34-dev and 1.36-dev; version inferred
    gate("AllowUnsafeMalformedObjectDeletion", true, Beta, false, "1.32", None), // beta/default-on in 1.37 per docs (alpha 1.32-1.36)
    gate("AnonymousAuthConfigurableEndpoints", true, Ga, true, "1.31", None), // generic apiserver
    gate("AnyVolumeDataSource", true, Ga, true, "1.25", Some("1.37")), // CHANGELOG-1.37
    gate("AppArmor", true, Ga, true, "1.25", Some("1.33")),
    gate("AppArmorFields", true, Ga, true, "1.30", Some("1.33")),
    gate("AtomicFIFO", true, Beta, false, "1.36", None), // client-go
    gate("AtomicWriteVolumeUserFields", false, Alpha, false, "1.37", None), // from 1.37 docs only
    gate("AuthorizeNodeWithSelectors", true, Ga, true, "1.31", None),
    gate("AuthorizePodWebsocketUpgradeCreatePermission", true, Beta, false, "1.35", None),
    gate("AuthorizeWithSelectors", true, Ga, true, "1.31", None), // generic apiserver
    gate("BtreeWatchCache", true, Ga, true, "1.32", Some("1.37")), // CHANGELOG-1.37
    gate("CBORServingAndStorage", false, Alpha, false, "1.32", None), // generic apiserver
    gate("CPUManager", true, Ga, true, "1.25", Some("1.33")), // removed between snapshots 1.32-dev and 1.33-dev; version inferred
    gate("CPUManagerPolicyAlphaOptions", false, Alpha, false, "1.25", None),
    gate("CPUManagerPolicyBetaOptions", true, Beta, false, "1.25", None),
    gate("CPUManagerPolicyOptions", true, Ga, true, "1.25", None),
    gate("CRDObservedGenerationTracking", true, Beta, false, "1.35", None), // apiextensions; default true from 1.36
    gate("CRDValidationRatcheting", true, Ga, true, "1.28", None), // apiextensions
    gate("CRIListStreaming", false, Alpha, false, "1.36", None),
    gate("CSIInlineVolume", true, Ga, true, "1.25", Some("1.27")),
    gate("CSIMigration", true, Ga, true, "1.25", Some("1.27")),
    gate("CSIMigrationAWS", true, Ga, true, "1.25", Some("1.27")),
    gate("CSIMigrationAzureDisk", true, Ga, true, "1.25", Some("1.27")),
    gate("CSIMigrationAzureFile", true, Ga, true, "1.25", Some("1.29")), // removed between snapshots 1.28.x and 1.30-dev; version inferred
    gate("CSIMigrationGCE", true, Ga, true, "1.25", Some("1.28")),
    gate("CSIMigrationOpenStack", true, Ga, true, "1.25", Some("1.26")), // removal version from website 'Feature gates (removed)' table
    gate("CSIMigrationPortworx", true, Ga, true, "1.25", Some("1.36")),
    gate("CSIMigrationRBD", false, Deprecated, false, "1.25", Some("1.31")),
    gate("CSIMigrationvSphere", true, Ga, true, "1.25", Some("1.29")),
    gate("CSINodeExpandSecret", true, Ga, true, "1.25", Some("1.31")),
    gate("CSIServiceAccountTokenSecrets", true, Ga, true, "1.35", None),
    gate("CSIStorageCapacity", true, Ga, true, "1.25", Some("1.28")),
    gate("CSIVolumeFSGroupPolicy", true, Ga, true, "1.25", Some("1.26")), // removal version from website 'Feature gates (removed)' table
    gate("CSIVolumeHealth", false, Alpha, false, "1.25", None),
    gate("CSRDuration", true, Ga, true, "1.25", Some("1.26")),
    gate("ChangeContainerStatusOnKubeletRestart", false, Deprecated, false, "1.35", None),
    gate("ClearingNominatedNodeNameAfterBinding", true, Beta, false, "1.34", None),
    gate("ClientsAllowCARotation", true, Beta, false, "1.36", None), // client-go; seen only in 1.36 reference docs
    gate("ClientsAllowCBOR", false, Alpha, false, "1.32", None), // client-go
    gate("ClientsAllowTLSCacheGC", true, Beta, false, "1.36", None), // client-go; seen only in 1.36 reference docs
    gate("ClientsPreferCBOR", false, Alpha, false, "1.32", None), // client-go
    gate("CloudControllerManagerWatchBasedRoutesReconciliation", false, Alpha, false, "1.35", None), // controller-manager gate relisted in pkg/features
    gate("CloudControllerManagerWebhook", false, Alpha, false, "1.27", None), // controller-manager gate relisted in pkg/features
    gate("CloudDualStackNodeIPs", true, Ga, true, "1.27", Some("1.32")),
    gate("ClusterTrustBundle", true, Ga, false, "1.27", None), // GA/default-on 1.37, not marked locked in website gate doc
    gate("ClusterTrustBundleProjection", true, Ga, false, "1.29", None), // GA/default-on 1.37, not marked locked in website gate doc
    gate("ComponentFlagz", true, Beta, false, "1.32", None), // component-base zpages
    gate("ComponentSLIs", true, Ga, true, "1.26", Some("1.35")), // component-base metrics; removal version from website 'Feature gates (removed)' table
    gate("ComponentStatusz", true, Beta, false, "1.32", None), // component-base zpages
    gate("CompositePodGroup", false, Alpha, false, "1.37", None),
    gate("ConcurrentWatchObjectDecode", true, Beta, false, "1.31", None), // generic apiserver; default true in 1.37 per docs
    gate("ConfigurableFSGroupPolicy", true, Ga, true, "1.25", Some("1.26")), // removal version from website 'Feature gates (removed)' table
    gate("ConsistentHTTPGetHandlers", true, Ga, true, "1.26", Some("1.31")),
    gate("ConsistentListFromCache", true, Ga, true, "1.28", Some("1.37")), // CHANGELOG-1.37
    gate("ConsistentListFromCacheSkipTimeoutFallback", false, Alpha, false, "1.37", None), // from CHANGELOG-1.37 only
    gate("ConstrainedImpersonation", true, Beta, false, "1.35", None), // generic apiserver
    gate("ContainerCheckpoint", true, Beta, false, "1.25", None),
    gate("ContainerRestartRules", true, Beta, false, "1.34", None),
    gate("ContainerStopSignals", false, Alpha, false, "1.33", None),
    gate("ContextualLogging", true, Beta, false, "1.25", None), // component-base logs; registered by cmd/kubelet/app init
    gate("ControllerManagerLeaderMigration", true, Ga, true, "1.25", Some("1.27")),
    gate("ControllerManagerReleaseLeaderElectionLockOnExit", false, Alpha, false, "1.36", None),
    gate("CoordinatedLeaderElection", false, Beta, false, "1.31", None), // generic apiserver
    gate("CronJobTimeZone", true, Ga, true, "1.25", Some("1.29")),
    gate("CronJobsScheduledAnnotation", true, Ga, true, "1.28", Some("1.35")), // removed between snapshots 1.34-dev and 1.36-dev; version inferred
    gate("CrossNamespaceVolumeDataSource", false, Alpha, false, "1.26", None),
    gate("CustomCPUCFSQuotaPeriod", true, Ga, false, "1.25", None), // Go identifier CPUCFSQuotaPeriod; alpha 1.12-1.35, GA/default-on from 1.36 per website gate doc (absent from 1.36 alpha/beta list); lock not stated
    gate("CustomResourceFieldSelectors", true, Ga, true, "1.30", None), // apiextensions
    gate("CustomResourceValidationExpressions", true, Ga, true, "1.25", Some("1.31")),
    gate("DRAAdminAccess", true, Ga, true, "1.32", None),
    gate("DRAConsumableCapacity", true, Beta, false, "1.34", None),
    gate("DRAControlPlaneController", false, Alpha, false, "1.31", Some("1.32")),
    gate("DRADerivedAttributes", false, Alpha, false, "1.37", None),
    gate("DRADeviceBindingConditions", true, Beta, false, "1.34", None),
    gate("DRADeviceCompatibilityGroups", false, Alpha, false, "1.37", None),
    gate("DRADeviceTaintRules", true, Ga, false, "1.35", None), // GA 1.37 unlocked (lock planned 1.38)
    gate("DRADeviceTaints", true, Ga, false, "1.33", None), // GA 1.37 unlocked (lock planned 1.38)
    gate("DRAExtendedResource", true, Ga, true, "1.34", None),
    gate("DRAFractionalCapacityRange", true, Beta, false, "1.37", None), // two 1.37 specs: default false, or true with MinCompatibilityVersion 1.37
    gate("DRAListTypeAttributes", false, Alpha, false, "1.36", None),
    gate("DRANodeAllocatableResources", false, Alpha, false, "1.36", None),
    gate("DRAOptionalNodeOperations", false, Alpha, false, "1.37", None),
    gate("DRAPartitionableDevices", true, Beta, false, "1.33", None),
    gate("DRAPartitionableDevicesType", false, Alpha, false, "1.37", None), // from 1.37 docs only
    gate("DRAPrioritizedList", true, Ga, true, "1.33", None),
    gate("DRAResourceClaimDeviceStatus", true, Ga, true, "1.32", None),
    gate("DRAResourceClaimGranularStatusAuthorization", true, Beta, false, "1.36", None),
    gate("DRAResourcePoolStatus", false, Alpha, false, "1.36", None),
    gate("DRASchedulerFilterTimeout", true, Beta, false, "1.34", None),
    gate("DRAWorkloadResourceClaims", false, Beta, false, "1.36", None),
    gate("DaemonSetUpdateSurge", true, Ga, true, "1.25", Some("1.27")),
    gate("DeclarativeValidation", true, Ga, true, "1.33", None), // GA in 1.36/1.37 per docs; LockToDefault not confirmed from code
    gate("DeclarativeValidationBeta", true, Beta, false, "1.36", None), // generic apiserver
    gate("DeclarativeValidationTakeover", false, Deprecated, true, "1.33", None), // locked in 1.37 (CHANGELOG-1.37)
    gate("DefaultHostNetworkHostPortsInPodTemplates", false, Deprecated, false, "1.28", Some("1.31")), // removed between snapshots 1.30-dev and 1.31-dev; version inferred
    gate("DefaultPodSysctls", false, Alpha, false, "1.37", None), // from 1.37 docs only
    gate("DefaultPodTopologySpread", true, Ga, true, "1.25", Some("1.26")),
    gate("DelegateFSGroupToCSIDriver", true, Ga, true, "1.25", Some("1.28")),
    gate("DeploymentReplicaSetTerminatingReplicas", true, Beta, false, "1.33", None),
    gate("DetectCacheInconsistency", true, Beta, false, "1.34", None), // generic apiserver
    gate("DevicePluginCDIDevices", true, Ga, true, "1.28", Some("1.35")), // removed between snapshots 1.34-dev and 1.36-dev; version inferred
    gate("DevicePlugins", true, Ga, true, "1.25", Some("1.28")),
    gate("DisableAcceleratorUsageMetrics", true, Ga, true, "1.25", Some("1.28")),
    gate("DisableAllocatorDualWrite", true, Ga, true, "1.31", None),
    gate("DisableCPUQuotaWithExclusiveCPUs", true, Deprecated, true, "1.33", None), // beta 1.33-1.35, deprecated 1.36, deprecated+locked 1.37 (website gate doc)
    gate("DisableCloudProviders", true, Ga, true, "1.25", Some("1.33")), // removed between snapshots 1.32-dev and 1.33-dev; version inferred
    gate("DisableKubeletCloudCredentialProviders", true, Ga, true, "1.25", Some("1.33")), // removed between snapshots 1.32-dev and 1.33-dev; version inferred
    gate("DisableNodeKubeProxyVersion", true, Deprecated, false, "1.29", None),
    gate("DownwardAPIHugePages", true, Ga, true, "1.25", Some("1.29")),
    gate("DryRun", true, Ga, true, "1.25", Some("1.28")),
    gate("DynamicKubeletConfig", false, Deprecated, false, "1.25", Some("1.26")),
    gate("DynamicResourceAllocation", true, Ga, true, "1.26", None),
    gate("EfficientWatchResumption", true, Ga, true, "1.25", Some("1.33")), // removed between snapshots 1.31-dev and 1.34-dev; version inferred
    gate("ElasticIndexedJob", true, Ga, true, "1.27", Some("1.33")), // removed between snapshots 1.32-dev and 1.33-dev; version inferred
    gate("EmptyDirVolumeMode", false, Alpha, false, "1.37", None), // from 1.37 docs only
    gate("EndpointSliceTerminatingCondition", true, Ga, true, "1.25", Some("1.28")),
    gate("EnvFiles", true, Beta, false, "1.34", None),
    gate("EphemeralContainers", true, Ga, true, "1.25", Some("1.27")),
    gate("EtcdRangeStream", true, Beta, false, "1.37", None), // generic apiserver
    gate("EventedPLEG", false, Alpha, false, "1.26", None),
    gate("ExcludeAdmissionWebhookVirtualResources", true, Beta, false, "1.37", None), // from 1.37 docs only
    gate("ExecProbeTimeout", true, Ga, true, "1.25", None), // locked since 1.35
    gate("ExpandCSIVolumes", true, Ga, false, "1.25", Some("1.27")),
    gate("ExpandInUsePersistentVolumes", true, Ga, false, "1.25", Some("1.27")),
    gate("ExpandPersistentVolumes", true, Ga, false, "1.25", Some("1.27")),
    gate("ExpandedDNSConfig", true, Ga, true, "1.25", Some("1.30")), // removed between snapshots 1.28.x and 1.30-dev; version inferred ('remove in 1.30')
    gate("ExperimentalHostUserNamespaceDefaulting", false, Deprecated, true, "1.25", Some("1.30")), // removed between snapshots 1.28.x and 1.30-dev; version inferred ('remove in 1.30')
    gate("ExtendWebSocketsToKubelet", true, Beta, false, "1.36", None),
    gate("ExternalServiceAccountTokenSigner", true, Ga, true, "1.32", None), // GA in 1.36/1.37 per docs; LockToDefault not confirmed from code
    gate("GRPCContainerProbe", true, Ga, true, "1.25", Some("1.29")),
    gate("GRPCContainerProbeTLS", false, Alpha, false, "1.37", None),
    gate("GangScheduling", false, Alpha, false, "1.35", Some("1.37")), // website gate doc: alpha 1.35-1.36, removed
    gate("GenericWorkload", false, Beta, false, "1.35", None),
    gate("GitRepoVolumeDriver", false, Deprecated, false, "1.33", None),
    gate("GracefulNodeShutdown", true, Beta, false, "1.25", None),
    gate("GracefulNodeShutdownBasedOnPodPriority", true, Beta, false, "1.25", None),
    gate("H2CContainerProbe", false, Alpha, false, "1.37", None),
    gate("HPAConfigurableTolerance", true, Ga, true, "1.33", None), // GA in 1.36/1.37 per docs; LockToDefault not confirmed from code
    gate("HPAContainerMetrics", true, Ga, true, "1.25", Some("1.33")), // removed between snapshots 1.32-dev and 1.33-dev; version inferred
    gate("HPAScaleToZero", true, Beta, false, "1.25", None), // beta/default-on in 1.37 per docs
    gate("HonorPVReclaimPolicy", true, Ga, true, "1.25", None),
    gate("HostnameOverride", true, Ga, true, "1.34", None), // GA in 1.36/1.37 per docs; LockToDefault not confirmed from code
    gate("HugepageAwareEviction", true, Beta, false, "1.37", None),
    gate("IPTablesOwnershipCleanup", true, Ga, true, "1.25", Some("1.30")), // removed between snapshots 1.28.x and 1.30-dev; version inferred ('remove in 1.30')
    gate("IdentifyPodOS", true, Ga, true, "1.25", Some("1.27")),
    gate("ImageMaximumGCAge", true, Ga, true, "1.29", None),
    gate("ImageVolume", true, Ga, true, "1.31", None), // GA in 1.36/1.37 per docs; LockToDefault not confirmed from code
    gate("ImageVolumeWithDigest", false, Alpha, false, "1.35", None),
    gate("InOrderInformers", true, Ga, true, "1.33", None), // client-go; GA+locked from 1.36 (website gate doc)
    gate("InOrderInformersBatchProcess", true, Beta, false, "1.35", None), // client-go
    gate("InPlacePodLevelResourcesVerticalScaling", true, Beta, false, "1.35", None),
    gate("InPlacePodVerticalScaling", true, Ga, true, "1.27", None),
    gate("InPlacePodVerticalScalingAllocatedStatus", false, Deprecated, false, "1.32", None),
    gate("InPlacePodVerticalScalingExclusiveCPUs", false, Alpha, false, "1.32", None),
    gate("InPlacePodVerticalScalingExclusiveMemory", false, Alpha, false, "1.34", None),
    gate("InPlacePodVerticalScalingInitContainers", true, Beta, false, "1.36", None), // seen only in 1.36 reference docs
    gate("InPlacePodVerticalScalingMemoryBackedVolumes", false, Alpha, false, "1.37", None),
    gate("InPlacePodVerticalScalingSchedulerPreemption", false, Alpha, false, "1.37", None),
    gate("InTreePluginAWSUnregister", false, Alpha, false, "1.25", Some("1.31")), // removed between snapshots 1.30-dev and 1.31-dev; version inferred
    gate("InTreePluginAzureDiskUnregister", false, Alpha, false, "1.25", Some("1.31")), // removed between snapshots 1.30-dev and 1.31-dev; version inferred
    gate("InTreePluginAzureFileUnregister", false, Alpha, false, "1.25", Some("1.31")), // removed between snapshots 1.30-dev and 1.31-dev; version inferred
    gate("InTreePluginGCEUnregister", false, Alpha, false, "1.25", Some("1.31")), // removed between snapshots 1.30-dev and 1.31-dev; version inferred
    gate("InTreePluginOpenStackUnregister", false, Alpha, false, "1.25", Some("1.31")), // removed between snapshots 1.30-dev and 1.31-dev; version inferred
    gate("InTreePluginPortworxUnregister", false, Alpha, false, "1.25", Some("1.36")),
    gate("InTreePluginRBDUnregister", false, Deprecated, false, "1.25", Some("1.31")),
    gate("InTreePluginvSphereUnregister", false, Alpha, false, "1.25", Some("1.31")), // removed between snapshots 1.30-dev and 1.31-dev; version inferred
    gate("IndexedJob", true, Ga, true, "1.25", Some("1.26")),
    gate("InformerResourceVersion", true, Ga, false, "1.30", None), // client-go; GA 1.35, not locked
    gate("InterPodAffinityHostnameFastPath", false, Alpha, false, "1.37", None),
    gate("JobBackoffLimitPerIndex", true, Ga, true, "1.28", None),
    gate("JobManagedBy", true, Ga, true, "1.30", None),
    gate("JobMutableNodeSchedulingDirectives", true, Ga, true, "1.25", Some("1.29")),
    gate("JobPodFailurePolicy", true, Ga, true, "1.25", Some("1.33")),
    gate("JobPodReplacementPolicy", true, Ga, true, "1.28", None),
    gate("JobReadyPods", true, Ga, true, "1.25", Some("1.31")),
    gate("JobSuccessPolicy", true, Ga, true, "1.30", None),
    gate("JobTrackingWithFinalizers", true, Ga, true, "1.25", Some("1.29")),
    gate("KMSv1", false, Deprecated, false, "1.28", None), // generic apiserver
    gate("KMSv2", true, Ga, true, "1.25", Some("1.32")), // removed between snapshots 1.31-dev and 1.34-dev; version inferred
    gate("KMSv2KDF", true, Ga, true, "1.28", Some("1.32")), // removed between snapshots 1.31-dev and 1.34-dev; version inferred
    gate("KubeProxyDrainingTerminatingNodes", true, Ga, true, "1.28", Some("1.33")), // removed between snapshots 1.32-dev and 1.34-dev; version inferred
    gate("KubeProxyIPVS", true, Deprecated, false, "1.37", None),
    gate("KubeProxyNFTablesLocalhostNodePorts", false, Alpha, false, "1.37", None),
    gate("KubeletCgroupDriverFromCRI", true, Ga, true, "1.28", None),
    gate("KubeletCrashLoopBackOffMax", true, Beta, false, "1.32", None),
    gate("KubeletCredentialProviders", true, Ga, true, "1.25", Some("1.28")),
    gate("KubeletEnsureSecretPulledImages", true, Beta, false, "1.33", None),
    gate("KubeletFineGrainedAuthz", true, Ga, true, "1.32", None),
    gate("KubeletInUserNamespace", true, Beta, false, "1.25", None), // beta/default-on in 1.37 per docs
    gate("KubeletPSI", true, Ga, true, "1.33", None), // GA+locked 1.36 (website gate doc)
    gate("KubeletPodResources", true, Ga, true, "1.25", Some("1.30")), // removed between snapshots 1.28.x and 1.30-dev; version inferred
    gate("KubeletPodResourcesDynamicResources", true, Ga, true, "1.27", None), // GA in 1.36/1.37 per docs; LockToDefault not confirmed from code
    gate("KubeletPodResourcesGet", true, Ga, true, "1.27", None), // GA in 1.36/1.37 per docs; LockToDefault not confirmed from code
    gate("KubeletPodResourcesGetAllocatable", true, Ga, true, "1.25", Some("1.30")), // removed between snapshots 1.28.x and 1.30-dev; version inferred
    gate("KubeletPodResourcesListUseActivePods", true, Deprecated, false, "1.34", None),
    gate("KubeletRegistrationGetOnExistsOnly", false, Deprecated, false, "1.32", None),
    gate("KubeletSeparateDiskGC", true, Beta, false, "1.29", None),
    gate("KubeletServiceAccountTokenForCredentialProviders", true, Beta, false, "1.33", None),
    gate("KubeletTracing", true, Ga, true, "1.25", None),
    gate("LegacyServiceAccountTokenCleanUp", true, Ga, true, "1.28", Some("1.32")),
    gate("LegacyServiceAccountTokenNoAutoGeneration", true, Ga, true, "1.25", Some("1.29")),
    gate("LegacyServiceAccountTokenTracking", true, Ga, true, "1.26", Some("1.30")), // removed between snapshots 1.28.x and 1.30-dev; version inferred
    gate("LegacySidecarContainers", false, Deprecated, false, "1.33", Some("1.35")), // removed between snapshots 1.34-dev and 1.36-dev; version inferred
    gate("ListFromCacheSnapshot", true, Beta, false, "1.33", None), // generic apiserver
    gate("LoadBalancerIPMode", true, Ga, true, "1.29", Some("1.35")), // removed between snapshots 1.34-dev and 1.36-dev; version inferred
    gate("LocalStorageCapacityIsolation", true, Ga, true, "1.25", Some("1.27")),
    gate("LocalStorageCapacityIsolationFSQuotaMonitoring", false, Beta, false, "1.25", None), // 1.25.0 shipped it as beta/default-on; reverted to alpha in 1.25 patches
    gate("LogarithmicScaleDown", true, Ga, true, "1.25", None),
    gate("LoggingAlphaOptions", false, Alpha, false, "1.25", None), // component-base logs
    gate("LoggingBetaOptions", true, Beta, false, "1.25", None), // component-base logs
    gate("ManifestBasedAdmissionControlConfig", true, Beta, false, "1.36", None),
    gate("MatchLabelKeysInPodAffinity", true, Ga, true, "1.29", None),
    gate("MatchLabelKeysInPodTopologySpread", true, Beta, false, "1.25", None),
    gate("MatchLabelKeysInPodTopologySpreadSelectorMerge", true, Beta, false, "1.34", None),
    gate("MaxUnavailableStatefulSet", true, Beta, false, "1.25", None), // default flipped true(1.35.0-1.35.3)/false(1.35.4-1.36)/true(1.37)
    gate("MemoryManager", true, Ga, true, "1.25", Some("1.36")),
    gate("MemoryQoS", true, Beta, false, "1.25", None), // beta/default-on in 1.37 per docs
    gate("MinDomainsInPodTopologySpread", true, Ga, true, "1.25", Some("1.32")),
    gate("MinimizeIPTablesRestore", true, Ga, true, "1.26", Some("1.30")), // removed between snapshots 1.28.x and 1.30-dev; version inferred
    gate("MixedProtocolLBService", true, Ga, true, "1.25", Some("1.28")),
    gate("MultiCIDRRangeAllocator", false, Alpha, false, "1.25", Some("1.29")),
    gate("MultiCIDRServiceAllocator", true, Ga, true, "1.27", None),
    gate("MutableCSINodeAllocatableCount", true, Ga, true, "1.33", None), // GA in 1.36/1.37 per docs; LockToDefault not confirmed from code
    gate("MutablePVNodeAffinity", false, Alpha, false, "1.35", None),
    gate("MutablePodResourcesForSuspendedJobs", true, Beta, false, "1.35", None),
    gate("MutableSchedulingDirectivesForSuspendedJobs", true, Beta, false, "1.35", None),
    gate("MutatingAdmissionPolicy", true, Ga, false, "1.32", None), // GA/default-on 1.36 per docs; lock unknown; a 1.31-dev snapshot already had it
    gate("NFTablesProxyMode", true, Ga, true, "1.29", None),
    gate("NativeHistograms", true, Beta, false, "1.36", None), // component-base metrics (registered by pkg/kubelet/server)
    gate("NetworkPolicyEndPort", true, Ga, true, "1.25", Some("1.27")),
    gate("NetworkPolicyStatus", false, Alpha, false, "1.25", Some("1.28")),
    gate("NewVolumeManagerReconstruction", true, Ga, true, "1.26", Some("1.32")), // introduction version not verified
    gate("NodeDeclaredFeatures", true, Ga, true, "1.35", None),
    gate("NodeInclusionPolicyInPodTopologySpread", true, Ga, true, "1.25", None),
    gate("NodeLifecycleConditions", false, Alpha, false, "1.37", None), // from 1.37 docs only
    gate("NodeLogQuery", true, Ga, false, "1.27", None), // GA/default-on 1.36 per docs; lock unknown
    gate("NodeOutOfServiceVolumeDetach", true, Ga, true, "1.25", Some("1.32")), // removed between snapshots 1.31-dev and 1.32-dev; version inferred
    gate("NodeSwap", true, Ga, true, "1.25", None),
    gate("NominatedNodeNameForExpectation", true, Beta, false, "1.34", None),
    gate("NonPreemptingPriority", true, Ga, true, "1.25", Some("1.26")),
    gate("OpenAPIEnums", true, Beta, false, "1.25", None), // generic apiserver
    gate("OpenAPIV3", true, Ga, true, "1.25", Some("1.29")),
    gate("OpportunisticBatching", true, Beta, false, "1.35", None),
    gate("OrderedNamespaceDeletion", true, Ga, true, "1.30", Some("1.37")), // CHANGELOG-1.37
    gate("PDBUnhealthyPodEvictionPolicy", true, Ga, true, "1.26", Some("1.33")), // removed between snapshots 1.32-dev and 1.34-dev; version inferred
    gate("PLEGOnDemandRelist", true, Beta, false, "1.36", None), // seen only in 1.36 reference docs
    gate("PersistentVolumeClaimUnusedSinceTime", true, Beta, false, "1.36", None),
    gate("PersistentVolumeLastPhaseTransitionTime", true, Ga, true, "1.28", Some("1.33")), // removed between snapshots 1.32-dev and 1.34-dev; version inferred
    gate("PodAffinityNamespaceSelector", true, Ga, true, "1.25", Some("1.26")),
    gate("PodAndContainerStatsFromCRI", false, Beta, false, "1.25", None), // beta (off) in 1.37 per docs
    gate("PodCertificateRequest", true, Ga, false, "1.34", None), // GA/default-on 1.37 per docs; lock unknown
    gate("PodDeletionCost", true, Beta, false, "1.25", None),
    gate("PodDisruptionBudget", true, Ga, true, "1.25", Some("1.26")), // removal version from website 'Feature gates (removed)' table
    gate("PodDisruptionConditions", true, Ga, true, "1.25", Some("1.33")), // removed between snapshots 1.32-dev and 1.34-dev; version inferred
    gate("PodGroupPreemptionPolicy", false, Alpha, false, "1.37", None),
    gate("PodHasNetworkCondition", false, Alpha, false, "1.25", Some("1.28")), // renamed to PodReadyToStartContainersCondition
    gate("PodHostIPs", true, Ga, true, "1.28", Some("1.33")), // removed between snapshots 1.32-dev and 1.34-dev; version inferred
    gate("PodIndexLabel", true, Ga, true, "1.28", Some("1.35")), // removed between snapshots 1.34-dev and 1.36-dev; version inferred
    gate("PodLevelResourceManagers", false, Beta, false, "1.36", None),
    gate("PodLevelResources", true, Beta, false, "1.32", None),
    gate("PodLifecycleSleepAction", true, Ga, true, "1.29", None),
    gate("PodLifecycleSleepActionAllowZero", true, Ga, true, "1.32", None),
    gate("PodLogsQuerySplitStreams", false, Alpha, false, "1.32", None),
    gate("PodObservedGenerationTracking", true, Ga, true, "1.33", None),
    gate("PodOverhead", true, Ga, true, "1.25", Some("1.26")),
    gate("PodReadyToStartContainersCondition", true, Ga, true, "1.28", None), // GA in 1.36/1.37 per docs; LockToDefault not confirmed from code
    gate("PodSchedulingReadiness", true, Ga, true, "1.26", None),
    gate("PodSecurity", true, Ga, true, "1.25", Some("1.28")),
    gate("PodTopologyLabelsAdmission", true, Beta, false, "1.33", None),
    gate("PodsAPI", true, Beta, false, "1.36", None),
    gate("PortForwardWebsockets", true, Beta, false, "1.30", None),
    gate("PreferNominatedNode", true, Ga, true, "1.25", Some("1.26")),
    gate("PreferSameTrafficDistribution", true, Ga, true, "1.33", None),
    gate("PreventStaticPodAPIReferences", true, Beta, false, "1.34", None),
    gate("ProbeTerminationGracePeriod", true, Ga, true, "1.25", Some("1.29")),
    gate("ProcMountType", true, Ga, true, "1.25", None), // GA in 1.36/1.37 per docs; LockToDefault not confirmed from code
    gate("ProxyTerminatingEndpoints", true, Ga, true, "1.25", Some("1.30")), // removed between snapshots 1.28.x and 1.30-dev; version inferred
    gate("QOSReserved", false, Alpha, false, "1.25", None),
    gate("ReadWriteOncePod", true, Ga, true, "1.25", Some("1.31")),
    gate("RecoverVolumeExpansionFailure", true, Ga, true, "1.25", None),
    gate("RecursiveReadOnlyMounts", true, Ga, true, "1.30", None),
    gate("ReduceDefaultCrashLoopBackOffDecay", false, Alpha, false, "1.33", None),
    gate("RelaxedDNSSearchValidation", true, Ga, true, "1.32", Some("1.37")), // CHANGELOG-1.37
    gate("RelaxedEnvironmentVariableValidation", true, Ga, true, "1.30", None),
    gate("RelaxedServiceNameValidation", true, Ga, true, "1.34", None), // GA in 1.36/1.37 per docs; LockToDefault not confirmed from code
    gate("ReloadKubeletClientCAFile", true, Beta, false, "1.36", None), // seen only in 1.36 reference docs
    gate("ReloadKubeletServerCertificateFile", true, Beta, false, "1.31", None),
    gate("RemainingItemCount", true, Ga, true, "1.25", Some("1.33")), // removed between snapshots 1.31-dev and 1.34-dev; version inferred
    gate("RemoteRequestHeaderUID", true, Beta, false, "1.32", None), // generic apiserver
    gate("RemoveSelfLink", true, Ga, true, "1.25", Some("1.30")), // generic apiserver, never relisted; removal version is a guess (present 1.26-dev, absent 1.34-dev)
    gate("ResilientWatchCacheInitialization", true, Ga, true, "1.31", Some("1.37")), // CHANGELOG-1.37
    gate("ResourceHealthStatus", true, Beta, false, "1.31", None),
    gate("ResourceHealthStatusMessage", true, Beta, false, "1.36", None),
    gate("RestartAllContainersOnContainerExits", true, Beta, false, "1.35", None),
    gate("RetroactiveDefaultStorageClass", true, Ga, true, "1.25", Some("1.29")),
    gate("RetryGenerateName", true, Ga, true, "1.30", Some("1.37")), // CHANGELOG-1.37
    gate("RotateKubeletServerCertificate", true, Beta, false, "1.25", None),
    gate("RuntimeClassInImageCriApi", false, Alpha, false, "1.29", None), // Go identifier RuntimeClassInImageCriAPI
    gate("SELinuxChangePolicy", true, Ga, true, "1.32", None), // GA in 1.36/1.37 per docs; LockToDefault not confirmed from code
    gate("SELinuxMount", true, Ga, false, "1.30", None), // GA/default-on 1.37, not marked locked in website gate doc
    gate("SELinuxMountReadWriteOncePod", true, Ga, false, "1.25", None), // GA 1.36, not marked locked in website gate doc
    gate("SchedulerAsyncAPICalls", false, Beta, false, "1.34", None), // 1.34 spec later changed to default false
    gate("SchedulerAsyncPreemption", true, Beta, false, "1.32", None),
    gate("SchedulerPopFromBackoffQ", true, Beta, false, "1.33", None),
    gate("SchedulerPreQueueingHints", false, Alpha, false, "1.37", None),
    gate("SchedulerQueueingHints", true, Ga, true, "1.28", None),
    gate("SeccompDefault", true, Ga, true, "1.25", Some("1.29")),
    gate("SecurityContextDeny", false, Alpha, false, "1.27", Some("1.30")), // removed between snapshots 1.28.x and 1.30-dev; version inferred
    gate("SelectorIndex", true, Ga, true, "1.25", Some("1.26")), // removal version from website 'Feature gates (removed)' table; not seen in any code snapshot
    gate("SeparateCacheWatchRPC", false, Deprecated, false, "1.28", None), // generic apiserver
    gate("SeparateTaintEvictionController", true, Ga, true, "1.29", None),
    gate("ServerSideApply", true, Ga, true, "1.25", Some("1.32")), // removed between snapshots 1.31-dev and 1.34-dev; version inferred
    gate("ServerSideFieldValidation", true, Ga, true, "1.25", Some("1.32")), // removed between snapshots 1.31-dev and 1.34-dev; version inferred
    gate("ServiceAccountNodeAudienceRestriction", true, Beta, false, "1.32", None),
    gate("ServiceAccountTokenJTI", true, Ga, true, "1.29", None),
    gate("ServiceAccountTokenNodeBinding", true, Ga, true, "1.29", None),
    gate("ServiceAccountTokenNodeBindingValidation", true, Ga, true, "1.29", None),
    gate("ServiceAccountTokenPodNodeInfo", true, Ga, true, "1.29", None),
    gate("ServiceIPStaticSubrange", true, Ga, true, "1.25", Some("1.28")),
    gate("ServiceInternalTrafficPolicy", true, Ga, true, "1.25", Some("1.28")),
    gate("ServiceLBNodePortControl", true, Ga, true, "1.25", Some("1.26")),
    gate("ServiceLoadBalancerClass", true, Ga, true, "1.25", Some("1.26")),
    gate("ServiceNodePortStaticSubrange", true, Ga, true, "1.27", Some("1.31")),
    gate("ServiceTrafficDistribution", true, Ga, true, "1.30", Some("1.36")),
    gate("ShardedListAndWatch", false, Alpha, false, "1.36", None), // generic apiserver
    gate("SidecarContainers", true, Ga, true, "1.28", Some("1.37")), // CHANGELOG-1.37
    gate("SizeBasedListCostEstimate", true, Beta, false, "1.34", None), // generic apiserver
    gate("SizeMemoryBackedVolumes", true, Ga, true, "1.25", Some("1.35")), // removed between snapshots 1.34-dev and 1.36-dev; version inferred
    gate("SkipReadOnlyValidationGCE", true, Deprecated, false, "1.28", Some("1.31")),
    gate("StableLoadBalancerNodeSet", true, Ga, true, "1.27", Some("1.32")), // removed between snapshots 1.31-dev and 1.32-dev; version inferred
    gate("StaleControllerConsistencyDaemonSet", true, Beta, false, "1.36", None),
    gate("StaleControllerConsistencyJob", true, Beta, false, "1.36", None),
    gate("StaleControllerConsistencyReplicaSet", true, Beta, false, "1.36", None),
    gate("StaleControllerConsistencyStatefulSet", true, Beta, false, "1.36", None),
    gate("StatefulSetAutoDeletePVC", true, Ga, true, "1.25", Some("1.35")), // removed between snapshots 1.34-dev and 1.36-dev; version inferred
    gate("StatefulSetMinReadySeconds", true, Ga, true, "1.25", Some("1.27")),
    gate("StatefulSetRecreateStrategy", false, Alpha, false, "1.37", None), // from 1.37 docs only
    gate("StatefulSetSemanticRevisionComparison", true, Beta, false, "1.35", None), // spec version 1.0; mitigation for a 1.34 regression, may also exist in 1.34.x patches
    gate("StatefulSetStartOrdinal", true, Ga, true, "1.26", Some("1.33")), // removed between snapshots 1.32-dev and 1.34-dev; version inferred
    gate("StorageCapacityScoring", true, Beta, false, "1.33", None),
    gate("StorageNamespaceIndex", true, Deprecated, false, "1.30", None),
    gate("StorageVersionAPI", false, Alpha, false, "1.25", None), // generic apiserver
    gate("StorageVersionHash", true, Beta, false, "1.25", None), // generic apiserver
    gate("StorageVersionMigrator", false, Beta, false, "1.30", None),
    gate("StreamingCollectionEncodingToJSON", true, Ga, true, "1.33", Some("1.37")), // CHANGELOG-1.37
    gate("StreamingCollectionEncodingToProtobuf", true, Ga, true, "1.33", Some("1.37")), // CHANGELOG-1.37
    gate("StrictCostEnforcementForVAP", true, Ga, true, "1.30", Some("1.35")), // removed between snapshots 1.34-dev and 1.36-dev; version inferred
    gate("StrictCostEnforcementForWebhooks", true, Ga, true, "1.30", Some("1.35")), // removed between snapshots 1.34-dev and 1.36-dev; version inferred
    gate("StrictIPCIDRValidation", true, Beta, false, "1.33", None),
    gate("StructuredAuthenticationConfiguration", true, Ga, true, "1.29", None), // generic apiserver
    gate("StructuredAuthenticationConfigurationEgressSelector", true, Beta, false, "1.34", None), // generic apiserver
    gate("StructuredAuthenticationConfigurationJWKSMetrics", true, Beta, false, "1.35", None), // generic apiserver
    gate("StructuredAuthorizationConfiguration", true, Ga, true, "1.29", Some("1.36")),
    gate("SupplementalGroupsPolicy", true, Ga, true, "1.31", None),
    gate("SuspendJob", true, Ga, true, "1.25", Some("1.26")),
    gate("SystemdWatchdog", true, Ga, true, "1.32", None),
    gate("TaintTolerationComparisonOperators", false, Alpha, false, "1.35", None),
    gate("TokenRequestServiceAccountUIDValidation", true, Beta, false, "1.34", None), // generic apiserver
    gate("TopologyAwareHints", true, Ga, true, "1.25", Some("1.36")),
    gate("TopologyAwareWorkloadScheduling", false, Alpha, false, "1.36", None),
    gate("TopologyManager", true, Ga, true, "1.25", Some("1.29")),
    gate("TopologyManagerPolicyAlphaOptions", false, Alpha, false, "1.26", None),
    gate("TopologyManagerPolicyBetaOptions", true, Beta, false, "1.26", None),
    gate("TopologyManagerPolicyOptions", true, Ga, true, "1.26", None),
    gate("TranslateStreamCloseWebsocketRequests", true, Beta, false, "1.29", None),
    gate("UnauthenticatedHTTP2DOSMitigation", true, Beta, false, "1.25", None), // generic apiserver; NOT in 1.25.0-1.28.0: added in patch releases (CVE-2023-44487), first in a .0 release in 1.29; default false before 1.29
    gate("UnknownVersionInteroperabilityProxy", true, Beta, false, "1.28", None),
    gate("UnlockWhileProcessingFIFO", true, Beta, false, "1.36", None), // client-go
    gate("UserNamespacesHostNetworkSupport", false, Alpha, false, "1.35", None),
    gate("UserNamespacesPodSecurityStandards", false, Alpha, false, "1.29", Some("1.35")), // removed between snapshots 1.34-dev and 1.36-dev; version inferred
    gate("UserNamespacesStatelessPodsSupport", false, Alpha, false, "1.25", Some("1.28")), // renamed to UserNamespacesSupport
    gate("UserNamespacesSupport", true, Ga, true, "1.28", None), // GA in 1.36/1.37 per docs; LockToDefault not confirmed from code; renamed from UserNamespacesStatelessPodsSupport in 1.28
    gate("ValidatingAdmissionPolicy", true, Ga, true, "1.26", Some("1.32")), // removed between snapshots 1.31-dev and 1.34-dev; version inferred
    gate("VolumeAttributesClass", true, Ga, true, "1.29", None),
    gate("VolumeBindMountOptions", false, Alpha, false, "1.37", None), // from 1.37 docs only
    gate("VolumeCapacityPriority", false, Alpha, false, "1.25", Some("1.33")), // removed between snapshots 1.32-dev and 1.34-dev; version inferred
    gate("VolumeLimitScaling", true, Beta, false, "1.35", None),
    gate("WatchBookmark", true, Ga, true, "1.25", Some("1.33")), // removed between snapshots 1.31-dev and 1.34-dev; version inferred
    gate("WatchCacheInitializationPostStartHook", true, Ga, true, "1.31", None), // generic apiserver; GA 1.37 (CHANGELOG); lock assumed
    gate("WatchFromStorageWithoutResourceVersion", false, Deprecated, true, "1.27", Some("1.36")),
    gate("WatchList", true, Beta, false, "1.27", None), // generic apiserver
    gate("WatchListClient", true, Beta, false, "1.30", None), // client-go
    gate("WinDSR", true, Ga, true, "1.25", None),
    gate("WinOverlay", true, Ga, true, "1.25", None),
    gate("WindowsCPUAndMemoryAffinity", false, Alpha, false, "1.32", None),
    gate("WindowsGracefulNodeShutdown", true, Beta, false, "1.32", None),
    gate("WindowsHostNetwork", false, Deprecated, false, "1.26", None),
    gate("WindowsHostProcessContainers", true, Ga, true, "1.25", Some("1.28")),
    gate("WorkloadAwarePreemption", false, Alpha, false, "1.36", Some("1.37")), // website gate doc: alpha 1.36 only, removed
    gate("WorkloadWithJob", false, Alpha, false, "1.36", None),
    gate("ZeroLimitedNominalConcurrencyShares", true, Ga, true, "1.29", Some("1.32")), // removed between snapshots 1.31-dev and 1.34-dev; version inferred
];
