//go:build !linux

package testenv

import "syscall"

// procAttr puts a server in its own process group so stop reaches all of it. Outside Linux
// there is no parent-death signal: servers of a killed test binary must be stopped by hand.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
