//go:build unix

package main

import (
	"syscall"
	"time"
)

// cpuTime is the user and system CPU time this process has used so far
// (getrusage), or -1 if the system does not say.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return -1
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
