package ncclnet

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/weftccl/weft/internal/errkind"
)

// NCCL_NET_PLUGIN's value is tried as given, then as libnccl-net-NAME.so
// unless it is a path or already a lib….so name (NCCL's
// src/plugin/plugin_open.cc).
func TestCandidates(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []string
	}{
		{"", nil},
		{"none", nil},
		{"NONE", nil},
		{"aws-ofi", []string{"aws-ofi", "libnccl-net-aws-ofi.so"}},
		{"libnccl-net-x.so", []string{"libnccl-net-x.so"}},
		{"libfoo.so.1", []string{"libfoo.so.1", "libnccl-net-libfoo.so.1.so"}},
		{"/opt/p/libnccl-net.so", []string{"/opt/p/libnccl-net.so"}},
		{"./plug.so", []string{"./plug.so"}},
	} {
		if got := Candidates(c.in); !slices.Equal(got, c.want) {
			t.Errorf("Candidates(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestErrorKinds(t *testing.T) {
	for _, c := range []struct {
		code Result
		want error
	}{
		{SystemError, errkind.ErrSystem},
		{RemoteError, errkind.ErrRemote},
		{InvalidArgument, errkind.ErrInvalidArgument},
		{InvalidUsage, errkind.ErrInvalidUsage},
		{UnhandledCudaError, errkind.ErrDevice},
		{InternalError, errkind.ErrInternal},
	} {
		err := &Error{Plugin: "p", Call: "isend", Code: c.code}
		if !errors.Is(err, c.want) || !strings.Contains(err.Error(), "isend") || !strings.Contains(err.Error(), c.code.String()) {
			t.Errorf("%v: %q does not wrap %v or name the call and code", c.code, err, c.want)
		}
	}
	if err := (&LoadError{Name: "x", Detail: "d"}); !errors.Is(err, errkind.ErrNotSupported) {
		t.Errorf("LoadError does not wrap ErrNotSupported")
	}
}
