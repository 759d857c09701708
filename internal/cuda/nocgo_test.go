//go:build !cgo

package cuda

const cgoBuild = false
