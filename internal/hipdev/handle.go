package hipdev

import (
	"bytes"
	"encoding/binary"
	"fmt"

	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/internal/devcore"
	"github.com/weftccl/weft/internal/hip"
)

// ExportHandle is weft's exported form of a buffer in HIP device memory:
// the hipIpcMemHandle_t of its allocation, the range of the buffer in it,
// and who exported it, so that an importer refuses handles of other hosts
// and jobs before it asks the runtime. Encoded, version 1 (integers
// little-endian):
//
//	off  size  field
//	  0     8  magic "WEFTHIP1"
//	  8     4  exporter pid
//	 12     4  reserved (0)
//	 16     8  exporter host hash (HashID of its hal.Endpoint.HostID)
//	 24     8  job hash (HashID of hal.Config.JobID)
//	 32     8  exporter device hash (HashID of its PCI bus id)
//	 40     8  allocation base address in the exporter
//	 48     8  allocation size
//	 56     8  offset of the buffer within the allocation
//	 64     8  buffer size
//	 72    64  hipIpcMemHandle_t of the allocation
//	136        end
type ExportHandle struct {
	PID       uint32
	Host, Job uint64
	Device    uint64
	AllocBase uint64
	AllocSize uint64
	Offset    uint64
	Size      uint64
	IPC       hip.IPCMemHandle
}

const handleMagic = "WEFTHIP1"

// ExportHandleSize is the length of an encoded ExportHandle in bytes.
const ExportHandleSize = 136

// HashID condenses an identity (a HostID, a job id, a PCI bus id) into the
// 64 bits a handle carries: devcore.HashID, the first 8 bytes of its
// SHA-256.
func HashID(id string) uint64 { return devcore.HashID(id) }

// Encode returns the handle's bytes.
func (h ExportHandle) Encode() []byte {
	b := make([]byte, ExportHandleSize)
	copy(b, handleMagic)
	le := binary.LittleEndian
	le.PutUint32(b[8:], h.PID)
	for i, v := range []uint64{h.Host, h.Job, h.Device, h.AllocBase, h.AllocSize, h.Offset, h.Size} {
		le.PutUint64(b[16+8*i:], v)
	}
	copy(b[72:], h.IPC[:])
	return b
}

// DecodeExportHandle parses and validates b. Errors wrap
// hal.ErrInvalidArgument: a handle of the wrong size, of another backend
// or format version (magic), or with inconsistent sizes.
func DecodeExportHandle(b []byte) (ExportHandle, error) {
	var h ExportHandle
	if len(b) != ExportHandleSize {
		return h, fmt.Errorf("HIP IPC handle is %d bytes, want %d: %w", len(b), ExportHandleSize, hal.ErrInvalidArgument)
	}
	if !bytes.Equal(b[:8], []byte(handleMagic)) {
		return h, fmt.Errorf("not a HIP IPC handle of this weft version (magic %q, want %q; exported by another backend or weft version?): %w", b[:8], handleMagic, hal.ErrInvalidArgument)
	}
	le := binary.LittleEndian
	h.PID = le.Uint32(b[8:])
	for i, p := range []*uint64{&h.Host, &h.Job, &h.Device, &h.AllocBase, &h.AllocSize, &h.Offset, &h.Size} {
		*p = le.Uint64(b[16+8*i:])
	}
	copy(h.IPC[:], b[72:])
	if le.Uint32(b[12:]) != 0 || h.Size == 0 || h.AllocSize > 1<<62 || h.Offset > h.AllocSize || h.Size > h.AllocSize-h.Offset {
		return h, fmt.Errorf("HIP IPC handle is inconsistent: buffer of %d bytes at offset %d in an allocation of %d bytes: %w", h.Size, h.Offset, h.AllocSize, hal.ErrInvalidArgument)
	}
	return h, nil
}

// IPCMapping is one hipIpcOpenMemHandle mapping of an allocation, shared
// by every import of it on one device: the runtime opens a handle once per
// device and process, so imports of buffers of one allocation share it,
// counted. Base is the allocation's address on the importing device, Size
// its size as mapped.
type IPCMapping = devcore.Mapping[hip.Device, hip.IPCMemHandle, hip.DevicePtr]

// ipcMaps is the process's table of IPC mappings.
var ipcMaps = devcore.IPC[hip.Device, hip.IPCMemHandle, hip.DevicePtr]{
	OpenHandle:  hip.Device.IPCOpenMemHandle,
	Range:       hip.Device.MemGetAddressRange,
	CloseHandle: hip.Device.IPCCloseMemHandle,
}

// OpenIPC maps the allocation of h on d, or takes another reference to
// the mapping d already has. When the runtime refuses a second open of the
// handle by another device of this process, that device's mapping is
// shared (its address is valid process-wide). Release each mapping once
// per OpenIPC.
func OpenIPC(d hip.Device, h hip.IPCMemHandle) (*IPCMapping, error) { return ipcMaps.Open(d, h) }
