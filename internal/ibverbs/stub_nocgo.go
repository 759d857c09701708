//go:build !cgo

package ibverbs

// Without cgo there is no way to reach a verbs library: Open fails with a
// *LoadError (wrapping hal.ErrNotSupported), so no other object can be
// made; their methods exist so that hal/ib builds.

func errNoCgo(path string) error {
	return &LoadError{Library: path, Detail: "weft built without cgo (CGO_ENABLED=0)"}
}

// Lib is one opened verbs library.
type Lib struct{ path string }

// Load opens Library().
func Load() (*Lib, error) { return Open(Library()) }

// Open fails: built without cgo.
func Open(path string) (*Lib, error) { return nil, errNoCgo(path) }

func (l *Lib) Path() string                             { return l.path }
func (l *Lib) HasDmaBuf() bool                          { return false }
func (l *Lib) Devices() ([]string, error)               { return nil, errNoCgo(l.path) }
func (l *Lib) StatusString(status int) string           { return fallbackStatus(status) }
func (l *Lib) OpenDevice(name string) (*Context, error) { return nil, errNoCgo(l.path) }

// Context is an opened device.
type Context struct{ lib *Lib }

func (c *Context) Name() string                          { return "" }
func (c *Context) Lib() *Lib                             { return c.lib }
func (c *Context) Close() error                          { return errNoCgo("") }
func (c *Context) QueryDevice() (DeviceAttr, error)      { return DeviceAttr{}, errNoCgo("") }
func (c *Context) QueryPort(port int) (PortAttr, error)  { return PortAttr{}, errNoCgo("") }
func (c *Context) QueryGID(port, index int) (GID, error) { return GID{}, errNoCgo("") }
func (c *Context) AllocPD() (*PD, error)                 { return nil, errNoCgo("") }
func (c *Context) CreateCQ(cqe int) (*CQ, error)         { return nil, errNoCgo("") }

// PD is a protection domain.
type PD struct{}

func (p *PD) Dealloc() error                                     { return errNoCgo("") }
func (p *PD) RegMR(addr, length uint64, access int) (*MR, error) { return nil, errNoCgo("") }
func (p *PD) RegDmaBufMR(off, length, iova uint64, fd, access int) (*MR, error) {
	return nil, errNoCgo("")
}
func (p *PD) CreateRCQP(send, recv *CQ, maxSendWR, maxRecvWR int) (*QP, error) {
	return nil, errNoCgo("")
}

// MR is a registered memory region.
type MR struct{}

func (m *MR) LKey() uint32 { return 0 }
func (m *MR) RKey() uint32 { return 0 }
func (m *MR) Addr() uint64 { return 0 }
func (m *MR) Len() uint64  { return 0 }
func (m *MR) Dereg() error { return errNoCgo("") }

// CQ is a completion queue.
type CQ struct{}

func (q *CQ) CQE() int                   { return 0 }
func (q *CQ) Poll(out []WC) (int, error) { return 0, errNoCgo("") }
func (q *CQ) Destroy() error             { return errNoCgo("") }

// QP is a reliable-connected queue pair.
type QP struct{}

func (q *QP) Num() uint32                 { return 0 }
func (q *QP) Init(port, access int) error { return errNoCgo("") }
func (q *QP) ToRTR(a RTR) error           { return errNoCgo("") }
func (q *QP) ToRTS(a RTS) error           { return errNoCgo("") }
func (q *QP) SetState(state int) error    { return errNoCgo("") }
func (q *QP) Post(wrs []WR) (int, error)  { return 0, errNoCgo("") }
func (q *QP) PostRecv(ids, addrs []uint64, length, lkey uint32) (int, error) {
	return 0, errNoCgo("")
}
func (q *QP) Destroy() error { return errNoCgo("") }
