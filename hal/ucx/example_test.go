package ucx_test

import (
	"fmt"
	"log"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/hal/ucx"
)

// Two ranks of one job on one host (goroutines of one process, each with
// its own hal/host device) connected through UCX: rank 0 puts a message
// into rank 1's window and signals it. The job secret authenticates the
// engine's side channel before it learns rank 1's UCX worker address. (No
// Output line: the example needs UCX installed, so go test compiles it
// without running it.)
func Example() {
	const job = "ucx-example"
	secret := []byte("0123456789abcdef0123456789abcdef") // from the bootstrap in a real job
	open := func(rank int) (hal.Device, *ucx.NetDevice) {
		dev, err := hal.Open("host", hal.Config{Ordinal: rank, Rank: rank, JobID: job})
		if err != nil {
			log.Fatal(err)
		}
		nd, err := ucx.Open(dev, hal.NetConfig{Rank: rank, NRanks: 2, JobID: job, Secret: secret, OneHost: true},
			ucx.Options{Settings: map[string]string{"TLS": "tcp"}})
		if err != nil {
			log.Fatal(err) // "ucx: open rank 0: libucp.so.0 not found: …" without UCX
		}
		return dev, nd
	}
	dev0, nd0 := open(0)
	dev1, nd1 := open(1)

	// Rank 1: a window of 4 KiB (semaphore in the first 8 bytes), exported.
	win, _ := dev1.Alloc(4096)
	h, _ := nd1.ExportPort(win)

	// Rank 0: import the window and connect an engine to rank 1 (handles and
	// addresses travel through the bootstrap in a real job).
	remote, err := nd0.ImportPort(h)
	if err != nil {
		log.Fatal(err)
	}
	peer := dev1.Endpoint()
	peer.Net = map[string][]byte{ucx.Name: nd1.Address()}
	e, err := nd0.NewEngine(peer)
	if err != nil {
		log.Fatal(err)
	}
	src, _ := dev0.Alloc(64)
	dev0.Write(src, 0, []byte("hello over UCX"))
	e.Put(remote.Addr()+8, src.Addr(), 14)
	e.Signal(remote.Addr(), 0, 0)

	// Rank 1 waits for the semaphore; the data is visible once it moves.
	sem := (*uint64)(unsafe.Pointer(&win.Host()[0]))
	for deadline := time.Now().Add(10 * time.Second); atomic.LoadUint64(sem) == 0; {
		if time.Now().After(deadline) {
			log.Fatal("no signal within 10 s")
		}
		time.Sleep(100 * time.Microsecond)
	}
	fmt.Println(string(win.Host()[8:22]))

	e.Close()
	nd0.Close()
	nd1.Close()
	src.Free()
	win.Free()
	dev0.Close()
	dev1.Close()
}
