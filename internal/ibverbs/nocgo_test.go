//go:build !cgo

package ibverbs_test

import (
	"errors"
	"testing"

	"github.com/weftccl/weft/internal/errkind"
	"github.com/weftccl/weft/internal/ibverbs"
)

func TestNoCgo(t *testing.T) {
	if _, err := ibverbs.Load(); !errors.Is(err, errkind.ErrNotSupported) {
		t.Fatalf("Load() without cgo = %v; want ErrNotSupported", err)
	}
}
