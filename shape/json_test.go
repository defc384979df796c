package shape

import (
	"encoding/json"
	"math/rand/v2"
	"testing"
)

// TestIsJSONNumberAgreesWithEncodingJSON: a value is written bare only when it is a JSON number.
// Over strings of digits, signs, points and exponents (of which encoding/json accepts only
// numbers), isJSONNumber says what json.Valid says: the common integers and every other form.
func TestIsJSONNumberAgreesWithEncodingJSON(t *testing.T) {
	cases := []string{"", "0", "7", "10", "210", "85710761", "58.0", "-1", "-0", "00", "01", "1.", ".5", "1e5", "1E+5",
		"1e-05", "-0.5e10", "1e", "1e+", "+1", "--1", "1-", "1.2.3", "9999999999999999999999", "1x"}
	r := rand.New(rand.NewPCG(3, 4))
	const alphabet = "0123456789-+.eE"
	for range 200000 {
		b := make([]byte, r.IntN(9))
		for i := range b {
			if r.IntN(4) == 0 {
				b[i] = alphabet[10+r.IntN(5)]
			} else {
				b[i] = alphabet[r.IntN(10)]
			}
		}
		cases = append(cases, string(b))
	}
	numbers := 0
	for _, c := range cases {
		want := json.Valid([]byte(c))
		if got := isJSONNumber([]byte(c)); got != want {
			t.Fatalf("isJSONNumber(%q) = %v, encoding/json says %v", c, got, want)
		}
		if want {
			numbers++
		}
	}
	if numbers < 1000 {
		t.Fatalf("only %d of %d cases are numbers: the test shows little", numbers, len(cases))
	}
}
