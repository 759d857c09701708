//go:build !cgo

package ncclnet

// Without cgo no plugin can be loaded: Load fails with a *LoadError, so
// no other object can be made; their methods exist so that hal/netplugin
// builds.

func errNoCgo(name string) error {
	return &LoadError{Name: name, Detail: "weft built without cgo (CGO_ENABLED=0)"}
}

// Plugin is a loaded net plugin.
type Plugin struct{}

// Load fails: built without cgo.
func Load(name string) (*Plugin, error) { return nil, errNoCgo(name) }

func (p *Plugin) Name() string                           { return "" }
func (p *Plugin) Path() string                           { return "" }
func (p *Plugin) Devices() (int, error)                  { return 0, errNoCgo("") }
func (p *Plugin) Properties(dev int) (Properties, error) { return Properties{}, errNoCgo("") }
func (p *Plugin) Listen(dev int) (*Listen, Handle, error) {
	return nil, Handle{}, errNoCgo("")
}
func (p *Plugin) Dial(dev int, h Handle) *Dialer { return &Dialer{} }

// Dialer is a connection in progress.
type Dialer struct{}

func (d *Dialer) Connect() (*SendComm, error) { return nil, errNoCgo("") }
func (d *Dialer) Free()                       {}

// Listen is a listening comm.
type Listen struct{}

func (l *Listen) Accept() (*RecvComm, error) { return nil, errNoCgo("") }
func (l *Listen) Close() error               { return errNoCgo("") }

type comm struct{}

// SendComm is the sending end of a connection.
type SendComm struct{ comm }

// RecvComm is the receiving end of a connection.
type RecvComm struct{ comm }

// MR is a memory registration.
type MR struct{}

func (c *comm) RegMr(addr uint64, size int, ptrType int) (*MR, error) { return nil, errNoCgo("") }
func (m *MR) Dereg() error                                            { return errNoCgo("") }

// Request is an operation in flight.
type Request struct{}

func (s *SendComm) ISend(addr uint64, size, tag int, mr *MR) (*Request, error) {
	return nil, errNoCgo("")
}
func (r *RecvComm) IRecv(addr uint64, size, tag int, mr *MR) (*Request, error) {
	return nil, errNoCgo("")
}
func (r *RecvComm) IFlush(addr uint64, size int, mr *MR) (*Request, error) {
	return nil, errNoCgo("")
}
func (q *Request) Test() (done bool, size int, err error) { return false, 0, errNoCgo("") }
func (s *SendComm) Close() error                          { return errNoCgo("") }
func (r *RecvComm) Close() error                          { return errNoCgo("") }
