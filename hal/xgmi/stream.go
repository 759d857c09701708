package xgmi

import (
	"fmt"

	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/internal/hipdev"
)

// NewStream creates a HIP stream with hipStreamNonBlocking (it does not
// synchronise with the null stream). Its Synchronize polls with a
// deadline, so no wait is unbounded.
func (d *Device) NewStream() (hal.Stream, error) {
	if err := d.checkOpen("new stream"); err != nil {
		return nil, err
	}
	return hipdev.NewHALStream(d.dev, d.String())
}

// BeginCapture starts capturing s, a stream of this GPU, into a HIP graph
// (relaxed mode, so that other threads' HIP calls are unaffected).
func (d *Device) BeginCapture(s hal.Stream) error {
	hs, err := hipdev.HALStreamOf("begin capture", s, d.dev, d.String())
	if err != nil {
		return err
	}
	return hs.BeginCapture()
}

// EndCapture ends the capture of s and instantiates the graph.
func (d *Device) EndCapture(s hal.Stream) (hal.Graph, error) {
	hs, err := hipdev.HALStreamOf("end capture", s, d.dev, d.String())
	if err != nil {
		return nil, err
	}
	return hs.EndCapture()
}

// NewEngine creates the port-mapped engine of the link to peer, which may
// be this GPU's own endpoint (then it copies within the GPU and signals
// local semaphores): a hipdev.CopyEngine, whose puts are hipMemcpyAsync on
// the SDMA engines and whose signals are stream-ordered
// hipStreamWriteValue64 stores. Errors wrap hal.ErrNotSupported when the
// link is not port-mapped.
func (d *Device) NewEngine(peer hal.Endpoint) (hal.Engine, error) {
	if err := d.checkOpen("new engine"); err != nil {
		return nil, err
	}
	name := fmt.Sprintf("engine of %s to GPU %d of pid %d", d, peer.Ordinal, peer.PID)
	if peer.PCIBusID == d.ep.PCIBusID && peer.PID == d.ep.PID {
		name = fmt.Sprintf("engine of %s to itself", d)
	}
	if l := d.Link(peer); l.Caps&hal.CapPortMapped == 0 {
		return nil, fmt.Errorf("%s: %s: %w", name, l.Reason, hal.ErrNotSupported)
	}
	return hipdev.NewCopyEngine(d.dev, name)
}
