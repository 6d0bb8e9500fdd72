//! Table tests over Go's validation rules, run through the static pod decoder: each rule with
//! a passing and a failing pod and the exact field path and message start.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use serde_json::{json, Value};

use crate::static_pod::{parse_manifest, Context, ManifestError, FILE_SOURCE};

fn base() -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "web"},
        "spec": {
            "containers": [{"name": "c", "image": "busybox:1"}]
        }
    })
}

/// JSON merge patch (RFC 7386): objects merge, anything else replaces, null removes.
fn merge(target: &mut Value, patch: &Value) {
    match (target, patch) {
        (Value::Object(t), Value::Object(p)) => {
            for (k, v) in p {
                if v.is_null() {
                    t.remove(k);
                } else {
                    merge(t.entry(k.clone()).or_insert(Value::Null), v);
                }
            }
        }
        (t, p) => *t = p.clone(),
    }
}

fn errors_of(patch: &Value) -> Vec<String> {
    let mut pod = base();
    merge(&mut pod, patch);
    let text = serde_json::to_vec(&pod).unwrap();
    let ctx = Context {
        source: FILE_SOURCE,
        origin: "t.json",
        node_name: "node-1",
    };
    let m = parse_manifest(&text, &ctx);
    m.errors
        .iter()
        .flat_map(|e| match e {
            ManifestError::Invalid { errors, .. } => {
                errors.iter().map(ToString::to_string).collect()
            }
            other => vec![other.to_string()],
        })
        .collect()
}

fn c(extra: Value) -> Value {
    let mut container = json!({"name": "c", "image": "busybox:1"});
    merge(&mut container, &extra);
    json!({"spec": {"containers": [container]}})
}

fn vol(v: Value) -> Value {
    json!({"spec": {"volumes": [v]}})
}

/// (what, passing patch, failing patch, the failing pod's error starts with)
fn cases() -> Vec<(&'static str, Value, Value, &'static str)> {
    vec![
        // Object meta.
        ("name", json!({}), json!({"metadata": {"name": "Web_1"}}),
         "metadata.name: Invalid value: \"Web_1-node-1\": a lowercase RFC 1123 subdomain"),
        ("generateName", json!({"metadata": {"generateName": "web-"}}), json!({"metadata": {"generateName": "Web-"}}),
         "metadata.generateName: Invalid value: \"Web-\": a lowercase RFC 1123 subdomain"),
        ("namespace", json!({"metadata": {"namespace": "kube-system"}}), json!({"metadata": {"namespace": "kube.system"}}),
         "metadata.namespace: Invalid value: \"kube.system\": a lowercase RFC 1123 label"),
        ("label key", json!({"metadata": {"labels": {"example.com/app": "x"}}}), json!({"metadata": {"labels": {"-app": "x"}}}),
         "metadata.labels: Invalid value: \"-app\": name part must consist of"),
        ("label value", json!({"metadata": {"labels": {"app": "My_value.1"}}}), json!({"metadata": {"labels": {"app": "a b"}}}),
         "metadata.labels: Invalid value: \"a b\": a valid label must be an empty string"),
        ("annotation key", json!({"metadata": {"annotations": {"example.com/Note": "x"}}}), json!({"metadata": {"annotations": {"a/b/c": "x"}}}),
         "metadata.annotations: Invalid value: \"a/b/c\": a qualified name must consist of"),
        ("annotation size", json!({"metadata": {"annotations": {"a": "x".repeat(200_000)}}}),
         json!({"metadata": {"annotations": {"a": "x".repeat(262_144)}}}),
         "metadata.annotations: Too long: must have at most 262144 bytes"),
        ("deletion cost", json!({"metadata": {"annotations": {"controller.kubernetes.io/pod-deletion-cost": "-5"}}}),
         json!({"metadata": {"annotations": {"controller.kubernetes.io/pod-deletion-cost": "x"}}}),
         "metadata.annotations[controller.kubernetes.io/pod-deletion-cost]: Invalid value: \"x\": must be a 32bit integer"),
        ("seccomp annotation", json!({"metadata": {"annotations": {"seccomp.security.alpha.kubernetes.io/pod": "runtime/default"}}}),
         json!({"metadata": {"annotations": {"seccomp.security.alpha.kubernetes.io/pod": "localhost/../x"}}}),
         "metadata.annotations[seccomp.security.alpha.kubernetes.io/pod]: Invalid value: \"localhost/../x\": must be a valid seccomp profile"),
        ("apparmor annotation", json!({"metadata": {"annotations": {"container.apparmor.security.beta.kubernetes.io/c": "runtime/default"}}}),
         json!({"metadata": {"annotations": {"container.apparmor.security.beta.kubernetes.io/nope": "runtime/default"}}}),
         "metadata.annotations[container.apparmor.security.beta.kubernetes.io/nope]: Invalid value: \"nope\": container not found"),
        ("owner reference", json!({"metadata": {"ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": "n", "uid": "u"}]}}),
         json!({"metadata": {"ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": "", "uid": "u"}]}}),
         "metadata.ownerReferences.name: Invalid value: \"\": name must not be empty"),
        // Volumes.
        ("volume name", vol(json!({"name": "data", "emptyDir": {}})), vol(json!({"name": "/tmp/x", "emptyDir": {}})),
         "spec.volumes[0].name: Invalid value: \"/tmp/x\": a lowercase RFC 1123 label"),
        ("volume name backstep", vol(json!({"name": "x", "emptyDir": {}})), vol(json!({"name": "../x", "emptyDir": {}})),
         "spec.volumes[0].name: Invalid value: \"../x\""),
        ("volume name required", vol(json!({"name": "x", "emptyDir": {}})), vol(json!({"name": "", "emptyDir": {}})),
         "spec.volumes[0].name: Required value"),
        ("volume unique", json!({"spec": {"volumes": [{"name": "a", "emptyDir": {}}, {"name": "b", "emptyDir": {}}]}}),
         json!({"spec": {"volumes": [{"name": "a", "emptyDir": {}}, {"name": "a", "emptyDir": {}}]}}),
         "spec.volumes[1].name: Duplicate value: \"a\""),
        ("volume one source", vol(json!({"name": "a", "hostPath": {"path": "/x"}})),
         vol(json!({"name": "a", "emptyDir": {}, "hostPath": {"path": "/x"}})),
         "spec.volumes[0].hostPath: Forbidden: may not specify more than 1 volume type"),
        ("volume a source", vol(json!({"name": "a", "emptyDir": {}})), vol(json!({"name": "a"})),
         "spec.volumes[0]: Required value: must specify a volume type"),
        ("hostPath path", vol(json!({"name": "a", "hostPath": {"path": "/var/log"}})),
         vol(json!({"name": "a", "hostPath": {"path": "/var/../etc"}})),
         "spec.volumes[0].hostPath.path: Invalid value: \"/var/../etc\": must not contain '..'"),
        ("hostPath type", vol(json!({"name": "a", "hostPath": {"path": "/x", "type": "Directory"}})),
         vol(json!({"name": "a", "hostPath": {"path": "/x", "type": "Dir"}})),
         "spec.volumes[0].hostPath.type: Unsupported value: \"Dir\": supported values:"),
        ("emptyDir sizeLimit", vol(json!({"name": "a", "emptyDir": {"sizeLimit": "1Gi"}})),
         vol(json!({"name": "a", "emptyDir": {"sizeLimit": "-1Gi"}})),
         "spec.volumes[0].emptyDir.sizeLimit: Forbidden: SizeLimit field must be a valid resource quantity"),
        ("secret name", vol(json!({"name": "a", "secret": {"secretName": "s"}})), vol(json!({"name": "a", "secret": {}})),
         "spec.volumes[0].secret.secretName: Required value"),
        ("secret mode", vol(json!({"name": "a", "secret": {"secretName": "s", "defaultMode": 0o644}})),
         vol(json!({"name": "a", "secret": {"secretName": "s", "defaultMode": 0o1000}})),
         "spec.volumes[0].secret.defaultMode: Invalid value: 512: must be a number between 0 and 0777 (octal), both inclusive"),
        ("items path", vol(json!({"name": "a", "configMap": {"name": "m", "items": [{"key": "k", "path": "d/f"}]}})),
         vol(json!({"name": "a", "configMap": {"name": "m", "items": [{"key": "k", "path": "../f"}]}})),
         "spec.volumes[0].configMap.items[0].path: Invalid value: \"../f\": must not contain '..'"),
        ("items relative", vol(json!({"name": "a", "configMap": {"name": "m", "items": [{"key": "k", "path": "f"}]}})),
         vol(json!({"name": "a", "configMap": {"name": "m", "items": [{"key": "k", "path": "/f"}]}})),
         "spec.volumes[0].configMap.items[0].path: Invalid value: \"/f\": must be a relative path"),
        ("items reserved", vol(json!({"name": "a", "configMap": {"name": "m", "items": [{"key": "k", "path": "f..x"}]}})),
         vol(json!({"name": "a", "configMap": {"name": "m", "items": [{"key": "k", "path": "..data"}]}})),
         "spec.volumes[0].configMap.items[0].path: Invalid value: \"..data\": must not start with '..'"),
        ("downwardAPI field", vol(json!({"name": "a", "downwardAPI": {"items": [{"path": "n", "fieldRef": {"fieldPath": "metadata.labels['app']"}}]}})),
         vol(json!({"name": "a", "downwardAPI": {"items": [{"path": "n", "fieldRef": {"fieldPath": "spec.nodeName"}}]}})),
         "spec.volumes[0].downwardAPI.items[0].fieldRef.fieldPath: Unsupported value: \"spec.nodeName\""),
        ("projected token", vol(json!({"name": "a", "projected": {"sources": [{"serviceAccountToken": {"path": "t", "expirationSeconds": 3600}}]}})),
         vol(json!({"name": "a", "projected": {"sources": [{"serviceAccountToken": {"path": "t", "expirationSeconds": 60}}]}})),
         "spec.volumes[0].projected.sources[0].serviceAccountToken.expirationSeconds: Invalid value: 60: may not specify a duration less than 10 minutes"),
        // Containers.
        ("container name", c(json!({"name": "web-1"})), c(json!({"name": "Web"})),
         "spec.containers[0].name: Invalid value: \"Web\": a lowercase RFC 1123 label"),
        ("container image", c(json!({})), c(json!({"image": ""})), "spec.containers[0].image: Required value"),
        ("image whitespace", c(json!({})), c(json!({"image": " busybox"})),
         "spec.containers[0].image: Invalid value: \" busybox\": must not have leading or trailing whitespace"),
        ("names across init", json!({"spec": {"initContainers": [{"name": "i", "image": "x"}]}}),
         json!({"spec": {"initContainers": [{"name": "c", "image": "x"}]}}),
         "spec.initContainers[0].name: Duplicate value: \"c\""),
        ("init probes", json!({"spec": {"initContainers": [{"name": "i", "image": "x", "restartPolicy": "Always", "readinessProbe": {"exec": {"command": ["true"]}}}]}}),
         json!({"spec": {"initContainers": [{"name": "i", "image": "x", "readinessProbe": {"exec": {"command": ["true"]}}}]}}),
         "spec.initContainers[0].readinessProbe: Forbidden: may not be set for init containers without restartPolicy=Always"),
        ("init restartPolicy", json!({"spec": {"initContainers": [{"name": "i", "image": "x", "restartPolicy": "Always"}]}}),
         json!({"spec": {"initContainers": [{"name": "i", "image": "x", "restartPolicy": "Never"}]}}),
         "spec.initContainers[0].restartPolicy: Unsupported value: \"Never\": supported values: \"Always\""),
        ("ephemeral", json!({}), json!({"spec": {"ephemeralContainers": [{"name": "e", "image": "x"}]}}),
         "spec.ephemeralContainers: Forbidden: cannot be set on create"),
        ("port number", c(json!({"ports": [{"containerPort": 80}]})), c(json!({"ports": [{"containerPort": 70000}]})),
         "spec.containers[0].ports[0].containerPort: Invalid value: 70000: must be between 1 and 65535, inclusive"),
        ("port required", c(json!({"ports": [{"containerPort": 80}]})), c(json!({"ports": [{"name": "http"}]})),
         "spec.containers[0].ports[0].containerPort: Required value"),
        ("port name", c(json!({"ports": [{"containerPort": 80, "name": "http"}]})), c(json!({"ports": [{"containerPort": 80, "name": "HTTP"}]})),
         "spec.containers[0].ports[0].name: Invalid value: \"HTTP\": must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)"),
        ("port protocol", c(json!({"ports": [{"containerPort": 80, "protocol": "UDP"}]})), c(json!({"ports": [{"containerPort": 80, "protocol": "ICMP"}]})),
         "spec.containers[0].ports[0].protocol: Unsupported value: \"ICMP\": supported values: \"SCTP\", \"TCP\", \"UDP\""),
        ("host port conflict", c(json!({"ports": [{"containerPort": 80, "hostPort": 8080}, {"containerPort": 81, "hostPort": 8081}]})),
         c(json!({"ports": [{"containerPort": 80, "hostPort": 8080}, {"containerPort": 81, "hostPort": 8080}]})),
         "spec.containers[0].ports[1].hostPort: Duplicate value: \"/TCP/8080\""),
        ("env name", c(json!({"env": [{"name": "MY_VAR.x", "value": "1"}]})), c(json!({"env": [{"name": "1X", "value": "1"}]})),
         "spec.containers[0].env[0].name: Invalid value: \"1X\": a valid environment variable name"),
        ("env valueFrom", c(json!({"env": [{"name": "N", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}]})),
         c(json!({"env": [{"name": "N", "valueFrom": {"fieldRef": {"fieldPath": "spec.nope"}}}]})),
         "spec.containers[0].env[0].valueFrom.fieldRef.fieldPath: Unsupported value: \"spec.nope\""),
        ("env one source", c(json!({"env": [{"name": "N", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}]})),
         c(json!({"env": [{"name": "N", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}, "configMapKeyRef": {"name": "m", "key": "k"}}}]})),
         "spec.containers[0].env[0].valueFrom: Invalid value: \"\": may not have more than one field specified at a time"),
        ("envFrom", c(json!({"envFrom": [{"configMapRef": {"name": "m"}}]})), c(json!({"envFrom": [{"prefix": "P_"}]})),
         "spec.containers[0].envFrom[0]: Invalid value: \"\": must specify one of: `configMapRef` or `secretRef`"),
        ("mount volume", json!({"spec": {"volumes": [{"name": "v", "emptyDir": {}}], "containers": [{"name": "c", "image": "x", "volumeMounts": [{"name": "v", "mountPath": "/v"}]}]}}),
         c(json!({"volumeMounts": [{"name": "v", "mountPath": "/v"}]})),
         "spec.containers[0].volumeMounts[0].name: Not found: \"v\""),
        ("mount path volume name", json!({}), json!({"spec": {"volumes": [{"name": "/tmp/x", "emptyDir": {}}], "containers": [{"name": "c", "image": "x", "volumeMounts": [{"name": "/tmp/x", "mountPath": "/v"}]}]}}),
         "spec.volumes[0].name: Invalid value: \"/tmp/x\""),
        ("mount unique", json!({"spec": {"volumes": [{"name": "v", "emptyDir": {}}], "containers": [{"name": "c", "image": "x", "volumeMounts": [{"name": "v", "mountPath": "/a"}, {"name": "v", "mountPath": "/b"}]}]}}),
         json!({"spec": {"volumes": [{"name": "v", "emptyDir": {}}], "containers": [{"name": "c", "image": "x", "volumeMounts": [{"name": "v", "mountPath": "/a"}, {"name": "v", "mountPath": "/a"}]}]}}),
         "spec.containers[0].volumeMounts[1].mountPath: Invalid value: \"/a\": must be unique"),
        ("subPath", json!({"spec": {"volumes": [{"name": "v", "emptyDir": {}}], "containers": [{"name": "c", "image": "x", "volumeMounts": [{"name": "v", "mountPath": "/a", "subPath": "d/e"}]}]}}),
         json!({"spec": {"volumes": [{"name": "v", "emptyDir": {}}], "containers": [{"name": "c", "image": "x", "volumeMounts": [{"name": "v", "mountPath": "/a", "subPath": "../e"}]}]}}),
         "spec.containers[0].volumeMounts.subPath: Invalid value: \"../e\": must not contain '..'"),
        ("subPath absolute", json!({"spec": {"volumes": [{"name": "v", "emptyDir": {}}], "containers": [{"name": "c", "image": "x", "volumeMounts": [{"name": "v", "mountPath": "/a", "subPath": "e"}]}]}}),
         json!({"spec": {"volumes": [{"name": "v", "emptyDir": {}}], "containers": [{"name": "c", "image": "x", "volumeMounts": [{"name": "v", "mountPath": "/a", "subPath": "/e"}]}]}}),
         "spec.containers[0].volumeMounts.subPath: Invalid value: \"/e\": must be a relative path"),
        ("mount propagation", json!({"spec": {"volumes": [{"name": "v", "emptyDir": {}}], "containers": [{"name": "c", "image": "x", "securityContext": {"privileged": true}, "volumeMounts": [{"name": "v", "mountPath": "/a", "mountPropagation": "Bidirectional"}]}]}}),
         json!({"spec": {"volumes": [{"name": "v", "emptyDir": {}}], "containers": [{"name": "c", "image": "x", "volumeMounts": [{"name": "v", "mountPath": "/a", "mountPropagation": "Bidirectional"}]}]}}),
         "spec.containers[0].volumeMounts.mountPropagation: Forbidden: Bidirectional mount propagation is available only to privileged containers"),
        ("probe handler", c(json!({"livenessProbe": {"tcpSocket": {"port": 80}}})), c(json!({"livenessProbe": {"periodSeconds": 5}})),
         "spec.containers[0].livenessProbe: Required value: must specify a handler type"),
        ("probe one handler", c(json!({"readinessProbe": {"httpGet": {"port": "http"}}})),
         c(json!({"readinessProbe": {"httpGet": {"port": 80}, "tcpSocket": {"port": 80}}})),
         "spec.containers[0].readinessProbe.tcpSocket: Forbidden: may not specify more than 1 handler type"),
        ("probe numbers", c(json!({"livenessProbe": {"exec": {"command": ["true"]}, "timeoutSeconds": 1}})),
         c(json!({"livenessProbe": {"exec": {"command": ["true"]}, "timeoutSeconds": -1}})),
         "spec.containers[0].livenessProbe.timeoutSeconds: Invalid value: -1: must be greater than or equal to 0"),
        ("liveness successThreshold", c(json!({"livenessProbe": {"exec": {"command": ["true"]}, "successThreshold": 1}})),
         c(json!({"livenessProbe": {"exec": {"command": ["true"]}, "successThreshold": 2}})),
         "spec.containers[0].livenessProbe.successThreshold: Invalid value: 2: must be 1"),
        ("probe exec command", c(json!({"startupProbe": {"exec": {"command": ["true"]}}})), c(json!({"startupProbe": {"exec": {}}})),
         "spec.containers[0].startupProbe.exec.command: Required value"),
        ("probe port", c(json!({"livenessProbe": {"grpc": {"port": 9000}}})), c(json!({"livenessProbe": {"grpc": {"port": 0}}})),
         "spec.containers[0].livenessProbe.grpc.port: Invalid value: 0: must be between 1 and 65535, inclusive"),
        ("lifecycle", c(json!({"lifecycle": {"preStop": {"exec": {"command": ["true"]}}}})), c(json!({"lifecycle": {"postStart": {}}})),
         "spec.containers[0].lifecycle.postStart: Required value: must specify a handler type"),
        ("resources request <= limit", c(json!({"resources": {"requests": {"cpu": "100m"}, "limits": {"cpu": "200m"}}})),
         c(json!({"resources": {"requests": {"cpu": "300m"}, "limits": {"cpu": "200m"}}})),
         "spec.containers[0].resources.requests: Invalid value: \"300m\": must be less than or equal to cpu limit"),
        ("resources name", c(json!({"resources": {"limits": {"memory": "1Gi"}}})), c(json!({"resources": {"limits": {"gpu": "1"}}})),
         "spec.containers[0].resources.limits[gpu]: Invalid value: \"gpu\": must be a standard resource for containers"),
        ("resources quantity", c(json!({"resources": {"limits": {"memory": "1e3"}}})), c(json!({"resources": {"limits": {"memory": "1e2147483647"}}})),
         "spec.containers[0].resources.limits[memory]: Invalid value: \"1e2147483647\": out of range: the value is too large"),
        ("extended resource", c(json!({"resources": {"limits": {"example.com/dev": "1"}, "requests": {"example.com/dev": "1"}}})),
         c(json!({"resources": {"limits": {"example.com/dev": "2"}, "requests": {"example.com/dev": "1"}}})),
         "spec.containers[0].resources.requests: Invalid value: \"1\": must be equal to example.com/dev limit"),
        ("securityContext user", c(json!({"securityContext": {"runAsUser": 1000}})), c(json!({"securityContext": {"runAsUser": -1}})),
         "spec.containers[0].securityContext.runAsUser: Invalid value: -1: must be between 0 and 2147483647, inclusive"),
        ("securityContext escalation", c(json!({"securityContext": {"privileged": true}})),
         c(json!({"securityContext": {"privileged": true, "allowPrivilegeEscalation": false}})),
         "spec.containers[0].securityContext: Invalid value: {"),
        ("seccomp", c(json!({"securityContext": {"seccompProfile": {"type": "Localhost", "localhostProfile": "p.json"}}})),
         c(json!({"securityContext": {"seccompProfile": {"type": "Localhost"}}})),
         "spec.containers[0].securityContext.seccompProfile.localhostProfile: Required value: must be set when seccomp type is Localhost"),
        ("terminationMessagePolicy", c(json!({"terminationMessagePolicy": "FallbackToLogsOnError"})),
         c(json!({"terminationMessagePolicy": "Sometimes"})),
         "spec.containers[0].terminationMessagePolicy: Invalid value: \"Sometimes\": must be 'File' or 'FallbackToLogsOnError'"),
        ("pull policy", c(json!({"imagePullPolicy": "Never"})), c(json!({"imagePullPolicy": "Sometimes"})),
         "spec.containers[0].imagePullPolicy: Unsupported value: \"Sometimes\""),
        // Pod spec fields.
        ("restartPolicy", json!({"spec": {"restartPolicy": "Never"}}), json!({"spec": {"restartPolicy": "Sometimes"}}),
         "spec.restartPolicy: Unsupported value: \"Sometimes\": supported values: \"Always\", \"OnFailure\", \"Never\""),
        ("dnsPolicy", json!({"spec": {"dnsPolicy": "Default"}}), json!({"spec": {"dnsPolicy": "Google"}}),
         "spec.dnsPolicy: Unsupported value: \"Google\""),
        ("dnsConfig None", json!({"spec": {"dnsPolicy": "None", "dnsConfig": {"nameservers": ["1.1.1.1"]}}}),
         json!({"spec": {"dnsPolicy": "None"}}),
         "spec.dnsConfig: Required value: must provide `dnsConfig` when `dnsPolicy` is None"),
        ("dnsConfig nameserver", json!({"spec": {"dnsConfig": {"nameservers": ["::1"]}}}), json!({"spec": {"dnsConfig": {"nameservers": ["dns"]}}}),
         "spec.dnsConfig.nameservers[0]: Invalid value: \"dns\": must be a valid IP address"),
        ("hostAliases ip", json!({"spec": {"hostAliases": [{"ip": "10.0.0.1", "hostnames": ["db.local"]}]}}),
         json!({"spec": {"hostAliases": [{"ip": "10.0.0.300", "hostnames": ["db"]}]}}),
         "spec.hostAliases[0].ip: Invalid value: \"10.0.0.300\": must be a valid IP address"),
        ("hostAliases hostname", json!({"spec": {"hostAliases": [{"ip": "10.0.0.1", "hostnames": ["db"]}]}}),
         json!({"spec": {"hostAliases": [{"ip": "10.0.0.1", "hostnames": ["DB_1"]}]}}),
         "spec.hostAliases[0].hostnames[0]: Invalid value: \"DB_1\": a lowercase RFC 1123 subdomain"),
        ("toleration operator", json!({"spec": {"tolerations": [{"key": "k", "operator": "Equal", "value": "v"}]}}),
         json!({"spec": {"tolerations": [{"key": "k", "operator": "Like"}]}}),
         "spec.tolerations[0].operator: Unsupported value: \"Like\": supported values: \"Equal\", \"Exists\""),
        ("toleration empty key", json!({"spec": {"tolerations": [{"operator": "Exists"}]}}),
         json!({"spec": {"tolerations": [{"operator": "Equal", "value": "v"}]}}),
         "spec.tolerations[0].operator: Invalid value: \"Equal\": operator must be Exists when `key` is empty"),
        ("toleration seconds", json!({"spec": {"tolerations": [{"key": "k", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 5}]}}),
         json!({"spec": {"tolerations": [{"key": "k", "operator": "Exists", "effect": "NoSchedule", "tolerationSeconds": 5}]}}),
         "spec.tolerations[0].effect: Invalid value: \"NoSchedule\": effect must be 'NoExecute' when `tolerationSeconds` is set"),
        ("node affinity", json!({"spec": {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": [{"key": "k", "operator": "In", "values": ["a"]}]}]}}}}}),
         json!({"spec": {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": [{"key": "k", "operator": "In"}]}]}}}}}),
         "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].values: Required value: must be specified when `operator` is 'In' or 'NotIn'"),
        ("affinity weight", json!({"spec": {"affinity": {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 10, "podAffinityTerm": {"topologyKey": "kubernetes.io/hostname"}}]}}}}),
         json!({"spec": {"affinity": {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 0, "podAffinityTerm": {"topologyKey": "kubernetes.io/hostname"}}]}}}}),
         "spec.affinity.podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight: Invalid value: 0: must be in the range 1-100"),
        ("affinity topologyKey", json!({"spec": {"affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{"topologyKey": "zone"}]}}}}),
         json!({"spec": {"affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{"topologyKey": ""}]}}}}),
         "spec.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].topologyKey: Required value: can not be empty"),
        ("topology spread skew", json!({"spec": {"topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}]}}),
         json!({"spec": {"topologySpreadConstraints": [{"maxSkew": 0, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}]}}),
         "spec.topologySpreadConstraints[0].maxSkew: Invalid value: 0: must be greater than zero"),
        ("topology spread unsatisfiable", json!({"spec": {"topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway"}]}}),
         json!({"spec": {"topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "Maybe"}]}}),
         "spec.topologySpreadConstraints[0].whenUnsatisfiable: Unsupported value: \"Maybe\""),
        ("topology spread duplicate", json!({"spec": {"topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}, {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway"}]}}),
         json!({"spec": {"topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}, {"maxSkew": 2, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}]}}),
         "spec.topologySpreadConstraints[1].{topologyKey, whenUnsatisfiable}: Duplicate value: \"{zone, DoNotSchedule}\""),
        ("pod securityContext", json!({"spec": {"securityContext": {"fsGroup": 2000, "supplementalGroups": [1]}}}),
         json!({"spec": {"securityContext": {"supplementalGroups": [-1]}}}),
         "spec.securityContext.supplementalGroups[0]: Invalid value: -1: must be between 0 and 2147483647, inclusive"),
        ("sysctls", json!({"spec": {"securityContext": {"sysctls": [{"name": "net.ipv4.ip_forward", "value": "1"}]}}}),
         json!({"spec": {"securityContext": {"sysctls": [{"name": "Net.X", "value": "1"}]}}}),
         "spec.securityContext.sysctls[0].name: Invalid value: \"Net.X\": must have at most 253 characters"),
        ("shareProcessNamespace", json!({"spec": {"shareProcessNamespace": true}}), json!({"spec": {"shareProcessNamespace": true, "hostPID": true}}),
         "spec.securityContext.shareProcessNamespace: Invalid value: true: ShareProcessNamespace and HostPID cannot both be enabled"),
        ("hostNetwork ports", json!({"spec": {"hostNetwork": true, "containers": [{"name": "c", "image": "x", "ports": [{"containerPort": 80}]}]}}),
         json!({"spec": {"hostNetwork": true, "containers": [{"name": "c", "image": "x", "ports": [{"containerPort": 80, "hostPort": 81}]}]}}),
         "spec.containers[0].ports[0].hostPort: Invalid value: 81: must match `containerPort` when `hostNetwork` is true"),
        ("activeDeadlineSeconds", json!({"spec": {"activeDeadlineSeconds": 60}}), json!({"spec": {"activeDeadlineSeconds": 0}}),
         "spec.activeDeadlineSeconds: Invalid value: 0: must be between 1 and 2147483647, inclusive"),
        ("terminationGracePeriodSeconds", json!({"spec": {"terminationGracePeriodSeconds": 0}}), json!({"spec": {"terminationGracePeriodSeconds": -1}}),
         "spec.terminationGracePeriodSeconds: Invalid value: -1: must be greater than or equal to 0"),
        ("hostname", json!({"spec": {"hostname": "web-0"}}), json!({"spec": {"hostname": "web.0"}}),
         "spec.hostname: Invalid value: \"web.0\": a lowercase RFC 1123 label"),
        ("serviceAccountName", json!({"spec": {"serviceAccountName": "sa"}}), json!({"spec": {"serviceAccountName": "SA"}}),
         "spec.serviceAccountName: Invalid value: \"SA\": a lowercase RFC 1123 subdomain"),
        ("nodeSelector", json!({"spec": {"nodeSelector": {"disk": "ssd"}}}), json!({"spec": {"nodeSelector": {"disk": "s s d"}}}),
         "spec.nodeSelector: Invalid value: \"s s d\": a valid label must be an empty string"),
        ("readinessGates", json!({"spec": {"readinessGates": [{"conditionType": "example.com/ready"}]}}),
         json!({"spec": {"readinessGates": [{"conditionType": "not ok"}]}}),
         "spec.readinessGates[0].conditionType: Invalid value: \"not ok\": name part must consist of"),
        ("preemptionPolicy", json!({"spec": {"preemptionPolicy": "Never"}}), json!({"spec": {"preemptionPolicy": "Sometimes"}}),
         "spec.preemptionPolicy: Unsupported value: \"Sometimes\""),
        ("overhead", json!({"spec": {"overhead": {"cpu": "10m"}}}), json!({"spec": {"overhead": {"cpu": "-10m"}}}),
         "spec.overhead[cpu]: Invalid value: \"-10m\": must be greater than or equal to 0"),
    ]
}

#[test]
fn go_validation_rules_pass_and_fail_with_the_field_path() {
    let mut failures = Vec::new();
    for (what, good, bad, want) in cases() {
        let errs = errors_of(&good);
        if !errs.is_empty() {
            failures.push(format!("{what}: the passing pod fails: {errs:?}"));
        }
        let errs = errors_of(&bad);
        if !errs.iter().any(|e| e.starts_with(want)) {
            failures.push(format!("{what}: want {want:?}, got {errs:?}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn every_problem_is_reported_in_one_error() {
    let errs = errors_of(&json!({
        "metadata": {"name": "Bad"},
        "spec": {"restartPolicy": "x", "containers": [{"name": "c", "image": ""}]}
    }));
    assert_eq!(errs.len(), 3, "{errs:?}");
    assert!(errs[0].starts_with("metadata.name: Invalid value: \"Bad-node-1\""));
    assert!(errs
        .iter()
        .any(|e| e == "spec.containers[0].image: Required value"));
    assert!(errs
        .iter()
        .any(|e| e.starts_with("spec.restartPolicy: Unsupported value: \"x\"")));
}

#[test]
fn huge_values_are_not_repeated_in_messages() {
    let errs = errors_of(&json!({"metadata": {"labels": {"app": "x".repeat(100_000)}}}));
    assert!(errs.iter().all(|e| e.len() < 1_000), "{}", errs[0].len());
    assert!(
        errs[0].starts_with("metadata.labels: Invalid value: \"xxx"),
        "{}",
        errs[0]
    );
}
