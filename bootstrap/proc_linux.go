package bootstrap

import (
	"os"
	"syscall"
)

// procAttr puts each rank in its own process group, so that a signal for
// the job reaches the rank's own children too and the terminal's ^C
// reaches the ranks once (through Run), and has the kernel kill the rank
// if the launcher dies.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// signalGroup sends sig to the process group of p.
func signalGroup(p *os.Process, sig os.Signal) {
	if s, ok := sig.(syscall.Signal); ok {
		if syscall.Kill(-p.Pid, s) == nil {
			return
		}
	}
	p.Signal(sig)
}

// killGroup kills the process group of p.
func killGroup(p *os.Process) { signalGroup(p, syscall.SIGKILL) }

// exitSignal returns the name of the signal that killed the process, or "".
func exitSignal(ps *os.ProcessState) string {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return ws.Signal().String()
	}
	return ""
}
