package sysfs

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/weftccl/weft/internal/errkind"
)

// DefaultRoot is where the kernel mounts sysfs.
const DefaultRoot = "/sys"

// maxAttrBytes bounds every attribute read. Kernel attributes fit in a page;
// a larger file is a fake tree gone wrong, not something to slurp.
const maxAttrBytes = 64 << 10

// FS reads a sysfs tree rooted at a directory: /sys on a live system, a
// fixture or a tree made by package fakesys in tests. It only opens files
// for reading and never follows a link out of the root.
type FS struct {
	root string // cleaned, symlinks resolved
}

// Open returns an FS for root ("" means /sys). The error wraps
// errkind.ErrNotSupported when root does not exist or is not a directory.
func Open(root string) (*FS, error) {
	if root == "" {
		root = DefaultRoot
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("sysfs root %s: %w", root, errkind.ErrInvalidArgument)
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return nil, fmt.Errorf("sysfs root %s: %v: %w", root, err, errkind.ErrNotSupported)
	}
	st, err := os.Stat(real)
	if err != nil || !st.IsDir() {
		return nil, fmt.Errorf("sysfs root %s is not a directory: %w", root, errkind.ErrNotSupported)
	}
	return &FS{root: real}, nil
}

// Root returns the resolved root directory.
func (f *FS) Root() string { return f.root }

// Path returns the full path of rel (a path relative to the root, with
// forward slashes).
func (f *FS) Path(rel string) string { return filepath.Join(f.root, filepath.FromSlash(rel)) }

// ReadAttr reads one attribute file and trims trailing white space. Errors
// are *AttrError naming the file; a missing file wraps fs.ErrNotExist.
func (f *FS) ReadAttr(rel string) (string, error) {
	p := f.Path(rel)
	fh, err := os.Open(p)
	if err != nil {
		return "", &AttrError{File: p, Err: unwrapPathError(err)}
	}
	defer fh.Close()
	b, err := io.ReadAll(io.LimitReader(fh, maxAttrBytes+1))
	if err != nil {
		return "", &AttrError{File: p, Err: unwrapPathError(err)}
	}
	if len(b) > maxAttrBytes {
		return "", &AttrError{File: p, Err: malformed("longer than %d bytes", maxAttrBytes)}
	}
	return strings.TrimRight(string(b), " \t\r\n\x00"), nil
}

// unwrapPathError drops the *fs.PathError layer, whose path AttrError
// already names, keeping the cause (fs.ErrNotExist, syscall.EINVAL, …).
func unwrapPathError(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// attr reads rel and parses it with parse; both errors name the file.
func attr[T any](f *FS, rel string, parse func(string) (T, error)) (T, error) {
	var zero T
	s, err := f.ReadAttr(rel)
	if err != nil {
		return zero, err
	}
	v, err := parse(s)
	if err != nil {
		return zero, &AttrError{File: f.Path(rel), Err: err}
	}
	return v, nil
}

// optAttr is attr for attributes that may be absent (or unreadable as a
// normal condition, such as speed on a link-down interface): it returns
// def when the file does not exist or cannot be read, and an error only
// for content that does not parse.
func optAttr[T any](f *FS, rel string, def T, parse func(string) (T, error)) (T, error) {
	s, err := f.ReadAttr(rel)
	if err != nil {
		return def, nil
	}
	v, err := parse(s)
	if err != nil {
		return def, &AttrError{File: f.Path(rel), Err: err}
	}
	return v, nil
}

// Exists reports whether rel exists under the root.
func (f *FS) Exists(rel string) bool {
	_, err := os.Lstat(f.Path(rel))
	return err == nil
}

// List returns the sorted names in directory rel, or nil when it does not
// exist. Other errors name the directory.
func (f *FS) List(rel string) ([]string, error) {
	ents, err := os.ReadDir(f.Path(rel))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, &AttrError{File: f.Path(rel), Err: unwrapPathError(err)}
	}
	names := make([]string, 0, len(ents))
	for _, e := range ents {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	return names, nil
}

// Resolve follows the symbolic links of rel and returns the resulting path
// relative to the root ("devices/pci0000:00/0000:00:01.0"). A link leading
// out of the root is an error wrapping ErrMalformed.
func (f *FS) Resolve(rel string) (string, error) {
	p := f.Path(rel)
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		return "", &AttrError{File: p, Err: unwrapPathError(err)}
	}
	r, err := filepath.Rel(f.root, real)
	if err != nil || r == ".." || strings.HasPrefix(r, ".."+string(filepath.Separator)) {
		return "", &AttrError{File: p, Err: malformed("link leads out of the sysfs root to %s", real)}
	}
	return filepath.ToSlash(r), nil
}

// LinkBase returns the last element of the target of the symbolic link
// rel ("nvidia" for a driver link), or "" when rel is not a link.
func (f *FS) LinkBase(rel string) string {
	t, err := os.Readlink(f.Path(rel))
	if err != nil {
		return ""
	}
	return filepath.Base(t)
}
