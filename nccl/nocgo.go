//go:build !cgo

// Command nccl is weft's NCCL C ABI (see main.go). It needs cgo: built
// without it, this package is an empty program so that
// CGO_ENABLED=0 go build ./... succeeds.
package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Fprintln(os.Stderr, "weft's NCCL library needs cgo: go build -buildmode=c-shared -o libweft_nccl.so ./nccl")
	os.Exit(2)
}
