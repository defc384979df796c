//go:build !linux

package doctor

// checkFile is only implemented on Linux.
func checkFile(path string) Result {
	return Skip("file permission checks run on Linux only (%s)", path)
}
