package sysfs

import (
	"errors"
	"sort"
	"strconv"
	"strings"
)

// NUMANode is one node under devices/system/node.
type NUMANode struct {
	ID          int
	CPUs        []int // sorted CPU numbers, from cpulist
	MemoryBytes int64 // MemTotal from meminfo, 0 when unknown
	// Distances are the SLIT distances to node 0, 1, … (10 = local).
	Distances []int
}

// ReadNUMANodes reads devices/system/node/node*. A kernel built without
// NUMA has no such directory; then one node 0 holding every online CPU is
// returned, as the kernel itself treats such a machine.
func (f *FS) ReadNUMANodes() ([]NUMANode, error) {
	names, err := f.List("devices/system/node")
	if err != nil {
		return nil, err
	}
	var out []NUMANode
	var errs []error
	for _, n := range names {
		idStr, ok := strings.CutPrefix(n, "node")
		if !ok {
			continue
		}
		id, err := strconv.Atoi(idStr)
		if err != nil || id < 0 {
			continue // "node_possible" style names are not nodes
		}
		rel := "devices/system/node/" + n
		node := NUMANode{ID: id}
		if node.CPUs, err = attr(f, rel+"/cpulist", ParseCPUList); err != nil {
			errs = append(errs, err)
			continue
		}
		node.MemoryBytes, err = optAttr(f, rel+"/meminfo", 0, ParseMemTotal)
		errs = append(errs, err)
		node.Distances, err = optAttr(f, rel+"/distance", nil, ParseDistances)
		errs = append(errs, err)
		out = append(out, node)
	}
	if len(out) == 0 && len(errs) == 0 {
		cpus, err := optAttr(f, "devices/system/cpu/online", nil, ParseCPUList)
		if err != nil {
			return nil, err
		}
		out = append(out, NUMANode{ID: 0, CPUs: cpus, Distances: []int{10}})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, errors.Join(errs...)
}

// ReadCPUID reads devices/system/cpu/modalias. A missing file gives a zero
// CPUID and no error; the caller decides on a fallback.
func (f *FS) ReadCPUID() (CPUID, error) {
	return optAttr(f, "devices/system/cpu/modalias", CPUID{}, ParseCPUModalias)
}
