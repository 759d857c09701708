//go:build cgo

package ibverbs

/*
#cgo LDFLAGS: -ldl
#include <stdlib.h>
#include "ibverbs.h"
*/
import "C"

import (
	"bytes"
	"encoding/binary"
	"sync"
	"unsafe"
)

var (
	libsMu sync.Mutex
	libs   = map[string]*Lib{}
)

// Lib is one opened verbs library. It is safe for concurrent use.
type Lib struct {
	c    *C.weft_ibv_lib
	path string
}

// Load opens Library().
func Load() (*Lib, error) { return Open(Library()) }

// Open opens the verbs library at path (a name the dynamic loader finds, or
// a file) and resolves every symbol weft uses. Libraries stay open for the
// life of the process; opening a path again returns the same Lib. Errors
// are *LoadError (wrapping hal.ErrNotSupported).
func Open(path string) (*Lib, error) {
	libsMu.Lock()
	defer libsMu.Unlock()
	if l := libs[path]; l != nil {
		return l, nil
	}
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	var msg [512]C.char
	var cl *C.weft_ibv_lib
	if rc := C.weft_ibv_open(cpath, &cl, &msg[0], C.int(len(msg))); rc != 0 {
		return nil, &LoadError{Library: path, Detail: C.GoString(&msg[0])}
	}
	l := &Lib{c: cl, path: path}
	libs[path] = l
	return l, nil
}

// Path is the path the library was opened by.
func (l *Lib) Path() string { return l.path }

// HasDmaBuf reports whether the library has ibv_reg_dmabuf_mr (rdma-core
// v34 and later).
func (l *Lib) HasDmaBuf() bool { return C.weft_ibv_has_dmabuf(l.c) != 0 }

// Devices lists the RDMA devices the library sees (ibv_get_device_list).
func (l *Lib) Devices() ([]string, error) {
	const max = 64
	buf := (*C.char)(C.malloc(64 * max))
	defer C.free(unsafe.Pointer(buf))
	var n C.int
	if err := newError("ibv_get_device_list", "", int(C.weft_ibv_device_names(l.c, buf, max, &n))); err != nil {
		return nil, err
	}
	raw := C.GoBytes(unsafe.Pointer(buf), 64*max)
	var out []string
	for i := 0; i < int(n) && i < max; i++ {
		name := raw[64*i : 64*i+64]
		if j := bytes.IndexByte(name, 0); j >= 0 {
			name = name[:j]
		}
		out = append(out, string(name))
	}
	return out, nil
}

// StatusString is ibv_wc_status_str.
func (l *Lib) StatusString(status int) string {
	if s := C.weft_ibv_wc_status_str(l.c, C.int(status)); s != nil {
		return C.GoString(s)
	}
	return fallbackStatus(status)
}

// Context is an opened device.
type Context struct {
	lib  *Lib
	c    *C.struct_ibv_context
	name string
}

// OpenDevice opens the device called name (ibv_open_device). An unknown
// name is ENODEV.
func (l *Lib) OpenDevice(name string) (*Context, error) {
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	var c *C.struct_ibv_context
	if err := newError("ibv_open_device", name, int(C.weft_ibv_open_device(l.c, cname, &c))); err != nil {
		return nil, err
	}
	return &Context{lib: l, c: c, name: name}, nil
}

// Name is the device's name.
func (c *Context) Name() string { return c.name }

// Lib is the library the device was opened with.
func (c *Context) Lib() *Lib { return c.lib }

// Close closes the device (ibv_close_device).
func (c *Context) Close() error {
	return newError("ibv_close_device", c.name, int(C.weft_ibv_close_device(c.lib.c, c.c)))
}

// QueryDevice is ibv_query_device.
func (c *Context) QueryDevice() (DeviceAttr, error) {
	var a C.struct_ibv_device_attr
	if err := newError("ibv_query_device", c.name, int(C.weft_ibv_query_device(c.lib.c, c.c, &a))); err != nil {
		return DeviceAttr{}, err
	}
	fw := C.GoBytes(unsafe.Pointer(&a.fw_ver[0]), 64)
	if j := bytes.IndexByte(fw, 0); j >= 0 {
		fw = fw[:j]
	}
	var guid [8]byte
	binary.NativeEndian.PutUint64(guid[:], uint64(a.node_guid))
	return DeviceAttr{
		FWVersion: string(fw), NodeGUID: binary.BigEndian.Uint64(guid[:]), MaxMRSize: uint64(a.max_mr_size),
		MaxQP: int(a.max_qp), MaxQPWR: int(a.max_qp_wr), MaxCQE: int(a.max_cqe), MaxMR: int(a.max_mr),
		MaxQPRdAtom: int(a.max_qp_rd_atom), AtomicCap: int(a.atomic_cap), PhysPorts: int(a.phys_port_cnt),
	}, nil
}

// QueryPort is ibv_query_port for port (1-based).
func (c *Context) QueryPort(port int) (PortAttr, error) {
	var a C.struct_ibv_port_attr
	if err := newError("ibv_query_port", c.name, int(C.weft_ibv_query_port(c.lib.c, c.c, C.int(port), &a))); err != nil {
		return PortAttr{}, err
	}
	return PortAttr{
		State: int(a.state), ActiveMTU: int(a.active_mtu), GIDTblLen: int(a.gid_tbl_len),
		MaxMsgSz: uint32(a.max_msg_sz), LID: uint16(a.lid), LinkLayer: int(a.link_layer),
	}, nil
}

// QueryGID is ibv_query_gid.
func (c *Context) QueryGID(port, index int) (GID, error) {
	var g GID
	rc := C.weft_ibv_query_gid(c.lib.c, c.c, C.int(port), C.int(index), (*C.uint8_t)(unsafe.Pointer(&g[0])))
	return g, newError("ibv_query_gid", c.name, int(rc))
}

// PD is a protection domain.
type PD struct {
	ctx *Context
	c   *C.struct_ibv_pd
}

// AllocPD is ibv_alloc_pd.
func (c *Context) AllocPD() (*PD, error) {
	var p *C.struct_ibv_pd
	if err := newError("ibv_alloc_pd", c.name, int(C.weft_ibv_alloc_pd(c.lib.c, c.c, &p))); err != nil {
		return nil, err
	}
	return &PD{ctx: c, c: p}, nil
}

// Dealloc is ibv_dealloc_pd.
func (p *PD) Dealloc() error {
	return newError("ibv_dealloc_pd", p.ctx.name, int(C.weft_ibv_dealloc_pd(p.ctx.lib.c, p.c)))
}

// MR is a registered memory region.
type MR struct {
	ctx  *Context
	c    *C.struct_ibv_mr
	addr uint64
	len  uint64
}

// RegMR registers length bytes of host memory at addr (ibv_reg_mr). The
// memory must not be Go-managed: it is read and written by the device.
func (p *PD) RegMR(addr, length uint64, access int) (*MR, error) {
	var m *C.struct_ibv_mr
	rc := C.weft_ibv_reg_mr(p.ctx.lib.c, p.c, C.uint64_t(addr), C.uint64_t(length), C.int(access), &m)
	if err := newError("ibv_reg_mr", p.ctx.name, int(rc)); err != nil {
		return nil, err
	}
	return &MR{ctx: p.ctx, c: m, addr: addr, len: length}, nil
}

// RegDmaBufMR registers length bytes at offset of the dma-buf fd, addressed
// by the device as iova (ibv_reg_dmabuf_mr). ENOSYS when the library lacks
// the call.
func (p *PD) RegDmaBufMR(offset, length, iova uint64, fd, access int) (*MR, error) {
	var m *C.struct_ibv_mr
	rc := C.weft_ibv_reg_dmabuf_mr(p.ctx.lib.c, p.c, C.uint64_t(offset), C.uint64_t(length), C.uint64_t(iova), C.int(fd), C.int(access), &m)
	if err := newError("ibv_reg_dmabuf_mr", p.ctx.name, int(rc)); err != nil {
		return nil, err
	}
	return &MR{ctx: p.ctx, c: m, addr: iova, len: length}, nil
}

// LKey and RKey are the region's keys; Addr and Len its range.
func (m *MR) LKey() uint32 { return uint32(m.c.lkey) }
func (m *MR) RKey() uint32 { return uint32(m.c.rkey) }
func (m *MR) Addr() uint64 { return m.addr }
func (m *MR) Len() uint64  { return m.len }

// Dereg is ibv_dereg_mr.
func (m *MR) Dereg() error {
	return newError("ibv_dereg_mr", m.ctx.name, int(C.weft_ibv_dereg_mr(m.ctx.lib.c, m.c)))
}

// CQ is a completion queue.
type CQ struct {
	ctx *Context
	c   *C.struct_ibv_cq
	wc  []C.struct_ibv_wc
}

// CreateCQ is ibv_create_cq with at least cqe entries.
func (c *Context) CreateCQ(cqe int) (*CQ, error) {
	var q *C.struct_ibv_cq
	if err := newError("ibv_create_cq", c.name, int(C.weft_ibv_create_cq(c.lib.c, c.c, C.int(cqe), &q))); err != nil {
		return nil, err
	}
	return &CQ{ctx: c, c: q, wc: make([]C.struct_ibv_wc, 64)}, nil
}

// CQE is the queue's capacity as the provider reports it.
func (q *CQ) CQE() int { return int(q.c.cqe) }

// Poll takes up to len(out) completions (ibv_poll_cq); it never blocks. A
// negative result from the provider (an overrun queue) is an error.
func (q *CQ) Poll(out []WC) (int, error) {
	n := len(out)
	if n > len(q.wc) {
		n = len(q.wc)
	}
	if n == 0 {
		return 0, nil
	}
	got := int(C.weft_ibv_poll_cq(q.c, &q.wc[0], C.int(n)))
	if got < 0 {
		return 0, &Error{Call: "ibv_poll_cq", Device: q.ctx.name, Errno: 5 /* EIO */}
	}
	for i := 0; i < got; i++ {
		w := &q.wc[i]
		imm := uint32(w.imm_data)
		var b [4]byte
		binary.NativeEndian.PutUint32(b[:], imm)
		out[i] = WC{
			ID: uint64(w.wr_id), Status: int(w.status), Opcode: int(w.opcode), ByteLen: uint32(w.byte_len),
			Imm: binary.BigEndian.Uint32(b[:]), WithImm: w.wc_flags&C.IBV_WC_WITH_IMM != 0, QPNum: uint32(w.qp_num),
		}
	}
	return got, nil
}

// Destroy is ibv_destroy_cq.
func (q *CQ) Destroy() error {
	return newError("ibv_destroy_cq", q.ctx.name, int(C.weft_ibv_destroy_cq(q.ctx.lib.c, q.c)))
}

// QP is a reliable-connected queue pair.
type QP struct {
	ctx *Context
	c   *C.struct_ibv_qp
	wrs []C.weft_wr
}

// CreateRCQP is ibv_create_qp for an RC queue pair with one scatter/gather
// entry per request.
func (p *PD) CreateRCQP(send, recv *CQ, maxSendWR, maxRecvWR int) (*QP, error) {
	var q *C.struct_ibv_qp
	rc := C.weft_ibv_create_rc_qp(p.ctx.lib.c, p.c, send.c, recv.c, C.uint32_t(maxSendWR), C.uint32_t(maxRecvWR), &q)
	if err := newError("ibv_create_qp", p.ctx.name, int(rc)); err != nil {
		return nil, err
	}
	return &QP{ctx: p.ctx, c: q, wrs: make([]C.weft_wr, 64)}, nil
}

// Num is the queue pair number.
func (q *QP) Num() uint32 { return uint32(q.c.qp_num) }

// Init moves the queue pair from RESET to INIT on port with the remote
// access it allows.
func (q *QP) Init(port, access int) error {
	return newError("ibv_modify_qp(INIT)", q.ctx.name, int(C.weft_ibv_qp_init(q.ctx.lib.c, q.c, C.int(port), C.int(access))))
}

// ToRTR moves the queue pair from INIT to RTR, connected to a.DestQPN.
func (q *QP) ToRTR(a RTR) error {
	g := a.DGID
	global := 0
	if a.Global {
		global = 1
	}
	rc := C.weft_ibv_qp_rtr(q.ctx.lib.c, q.c, C.int(a.Port), C.uint32_t(a.DestQPN), C.uint32_t(a.RQPSN), C.int(a.MTU),
		C.uint16_t(a.DLID), C.int(global), (*C.uint8_t)(unsafe.Pointer(&g[0])), C.int(a.SGIDIndex), C.int(a.MaxDestRd))
	return newError("ibv_modify_qp(RTR)", q.ctx.name, int(rc))
}

// ToRTS moves the queue pair from RTR to RTS.
func (q *QP) ToRTS(a RTS) error {
	rc := C.weft_ibv_qp_rts(q.ctx.lib.c, q.c, C.uint32_t(a.SQPSN), C.int(a.Timeout), C.int(a.RetryCnt), C.int(a.RNRRetry), C.int(a.MaxRdAt))
	return newError("ibv_modify_qp(RTS)", q.ctx.name, int(rc))
}

// SetState moves the queue pair to state with no other attribute (ERR,
// RESET).
func (q *QP) SetState(state int) error {
	return newError("ibv_modify_qp", q.ctx.name, int(C.weft_ibv_qp_state(q.ctx.lib.c, q.c, C.int(state))))
}

// Post posts the requests as one chain (ibv_post_send); at most 64. posted
// is how many the provider accepted before refusing one.
func (q *QP) Post(wrs []WR) (posted int, err error) {
	if len(wrs) > len(q.wrs) {
		return 0, &Error{Call: "ibv_post_send", Device: q.ctx.name, Errno: 22}
	}
	for i, w := range wrs {
		q.wrs[i] = C.weft_wr{
			wr_id: C.uint64_t(w.ID), laddr: C.uint64_t(w.LAddr), raddr: C.uint64_t(w.RAddr), add: C.uint64_t(w.Add),
			len: C.uint32_t(w.Len), lkey: C.uint32_t(w.LKey), rkey: C.uint32_t(w.RKey), imm: C.uint32_t(w.Imm),
			opcode: C.int32_t(w.Opcode), flags: C.uint32_t(w.Flags),
		}
	}
	if len(wrs) == 0 {
		return 0, nil
	}
	var n C.int
	rc := C.weft_ibv_post_send(q.c, &q.wrs[0], C.int(len(wrs)), &n)
	return int(n), newError("ibv_post_send", q.ctx.name, int(rc))
}

// PostRecv posts len(ids) receive requests, request i receiving up to
// length bytes at addrs[i] (lkey); length 0 posts requests without a
// buffer (enough for RDMA writes with immediate).
func (q *QP) PostRecv(ids, addrs []uint64, length, lkey uint32) (posted int, err error) {
	if len(ids) == 0 {
		return 0, nil
	}
	if len(ids) > 64 || len(addrs) != len(ids) {
		return 0, &Error{Call: "ibv_post_recv", Device: q.ctx.name, Errno: 22}
	}
	cids := (*C.uint64_t)(C.malloc(C.size_t(16 * len(ids))))
	defer C.free(unsafe.Pointer(cids))
	ca := unsafe.Slice(cids, 2*len(ids))
	for i := range ids {
		ca[i] = C.uint64_t(ids[i])
		ca[len(ids)+i] = C.uint64_t(addrs[i])
	}
	var n C.int
	rc := C.weft_ibv_post_recv(q.c, &ca[0], &ca[len(ids)], C.uint32_t(length), C.uint32_t(lkey), C.int(len(ids)), &n)
	return int(n), newError("ibv_post_recv", q.ctx.name, int(rc))
}

// Destroy is ibv_destroy_qp.
func (q *QP) Destroy() error {
	return newError("ibv_destroy_qp", q.ctx.name, int(C.weft_ibv_destroy_qp(q.ctx.lib.c, q.c)))
}
