#!/usr/bin/env python3
"""The node e2e runner's stand-in for Dynamic Kubelet Config's restart, for a kubelet without it.

The v1.20 suite sets the configuration a [Serial] group tests through Dynamic Kubelet Config
(`tempSetCurrentKubeletConfig`): it writes the wanted KubeletConfiguration into a ConfigMap,
points the Node's `spec.configSource` at it and polls `/configz` until the kubelet reports it.
A Go kubelet v1.20 with `--dynamic-config-dir` checkpoints that ConfigMap and restarts itself
with it. Go removed the feature in 1.24 and kubelet-rs does not have it: the runner does the
restart instead, from outside the kubelet, the way an operator changes a node's configuration
today. When the source changes it writes the ConfigMap's KubeletConfiguration into the file the
suite gave the kubelet (`--config <work>/kubelet-config`) and stops the kubelet with SIGTERM; the
suite's own supervisor starts it again with its unchanged command line (it restarts the kubelet
whenever its health check fails). The kubelet then starts with that configuration, exactly as
it would from a configuration management tool.

Nothing about Dynamic Kubelet Config's status reporting (`node.status.config`, last-known-good)
is emulated: the DynamicKubeletConfig group itself is not run against kubelet-rs.

usage: node-e2e-config-source.py WORKDIR NODE_NAME KUBELET_BINARY LOG
"""

import json
import os
import re
import signal
import ssl
import sys
import time
import urllib.request

POLL_SECONDS = 1.0
REQUEST_TIMEOUT = 5.0


def log(logf, msg):
    logf.write("%s %s\n" % (time.strftime("%H:%M:%S"), msg))
    logf.flush()


def read_kubeconfig(path):
    """The API server's URL and the bearer token of the suite's kubeconfig (its fixed layout)."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    server = re.search(r"^\s*server:\s*(\S+)", text, re.M)
    token = re.search(r"^\s*token:\s*(\S+)", text, re.M)
    if not server or not token:
        raise ValueError("no server or token in %s" % path)
    return server.group(1), token.group(1)


def get(server, token, path):
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    req = urllib.request.Request(server + path, headers={"Authorization": "Bearer " + token})
    with urllib.request.urlopen(req, timeout=REQUEST_TIMEOUT, context=ctx) as resp:
        return json.load(resp)


def kubelet_pids(binary):
    """The pids whose executable is the kubelet binary."""
    want = os.path.realpath(binary)
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            if os.path.realpath(os.readlink("/proc/%s/exe" % entry)) == want:
                pids.append(int(entry))
        except OSError:
            continue
    return pids


def main():
    if len(sys.argv) != 5:
        sys.exit(__doc__.strip().splitlines()[-1])
    workdir, node, binary, logpath = sys.argv[1:]
    kubeconfig = os.path.join(workdir, "kubeconfig")
    config = os.path.join(workdir, "kubelet-config")
    original = None
    applied = None
    with open(logpath, "a", encoding="utf-8") as logf:
        while True:
            time.sleep(POLL_SECONDS)
            if not (os.path.exists(kubeconfig) and os.path.exists(config)):
                continue
            if original is None:
                with open(config, encoding="utf-8") as f:
                    original = f.read()
                log(logf, "the suite's configuration: %s (%d bytes)" % (config, len(original)))
            try:
                server, token = read_kubeconfig(kubeconfig)
                source = get(server, token, "/api/v1/nodes/" + node).get("spec", {}).get("configSource")
                ref = (source or {}).get("configMap")
                if ref is None:
                    wanted, content = None, original
                else:
                    cm = get(server, token, "/api/v1/namespaces/%s/configmaps/%s" % (ref["namespace"], ref["name"]))
                    meta = cm.get("metadata", {})
                    wanted = (ref["namespace"], ref["name"], meta.get("uid"), meta.get("resourceVersion"))
                    content = cm.get("data", {}).get(ref.get("kubeletConfigKey", "kubelet"))
                    if content is None:
                        if wanted != applied:
                            log(logf, "ConfigMap %s/%s has no key %s: not applied" % (ref["namespace"], ref["name"], ref.get("kubeletConfigKey")))
                            applied = wanted
                        continue
            except Exception as e:  # the API server restarts or is not up yet: the next poll
                if applied is not None:
                    log(logf, "poll failed: %s" % e)
                continue
            if wanted == applied:
                continue
            if applied is None and wanted is None:
                applied = wanted
                continue
            tmp = config + ".tmp"
            with open(tmp, "w", encoding="utf-8") as f:
                f.write(content)
            os.replace(tmp, config)
            pids = kubelet_pids(binary)
            log(logf, "configuration %s written; stopping the kubelet (pids %s) for a restart" % (wanted or "of the suite", pids))
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGTERM)
                except OSError:
                    pass
            applied = wanted


if __name__ == "__main__":
    main()
