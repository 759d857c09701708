package cuda

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"

	"github.com/weftccl/weft/internal/env"
)

// Source is a translation unit to compile for one architecture: the input
// of [Compile] and the key of [KernelCache].
type Source struct {
	Name    string            // program name, for messages
	Source  string            // CUDA C++
	Headers map[string]string // include name -> contents
	Options []string          // extra NVRTC options, in order
	Arch    string            // "sm_90a", see Arch
}

// Key is the cache key of s compiled by compiler version compilerVersion:
// hex SHA-256 over the source, the headers sorted by name, the options, the
// architecture and the compiler version, each field length-prefixed so that
// no two distinct inputs share a key.
func (s Source) Key(compilerVersion string) string {
	h := sha256.New()
	field := func(b string) {
		var n [8]byte
		binary.LittleEndian.PutUint64(n[:], uint64(len(b)))
		h.Write(n[:])
		h.Write([]byte(b))
	}
	field("weft-kernel-key-v1")
	field(s.Source)
	names := make([]string, 0, len(s.Headers))
	for name := range s.Headers {
		names = append(names, name)
	}
	sort.Strings(names)
	field(fmt.Sprint(len(names)))
	for _, name := range names {
		field(name)
		field(s.Headers[name])
	}
	field(fmt.Sprint(len(s.Options)))
	for _, o := range s.Options {
		field(o)
	}
	field(s.Arch)
	field(compilerVersion)
	return hex.EncodeToString(h.Sum(nil))
}

// DefaultCacheDir is WEFT_CACHE_DIR, else $XDG_CACHE_HOME/weft, else
// ~/.cache/weft; "" when none can be determined (caching is then off).
func DefaultCacheDir() string {
	if d := env.String("WEFT_CACHE_DIR"); d != "" {
		return d
	}
	if d := os.Getenv("XDG_CACHE_HOME"); d != "" {
		return filepath.Join(d, "weft")
	}
	if home, err := os.UserHomeDir(); err == nil && home != "" {
		return filepath.Join(home, ".cache", "weft")
	}
	return ""
}

// CompileFunc compiles a source for its architecture and returns the binary.
type CompileFunc func(Source) ([]byte, error)

// KernelCache keeps compiled kernel binaries on disk, one file per key.
// Entries are written atomically (temporary file, then rename) and carry a
// checksum; an entry that cannot be read or fails its checksum is compiled
// again and replaced, never an error. Failing to write an entry is logged
// and otherwise ignored. A KernelCache is safe for concurrent use, also by
// several processes sharing the directory.
type KernelCache struct {
	// Dir is the cache directory; "" disables the cache.
	Dir string
	// CompilerVersion is part of every key ("nvrtc-13.0").
	CompilerVersion string
	// Compile produces a binary on a miss.
	Compile CompileFunc
}

// entry file format: magic, payload length (uint64 LE), SHA-256 of payload, payload.
var entryMagic = []byte("WEFTKBN1")

const entryHeader = 8 + 8 + sha256.Size

// Path returns the file that holds key's entry.
func (c *KernelCache) Path(key string) string { return filepath.Join(c.Dir, key+".cubin") }

// Get returns the binary for s, compiling it on a miss; hit says whether it
// came from disk.
func (c *KernelCache) Get(s Source) (bin []byte, hit bool, err error) {
	if c.Compile == nil {
		return nil, false, errors.New("kernel cache: no compiler")
	}
	if c.Dir == "" {
		bin, err = c.Compile(s)
		return bin, false, err
	}
	key := s.Key(c.CompilerVersion)
	log := env.Logger("HAL")
	bin, err = c.read(key)
	switch {
	case err == nil:
		log.Debug("kernel cache hit", "kernel", s.Name, "arch", s.Arch, "key", key)
		return bin, true, nil
	case errors.Is(err, fs.ErrNotExist):
		log.Debug("kernel cache miss", "kernel", s.Name, "arch", s.Arch, "key", key)
	default:
		log.Warn("kernel cache entry unusable; recompiling", "path", c.Path(key), "err", err)
	}
	bin, err = c.Compile(s)
	if err != nil {
		return nil, false, err
	}
	if werr := c.write(key, bin); werr != nil {
		log.Warn("kernel cache write failed", "dir", c.Dir, "err", werr)
	}
	return bin, false, nil
}

// Invalidate removes the entry of s, for a binary that the driver refused to
// load; the next Get compiles it again.
func (c *KernelCache) Invalidate(s Source) {
	if c.Dir == "" {
		return
	}
	_ = os.Remove(c.Path(s.Key(c.CompilerVersion)))
}

func (c *KernelCache) read(key string) ([]byte, error) {
	data, err := os.ReadFile(c.Path(key))
	if err != nil {
		return nil, err
	}
	if len(data) < entryHeader || !bytes.Equal(data[:8], entryMagic) {
		return nil, fmt.Errorf("%s: not a weft kernel cache entry", c.Path(key))
	}
	n := binary.LittleEndian.Uint64(data[8:16])
	payload := data[entryHeader:]
	if uint64(len(payload)) != n {
		return nil, fmt.Errorf("%s: truncated (%d of %d bytes)", c.Path(key), len(payload), n)
	}
	if sum := sha256.Sum256(payload); !bytes.Equal(sum[:], data[16:entryHeader]) {
		return nil, fmt.Errorf("%s: checksum mismatch", c.Path(key))
	}
	return payload, nil
}

func (c *KernelCache) write(key string, bin []byte) error {
	if err := os.MkdirAll(c.Dir, 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(c.Dir, ".tmp-"+key[:16]+"-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	var hdr [entryHeader]byte
	copy(hdr[:8], entryMagic)
	binary.LittleEndian.PutUint64(hdr[8:16], uint64(len(bin)))
	sum := sha256.Sum256(bin)
	copy(hdr[16:], sum[:])
	_, err = f.Write(hdr[:])
	if err == nil {
		_, err = f.Write(bin)
	}
	if err == nil {
		err = f.Chmod(0o644)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, c.Path(key))
	}
	if err != nil {
		_ = os.Remove(tmp)
	}
	return err
}
