package main

// The backends this binary can use register themselves on import, from the
// one list that every binary of weft shares.
import _ "github.com/weftccl/weft/backends"
