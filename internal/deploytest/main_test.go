package deploytest

import (
	"flag"
	"testing"

	"github.com/sf2loki/sf2loki/internal/testenv"
)

func TestMain(m *testing.M) {
	flag.Parse()
	// The controller scenarios spend their minutes waiting for schedule ticks, not on the CPU:
	// run them all at once rather than GOMAXPROCS at a time, unless -parallel says otherwise.
	explicit := false
	flag.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "test.parallel" })
	if !explicit {
		_ = flag.Set("test.parallel", "8")
	}
	testenv.Main(m)
}
