package devcore

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// fakeCache compiles a source into "bin:<source>:<n>", n counting the
// compilations, and hits when it holds the source.
type fakeCache struct {
	held     map[string]string
	compiled int
	failing  bool
}

func (c *fakeCache) Get(s string) ([]byte, bool, error) {
	if b, ok := c.held[s]; ok {
		return []byte(b), true, nil
	}
	if c.failing {
		return nil, false, errors.New("syntax error")
	}
	c.compiled++
	b := "bin:" + s + ":" + strings.Repeat("I", c.compiled)
	c.held[s] = b
	return []byte(b), false, nil
}

func (c *fakeCache) Invalidate(s string) { delete(c.held, s) }

func TestLoadCached(t *testing.T) {
	var refused []string
	note := func(err error) { refused = append(refused, err.Error()) }
	loadUnless := func(bad string) func([]byte) (string, error) {
		return func(b []byte) (string, error) {
			if string(b) == bad {
				return "", errors.New("invalid image")
			}
			return "module " + string(b), nil
		}
	}
	c := &fakeCache{held: map[string]string{"k": "bin:k:stale"}}
	m, err := LoadCached[string, string](c, "k", loadUnless("bin:k:stale"), note, "k", "GPU 0")
	if err != nil || m != "module bin:k:I" || c.compiled != 1 {
		t.Errorf("load of a refused cached binary = %q, %v after %d compilations; want it compiled again once", m, err, c.compiled)
	}
	if diff := cmp.Diff([]string{"invalid image"}, refused); diff != "" {
		t.Errorf("refusals reported (-want +got):\n%s", diff)
	}

	c = &fakeCache{held: map[string]string{}}
	_, err = LoadCached[string, string](c, "k", loadUnless("bin:k:I"), note, "k", "GPU 0")
	if err == nil || err.Error() != "load k on GPU 0: invalid image" || c.compiled != 1 {
		t.Errorf("a fresh binary refused = %v after %d compilations; want a load error, no retry", err, c.compiled)
	}

	c = &fakeCache{held: map[string]string{}, failing: true}
	_, err = LoadCached[string, string](c, "k", loadUnless(""), note, "k", "GPU 0")
	if err == nil || err.Error() != "compile k for GPU 0: syntax error" {
		t.Errorf("a source that does not compile = %v", err)
	}
}
