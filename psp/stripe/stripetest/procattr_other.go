//go:build !linux

package stripetest

import "syscall"

// sysProcAttr has nothing to add outside Linux: a crashed test process may
// leave its stripe-mock running there.
func sysProcAttr() *syscall.SysProcAttr { return nil }
