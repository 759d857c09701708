//go:build !cgo

package cuda

import "unsafe"

// Without cgo there is no way to reach the driver: every call fails with
// errNoCgo, which wraps errkind.ErrNotSupported. (Generated from the signatures
// of driver_cgo.go and nvrtc_cgo.go.)
var errNoCgo = &LoadError{Library: "libcuda.so.1", Detail: "weft built without cgo (CGO_ENABLED=0)", Hint: "no NVIDIA driver support in this build"}

func driverErrorName(Result) string   { return "" }
func driverErrorString(Result) string { return "" }
func loaded() bool                    { return false }

func Load() error {
	return errNoCgo
}

func DriverVersion() (int, error) {
	return 0, errNoCgo
}

func DeviceCount() (int, error) {
	return 0, errNoCgo
}

func DeviceGet(ordinal int) (Device, error) {
	return 0, errNoCgo
}

func (d Device) Name() (string, error) {
	return "", errNoCgo
}

func (d Device) Attribute(a DeviceAttribute) (int, error) {
	return 0, errNoCgo
}

func (d Device) UUID() (UUID, error) {
	return UUID{}, errNoCgo
}

func (d Device) PCIBusID() (string, error) {
	return "", errNoCgo
}

func (d Device) TotalMem() (int64, error) {
	return 0, errNoCgo
}

func CanAccessPeer(d, peer Device) (bool, error) {
	return false, errNoCgo
}

func P2PNativeAtomics(d, peer Device) (bool, error) {
	return false, errNoCgo
}

func (d Device) PrimaryCtxRetain() (Context, error) {
	return 0, errNoCgo
}

func (d Device) PrimaryCtxRelease() error {
	return errNoCgo
}

func (c Context) Synchronize() error {
	return errNoCgo
}

func (c Context) EnablePeerAccess(peer Context) error {
	return errNoCgo
}

func (c Context) MemAlloc(bytes int64) (DevicePtr, error) {
	return 0, errNoCgo
}

func (c Context) MemFree(p DevicePtr) error {
	return errNoCgo
}

func (c Context) MemGetInfo() (free, total int64, err error) {
	return 0, 0, errNoCgo
}

func (e Event) RecordUnlessCapturing(s Stream) (recorded bool, err error) {
	return false, errNoCgo
}

func (s Stream) After(prev Stream) (ordered bool, err error) { return false, errNoCgo }

func (s Stream) WaitUnlessCapturing(e Event) (waited bool, err error) { return false, errNoCgo }
func (s Stream) IsCapturing() (bool, error)                           { return false, errNoCgo }

func (s Stream) Join(prev Stream) (ordered bool, err error) { return false, errNoCgo }

func (c Context) MemHostAlloc(bytes int64, flags uint) (unsafe.Pointer, error) {
	return nil, errNoCgo
}

func (c Context) MemHostGetDevicePointer(p unsafe.Pointer) (DevicePtr, error) {
	return 0, errNoCgo
}

func (c Context) MemFreeHost(p unsafe.Pointer) error {
	return errNoCgo
}

func (c Context) MemcpyHtoD(dst DevicePtr, src []byte) error {
	return errNoCgo
}

func (c Context) MemcpyDtoH(dst []byte, src DevicePtr) error {
	return errNoCgo
}

func (c Context) MemcpyDtoD(dst, src DevicePtr, bytes int64) error {
	return errNoCgo
}

func (c Context) MemHostRegister(p unsafe.Pointer, bytes int64, flags uint) error {
	return errNoCgo
}

func (c Context) MemHostUnregister(p unsafe.Pointer) error {
	return errNoCgo
}

func (c Context) MemsetD8(dst DevicePtr, v byte, n int64) error {
	return errNoCgo
}

func (c Context) MemGetAddressRange(p DevicePtr) (base DevicePtr, size int64, err error) {
	err = errNoCgo
	return
}

func (c Context) PointerDeviceOrdinal(p DevicePtr) (int, error) {
	return 0, errNoCgo
}

func (c Context) IPCGetMemHandle(p DevicePtr) (IPCMemHandle, error) {
	return IPCMemHandle{}, errNoCgo
}

func (c Context) IPCOpenMemHandle(h IPCMemHandle) (DevicePtr, error) {
	return 0, errNoCgo
}

func (c Context) IPCCloseMemHandle(p DevicePtr) error {
	return errNoCgo
}

func (c Context) StreamCreate(flags uint) (Stream, error) {
	return Stream{}, errNoCgo
}

func (s Stream) Query() (done bool, err error) {
	err = errNoCgo
	return
}

func (s Stream) Synchronize() error {
	return errNoCgo
}

func (s Stream) Destroy() error {
	return errNoCgo
}

func (s Stream) MemcpyAsync(dst, src DevicePtr, bytes int64) error {
	return errNoCgo
}

func (s Stream) MemcpyDtoHAsync(dst unsafe.Pointer, src DevicePtr, bytes int64) error {
	return errNoCgo
}

func (s Stream) MemcpyHtoDAsync(dst DevicePtr, src unsafe.Pointer, bytes int64) error {
	return errNoCgo
}

func (s Stream) WaitEvent(e Event) error {
	return errNoCgo
}

// StreamWaitValueEq is CU_STREAM_WAIT_VALUE_EQ.
const StreamWaitValueEq = 0x1

func (s Stream) WaitValue64(addr DevicePtr, v uint64, flags uint) error { return errNoCgo }

func (s Stream) WriteValue64(addr DevicePtr, v uint64, flags uint) error {
	return errNoCgo
}

func (s Stream) Signal64(addr0 DevicePtr, v0 uint64, addr1 DevicePtr, v1 uint64) error {
	return errNoCgo
}

func (s Stream) BeginCapture(mode int) error {
	return errNoCgo
}

func (s Stream) EndCapture() (Graph, error) {
	return Graph{}, errNoCgo
}

func (g Graph) Instantiate(flags uint64) (GraphExec, error) {
	return GraphExec{}, errNoCgo
}

func (g Graph) Destroy() error {
	return errNoCgo
}

func (e GraphExec) Launch(s Stream) error {
	return errNoCgo
}

func (e GraphExec) Destroy() error {
	return errNoCgo
}

func (c Context) EventCreate(flags uint) (Event, error) {
	return Event{}, errNoCgo
}

func (e Event) Record(s Stream) error {
	return errNoCgo
}

func (e Event) Query() (done bool, err error) {
	err = errNoCgo
	return
}

func (e Event) Synchronize() error {
	return errNoCgo
}

func (e Event) ElapsedMillis(start Event) (float32, error) {
	return 0, errNoCgo
}

func (e Event) Destroy() error {
	return errNoCgo
}

func (c Context) ModuleLoadData(image []byte) (Module, error) {
	return Module{}, errNoCgo
}

func (m Module) Function(name string) (Function, error) {
	return Function{}, errNoCgo
}

func (m Module) Unload() error {
	return errNoCgo
}

func (f Function) SetAttribute(a FunctionAttribute, v int) error {
	return errNoCgo
}

func (f Function) Attribute(a FunctionAttribute) (int, error) {
	return 0, errNoCgo
}

// MaxActiveBlocksPerMultiprocessor is cuOccupancyMaxActiveBlocksPerMultiprocessor.
func (f Function) MaxActiveBlocksPerMultiprocessor(threads, sharedBytes int) (int, error) {
	return 0, errNoCgo
}

func (f Function) Launch(grid, block Dim3, sharedBytes int, s Stream, params []byte) error {
	return errNoCgo
}

func (c Context) MemGetAllocationGranularity(dev int, handleTypes int, option int) (int64, error) {
	return 0, errNoCgo
}

func (c Context) MemCreate(size int64, dev int, handleTypes int) (MemGenericAllocationHandle, error) {
	return 0, errNoCgo
}

func (c Context) MemRelease(h MemGenericAllocationHandle) error {
	return errNoCgo
}

func (c Context) MemExportToFD(h MemGenericAllocationHandle) (int, error) {
	return 0, errNoCgo
}

func (c Context) MemImportFromFD(fd int) (MemGenericAllocationHandle, error) {
	return 0, errNoCgo
}

func (c Context) MemAddressReserve(size, align int64) (DevicePtr, error) {
	return 0, errNoCgo
}

func (c Context) MemAddressFree(p DevicePtr, size int64) error {
	return errNoCgo
}

func (c Context) MemMap(p DevicePtr, size int64, h MemGenericAllocationHandle) error {
	return errNoCgo
}

func (c Context) MemUnmap(p DevicePtr, size int64) error {
	return errNoCgo
}

func (c Context) MemSetAccess(p DevicePtr, size int64, devices []int) error {
	return errNoCgo
}

func SetCurrentProc() uintptr {
	return 0
}

func LoadNVRTC() error {
	return errNoCgo
}

func NVRTCVersion() (major, minor int, err error) {
	err = errNoCgo
	return
}

func NVRTCPath() string {
	return ""
}

func Compile(s Source) ([]byte, error) {
	return nil, errNoCgo
}

func MulticastAvailable() bool {
	return false
}

func (c Context) MulticastGetGranularity(numDevices int, size int64, handleTypes int, option int) (int64, error) {
	return 0, errNoCgo
}

func (c Context) MulticastCreate(numDevices int, size int64, handleTypes int) (MemGenericAllocationHandle, error) {
	return 0, errNoCgo
}

func (c Context) MulticastAddDevice(mc MemGenericAllocationHandle, dev Device) error {
	return errNoCgo
}

func (c Context) MulticastBindMem(mc MemGenericAllocationHandle, mcOffset int64, mem MemGenericAllocationHandle, memOffset, size int64) error {
	return errNoCgo
}

func (c Context) MulticastUnbind(mc MemGenericAllocationHandle, dev Device, mcOffset, size int64) error {
	return errNoCgo
}

func QueueOps(ctx Context, streams []Stream, ops []StreamOp, batch bool) (failed int, err error) {
	return -1, errNoCgo
}
