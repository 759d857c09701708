//go:build cgo

package nvml

import (
	"encoding/binary"
	"errors"
	"testing"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/google/go-cmp/cmp"

	"github.com/weftccl/weft/hal"
)

// mockGPU is an H200 whose links 0–17 go to an NVSwitch the host does not
// see (remote bus id unparsable), link speed 26562 MB/s.
func mockGPU(busID string) *mock.Device {
	d := &mock.Device{}
	d.GetNameFunc = func() (string, gonvml.Return) { return "NVIDIA H200", gonvml.SUCCESS }
	d.GetUUIDFunc = func() (string, gonvml.Return) { return "GPU-" + busID, gonvml.SUCCESS }
	d.GetPciInfoFunc = func() (gonvml.PciInfo, gonvml.Return) {
		var p gonvml.PciInfo
		copy(p.BusId[:], busID)
		return p, gonvml.SUCCESS
	}
	d.GetCudaComputeCapabilityFunc = func() (int, int, gonvml.Return) { return 9, 0, gonvml.SUCCESS }
	d.GetMemoryInfoFunc = func() (gonvml.Memory, gonvml.Return) { return gonvml.Memory{Total: 150754820096}, gonvml.SUCCESS }
	d.GetNumaNodeIdFunc = func() (int, gonvml.Return) { return 0, gonvml.SUCCESS }
	d.GetNvLinkCapabilityFunc = func(l int, c gonvml.NvLinkCapability) (uint32, gonvml.Return) { return 1, gonvml.SUCCESS }
	// Hopper: the state comes from the field value, not GetNvLinkState.
	d.GetNvLinkStateFunc = func(l int) (gonvml.EnableState, gonvml.Return) { return 0, gonvml.ERROR_NOT_SUPPORTED }
	d.GetNvLinkVersionFunc = func(l int) (uint32, gonvml.Return) { return 4, gonvml.SUCCESS }
	d.GetNvLinkRemotePciInfoFunc = func(l int) (gonvml.PciInfo, gonvml.Return) {
		var p gonvml.PciInfo
		copy(p.BusId[:], "fffffff:ffff:ff")
		return p, gonvml.SUCCESS
	}
	d.GetNvLinkRemoteDeviceTypeFunc = func(l int) (gonvml.IntNvLinkDeviceType, gonvml.Return) {
		return gonvml.NVLINK_DEVICE_TYPE_SWITCH, gonvml.SUCCESS
	}
	d.GetFieldValuesFunc = func(v []gonvml.FieldValue) gonvml.Return {
		for i := range v {
			var val uint32
			switch v[i].FieldId {
			case gonvml.FI_DEV_NVLINK_GET_STATE:
				val = 1
			case gonvml.FI_DEV_NVLINK_GET_SPEED:
				val = 26562
			default:
				v[i].NvmlReturn = uint32(gonvml.ERROR_NOT_SUPPORTED)
				continue
			}
			v[i].ValueType = 1
			binary.LittleEndian.PutUint32(v[i].Value[:4], val)
		}
		return gonvml.SUCCESS
	}
	d.GetGpuFabricInfoFunc = func() (gonvml.GpuFabricInfo, gonvml.Return) {
		return gonvml.GpuFabricInfo{State: gonvml.GPU_FABRIC_STATE_COMPLETED, CliqueId: 0}, gonvml.SUCCESS
	}
	d.GetP2PStatusFunc = func(peer gonvml.Device, idx gonvml.GpuP2PCapsIndex) (gonvml.GpuP2PStatus, gonvml.Return) {
		if idx == gonvml.P2P_CAPS_INDEX_ATOMICS {
			return gonvml.P2P_STATUS_NOT_SUPPORTED, gonvml.SUCCESS
		}
		return gonvml.P2P_STATUS_OK, gonvml.SUCCESS
	}
	d.GetTopologyCommonAncestorFunc = func(peer gonvml.Device) (gonvml.GpuTopologyLevel, gonvml.Return) {
		return gonvml.TOPOLOGY_NODE, gonvml.SUCCESS
	}
	return d
}

func TestReadSnapshot(t *testing.T) {
	devs := []*mock.Device{mockGPU("00000000:18:00.0"), mockGPU("00000000:2A:00.0")}
	shutdown := 0
	lib := &mock.Interface{
		InitFunc:                   func() gonvml.Return { return gonvml.SUCCESS },
		ShutdownFunc:               func() gonvml.Return { shutdown++; return gonvml.SUCCESS },
		SystemGetDriverVersionFunc: func() (string, gonvml.Return) { return "580.159", gonvml.SUCCESS },
		DeviceGetCountFunc:         func() (int, gonvml.Return) { return 2, gonvml.SUCCESS },
		DeviceGetHandleByIndexFunc: func(i int) (gonvml.Device, gonvml.Return) { return devs[i], gonvml.SUCCESS },
	}
	snap, err := readSnapshot(lib)
	if err != nil {
		t.Fatal(err)
	}
	var links []NvLink
	for l := 0; l < 18; l++ {
		links = append(links, NvLink{Link: l, Version: 4, SpeedMBps: 26562, RemoteType: RemoteSwitch, Atomics: true})
	}
	dev := func(i int, bdf string) Device {
		return Device{Index: i, Name: "NVIDIA H200", UUID: "GPU-" + map[int]string{0: "00000000:18:00.0", 1: "00000000:2A:00.0"}[i],
			BusID: bdf, CCMajor: 9, MemoryBytes: 150754820096, NUMANode: 0, NvLinks: links, Fabric: &Fabric{State: "completed"}}
	}
	want := Snapshot{DriverVersion: "580.159", Devices: []Device{dev(0, "0000:18:00.0"), dev(1, "0000:2a:00.0")},
		Pairs: []Pair{{A: 0, B: 1, Read: true, Write: true, NVLink: true, Reason: "atomics: not supported", Ancestor: AncestorNode}}}
	if diff := cmp.Diff(want, snap); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if shutdown != 1 {
		t.Errorf("Shutdown called %d times, want 1", shutdown)
	}
}

func TestReadSnapshotNoLibrary(t *testing.T) {
	lib := &mock.Interface{InitFunc: func() gonvml.Return { return gonvml.ERROR_LIBRARY_NOT_FOUND }}
	_, err := readSnapshot(lib)
	if !errors.Is(err, hal.ErrNotSupported) {
		t.Fatalf("error %v, want ErrNotSupported", err)
	}
	if want := "NVML init: libnvidia-ml.so.1 not found (no NVIDIA driver installed): not supported"; err.Error() != want {
		t.Errorf("error %q, want %q", err, want)
	}
}

// TestOpenWithoutDriver: on this machine (no NVIDIA driver) the live
// source fails with a reason, not a panic.
func TestOpenWithoutDriver(t *testing.T) {
	_, err := Open().Snapshot()
	if err != nil && !errors.Is(err, hal.ErrNotSupported) && !errors.Is(err, hal.ErrDevice) {
		t.Fatalf("Snapshot: %v", err)
	}
}
