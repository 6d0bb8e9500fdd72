// The Go kubelet's own CPU manager checkpoints, for kubelet-core's format tests
// (kubelet-core/src/cpumanager/checkpoint.rs, GO_WRITTEN): prints, for each sample state, the
// spew rendering Go's checksum hashes and the file MarshalCheckpoint writes. Run inside the
// v1.20.2 tree the control plane is built from, with its Go 1.15 (scripts/control-plane.sh):
//
//   T=/var/cache/kubelet-rs/control-plane/src/kubernetes; G=/var/cache/kubelet-rs/go1.15/usr/lib/go-1.15
//   mkdir -p $T/_output/cpuck && cp scripts/go-cpu-checkpoint-vectors.go $T/_output/cpuck/main.go
//   (cd $T && GOROOT=$G GOFLAGS=-mod=vendor $G/bin/go run ./_output/cpuck/main.go)
package main

import (
	"fmt"

	"github.com/davecgh/go-spew/spew"
	"k8s.io/kubernetes/pkg/kubelet/cm/cpumanager/state"
)

func main() {
	cases := []*state.CPUManagerCheckpoint{
		{PolicyName: "none", DefaultCPUSet: "", Entries: map[string]map[string]string{}},
		{PolicyName: "static", DefaultCPUSet: "0-3", Entries: map[string]map[string]string{}},
		{PolicyName: "static", DefaultCPUSet: "0,3-7", Entries: map[string]map[string]string{
			"pod-b": {"c2": "2", "c1": "1"},
			"pod-a": {"app": "8-9,12"},
		}},
		{PolicyName: "static", DefaultCPUSet: "0-1", Entries: nil},
	}
	printer := spew.ConfigState{Indent: " ", SortKeys: true, DisableMethods: true, SpewKeys: true}
	for _, c := range cases {
		fmt.Printf("%s\n", printer.Sprintf("%#v", c))
		b, err := c.MarshalCheckpoint()
		if err != nil {
			panic(err)
		}
		fmt.Printf("%s\n", b)
	}
}
