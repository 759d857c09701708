package ibverbs

import (
	"fmt"
	"net/netip"
)

// Access flags of memory regions and queue pairs (enum ibv_access_flags).
const (
	AccessLocalWrite   = 1
	AccessRemoteWrite  = 1 << 1
	AccessRemoteRead   = 1 << 2
	AccessRemoteAtomic = 1 << 3
)

// Work-request opcodes (enum ibv_wr_opcode) and send flags.
const (
	OpWrite        = 0
	OpWriteWithImm = 1
	OpFetchAdd     = 6

	SendFence    = 1
	SendSignaled = 1 << 1
	SendInline   = 1 << 3
)

// Completion opcodes (enum ibv_wc_opcode).
const (
	WCOpWrite       = 1
	WCOpFetchAdd    = 4
	WCOpRecvWithImm = 129
)

// Queue-pair states (enum ibv_qp_state).
const (
	QPSReset = 0
	QPSInit  = 1
	QPSRTR   = 2
	QPSRTS   = 3
	QPSErr   = 6
)

// Port states and link layers.
const (
	PortDown   = 1
	PortActive = 4

	LinkInfiniBand = 1
	LinkEthernet   = 2
)

// DeviceAttr is the part of struct ibv_device_attr weft uses.
type DeviceAttr struct {
	FWVersion   string
	NodeGUID    uint64 // host order
	MaxMRSize   uint64
	MaxQP       int
	MaxQPWR     int
	MaxCQE      int
	MaxMR       int
	MaxQPRdAtom int
	AtomicCap   int // 0 none, 1 HCA, 2 global
	PhysPorts   int
}

// PortAttr is the part of struct ibv_port_attr weft uses.
type PortAttr struct {
	State     int
	ActiveMTU int // enum ibv_mtu: 1 = 256 … 5 = 4096
	GIDTblLen int
	MaxMsgSz  uint32
	LID       uint16
	LinkLayer int
}

// StateName names a port state as sysfs does.
func (p PortAttr) StateName() string {
	switch p.State {
	case 1:
		return "DOWN"
	case 2:
		return "INIT"
	case 3:
		return "ARMED"
	case 4:
		return "ACTIVE"
	}
	return fmt.Sprintf("state %d", p.State)
}

// GID is a port's global identifier (16 bytes, network order).
type GID [16]byte

// IsZero reports an unset GID table entry.
func (g GID) IsZero() bool { return g == GID{} }

// IPv4Mapped reports a GID of the form ::ffff:a.b.c.d, which RoCEv2 uses
// for IPv4 addresses.
func (g GID) IPv4Mapped() bool { return netip.AddrFrom16(g).Is4In6() }

func (g GID) String() string { return netip.AddrFrom16(g).String() }

// WR is one send work request: an RDMA write (OpWrite, OpWriteWithImm) of
// Len bytes from LAddr (LKey) to RAddr (RKey), or a fetch-and-add
// (OpFetchAdd) of Add at RAddr returning the old value into the 8 bytes at
// LAddr.
type WR struct {
	ID     uint64
	Opcode int
	Flags  int
	LAddr  uint64
	Len    uint32
	LKey   uint32
	RAddr  uint64
	RKey   uint32
	Add    uint64
	Imm    uint32
}

// WC is one work completion.
type WC struct {
	ID      uint64
	Status  int
	Opcode  int
	ByteLen uint32
	Imm     uint32 // host order, valid with WithImm
	WithImm bool
	QPNum   uint32
}

// RTR is what moving a queue pair to ready-to-receive needs: the peer's
// queue pair and address. IB uses the LID; RoCE (Global) the GID.
type RTR struct {
	Port      int
	DestQPN   uint32
	RQPSN     uint32
	MTU       int
	DLID      uint16
	Global    bool
	DGID      GID
	SGIDIndex int
	MaxDestRd int
}

// RTS is what moving a queue pair to ready-to-send needs.
type RTS struct {
	SQPSN    uint32
	Timeout  int // 4.096 µs × 2^Timeout
	RetryCnt int
	RNRRetry int // 7: retry forever
	MaxRdAt  int
}
