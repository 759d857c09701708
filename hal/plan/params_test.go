package plan

import (
	"bytes"
	"testing"
	"time"
)

// paramsCase is a plan, bindings and arguments with every field of the
// parameter block set to a distinct value, nch channels and group
// arguments (some skipped).
func paramsCase(nch int) (*Plan, *Bindings, *Args) {
	p := &Plan{Name: "params", Rank: 2, NRanks: 5, Semaphores: 9, ScratchSlots: 4, SwitchSlots: 3}
	b := &Bindings{Scratch: 11, ScratchBytes: 12, Semaphores: 13, Expected: 14, State: 15, Control: 16, Fifo: 17, FifoHead: 18, Switch: 19, Multicast: 20, SwitchBytes: 21}
	a := &Args{Count: 1000 + int64(nch), Input: 31, Output: 32, Timeout: time.Duration(nch) * time.Second, Scalar: 33, ScalarPtr: 34, PostTable: 35}
	for i := 0; i < nch; i++ {
		p.Channels = append(p.Channels, Channel{Peer: 40 + i})
		b.Peers = append(b.Peers, PeerBinding{Scratch: uint64(100 + i), Semaphores: uint64(200 + i)})
		if i%2 == 0 {
			a.PeerInput = append(a.PeerInput, uint64(300+i))
		}
		a.PeerOutput = append(a.PeerOutput, uint64(400+i))
		a.Groups = append(a.Groups, GroupArgs{Count: int64(500 + i), Input: uint64(600 + i), Output: uint64(700 + i), Post: uint64(800 + i), Skip: i%3 == 1})
	}
	return p, b, a
}

// PackParamsInto writes every byte of the block: packed into a buffer
// full of garbage it equals a fresh PackParams, so launch paths may reuse
// buffers.
func TestPackParamsIntoReused(t *testing.T) {
	for _, nch := range []int{0, 1, 3, MaxPeers} {
		p, b, a := paramsCase(nch)
		want, err := PackParams(p, b, a)
		if err != nil {
			t.Fatal(err)
		}
		dirty := bytes.Repeat([]byte{0xA5}, ParamsBytes+8)
		got, err := PackParamsInto(dirty, p, b, a)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%d channels: PackParamsInto over a used buffer differs from PackParams", nch)
		}
	}
	p, b, a := paramsCase(1)
	if _, err := PackParamsInto(make([]byte, ParamsBytes-1), p, b, a); err == nil {
		t.Error("PackParamsInto into a short buffer: no error")
	}
}

// BenchmarkPackParamsInto is the per-launch cost of the parameter block
// (1.7 µs with a closure per field and a fresh allocation on the
// development VM; the launch paths now reuse buffers).
func BenchmarkPackParamsInto(b *testing.B) {
	p, bd, a := paramsCase(1)
	buf := make([]byte, ParamsBytes)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, err := PackParamsInto(buf, p, bd, a); err != nil {
			b.Fatal(err)
		}
	}
}
