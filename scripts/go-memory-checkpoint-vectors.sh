#!/usr/bin/env bash
# The Go kubelet's memory manager checkpoint (v1.25's pkg/kubelet/cm/memorymanager/state:
# MemoryManagerCheckpoint and its MarshalCheckpoint, copied below type for type), for
# kubelet-core's format tests (kubelet-core/src/memorymanager/checkpoint_tests.rs,
# GO_WRITTEN): prints the file Go writes for sample states, its checksum computed by the
# tree's own checksum package (FNV-1a over go-spew's %#v). Runs inside the v1.20.2 tree the
# control plane is built from (it vendors go-spew, k8s.io/api and the checksum package; the
# memory manager itself came in 1.21), with its Go 1.15 (scripts/control-plane.sh).
set -euo pipefail
T=${T:-/var/cache/kubelet-rs/control-plane/src/kubernetes}
G=${G:-/var/cache/kubelet-rs/go1.15/usr/lib/go-1.15}
d=$T/_output/memck
mkdir -p "$d/state"
cat > "$d/state/state.go" <<'GO'
package state

import (
	"encoding/json"

	v1 "k8s.io/api/core/v1"
	"k8s.io/kubernetes/pkg/kubelet/checkpointmanager/checksum"
)

type MemoryTable struct {
	TotalMemSize   uint64 `json:"total"`
	SystemReserved uint64 `json:"systemReserved"`
	Allocatable    uint64 `json:"allocatable"`
	Reserved       uint64 `json:"reserved"`
	Free           uint64 `json:"free"`
}

type NUMANodeState struct {
	NumberOfAssignments int                              `json:"numberOfAssignments"`
	MemoryMap           map[v1.ResourceName]*MemoryTable `json:"memoryMap"`
	Cells               []int                            `json:"cells"`
}

type NUMANodeMap map[int]*NUMANodeState

type Block struct {
	NUMAAffinity []int           `json:"numaAffinity"`
	Type         v1.ResourceName `json:"type"`
	Size         uint64          `json:"size"`
}

type ContainerMemoryAssignments map[string]map[string][]Block

type MemoryManagerCheckpoint struct {
	PolicyName   string                     `json:"policyName"`
	MachineState NUMANodeMap                `json:"machineState"`
	Entries      ContainerMemoryAssignments `json:"entries,omitempty"`
	Checksum     checksum.Checksum          `json:"checksum"`
}

func (mp *MemoryManagerCheckpoint) MarshalCheckpoint() ([]byte, error) {
	mp.Checksum = 0
	mp.Checksum = checksum.New(mp)
	return json.Marshal(*mp)
}
GO
cat > "$d/main.go" <<'GO'
package main

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/kubernetes/_output/memck/state"
)

func table(total, sys, reserved uint64) *state.MemoryTable {
	return &state.MemoryTable{TotalMemSize: total, SystemReserved: sys, Allocatable: total - sys, Reserved: reserved, Free: total - sys - reserved}
}

func main() {
	samples := []*state.MemoryManagerCheckpoint{
		{PolicyName: "None", MachineState: state.NUMANodeMap{}, Entries: state.ContainerMemoryAssignments{}},
		{PolicyName: "Static", MachineState: state.NUMANodeMap{}, Entries: state.ContainerMemoryAssignments{}},
		{
			PolicyName: "Static",
			MachineState: state.NUMANodeMap{
				0: {NumberOfAssignments: 3, Cells: []int{0, 1}, MemoryMap: map[v1.ResourceName]*state.MemoryTable{
					"memory": table(1<<30, 100<<20, 512<<20), "hugepages-2Mi": table(64<<20, 0, 4<<20), "hugepages-1Gi": table(0, 0, 0)}},
				1: {NumberOfAssignments: 1, Cells: []int{0, 1}, MemoryMap: map[v1.ResourceName]*state.MemoryTable{
					"memory": table(2<<30, 0, 1<<30), "hugepages-2Mi": table(0, 0, 0), "hugepages-1Gi": table(0, 0, 0)}},
				10: {NumberOfAssignments: 0, Cells: []int{10}, MemoryMap: map[v1.ResourceName]*state.MemoryTable{
					"memory": table(1<<30, 0, 0)}},
				2: {NumberOfAssignments: 1, Cells: []int{2}, MemoryMap: map[v1.ResourceName]*state.MemoryTable{
					"memory": table(1<<30, 0, 256<<20)}},
			},
			Entries: state.ContainerMemoryAssignments{
				"pod-b": {"app": {{NUMAAffinity: []int{2}, Type: "memory", Size: 256 << 20}}},
				"pod-a": {
					"init": {{NUMAAffinity: []int{0, 1}, Type: "memory", Size: 0}},
					"c": {{NUMAAffinity: []int{0, 1}, Type: "memory", Size: 1536 << 20}, {NUMAAffinity: []int{0, 1}, Type: "hugepages-2Mi", Size: 4 << 20}},
				},
			},
		},
	}
	for _, cp := range samples {
		b, err := cp.MarshalCheckpoint()
		if err != nil {
			panic(err)
		}
		fmt.Println(string(b))
	}
}
GO
cd "$T" && GOROOT=$G GOFLAGS=-mod=vendor "$G/bin/go" run ./_output/memck/main.go
