# The control plane's PKI: keys, CAs, certificates and kubeconfigs for its components and
# for node identities. Sourced by scripts/control-plane.sh (uses its $PKI, $CP_DIR, log, die).
# shellcheck shell=bash

# new_key PATH [rsa]: an ECDSA P-256 key (fast to make: tests issue one identity per node) or
# an RSA 2048 key, in PKCS#8 PEM (read by Go, openssl and rustls alike).
new_key() {
  if [ "${2:-}" = rsa ]; then
    openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$1" 2>/dev/null
  else
    openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null
  fi
  chmod 0600 "$1"
}

# new_ca NAME CN: a self-signed CA $PKI/NAME.{key,crt}.
new_ca() {
  local name=$1 cn=$2
  [ -f "$PKI/$name.crt" ] && return 0
  new_key "$PKI/$name.key"
  openssl req -x509 -new -key "$PKI/$name.key" -subj "/CN=$cn" -days 3650 -sha256 \
    -addext "basicConstraints=critical,CA:TRUE" \
    -addext "keyUsage=critical,keyCertSign,cRLSign,digitalSignature" \
    -out "$PKI/$name.crt" 2>/dev/null
}

# issue CA OUT SUBJECT USAGE [SANS]: a key and a certificate OUT.{key,crt} signed by $PKI/CA;
# USAGE is serverAuth or clientAuth; SANS an openssl subjectAltName list.
issue() {
  local ca=$1 out=$2 subj=$3 usage=$4 sans=${5:-}
  [ -f "$out.crt" ] && [ -f "$out.key" ] && return 0
  new_key "$out.key"
  local ext
  ext=$(mktemp)
  {
    echo "[v3]"
    echo "basicConstraints=critical,CA:FALSE"
    echo "keyUsage=critical,digitalSignature"
    echo "extendedKeyUsage=$usage"
    [ -z "$sans" ] || echo "subjectAltName=$sans"
  } >"$ext"
  openssl req -new -key "$out.key" -subj "$subj" -out "$out.csr" 2>/dev/null
  openssl x509 -req -in "$out.csr" -CA "$PKI/$ca.crt" -CAkey "$PKI/$ca.key" \
    -CAserial "$PKI/$ca.srl" -CAcreateserial \
    -days 3650 -sha256 -extfile "$ext" -extensions v3 -out "$out.crt.tmp" 2>/dev/null
  mv "$out.crt.tmp" "$out.crt"
  rm -f "$ext" "$out.csr"
}

# write_kubeconfig PATH USER CERT_BASE: a self-contained kubeconfig (certs embedded).
write_kubeconfig() {
  local path=$1 user=$2 base=$3 tmp
  tmp="$path.tmp.$$"
  cat >"$tmp" <<KCFG
apiVersion: v1
kind: Config
clusters:
- name: kubelet-rs
  cluster:
    server: $APISERVER_URL
    certificate-authority-data: $(base64 -w0 <"$PKI/ca.crt")
users:
- name: $user
  user:
    client-certificate-data: $(base64 -w0 <"$base.crt")
    client-key-data: $(base64 -w0 <"$base.key")
contexts:
- name: $user@kubelet-rs
  context:
    cluster: kubelet-rs
    user: $user
current-context: $user@kubelet-rs
preferences: {}
KCFG
  chmod 0600 "$tmp"
  mv "$tmp" "$path"
}

valid_node_name() {
  [ ${#1} -le 253 ] && [[ "$1" =~ ^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$ ]]
}

# node_identity NODE: client cert CN=system:node:NODE, O=system:nodes, its kubeconfig, and a
# kubelet serving cert (signed by the kubelet CA) for 127.0.0.1, localhost and NODE, all under
# $CP_DIR/nodes/NODE.
node_identity() {
  local node=$1 dir="$CP_DIR/nodes/$1"
  valid_node_name "$node" || die "invalid node name: $node"
  mkdir -p "$dir"
  issue ca "$dir/node" "/O=system:nodes/CN=system:node:$node" clientAuth
  issue kubelet-ca "$dir/kubelet" "/CN=$node" serverAuth \
    "DNS:$node,DNS:localhost,IP:127.0.0.1,IP:::1${KUBELET_RS_NODE_EXTRA_SANS:+,$KUBELET_RS_NODE_EXTRA_SANS}"
  [ -f "$dir/kubeconfig" ] || write_kubeconfig "$dir/kubeconfig" "system:node:$node" "$dir/node"
}

make_pki() {
  mkdir -p "$PKI"
  chmod 0700 "$PKI"
  new_ca ca kubelet-rs-ca
  new_ca kubelet-ca kubelet-rs-kubelet-ca
  # The aggregation layer's request-header CA (as kubeadm sets it up): the controller-manager
  # and scheduler read it from kube-system/extension-apiserver-authentication.
  new_ca front-proxy-ca kubelet-rs-front-proxy-ca
  issue front-proxy-ca "$PKI/front-proxy-client" "/CN=front-proxy-client" clientAuth
  issue ca "$PKI/apiserver" "/CN=kube-apiserver" serverAuth \
    "DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local,IP:127.0.0.1,IP:10.96.0.1"
  issue ca "$PKI/admin" "/O=system:masters/CN=kubernetes-admin" clientAuth
  issue ca "$PKI/apiserver-kubelet-client" "/O=system:masters/CN=kube-apiserver-kubelet-client" clientAuth
  issue ca "$PKI/controller-manager" "/CN=system:kube-controller-manager" clientAuth
  issue ca "$PKI/scheduler" "/CN=system:kube-scheduler" clientAuth
  if [ ! -f "$PKI/sa.pub" ]; then
    new_key "$PKI/sa.key" rsa
    openssl pkey -in "$PKI/sa.key" -pubout -out "$PKI/sa.pub" 2>/dev/null
  fi
  # The default node's kubelet serving cert also covers this machine's hostname.
  issue kubelet-ca "$PKI/kubelet" "/CN=$NODE_NAME" serverAuth \
    "DNS:$NODE_NAME,DNS:$(hostname),DNS:localhost,IP:127.0.0.1,IP:::1"
  [ -f "$CP_DIR/admin.kubeconfig" ] ||
    write_kubeconfig "$CP_DIR/admin.kubeconfig" kubernetes-admin "$PKI/admin"
  [ -f "$CP_DIR/controller-manager.kubeconfig" ] ||
    write_kubeconfig "$CP_DIR/controller-manager.kubeconfig" system:kube-controller-manager "$PKI/controller-manager"
  [ -f "$CP_DIR/scheduler.kubeconfig" ] ||
    write_kubeconfig "$CP_DIR/scheduler.kubeconfig" system:kube-scheduler "$PKI/scheduler"
  node_identity "$NODE_NAME"
  ln -sfn "nodes/$NODE_NAME/kubeconfig" "$CP_DIR/node.kubeconfig"
}
