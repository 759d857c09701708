package nvswitch

import (
	"errors"
	"io"
	"os"
	"syscall"
	"testing"

	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/internal/cuda"
)

// TestFetchFD: the descriptor of a handle is fetched while its exporter
// holds it; once the exporter has closed descriptor and tag and their
// numbers name other files, the handle is refused with ErrInvalidUsage
// instead of yielding those files. (This process plays the exporter.)
func TestFetchFD(t *testing.T) {
	dir := t.TempDir()
	f, err := os.CreateTemp(dir, "exported")
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("exported")
	tag, tagID, err := cuda.NewFDTag()
	if err != nil {
		t.Fatal(err)
	}
	h := validBuffer()
	h.pid, h.fd, h.tagFD, h.tagID = uint32(os.Getpid()), int32(f.Fd()), int32(tag), tagID

	fd, err := fetchFD(&h)
	if err != nil {
		t.Fatal(err)
	}
	// The *os.File owns fd from here: closing it through the File (not
	// syscall.Close) keeps its finalizer from closing the number again
	// after another test has reused it.
	fetched := os.NewFile(uintptr(fd), "fetched")
	got, _ := io.ReadAll(io.NewSectionReader(fetched, 0, 100))
	fetched.Close()
	if string(got) != "exported" {
		t.Errorf("fetched descriptor reads %q", got)
	}

	// The exporter frees: both numbers close, and other files take them.
	fdNum := int(f.Fd())
	f.Close()
	syscall.Close(tag)
	var reuse []*os.File
	for len(reuse) < 64 {
		g, err := os.CreateTemp(dir, "other")
		if err != nil {
			t.Fatal(err)
		}
		reuse = append(reuse, g)
	}
	defer func() {
		for _, g := range reuse {
			g.Close()
		}
	}()
	reused := false
	for _, g := range reuse {
		reused = reused || int(g.Fd()) == fdNum
	}
	if !reused {
		t.Skipf("descriptor %d was not reused", fdNum)
	}
	if fd, err := fetchFD(&h); !errors.Is(err, hal.ErrInvalidUsage) {
		if err == nil {
			syscall.Close(fd)
		}
		t.Errorf("fetch after the exporter closed its descriptors = %v, want ErrInvalidUsage", err)
	}
}
