//go:build !cgo

package ucx

// Without cgo there is no way to reach UCX: Load fails with a *LoadError
// (wrapping errkind.ErrNotSupported), so no other object can be made;
// their methods exist so that hal/ucx builds.

func errNoCgo() error {
	return &LoadError{Library: DefaultUCP, Detail: "weft built without cgo (CGO_ENABLED=0)"}
}

// Lib is the opened UCX libraries.
type Lib struct{}

// Load fails: built without cgo.
func Load() (*Lib, error) { return nil, errNoCgo() }

// Open fails: built without cgo.
func Open(ucp, ucs string) (*Lib, error) {
	return nil, &LoadError{Library: ucp, Detail: "weft built without cgo (CGO_ENABLED=0)"}
}

func (l *Lib) Version() string                            { return "" }
func (l *Lib) StatusString(status int) string             { return "" }
func (l *Lib) Done(r *Request, call string) (bool, error) { return true, errNoCgo() }
func (l *Lib) NewContext(features uint64, settings map[string]string) (*Context, error) {
	return nil, errNoCgo()
}

// Context is a UCP context.
type Context struct{}

func (c *Context) MemoryTypes() (uint64, error)                             { return 0, errNoCgo() }
func (c *Context) Close()                                                   {}
func (c *Context) MemMap(addr uintptr, n uint64, memType int) (*Mem, error) { return nil, errNoCgo() }
func (c *Context) NewWorker(amID uint16, maxLen int) (*Worker, error)       { return nil, errNoCgo() }

// Mem is a memory registration.
type Mem struct{}

func (m *Mem) PackRkey() ([]byte, error) { return nil, errNoCgo() }
func (m *Mem) Unmap() error              { return errNoCgo() }

// Worker is a UCP worker.
type Worker struct{}

func (w *Worker) Address() ([]byte, error)               { return nil, errNoCgo() }
func (w *Worker) Progress() int                          { return 0 }
func (w *Worker) Arm() (bool, error)                     { return false, errNoCgo() }
func (w *Worker) Wait(timeoutMs int) (bool, error)       { return false, errNoCgo() }
func (w *Worker) Signal() error                          { return errNoCgo() }
func (w *Worker) PopAM() ([]byte, bool)                  { return nil, false }
func (w *Worker) Dropped() uint64                        { return 0 }
func (w *Worker) Close()                                 {}
func (w *Worker) Connect(addr []byte) (*Endpoint, error) { return nil, errNoCgo() }

// Endpoint is a connection to a peer's worker.
type Endpoint struct{}

func (e *Endpoint) PeerFailureHandling() bool          { return false }
func (e *Endpoint) Err() error                         { return errNoCgo() }
func (e *Endpoint) UnpackRkey(b []byte) (*Rkey, error) { return nil, errNoCgo() }
func (e *Endpoint) Put(src uintptr, n uint64, raddr uint64, k *Rkey) (Request, error) {
	return Request{}, errNoCgo()
}
func (e *Endpoint) Flush() (Request, error)                        { return Request{}, errNoCgo() }
func (e *Endpoint) SendAM(id uint16, data []byte) (Request, error) { return Request{}, errNoCgo() }
func (e *Endpoint) Close(force bool) (Request, error)              { return Request{}, errNoCgo() }

// Rkey is a peer's remote key.
type Rkey struct{}

func (k *Rkey) Destroy() {}

// Request is an operation in flight.
type Request struct{}

func (r *Request) Pending() bool { return false }
