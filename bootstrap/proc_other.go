//go:build !linux

package bootstrap

import (
	"os"
	"syscall"
)

func procAttr() *syscall.SysProcAttr { return nil }

func signalGroup(p *os.Process, sig os.Signal) { p.Signal(sig) }

func killGroup(p *os.Process) { p.Kill() }

func exitSignal(ps *os.ProcessState) string {
	if !ps.Exited() {
		return "signal"
	}
	return ""
}
