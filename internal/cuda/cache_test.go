package cuda

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// fakeCompiler counts compilations and returns a binary derived from the
// source, so tests can tell hits from misses.
type fakeCompiler struct {
	mu    sync.Mutex
	calls int
	fail  error
}

func (f *fakeCompiler) compile(s Source) ([]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.fail != nil {
		return nil, f.fail
	}
	return []byte("cubin:" + s.Arch + ":" + s.Source), nil
}

func (f *fakeCompiler) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

func testSource() Source {
	return Source{
		Name:    "k.cu",
		Source:  `extern "C" __global__ void k() {}`,
		Headers: map[string]string{"b.h": "// b", "a.h": "// a"},
		Options: []string{"-lineinfo"},
		Arch:    "sm_90a",
	}
}

func TestCacheHitMiss(t *testing.T) {
	fc := &fakeCompiler{}
	c := &KernelCache{Dir: t.TempDir(), CompilerVersion: "nvrtc-13.0", Compile: fc.compile}
	s := testSource()
	bin, hit, err := c.Get(s)
	if err != nil || hit || fc.count() != 1 {
		t.Fatalf("first Get: hit=%v err=%v calls=%d, want a miss that compiles", hit, err, fc.count())
	}
	want := []byte("cubin:sm_90a:" + s.Source)
	if !bytes.Equal(bin, want) {
		t.Fatalf("first Get = %q, want %q", bin, want)
	}
	bin, hit, err = c.Get(s)
	if err != nil || !hit || fc.count() != 1 || !bytes.Equal(bin, want) {
		t.Fatalf("second Get: hit=%v err=%v calls=%d bin=%q, want a hit", hit, err, fc.count(), bin)
	}
	// Another cache over the same directory (another process) hits too.
	c2 := &KernelCache{Dir: c.Dir, CompilerVersion: "nvrtc-13.0", Compile: fc.compile}
	if _, hit, _ := c2.Get(s); !hit {
		t.Error("second cache over the same directory missed")
	}
	// No temporary files are left behind.
	ents, _ := os.ReadDir(c.Dir)
	if len(ents) != 1 {
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		t.Errorf("cache dir holds %v, want one entry", names)
	}
}

func TestCacheKeyChanges(t *testing.T) {
	base := testSource()
	key := base.Key("nvrtc-13.0")
	mut := []struct {
		name string
		f    func(*Source) string
	}{
		{"source", func(s *Source) string { s.Source += " "; return s.Key("nvrtc-13.0") }},
		{"header content", func(s *Source) string {
			s.Headers = map[string]string{"a.h": "// a2", "b.h": "// b"}
			return s.Key("nvrtc-13.0")
		}},
		{"header name", func(s *Source) string {
			s.Headers = map[string]string{"a.h": "// a", "c.h": "// b"}
			return s.Key("nvrtc-13.0")
		}},
		{"option", func(s *Source) string { s.Options = []string{"-G"}; return s.Key("nvrtc-13.0") }},
		{"arch", func(s *Source) string { s.Arch = "sm_80"; return s.Key("nvrtc-13.0") }},
		{"compiler", func(s *Source) string { return s.Key("nvrtc-12.8") }},
		{"framing", func(s *Source) string {
			s.Headers = map[string]string{"a.h// a": "", "b.h": "// b"}
			return s.Key("nvrtc-13.0")
		}},
	}
	for _, m := range mut {
		s := testSource()
		if got := m.f(&s); got == key {
			t.Errorf("changing %s kept the key", m.name)
		}
	}
	// Header order in the map does not matter; the name does not either.
	s := testSource()
	s.Name = "other.cu"
	s.Headers = map[string]string{"a.h": "// a", "b.h": "// b"}
	if s.Key("nvrtc-13.0") != key {
		t.Error("same inputs gave different keys")
	}
}

func TestCacheCorruptEntryIsRecompiled(t *testing.T) {
	corruptions := []struct {
		name string
		f    func(path string) error
	}{
		{"garbage", func(p string) error { return os.WriteFile(p, []byte("not a cubin"), 0o644) }},
		{"empty", func(p string) error { return os.WriteFile(p, nil, 0o644) }},
		{"flipped byte", func(p string) error {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			b[len(b)-1] ^= 0xff
			return os.WriteFile(p, b, 0o644)
		}},
		{"truncated", func(p string) error {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			return os.WriteFile(p, b[:len(b)-3], 0o644)
		}},
		{"unreadable (a directory)", func(p string) error {
			if err := os.Remove(p); err != nil {
				return err
			}
			return os.Mkdir(p, 0o755)
		}},
	}
	for _, cc := range corruptions {
		t.Run(cc.name, func(t *testing.T) {
			fc := &fakeCompiler{}
			c := &KernelCache{Dir: t.TempDir(), CompilerVersion: "v", Compile: fc.compile}
			s := testSource()
			want, _, err := c.Get(s)
			if err != nil {
				t.Fatal(err)
			}
			if err := cc.f(c.Path(s.Key("v"))); err != nil {
				t.Fatal(err)
			}
			bin, hit, err := c.Get(s)
			if err != nil {
				t.Fatalf("Get after corruption: %v", err)
			}
			if hit || fc.count() != 2 || !bytes.Equal(bin, want) {
				t.Fatalf("Get after corruption: hit=%v calls=%d bin=%q, want a recompile", hit, fc.count(), bin)
			}
			if cc.name == "unreadable (a directory)" {
				return // the directory cannot be replaced by rename; still not fatal
			}
			if _, hit, _ := c.Get(s); !hit {
				t.Error("entry was not rewritten after recompiling")
			}
		})
	}
}

func TestCacheInvalidate(t *testing.T) {
	fc := &fakeCompiler{}
	c := &KernelCache{Dir: t.TempDir(), CompilerVersion: "v", Compile: fc.compile}
	s := testSource()
	c.Get(s)
	c.Invalidate(s)
	if _, hit, _ := c.Get(s); hit || fc.count() != 2 {
		t.Errorf("Get after Invalidate: hit=%v calls=%d", hit, fc.count())
	}
}

func TestCacheCompileErrorNotCached(t *testing.T) {
	fc := &fakeCompiler{fail: errors.New("boom")}
	c := &KernelCache{Dir: t.TempDir(), CompilerVersion: "v", Compile: fc.compile}
	if _, _, err := c.Get(testSource()); err == nil || err.Error() != "boom" {
		t.Fatalf("Get = %v, want the compiler's error", err)
	}
	fc.fail = nil
	if _, hit, err := c.Get(testSource()); err != nil || hit {
		t.Fatalf("Get after a failed compile: hit=%v err=%v", hit, err)
	}
}

func TestCacheUnwritableDirIsNotFatal(t *testing.T) {
	fc := &fakeCompiler{}
	file := filepath.Join(t.TempDir(), "file")
	os.WriteFile(file, nil, 0o644)
	// A directory below a regular file can never be created.
	c := &KernelCache{Dir: filepath.Join(file, "sub"), CompilerVersion: "v", Compile: fc.compile}
	for i := 0; i < 2; i++ {
		if bin, hit, err := c.Get(testSource()); err != nil || hit || len(bin) == 0 {
			t.Fatalf("Get %d: hit=%v err=%v", i, hit, err)
		}
	}
}

func TestCacheDisabled(t *testing.T) {
	fc := &fakeCompiler{}
	c := &KernelCache{Compile: fc.compile}
	c.Get(testSource())
	c.Get(testSource())
	if fc.count() != 2 {
		t.Errorf("calls = %d, want 2 with no cache directory", fc.count())
	}
}

func TestCacheConcurrent(t *testing.T) {
	fc := &fakeCompiler{}
	c := &KernelCache{Dir: t.TempDir(), CompilerVersion: "v", Compile: fc.compile}
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, _, err := c.Get(testSource()); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if _, hit, _ := c.Get(testSource()); !hit {
		t.Error("no entry after concurrent Gets")
	}
}

func TestDefaultCacheDir(t *testing.T) {
	t.Setenv("WEFT_CACHE_DIR", "/x/weft-cache")
	if got := DefaultCacheDir(); got != "/x/weft-cache" {
		t.Errorf("with WEFT_CACHE_DIR: %q", got)
	}
	t.Setenv("WEFT_CACHE_DIR", "")
	t.Setenv("XDG_CACHE_HOME", "/xdg")
	if got := DefaultCacheDir(); got != "/xdg/weft" {
		t.Errorf("with XDG_CACHE_HOME: %q", got)
	}
	t.Setenv("XDG_CACHE_HOME", "")
	t.Setenv("HOME", "/home/u")
	if got := DefaultCacheDir(); got != "/home/u/.cache/weft" {
		t.Errorf("with HOME: %q", got)
	}
}
