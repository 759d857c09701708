//go:build cgo

package ib_test

import (
	"bytes"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"unsafe"

	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/hal/host"
	"github.com/weftccl/weft/hal/ib"
)

// fileBuffer stands in for device memory the CPU cannot address (Host is
// nil) but that can be exported as a file descriptor, as a GPU buffer is
// exported as a dma-buf. The test reads it through its own mapping.
type fileBuffer struct {
	f   *os.File
	mem []byte
}

func (b *fileBuffer) Addr() uint64 { return uint64(uintptr(unsafe.Pointer(&b.mem[0]))) }
func (b *fileBuffer) Size() int64  { return int64(len(b.mem)) }
func (b *fileBuffer) Host() []byte { return nil }
func (b *fileBuffer) Free() error  { syscall.Munmap(b.mem); return b.f.Close() }

// dmaBufDevice is a hal/host device that exports fileBuffers as dma-bufs.
type dmaBufDevice struct{ *host.Device }

func (dmaBufDevice) DmaBuf(b hal.Buffer) (int, uint64, error) {
	fd, err := syscall.Dup(int(b.(*fileBuffer).f.Fd()))
	return fd, 0, err
}

var _ ib.DmaBufExporter = dmaBufDevice{}

// The GPUDirect path: ExportPort registers a buffer without host bytes
// through the device's dma-buf, and puts and signals land in it.
func TestDmaBuf(t *testing.T) {
	opts := fakeOptions(t)
	rs := openRanks(t, 2, opts, "job-dmabuf")
	dev := dmaBufDevice{rs[1].dev.(*host.Device)}
	rs[1].nd.Close()
	nd, err := ib.Open(dev, hal.NetConfig{Rank: 1, NRanks: 2, JobID: "job-dmabuf"}, opts)
	if err != nil {
		t.Fatal(err)
	}
	rs[1].nd = nd
	rs[1].ep.Net = map[string][]byte{ib.Name: nd.Address()}

	f, err := os.Create(filepath.Join(t.TempDir(), "dmabuf"))
	if err != nil {
		t.Fatal(err)
	}
	const size = 1 << 16
	f.Truncate(size)
	mem, err := syscall.Mmap(int(f.Fd()), 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	b := &fileBuffer{f: f, mem: mem}
	defer b.Free()
	rb := exchange(t, rs[1], rs[0], b)
	if rb.Addr() != b.Addr() {
		t.Errorf("remote address %#x, want the buffer's device address %#x", rb.Addr(), b.Addr())
	}
	src := alloc(t, rs[0].dev, size)
	for i := range src.Host() {
		src.Host()[i] = byte(i * 31)
	}
	e, _ := connect(t, rs[0], rs[1])
	if err := e.Put(rb.Addr()+8, src.Addr(), size-8); err != nil {
		t.Fatal(err)
	}
	if err := e.Signal(rb.Addr(), 0, 0); err != nil {
		t.Fatal(err)
	}
	if err := flush(t, e); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(mem[8:], src.Host()[:size-8]) || mem[0] != 1 {
		t.Errorf("dma-buf destination: data equal %v, semaphore byte %d", bytes.Equal(mem[8:], src.Host()[:size-8]), mem[0])
	}
}
