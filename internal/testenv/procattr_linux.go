package testenv

import "syscall"

// procAttr puts a server in its own process group (so stop reaches all of it) and has the
// kernel kill it when the test binary dies, so a crashed or killed test run leaks no servers.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
