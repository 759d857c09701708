//go:build !cgo

package sysnccl

var errNoCgo = &LoadError{Library: "libnccl.so.2", Detail: "weft built without cgo (CGO_ENABLED=0)"}

// Load fails: without cgo NCCL cannot be called.
func Load() error { return errNoCgo }

func Version() (int, error)          { return 0, errNoCgo }
func GetUniqueID() (UniqueID, error) { return UniqueID{}, errNoCgo }

// Comm is an NCCL communicator.
type Comm struct{ rank, nranks int }

// Has is false: nothing is loaded.
func Has(name string) bool { return false }

func CommInitRank(ctx uintptr, nranks int, id UniqueID, rank int) (*Comm, error) {
	return nil, errNoCgo
}
func CommInitRankConfig(ctx uintptr, nranks int, id UniqueID, rank int, cfg Config) (*Comm, error) {
	return nil, errNoCgo
}
func (c *Comm) Handle() uintptr   { return 0 }
func (c *Comm) Rank() int         { return c.rank }
func (c *Comm) Size() int         { return c.nranks }
func (c *Comm) Destroy() error    { return errNoCgo }
func (c *Comm) Abort() error      { return errNoCgo }
func (c *Comm) AsyncError() error { return errNoCgo }
func (c *Comm) AllReduce(send, recv uint64, count int, dt DataType, op RedOp, stream uintptr) error {
	return errNoCgo
}
func (c *Comm) AllGather(send, recv uint64, sendcount int, dt DataType, stream uintptr) error {
	return errNoCgo
}
func (c *Comm) ReduceScatter(send, recv uint64, recvcount int, dt DataType, op RedOp, stream uintptr) error {
	return errNoCgo
}
func (c *Comm) Broadcast(send, recv uint64, count int, dt DataType, root int, stream uintptr) error {
	return errNoCgo
}
func (c *Comm) Reduce(send, recv uint64, count int, dt DataType, op RedOp, root int, stream uintptr) error {
	return errNoCgo
}
func (c *Comm) AlltoAll(send, recv uint64, count int, dt DataType, stream uintptr) error {
	return errNoCgo
}
func (c *Comm) RedOpCreatePreMulSum(scalar uint64, dt DataType, residence ScalarResidence) (RedOp, error) {
	return 0, errNoCgo
}
func (c *Comm) RedOpDestroy(op RedOp) error { return errNoCgo }
func (c *Comm) Send(send uint64, count int, dt DataType, peer int, stream uintptr) error {
	return errNoCgo
}
func (c *Comm) Recv(recv uint64, count int, dt DataType, peer int, stream uintptr) error {
	return errNoCgo
}
func GroupStart() error { return errNoCgo }
func GroupEnd() error   { return errNoCgo }
