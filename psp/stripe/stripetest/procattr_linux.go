package stripetest

import "syscall"

// sysProcAttr makes the kernel kill stripe-mock when the test process dies,
// so a test binary that crashes or times out leaves no server behind.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
