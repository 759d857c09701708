//go:build cgo

package sysnccl

const cgoEnabled = true
