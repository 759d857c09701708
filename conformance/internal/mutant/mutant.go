package mutant

import "github.com/weftccl/weft/hal"

func Lookup(name string) (hal.Backend, bool) { return nil, false }
