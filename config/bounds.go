package config

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
)

// Limits on what loading a configuration reads, decodes and prints. A configuration is written by
// a person, so each limit is far above any real one; together they keep a hostile or broken input
// (an endless file, a YAML alias bomb, a million bad labels) from taking more than a bounded time
// and memory before it is refused.
const (
	// MaxFileBytes caps the configuration file.
	MaxFileBytes = 256 << 10
	// MaxSecretFileBytes caps each <secret>_file (a PEM key is a few KiB).
	MaxSecretFileBytes = 64 << 10
	// MaxNamedFileBytes caps each other file a key ending in _file names for reading (ca_file,
	// cert_file, key_file, credentials_file): a CA bundle of the whole public web is ~250 KiB.
	MaxNamedFileBytes = 1 << 20
	// MaxEntries caps the entries of any one list or map; a field's max tag can lower it.
	MaxEntries = 1000
	// MaxDecodedValues caps the YAML values the loader decodes. Every use of an alias counts
	// the values it stands for again, so nested aliases cannot expand without bound.
	MaxDecodedValues = 100_000
	// MaxInterpolatedBytes caps the total size of the values that ${NAME} interpolation builds.
	MaxInterpolatedBytes = 1 << 20
	// MaxPrintedErrors is how many problems Errors prints before summing up the rest.
	MaxPrintedErrors = 30
	// maxKeyShown caps how much of an unknown key a message repeats.
	maxKeyShown = 80
)

// errTooLarge is returned by readCapped for a file over its cap.
var errTooLarge = errors.New("file too large")

// readCapped reads the file name through open, refusing it as soon as more than limit bytes
// arrive (so /dev/zero or a runaway log file is refused at once, not read whole).
func readCapped(open func(string) (io.ReadCloser, error), name string, limit int64) ([]byte, error) {
	f, err := open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, errTooLarge
	}
	return data, nil
}

func openFile(name string) (io.ReadCloser, error) { return os.Open(name) }

// shortKey returns a key as messages show it: long keys are cut.
func shortKey(key string) string {
	if len(key) <= maxKeyShown {
		return key
	}
	return fmt.Sprintf("%s…(%d bytes)", strings.ToValidUTF8(key[:maxKeyShown], ""), len(key))
}
