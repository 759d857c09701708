//go:build cgo

package main

import (
	"os"
	"os/signal"
	"runtime"
	"sync"
	"syscall"

	"github.com/weftccl/weft/channels"
	"github.com/weftccl/weft/internal/env"
)

var stacksOnce sync.Once

// installStackDump makes SIGUSR1 write the port-channel FIFOs' state
// (channels.DebugState) and every goroutine's stack to stderr when
// WEFT_DEBUG_STACKS=1: to see where a hung job's proxy or transport waits
// (a trigger not taken, a cgo call into the driver, a socket) without
// stopping the process. A library loaded into a C program handles
// asynchronous signals only where it asks for them (os/signal), so this is
// off unless asked for; the program's own SIGUSR1 handler is replaced.
func installStackDump() {
	stacksOnce.Do(func() {
		if on, _ := env.Bool("WEFT_DEBUG_STACKS", false); !on {
			return // a malformed value is reported by the communicator's env.Check
		}
		ch := make(chan os.Signal, 1)
		signal.Notify(ch, syscall.SIGUSR1)
		go func() {
			buf := make([]byte, 8<<20)
			for range ch {
				n := runtime.Stack(buf, true)
				os.Stderr.Write([]byte("weft: port-channel FIFOs (WEFT_DEBUG_STACKS, SIGUSR1):\n" + channels.DebugState()))
				os.Stderr.Write([]byte("weft: goroutine stacks (WEFT_DEBUG_STACKS, SIGUSR1):\n"))
				os.Stderr.Write(buf[:n])
			}
		}()
	})
}
