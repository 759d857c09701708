package socket_test

import (
	"fmt"
	"log"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/weftccl/weft/hal"
	_ "github.com/weftccl/weft/hal/host"
	"github.com/weftccl/weft/hal/socket"
)

// Two ranks of one job (here goroutines of one process, each with its own
// hal/host device) connected by the socket transport: rank 0 puts a
// message into rank 1's window and signals it.
func Example() {
	const job = "socket-example"
	open := func(rank int) (hal.Device, *socket.NetDevice) {
		dev, err := hal.Open("host", hal.Config{Ordinal: rank, Rank: rank, JobID: job})
		if err != nil {
			log.Fatal(err)
		}
		nd, err := socket.Open(dev, hal.NetConfig{Rank: rank, NRanks: 2, JobID: job}, socket.Options{IfName: "lo"})
		if err != nil {
			log.Fatal(err)
		}
		return dev, nd
	}
	dev0, nd0 := open(0)
	dev1, nd1 := open(1)

	// Rank 1: a window of 4 KiB (semaphore in the first 8 bytes), exported.
	win, _ := dev1.Alloc(4096)
	h, _ := nd1.ExportPort(win)

	// Rank 0: import the window (the handle and the address travel through
	// the bootstrap in a real job) and connect an engine to rank 1.
	remote, err := nd0.ImportPort(h)
	if err != nil {
		log.Fatal(err)
	}
	peer := dev1.Endpoint()
	peer.Net = map[string][]byte{socket.Name: nd1.Address()}
	e, err := nd0.NewEngine(peer)
	if err != nil {
		log.Fatal(err)
	}
	src, _ := dev0.Alloc(64)
	dev0.Write(src, 0, []byte("hello over TCP"))
	e.Put(remote.Addr()+64, src.Addr(), 14) // data at offset 64
	e.Signal(remote.Addr(), 0, 0)           // then the semaphore at offset 0

	// Rank 1 waits for its semaphore; the data before it has landed.
	sem := (*uint64)(unsafe.Pointer(&win.Host()[0]))
	for deadline := time.Now().Add(10 * time.Second); atomic.LoadUint64(sem) < 1 && time.Now().Before(deadline); {
		time.Sleep(100 * time.Microsecond)
	}
	fmt.Printf("rank 1 got %q\n", win.Host()[64:78])

	e.Close()
	nd0.Close()
	nd1.Close()
	remote.Free()
	src.Free()
	win.Free()
	dev0.Close()
	dev1.Close()
	// Output: rank 1 got "hello over TCP"
}
