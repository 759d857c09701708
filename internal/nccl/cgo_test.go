//go:build cgo

package nccl

const cgoEnabled = true
