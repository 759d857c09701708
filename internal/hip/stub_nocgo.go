//go:build !cgo

package hip

import "unsafe"

// Without cgo there is no way to reach the runtime: every call fails with
// errNoCgo, which wraps hal.ErrNotSupported. (Written from the signatures
// of hip_cgo.go and rtc_cgo.go; TestStubMatchesCgo keeps them equal.)
var errNoCgo = &LoadError{Library: "libamdhip64.so", Detail: "weft built without cgo (CGO_ENABLED=0)", NotFound: true, Hint: "no ROCm support in this build"}

func runtimeErrorName(Result) string   { return "" }
func runtimeErrorString(Result) string { return "" }

func Load() error {
	return errNoCgo
}

func LoadFrom(paths ...string) error {
	return errNoCgo
}

func LibraryPath() string {
	return ""
}

func DriverVersion() (int, error) {
	return 0, errNoCgo
}

func RuntimeVersion() (int, error) {
	return 0, errNoCgo
}

func DeviceCount() (int, error) {
	return 0, errNoCgo
}

func (d Device) Name() (string, error) {
	return "", errNoCgo
}

func (d Device) Attribute(a DeviceAttribute) (int, error) {
	return 0, errNoCgo
}

func (d Device) PCIBusID() (string, error) {
	return "", errNoCgo
}

func (d Device) TotalMem() (int64, error) {
	return 0, errNoCgo
}

func (d Device) UUID() (u UUID, ok bool, err error) {
	return UUID{}, false, errNoCgo
}

func (d Device) ArchName() (string, error) {
	return "", errNoCgo
}

func CanAccessPeer(d, peer Device) (bool, error) {
	return false, errNoCgo
}

func (d Device) EnablePeerAccess(peer Device) error {
	return errNoCgo
}

func (d Device) Malloc(bytes int64, flags uint) (DevicePtr, error) {
	return 0, errNoCgo
}

func (d Device) Free(p DevicePtr) error {
	return errNoCgo
}

func (d Device) HostMalloc(bytes int64, flags uint) (unsafe.Pointer, error) {
	return nil, errNoCgo
}

func (d Device) HostGetDevicePointer(p unsafe.Pointer) (DevicePtr, error) {
	return 0, errNoCgo
}

func (d Device) HostFree(p unsafe.Pointer) error {
	return errNoCgo
}

func (d Device) MemcpyHtoD(dst DevicePtr, src []byte) error {
	return errNoCgo
}

func (d Device) MemcpyDtoH(dst []byte, src DevicePtr) error {
	return errNoCgo
}

func (d Device) Memset(dst DevicePtr, v byte, n int64) error {
	return errNoCgo
}

func (d Device) MemGetAddressRange(p DevicePtr) (base DevicePtr, size int64, err error) {
	return 0, 0, errNoCgo
}

func (d Device) IPCGetMemHandle(p DevicePtr) (IPCMemHandle, error) {
	return IPCMemHandle{}, errNoCgo
}

func (d Device) IPCOpenMemHandle(h IPCMemHandle) (DevicePtr, error) {
	return 0, errNoCgo
}

func (d Device) IPCCloseMemHandle(p DevicePtr) error {
	return errNoCgo
}

func (d Device) StreamCreate(flags uint) (Stream, error) {
	return Stream{}, errNoCgo
}

func (s Stream) Query() (done bool, err error) {
	return false, errNoCgo
}

func (s Stream) Destroy() error {
	return errNoCgo
}

func (s Stream) MemcpyAsync(dst, src DevicePtr, bytes int64) error {
	return errNoCgo
}

func (s Stream) WriteValue64(addr DevicePtr, v uint64) error {
	return errNoCgo
}

func (s Stream) Signal64(addr0 DevicePtr, v0 uint64, addr1 DevicePtr, v1 uint64) error {
	return errNoCgo
}

func (s Stream) After(prev Stream) (ordered bool, err error) { return false, errNoCgo }

func (s Stream) BeginCapture(mode int) error {
	return errNoCgo
}

func (s Stream) EndCapture() (Graph, error) {
	return Graph{}, errNoCgo
}

func (g Graph) Instantiate() (GraphExec, error) {
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

func (d Device) EventCreate(flags uint) (Event, error) {
	return Event{}, errNoCgo
}

func (e Event) Record(s Stream) error {
	return errNoCgo
}

func (e Event) Query() (done bool, err error) {
	return false, errNoCgo
}

func (e Event) ElapsedMillis(start Event) (float32, error) {
	return 0, errNoCgo
}

func (e Event) Destroy() error {
	return errNoCgo
}

func (d Device) ModuleLoadData(image []byte) (Module, error) {
	return Module{}, errNoCgo
}

func (m Module) Function(name string) (Function, error) {
	return Function{}, errNoCgo
}

func (m Module) Unload() error {
	return errNoCgo
}

func (f Function) Launch(grid, block Dim3, sharedBytes int, s Stream, params []byte) error {
	return errNoCgo
}

func (f Function) MaxActiveBlocksPerMultiprocessor(threads, sharedBytes int) (int, error) {
	return 0, errNoCgo
}

func LoadRTC() error {
	return errNoCgo
}

func LoadRTCFrom(paths ...string) error {
	return errNoCgo
}

func RTCVersion() (major, minor int, err error) {
	return 0, 0, errNoCgo
}

func RTCPath() string {
	return ""
}

func Compile(s Source) ([]byte, error) {
	return nil, errNoCgo
}
