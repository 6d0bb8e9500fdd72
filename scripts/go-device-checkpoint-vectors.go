// The Go kubelet's own device manager checkpoints, for kubelet-core's format tests
// (kubelet-core/src/devicemanager/checkpoint_tests.rs, GO_WRITTEN): prints, for each sample
// state, the spew rendering Go's checksum hashes and the file MarshalCheckpoint writes. Run
// inside the v1.20.2 tree the control plane is built from, with its Go 1.15
// (scripts/control-plane.sh):
//
//   T=/var/cache/kubelet-rs/control-plane/src/kubernetes; G=/var/cache/kubelet-rs/go1.15/usr/lib/go-1.15
//   mkdir -p $T/_output/devck && cp scripts/go-device-checkpoint-vectors.go $T/_output/devck/main.go
//   (cd $T && GOROOT=$G GOFLAGS=-mod=vendor $G/bin/go run ./_output/devck/main.go)
package main

import (
	"fmt"

	"github.com/davecgh/go-spew/spew"
	"k8s.io/kubernetes/pkg/kubelet/cm/devicemanager/checkpoint"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

func main() {
	resp := &pluginapi.ContainerAllocateResponse{
		Envs:        map[string]string{"B": "2", "A": "1"},
		Mounts:      []*pluginapi.Mount{{ContainerPath: "/tmp/Dev-1", HostPath: "/tmp/Dev-1"}},
		Devices:     []*pluginapi.DeviceSpec{{ContainerPath: "/dev/x", HostPath: "/dev/null", Permissions: "rw"}},
		Annotations: map[string]string{"k": "v"},
	}
	raw, err := resp.Marshal()
	if err != nil {
		panic(err)
	}
	empty, err := (&pluginapi.ContainerAllocateResponse{}).Marshal()
	if err != nil {
		panic(err)
	}
	cases := []checkpoint.DeviceManagerCheckpoint{
		checkpoint.New(nil, map[string][]string{}),
		checkpoint.New(nil, map[string][]string{"example.com/resource": {"Dev-2", "Dev-1"}, "a.io/b": {}}),
		checkpoint.New([]checkpoint.PodDevicesEntry{
			{PodUID: "pod-a", ContainerName: "c", ResourceName: "example.com/resource",
				DeviceIDs: checkpoint.DevicesPerNUMA{0: {"Dev-1"}}, AllocResp: raw},
			{PodUID: "pod-b", ContainerName: "d", ResourceName: "example.com/resource",
				DeviceIDs: checkpoint.DevicesPerNUMA{1: {"Dev-3", "Dev-2"}, 10: {"Dev-4"}, -1: {"Dev-5"}}, AllocResp: empty},
		}, map[string][]string{"example.com/resource": {"Dev-1", "Dev-2"}}),
	}
	printer := spew.ConfigState{Indent: " ", SortKeys: true, DisableMethods: true, SpewKeys: true}
	for _, c := range cases {
		d := c.(*checkpoint.Data)
		fmt.Printf("%s\n", printer.Sprintf("%#v", d.Data))
		b, err := c.MarshalCheckpoint()
		if err != nil {
			panic(err)
		}
		fmt.Printf("%s\n", b)
	}
}
