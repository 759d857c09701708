package cuda

import (
	"errors"
	"strings"
	"testing"

	"github.com/weftccl/weft/internal/env"
	"github.com/weftccl/weft/internal/errkind"
)

// TestMulticastWithoutDriver: without a driver (or without cgo) every
// multicast call fails with an error that names the call and wraps
// errkind.ErrNotSupported; nothing reaches a null entry point.
func TestMulticastWithoutDriver(t *testing.T) {
	if Load() == nil {
		t.Skip("a CUDA driver is installed; TestMulticastGranularity covers it")
	}
	if MulticastAvailable() {
		t.Error("MulticastAvailable() = true without a driver")
	}
	var c Context
	calls := []struct {
		name string
		err  error
	}{
		{"cuMulticastGetGranularity", func() error {
			_, err := c.MulticastGetGranularity(2, 1<<21, HandleTypePosixFD, MulticastGranularityRecommended)
			return err
		}()},
		{"cuMulticastCreate", func() error { _, err := c.MulticastCreate(2, 1<<21, HandleTypePosixFD); return err }()},
		{"cuMulticastAddDevice", c.MulticastAddDevice(1, 0)},
		{"cuMulticastBindMem", c.MulticastBindMem(1, 0, 2, 0, 1<<21)},
		{"cuMulticastUnbind", c.MulticastUnbind(1, 0, 0, 1<<21)},
	}
	for _, tt := range calls {
		if !errors.Is(tt.err, errkind.ErrNotSupported) {
			t.Errorf("%s without driver = %v, want an error wrapping errkind.ErrNotSupported", tt.name, tt.err)
		}
		// The cgo build names the call; the !cgo stub says why nothing can.
		if cgoBuild && !strings.Contains(tt.err.Error(), tt.name) {
			t.Errorf("%s without driver: %q does not name the call", tt.name, tt.err)
		}
	}
}

// TestMissingEntryPointError: a driver older than CUDA 12.1 lacks the
// multicast entry points; the error names the call, says what is needed
// and wraps errkind.ErrNotSupported and errkind.ErrDevice.
func TestMissingEntryPointError(t *testing.T) {
	err := error(&Error{Call: "cuMulticastCreate", Code: ErrorNotSupported, Name: ErrorNotSupported.Name(),
		Description: "the driver has no cuMulticastCreate (multicast objects need a CUDA 12.1 or newer driver)"})
	want := "cuMulticastCreate: CUDA_ERROR_NOT_SUPPORTED (the driver has no cuMulticastCreate (multicast objects need a CUDA 12.1 or newer driver))"
	if !loaded() && err.Error() != want {
		t.Errorf("Error() = %q, want %q", err, want)
	}
	if !errors.Is(err, errkind.ErrNotSupported) || !errors.Is(err, errkind.ErrDevice) {
		t.Errorf("%v does not wrap ErrNotSupported and ErrDevice", err)
	}
}

// TestMulticastGranularity asks a GPU for its multicast granularities. It
// creates no multicast object (cuMulticastGetGranularity only computes),
// yet like every use of the multicast API it waits for WEFT_NVLS=1
// (architecture.md §8).
func TestMulticastGranularity(t *testing.T) {
	if env.String("WEFT_NVLS") != "1" {
		t.Skip("WEFT_NVLS is not 1: no multicast call on this host (architecture.md §8)")
	}
	d, ctx := gpu(t)
	if !MulticastAvailable() {
		t.Skip("driver older than CUDA 12.1: no multicast entry points")
	}
	if v, err := d.Attribute(AttrMulticastSupported); err != nil || v == 0 {
		t.Skipf("CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED = %d, %v", v, err)
	}
	minG, err := ctx.MulticastGetGranularity(2, 1<<21, HandleTypePosixFD, MulticastGranularityMinimum)
	if err != nil {
		t.Fatal(err)
	}
	recG, err := ctx.MulticastGetGranularity(2, 1<<21, HandleTypePosixFD, MulticastGranularityRecommended)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("multicast granularity: minimum %d, recommended %d bytes", minG, recG)
	if minG <= 0 || recG < minG || recG%minG != 0 {
		t.Errorf("granularities minimum %d, recommended %d", minG, recG)
	}
}
