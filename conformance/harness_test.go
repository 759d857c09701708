package conformance

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/weftccl/weft/hal"
	_ "github.com/weftccl/weft/hal/host"
)

// TestOutcomes checks how the ranks' results become one status: the
// first-hand failure wins over its consequences on other ranks, a rank's
// NotSupported is not turned into a failure by the peers it leaves behind,
// and a panic is a failure.
func TestOutcomes(t *testing.T) {
	b, err := hal.Lookup("host")
	if err != nil {
		t.Fatal(err)
	}
	devs, _, err := openDevices(b, 3, jobID("outcomes"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		for _, d := range devs {
			d.Close()
		}
	}()
	cases := []struct {
		name    string
		run     func(t *T) error
		status  Status
		message string
	}{
		{"pass", func(t *T) error { return t.Barrier() }, Pass, ""},
		{"one rank fails, the others wait for it", func(t *T) error {
			if t.Rank == 1 {
				return t.Errorf("broken")
			}
			return t.Barrier()
		}, Fail, "rank 1: broken"},
		{"one rank finds the test not supported", func(t *T) error {
			if t.Rank == 0 {
				return t.NotSupported("no widget")
			}
			return nil
		}, NotSupported, "no widget"},
		{"panic", func(t *T) error {
			if t.Rank == 2 {
				var m map[int]int
				m[0] = 1
			}
			return t.Barrier()
		}, Fail, "rank 2: panic: assignment to entry in nil map"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			rs := runGoroutines(ctx, Case{ID: "device/x", Run: c.run}, "host", devs, [2]int{}, &config{timeout: time.Second})
			st, msg, _ := combine(rs)
			if st != c.status || !strings.HasPrefix(msg, c.message) {
				t.Errorf("got %s %q, want %s %q…", st, msg, c.status, c.message)
			}
		})
	}
}

// TestRegister checks that malformed registrations are refused at init.
func TestRegister(t *testing.T) {
	body := func(*T) error { return nil }
	for _, c := range []Case{
		{ID: "memory-mapped/x", Run: body}, // wrong section for capability 0
		{ID: "device/Bad Name", Run: body}, // malformed
		{ID: "device/info", Run: body},     // duplicate
		{ID: "device/no-body"},             // no body
		{ID: "x/y", Capability: hal.CapMemoryMapped | hal.CapPortMapped, Run: body}, // two capabilities
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Register(%q) did not panic", c.ID)
				}
			}()
			Register(c)
		}()
	}
	if _, ok := lookupCase("device/info"); !ok {
		t.Error("device/info is not registered")
	}
}
