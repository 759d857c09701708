//go:build !cgo

package cuda

// CurrentDevice needs cgo; see current_cgo.go.
func CurrentDevice() (dev Device, ctx Context, ok bool, err error) {
	return 0, 0, false, errNoCgo
}
