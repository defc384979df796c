package deploytest

import (
	"testing"

	"github.com/sf2loki/sf2loki/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }
