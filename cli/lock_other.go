//go:build !unix

package cli

// lockedByOther cannot tell on this system: bbolt's lock is not a flock
// here. The release builds for Linux and macOS only.
func lockedByOther(string) (bool, error) { return false, nil }
