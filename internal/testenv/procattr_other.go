//go:build !linux

package testenv

import "syscall"

// procAttr puts a server in its own process group so stop reaches all of it. Outside Linux
// there is no parent-death signal: servers of a killed test binary must be stopped by hand.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

// podProcAttr runs a node stand-in's Pod process in root as uid:gid with the supplementary
// groups, in its own process group.
func podProcAttr(root string, uid, gid uint32, groups []uint32) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Chroot: root, Credential: &syscall.Credential{Uid: uid, Gid: gid, Groups: groups},
		Setpgid: true}
}
