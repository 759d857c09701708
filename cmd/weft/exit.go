package main

import "github.com/weftccl/weft/hal"

// exitCode maps an error to the process exit status: 1 plus the
// ncclResult_t code, so scripts can tell a bad argument (5) from a lost peer
// (7).
func exitCode(err error) int {
	if err == nil {
		return 0
	}
	return 1 + hal.ResultCode(err)
}
