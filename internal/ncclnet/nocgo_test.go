//go:build !cgo

package ncclnet_test

import (
	"errors"
	"testing"

	"github.com/weftccl/weft/internal/errkind"
	"github.com/weftccl/weft/internal/ncclnet"
)

func TestNoCgo(t *testing.T) {
	if _, err := ncclnet.Load("weftest"); !errors.Is(err, errkind.ErrNotSupported) {
		t.Fatalf("Load() without cgo = %v; want ErrNotSupported", err)
	}
}
