//go:build cgo

package ib_test

import (
	"encoding/binary"
	"fmt"
	"testing"
	"time"

	"github.com/weftccl/weft/hal"
	_ "github.com/weftccl/weft/hal/host"
	"github.com/weftccl/weft/hal/ib"
	"github.com/weftccl/weft/internal/ibverbs/ibvtest"
)

// fakeOptions builds the in-memory verbs provider with the given devices
// and returns options that use it.
func fakeOptions(t *testing.T, devs ...string) ib.Options {
	t.Helper()
	if len(devs) == 0 {
		devs = []string{"fakeib0"}
	}
	spec := ""
	var names []string
	for i, d := range devs {
		if i > 0 {
			spec += ","
		}
		spec += d
		name := d
		if n := len(d) - len(":roce"); n > 0 && d[n:] == ":roce" {
			name = d[:n]
		}
		names = append(names, name)
	}
	t.Setenv("FAKEVERBS_DEVICES", spec)
	return ib.Options{Library: ibvtest.Build(t), SysfsRoot: fakeSysfs(t, names...)}
}

// rank is one goroutine rank: a hal/host device and its NetDevice.
type rank struct {
	dev hal.Device
	nd  *ib.NetDevice
	ep  hal.Endpoint
}

func openRanks(t *testing.T, n int, opts ib.Options, job string) []*rank {
	t.Helper()
	rs := make([]*rank, n)
	for r := range rs {
		dev, err := hal.Open("host", hal.Config{Ordinal: r, Rank: r, JobID: job})
		if err != nil {
			t.Fatal(err)
		}
		nd, err := ib.Open(dev, hal.NetConfig{Rank: r, NRanks: n, JobID: job}, opts)
		if err != nil {
			dev.Close()
			t.Fatal(err)
		}
		ep := dev.Endpoint()
		ep.Net = map[string][]byte{ib.Name: nd.Address()}
		rs[r] = &rank{dev: dev, nd: nd, ep: ep}
	}
	t.Cleanup(func() {
		for _, r := range rs {
			r.nd.Close()
			r.dev.Close()
		}
	})
	return rs
}

func alloc(t *testing.T, d hal.Device, n int64) hal.Buffer {
	t.Helper()
	b, err := d.Alloc(n)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Free() })
	return b
}

// exchange exports b on owner and imports it on importer.
func exchange(t *testing.T, owner, importer *rank, b hal.Buffer) hal.Buffer {
	t.Helper()
	h, err := owner.nd.ExportPort(b)
	if err != nil {
		t.Fatal(err)
	}
	rb, err := importer.nd.ImportPort(h)
	if err != nil {
		t.Fatal(err)
	}
	return rb
}

// connect opens engines both ways between a and b.
func connect(t *testing.T, a, b *rank) (ab, ba hal.Engine) {
	t.Helper()
	var err error
	if ab, err = a.nd.NewEngine(b.ep); err != nil {
		t.Fatal(err)
	}
	if ba, err = b.nd.NewEngine(a.ep); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ab.Close(); ba.Close() })
	return ab, ba
}

// flush waits until e has completed every request issued so far.
func flush(t *testing.T, e hal.Engine) error {
	t.Helper()
	m, err := e.Mark()
	if err != nil {
		return err
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := e.Completed()
		if err != nil {
			return err
		}
		if c >= m {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("flush: ticket %d not complete after 10 s (completed %d)", m, c)
		}
		time.Sleep(10 * time.Microsecond)
	}
}

func word(b hal.Buffer, off int) uint64 { return binary.LittleEndian.Uint64(b.Host()[off:]) }
