//go:build cgo

package ncclnet

// #include <stdlib.h>
import "C"

import (
	"context"
	"log/slog"

	"github.com/weftccl/weft/internal/env"
)

// Levels of ncclDebugLogLevel (NCCL's common.h).
const (
	logWarn  = 2
	logInfo  = 3
	logAbort = 4
	logTrace = 5
)

//export weftNcclnetLog
func weftNcclnetLog(level C.int, file *C.char, line C.int, msg *C.char) {
	l := env.Logger("NET")
	lv := slog.LevelDebug
	switch int(level) {
	case logWarn, logAbort:
		lv = slog.LevelWarn
	case logInfo:
		lv = slog.LevelInfo
	case logTrace:
		lv = slog.LevelDebug
	}
	if !l.Enabled(context.Background(), lv) {
		return
	}
	l.Log(context.Background(), lv, "net plugin: "+C.GoString(msg), "file", C.GoString(file), "line", int(line))
}
