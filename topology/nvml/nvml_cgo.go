//go:build cgo

package nvml

import (
	"encoding/binary"
	"fmt"
	"math"
	"strings"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/topology/sysfs"
)

// Open returns the NVML source backed by the system's libnvidia-ml.so.1.
// Opening loads nothing; each Snapshot loads, initialises and shuts down
// the library.
func Open() Source { return live{lib: gonvml.New()} }

type live struct{ lib gonvml.Interface }

func (l live) Snapshot() (Snapshot, error) { return readSnapshot(l.lib) }

// retErr turns an NVML return code into an error naming the call.
func retErr(call string, ret gonvml.Return) error {
	if ret == gonvml.SUCCESS {
		return nil
	}
	sentinel := hal.ErrDevice
	switch ret {
	case gonvml.ERROR_LIBRARY_NOT_FOUND, gonvml.ERROR_DRIVER_NOT_LOADED, gonvml.ERROR_NO_PERMISSION,
		gonvml.ERROR_NOT_SUPPORTED, gonvml.ERROR_FUNCTION_NOT_FOUND:
		sentinel = hal.ErrNotSupported
	}
	return fmt.Errorf("NVML %s: %s: %w", call, returnString(ret), sentinel)
}

// returnString has a fallback table so that messages read well even when
// the library (and its nvmlErrorString) is absent.
func returnString(ret gonvml.Return) string {
	switch ret {
	case gonvml.ERROR_LIBRARY_NOT_FOUND:
		return "libnvidia-ml.so.1 not found (no NVIDIA driver installed)"
	case gonvml.ERROR_DRIVER_NOT_LOADED:
		return "NVIDIA driver not loaded"
	case gonvml.ERROR_NO_PERMISSION:
		return "no permission (is /dev/nvidiactl readable?)"
	case gonvml.ERROR_NOT_SUPPORTED:
		return "not supported"
	case gonvml.ERROR_FUNCTION_NOT_FOUND:
		return "function not found (driver too old)"
	case gonvml.ERROR_INVALID_ARGUMENT:
		return "invalid argument"
	case gonvml.ERROR_GPU_IS_LOST:
		return "GPU is lost"
	}
	return fmt.Sprintf("error %d", int(ret))
}

func readSnapshot(lib gonvml.Interface) (snap Snapshot, err error) {
	if err := retErr("init", lib.Init()); err != nil {
		return Snapshot{}, err
	}
	defer func() {
		if ret := lib.Shutdown(); ret != gonvml.SUCCESS && err == nil {
			err = retErr("shutdown", ret)
		}
	}()
	if v, ret := lib.SystemGetDriverVersion(); ret == gonvml.SUCCESS {
		snap.DriverVersion = v
	}
	n, ret := lib.DeviceGetCount()
	if err := retErr("device count", ret); err != nil {
		return Snapshot{}, err
	}
	handles := make([]gonvml.Device, 0, n)
	for i := 0; i < n; i++ {
		h, ret := lib.DeviceGetHandleByIndex(i)
		if err := retErr(fmt.Sprintf("device %d handle", i), ret); err != nil {
			return Snapshot{}, err
		}
		d, err := readDevice(i, h)
		if err != nil {
			return Snapshot{}, err
		}
		handles = append(handles, h)
		snap.Devices = append(snap.Devices, d)
	}
	for a := 0; a < n; a++ {
		for b := a + 1; b < n; b++ {
			snap.Pairs = append(snap.Pairs, readPair(a, b, handles[a], handles[b]))
		}
	}
	return snap, nil
}

func readDevice(i int, h gonvml.Device) (Device, error) {
	d := Device{Index: i, NUMANode: -1}
	var ret gonvml.Return
	if d.Name, ret = h.GetName(); ret != gonvml.SUCCESS {
		return Device{}, retErr(fmt.Sprintf("device %d name", i), ret)
	}
	if d.UUID, ret = h.GetUUID(); ret != gonvml.SUCCESS {
		return Device{}, retErr(fmt.Sprintf("device %d UUID", i), ret)
	}
	pci, ret := h.GetPciInfo()
	if ret != gonvml.SUCCESS {
		return Device{}, retErr(fmt.Sprintf("device %d PCI info", i), ret)
	}
	bdf, err := sysfs.ParseBDF(cString(pci.BusId[:]))
	if err != nil {
		return Device{}, fmt.Errorf("NVML device %d bus id: %v: %w", i, err, hal.ErrDevice)
	}
	d.BusID = bdf
	if maj, min, ret := h.GetCudaComputeCapability(); ret == gonvml.SUCCESS {
		d.CCMajor, d.CCMinor = maj, min
	}
	if mem, ret := h.GetMemoryInfo(); ret == gonvml.SUCCESS {
		d.MemoryBytes = mem.Total
	}
	if numa, ret := h.GetNumaNodeId(); ret == gonvml.SUCCESS && numa >= 0 {
		d.NUMANode = numa
	}
	for l := 0; l < gonvml.NVLINK_MAX_LINKS; l++ {
		link, ok := readNvLink(h, l)
		if ok {
			d.NvLinks = append(d.NvLinks, link)
		}
	}
	d.C2C = readC2C(h)
	if fi, ret := h.GetGpuFabricInfo(); ret == gonvml.SUCCESS && fi.State != gonvml.GPU_FABRIC_STATE_NOT_SUPPORTED {
		d.Fabric = &Fabric{ClusterUUID: formatUUID(fi.ClusterUuid), CliqueID: fi.CliqueId, State: fabricStateName(fi.State)}
	}
	return d, nil
}

// readNvLink follows NCCL's detection (src/graph/xml.cc): a link counts
// when it supports P2P and is active; its far end comes from the remote PCI
// info and remote device type.
func readNvLink(h gonvml.Device, l int) (NvLink, bool) {
	p2p, ret := h.GetNvLinkCapability(l, gonvml.NVLINK_CAP_P2P_SUPPORTED)
	if ret != gonvml.SUCCESS || p2p == 0 {
		return NvLink{}, false
	}
	state, ret := h.GetNvLinkState(l)
	if ret != gonvml.SUCCESS {
		// Hopper and later report state through a field value.
		v, ok := fieldUint(h, gonvml.FI_DEV_NVLINK_GET_STATE, l)
		if !ok {
			return NvLink{}, false
		}
		state = gonvml.EnableState(v)
	}
	if state != gonvml.FEATURE_ENABLED {
		return NvLink{}, false
	}
	link := NvLink{Link: l, RemoteType: RemoteUnknown}
	if v, ret := h.GetNvLinkVersion(l); ret == gonvml.SUCCESS {
		link.Version = int(v)
	}
	if v, ok := fieldUint(h, gonvml.FI_DEV_NVLINK_GET_SPEED, l); ok && v < math.MaxInt32 {
		link.SpeedMBps = int(v)
	}
	if rp, ret := h.GetNvLinkRemotePciInfo(l); ret == gonvml.SUCCESS {
		if bdf, err := sysfs.ParseBDF(cString(rp.BusId[:])); err == nil {
			link.RemoteBusID = bdf
		}
	}
	if t, ret := h.GetNvLinkRemoteDeviceType(l); ret == gonvml.SUCCESS {
		link.RemoteType = RemoteType(t)
	}
	if a, ret := h.GetNvLinkCapability(l, gonvml.NVLINK_CAP_P2P_ATOMICS); ret == gonvml.SUCCESS {
		link.Atomics = a != 0
	}
	return link, true
}

func readC2C(h gonvml.Device) *C2C {
	n, ok := fieldUint(h, gonvml.FI_DEV_C2C_LINK_COUNT, 0)
	if !ok || n == 0 || n > 64 {
		return nil
	}
	c := &C2C{}
	for l := 0; l < int(n); l++ {
		up, ok1 := fieldUint(h, gonvml.FI_DEV_C2C_LINK_GET_STATUS, l)
		bw, ok2 := fieldUint(h, gonvml.FI_DEV_C2C_LINK_GET_MAX_BW, l)
		if ok1 && ok2 && up == 1 && bw < math.MaxInt32 {
			c.Links++
			c.BandwidthMBps = int(bw)
		}
	}
	if c.Links == 0 {
		return nil
	}
	return c
}

// fieldUint reads one scoped NVML field value as an unsigned integer.
func fieldUint(h gonvml.Device, field uint32, scope int) (uint64, bool) {
	fv := []gonvml.FieldValue{{FieldId: field, ScopeId: uint32(scope)}}
	if ret := h.GetFieldValues(fv); ret != gonvml.SUCCESS || gonvml.Return(fv[0].NvmlReturn) != gonvml.SUCCESS {
		return 0, false
	}
	return decodeField(fv[0].ValueType, fv[0].Value)
}

// decodeField decodes an nvmlValue_t by its nvmlValueType_t.
func decodeField(typ uint32, v [8]byte) (uint64, bool) {
	switch typ {
	case 0: // double
		f := math.Float64frombits(binary.LittleEndian.Uint64(v[:]))
		if f < 0 || math.IsNaN(f) || f > math.MaxInt64 {
			return 0, false
		}
		return uint64(f), true
	case 1: // unsigned int
		return uint64(binary.LittleEndian.Uint32(v[:4])), true
	case 2, 3: // unsigned long, unsigned long long
		return binary.LittleEndian.Uint64(v[:]), true
	case 4: // signed long long
		s := int64(binary.LittleEndian.Uint64(v[:]))
		return uint64(s), s >= 0
	case 5: // signed int
		s := int32(binary.LittleEndian.Uint32(v[:4]))
		return uint64(s), s >= 0
	}
	return 0, false
}

func readPair(a, b int, ha, hb gonvml.Device) Pair {
	p := Pair{A: a, B: b, Ancestor: AncestorUnknown}
	var reasons []string
	status := func(idx gonvml.GpuP2PCapsIndex, what string) bool {
		s, ret := ha.GetP2PStatus(hb, idx)
		if ret != gonvml.SUCCESS {
			reasons = append(reasons, what+": "+returnString(ret))
			return false
		}
		if s != gonvml.P2P_STATUS_OK {
			reasons = append(reasons, what+": "+p2pStatusName(int(s)))
			return false
		}
		return true
	}
	p.Read = status(gonvml.P2P_CAPS_INDEX_READ, "read")
	p.Write = status(gonvml.P2P_CAPS_INDEX_WRITE, "write")
	p.Atomics = status(gonvml.P2P_CAPS_INDEX_ATOMICS, "atomics")
	p.NVLink = status(gonvml.P2P_CAPS_INDEX_NVLINK, "nvlink")
	if len(reasons) > 0 {
		p.Reason = reasons[0]
	}
	if lvl, ret := ha.GetTopologyCommonAncestor(hb); ret == gonvml.SUCCESS {
		p.Ancestor = Ancestor(lvl)
	}
	return p
}

func cString(b []byte) string {
	if i := strings.IndexByte(string(b), 0); i >= 0 {
		b = b[:i]
	}
	return string(b)
}
