package testenv

import "syscall"

// procAttr puts a server in its own process group (so stop reaches all of it) and has the
// kernel kill it when the test binary dies, so a crashed or killed test run leaks no servers.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// podProcAttr runs a node stand-in's Pod process in root as uid:gid with the supplementary
// groups, in its own process group, killed with the test binary.
func podProcAttr(root string, uid, gid uint32, groups []uint32) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Chroot: root, Credential: &syscall.Credential{Uid: uid, Gid: gid, Groups: groups},
		Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
