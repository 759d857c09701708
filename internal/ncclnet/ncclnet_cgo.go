//go:build cgo

package ncclnet

/*
#cgo LDFLAGS: -ldl
#include <stdlib.h>
#include <string.h>
#include "ncclnet.h"
*/
import "C"

import (
	"fmt"
	"strings"
	"sync"
	"unsafe"
)

var (
	pluginsMu sync.Mutex
	plugins   = map[string]*Plugin{} // by NCCL_NET_PLUGIN value
)

// Plugin is a loaded and initialised net plugin. Its methods are safe
// for concurrent use; the objects it makes are not (see the package
// documentation).
type Plugin struct {
	c    *C.weft_ncclnet
	name string // the table's name
	path string // the library name that loaded
}

// Load opens the plugin NCCL_NET_PLUGIN=name selects (see [Candidates]),
// resolves its ncclNetPlugin_v8 table and calls its init with weft's
// logger. A plugin stays loaded for the life of the process; loading the
// same name again returns the same Plugin (init runs once). Errors: a
// *LoadError (no name, no library, no v8 table), or an *Error of init.
func Load(name string) (*Plugin, error) {
	pluginsMu.Lock()
	defer pluginsMu.Unlock()
	if p := plugins[name]; p != nil {
		return p, nil
	}
	cands := Candidates(name)
	if len(cands) == 0 {
		return nil, &LoadError{Name: name, Detail: "NCCL_NET_PLUGIN names no plugin"}
	}
	var tried []string
	for _, path := range cands {
		cpath := C.CString(path)
		var msg [512]C.char
		var cp *C.weft_ncclnet
		rc := C.weft_ncclnet_open(cpath, &cp, &msg[0], C.int(len(msg)))
		C.free(unsafe.Pointer(cpath))
		if rc == 1 {
			tried = append(tried, C.GoString(&msg[0]))
			continue
		}
		if rc != 0 {
			return nil, &LoadError{Name: name, Detail: path + ": " + C.GoString(&msg[0])}
		}
		p := &Plugin{c: cp, name: C.GoString(C.weft_ncclnet_name(cp)), path: path}
		if err := p.check("init", C.weft_ncclnet_init(cp)); err != nil {
			return nil, err
		}
		plugins[name] = p
		return p, nil
	}
	return nil, &LoadError{Name: name, Detail: strings.Join(tried, "; ")}
}

// Name is the plugin's own name (the name field of its table).
func (p *Plugin) Name() string { return p.name }

// Path is the library name or path that loaded.
func (p *Plugin) Path() string { return p.path }

func (p *Plugin) check(call string, rc C.int) error {
	if rc == 0 {
		return nil
	}
	return &Error{Plugin: p.name, Call: call, Code: Result(rc)}
}

// Devices is the number of network devices the plugin drives.
func (p *Plugin) Devices() (int, error) {
	var n C.int
	if err := p.check("devices", C.weft_ncclnet_devices(p.c, &n)); err != nil {
		return 0, err
	}
	return int(n), nil
}

// Properties describes device dev (0 ≤ dev < Devices()).
func (p *Plugin) Properties(dev int) (Properties, error) {
	var c C.weft_ncclNetProperties_v8_t
	if err := p.check("getProperties", C.weft_ncclnet_properties(p.c, C.int(dev), &c)); err != nil {
		return Properties{}, err
	}
	pr := Properties{GUID: uint64(c.guid), PtrSupport: int(c.ptrSupport), RegIsGlobal: c.regIsGlobal != 0,
		SpeedMbps: int(c.speed), Port: int(c.port), LatencyUs: float32(c.latency), MaxComms: int(c.maxComms), MaxRecvs: int(c.maxRecvs)}
	if c.name != nil {
		pr.Name = C.GoString(c.name)
	}
	if c.pciPath != nil {
		pr.PCIPath = C.GoString(c.pciPath)
	}
	return pr, nil
}

// Listen is a listening comm of one device.
type Listen struct {
	p   *Plugin
	c   unsafe.Pointer
	dev int
}

// Listen creates a listening comm on device dev and returns the handle a
// sender passes to Connect.
func (p *Plugin) Listen(dev int) (*Listen, Handle, error) {
	var h Handle
	buf := C.malloc(HandleSize)
	defer C.free(buf)
	C.memset(buf, 0, HandleSize)
	var lc unsafe.Pointer
	if err := p.check("listen", C.weft_ncclnet_listen(p.c, C.int(dev), buf, &lc)); err != nil {
		return nil, h, err
	}
	if lc == nil {
		return nil, h, &Error{Plugin: p.name, Call: "listen (returned no listen comm)", Code: InternalError}
	}
	copy(h[:], unsafe.Slice((*byte)(buf), HandleSize))
	return &Listen{p: p, c: lc, dev: dev}, h, nil
}

// Accept returns the receiving comm of a sender that connected, or nil
// while none has (accept does not block; call again).
func (l *Listen) Accept() (*RecvComm, error) {
	var rc unsafe.Pointer
	if err := l.p.check("accept", C.weft_ncclnet_accept(l.p.c, l.c, &rc)); err != nil {
		return nil, err
	}
	if rc == nil {
		return nil, nil
	}
	return &RecvComm{comm{p: l.p, c: rc}}, nil
}

// Close closes the listening comm.
func (l *Listen) Close() error {
	return l.p.check("closeListen", C.weft_ncclnet_close_listen(l.p.c, l.c))
}

// Dialer is a connection in progress to the listener of one handle.
// NCCL passes the same handle buffer to every connect call of one
// connection, and plugins keep their connect state in it; a Dialer holds
// that buffer in C memory until Free.
type Dialer struct {
	p   *Plugin
	dev int
	buf unsafe.Pointer
}

// Dial prepares a connection from device dev to the listener of h.
func (p *Plugin) Dial(dev int, h Handle) *Dialer {
	buf := C.malloc(HandleSize)
	C.memcpy(buf, unsafe.Pointer(&h[0]), HandleSize)
	return &Dialer{p: p, dev: dev, buf: buf}
}

// Connect starts or continues the connection. It returns nil while the
// connection is not established (connect does not block; call again).
func (d *Dialer) Connect() (*SendComm, error) {
	if d.buf == nil {
		return nil, &Error{Plugin: d.p.name, Call: "connect (after Free)", Code: InternalError}
	}
	var sc unsafe.Pointer
	if err := d.p.check("connect", C.weft_ncclnet_connect(d.p.c, C.int(d.dev), d.buf, &sc)); err != nil || sc == nil {
		return nil, err
	}
	return &SendComm{comm{p: d.p, c: sc}}, nil
}

// Free releases the handle buffer; call it once Connect has returned a
// comm or failed, or to give up.
func (d *Dialer) Free() {
	if d.buf != nil {
		C.free(d.buf)
		d.buf = nil
	}
}

type comm struct {
	p *Plugin
	c unsafe.Pointer
}

// SendComm is the sending end of a connection.
type SendComm struct{ comm }

// RecvComm is the receiving end of a connection.
type RecvComm struct{ comm }

// MR is a memory registration of one comm.
type MR struct {
	c    unsafe.Pointer
	comm *comm
}

// RegMr registers size bytes at addr (a host address for PtrHost, a
// device address for PtrCUDA) for the comm's sends or receives.
func (c *comm) RegMr(addr uint64, size int, ptrType int) (*MR, error) {
	var mh unsafe.Pointer
	if err := c.p.check("regMr", C.weft_ncclnet_reg_mr(c.p.c, c.c, C.uintptr_t(addr), C.size_t(size), C.int(ptrType), &mh)); err != nil {
		return nil, err
	}
	return &MR{c: mh, comm: c}, nil
}

// Dereg releases the registration.
func (m *MR) Dereg() error {
	return m.comm.p.check("deregMr", C.weft_ncclnet_dereg_mr(m.comm.p.c, m.comm.c, m.c))
}

// Request is an isend, irecv or iflush in flight.
type Request struct {
	p *Plugin
	c unsafe.Pointer
}

// ISend starts sending size bytes at addr (inside mr) with tag. It
// returns nil when the plugin cannot start it now (call again later).
func (s *SendComm) ISend(addr uint64, size, tag int, mr *MR) (*Request, error) {
	if size < 0 || int64(size) > int64(^uint32(0)>>1) {
		return nil, fmt.Errorf("isend of %d bytes: want 0 to 2^31-1: %w", size, &Error{Plugin: s.p.name, Call: "isend", Code: InvalidArgument})
	}
	var req unsafe.Pointer
	if err := s.p.check("isend", C.weft_ncclnet_isend(s.p.c, s.c, C.uintptr_t(addr), C.int(size), C.int(tag), mr.c, &req)); err != nil {
		return nil, err
	}
	if req == nil {
		return nil, nil
	}
	return &Request{p: s.p, c: req}, nil
}

// IRecv posts a receive of at most size bytes into addr (inside mr)
// matching tag. It returns nil when the plugin cannot post it now.
func (r *RecvComm) IRecv(addr uint64, size, tag int, mr *MR) (*Request, error) {
	var req unsafe.Pointer
	if err := r.p.check("irecv", C.weft_ncclnet_irecv(r.p.c, r.c, C.uintptr_t(addr), C.int(size), C.int(tag), mr.c, &req)); err != nil {
		return nil, err
	}
	if req == nil {
		return nil, nil
	}
	return &Request{p: r.p, c: req}, nil
}

// IFlush makes received data in device memory (PtrCUDA) visible to the
// device. It returns nil when there is nothing to flush or the plugin
// cannot start it now.
func (r *RecvComm) IFlush(addr uint64, size int, mr *MR) (*Request, error) {
	var req unsafe.Pointer
	if err := r.p.check("iflush", C.weft_ncclnet_iflush(r.p.c, r.c, C.uintptr_t(addr), C.int(size), mr.c, &req)); err != nil {
		return nil, err
	}
	if req == nil {
		return nil, nil
	}
	return &Request{p: r.p, c: req}, nil
}

// Test reports whether the request is done and, for a receive, how many
// bytes arrived. A done request is released by the plugin: do not test
// it again.
func (q *Request) Test() (done bool, size int, err error) {
	var d, n C.int
	if err := q.p.check("test", C.weft_ncclnet_test(q.p.c, q.c, &d, &n)); err != nil {
		return false, 0, err
	}
	return d != 0, int(n), nil
}

// Close closes the sending comm.
func (s *SendComm) Close() error {
	return s.p.check("closeSend", C.weft_ncclnet_close_send(s.p.c, s.c))
}

// Close closes the receiving comm.
func (r *RecvComm) Close() error {
	return r.p.check("closeRecv", C.weft_ncclnet_close_recv(r.p.c, r.c))
}
