package salesforce

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

func stringsReader(s string) io.Reader { return strings.NewReader(s) }

func TestQuoteString(t *testing.T) {
	tests := []struct{ in, want string }{
		{"Login", `'Login'`},
		{"", `''`},
		{"O'Brien", `'O\'Brien'`},
		{`a\b`, `'a\\b'`},
		{`\'`, `'\\\''`},
		{"x' OR Id != '", `'x\' OR Id != \''`},
		{"line\nbreak\r\ttab", `'line\nbreak\r\ttab'`},
		{`say "hi"`, `'say \"hi\"'`},
		{"ünïcødé", `'ünïcødé'`},
	}
	for _, tt := range tests {
		if got := QuoteString(tt.in); got != tt.want {
			t.Errorf("QuoteString(%q) = %s, want %s", tt.in, got, tt.want)
		}
	}
	if got := QuoteStrings([]string{"a@x.com", "b'c"}); got != `('a@x.com','b\'c')` {
		t.Errorf("QuoteStrings = %s", got)
	}
	if QuoteStrings(nil) != "" {
		t.Error("QuoteStrings(nil) not empty")
	}
}

// TestQuoteStringCannotBreakOut checks, for hostile inputs, that the literal
// ends exactly at its last character: scanning it as SOQL finds no
// unescaped quote before the end.
func TestQuoteStringCannotBreakOut(t *testing.T) {
	inputs := []string{`'`, `\`, `\'`, `'\`, `'' OR ''='`, "\\\\'", strings.Repeat(`\'`, 50), "a'\n) OR (Id != '"}
	for _, in := range inputs {
		q := QuoteString(in)
		end := literalEnd(q)
		if end != len(q)-1 {
			t.Errorf("QuoteString(%q) = %s: literal closes at %d of %d", in, q, end, len(q))
		}
	}
}

// literalEnd returns the index of the quote that closes the literal starting
// at s[0], following SOQL's backslash escapes.
func literalEnd(s string) int {
	for i := 1; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '\'':
			return i
		}
	}
	return -1
}

func TestFormatAndParseDateTime(t *testing.T) {
	tm := time.Date(2026, 6, 30, 3, 4, 5, 678_900_000, time.FixedZone("CEST", 2*3600))
	if got := FormatDateTime(tm); got != "2026-06-30T01:04:05.678Z" {
		t.Errorf("FormatDateTime = %s", got)
	}
	tests := []struct {
		in   string
		want string // normalized literal; "" = error
	}{
		{"2026-06-30T01:00:00.000+0000", "2026-06-30T01:00:00.000Z"},
		{"2026-06-30T01:00:00.000Z", "2026-06-30T01:00:00.000Z"},
		{"2026-06-30T01:00:00Z", "2026-06-30T01:00:00.000Z"},
		{"2026-06-30T03:00:00+02:00", "2026-06-30T01:00:00.000Z"},
		{"2026-06-30T03:00:00.5+0200", "2026-06-30T01:00:00.500Z"},
		{"2026-06-30T01:00:00.123456Z", "2026-06-30T01:00:00.123Z"},
		{"2026-06-30", ""},
		{"yesterday", ""},
		{"2026-06-30T01:00:00.000+0000' OR Id != '", ""},
		{"", ""},
	}
	for _, tt := range tests {
		got, err := NormalizeDateTime(tt.in)
		if tt.want == "" {
			if err == nil || !errors.Is(err, ErrInvalidSOQLValue) {
				t.Errorf("NormalizeDateTime(%q) = %q, %v; want ErrInvalidSOQLValue", tt.in, got, err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("NormalizeDateTime(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
}

func TestValidateIdentifier(t *testing.T) {
	good := []string{"Account", "LoginHistory", "EventLogFile", "API", "ApexExecution", "My_Object__c",
		"ns__Widget__c", "Order_Event__e", "LoginEventStream", "Account__r", "X1"}
	bad := []string{"", "1Account", "_Account", "Account_", "Acc ount", "Account;", "Account'", "Account)",
		"LogUser.Username", "Acc-ount", "Accöunt", "Account\n", "FIELDS(ALL)", strings.Repeat("a", 256)}
	for _, s := range good {
		if err := ValidateIdentifier(s); err != nil {
			t.Errorf("ValidateIdentifier(%q) = %v", s, err)
		}
	}
	for _, s := range bad {
		if err := ValidateIdentifier(s); !errors.Is(err, ErrInvalidSOQLValue) {
			t.Errorf("ValidateIdentifier(%q) = %v, want ErrInvalidSOQLValue", s, err)
		}
	}
}

func TestValidateFieldPath(t *testing.T) {
	good := []string{"Id", "LogUser.Username", "Account__r.Owner.Name", "a.b.c.d.e.f"}
	bad := []string{"", ".Id", "Id.", "LogUser..Username", "LogUser.User name", "a.b.c.d.e.f.g", "LogUser.Username'"}
	for _, s := range good {
		if err := ValidateFieldPath(s); err != nil {
			t.Errorf("ValidateFieldPath(%q) = %v", s, err)
		}
	}
	for _, s := range bad {
		if err := ValidateFieldPath(s); !errors.Is(err, ErrInvalidSOQLValue) {
			t.Errorf("ValidateFieldPath(%q) = %v, want ErrInvalidSOQLValue", s, err)
		}
	}
}

func TestValidateID(t *testing.T) {
	for _, s := range []string{"0AT5g000000AbCd", "0AT5g000000AbCdEAA"} {
		if err := ValidateID(s); err != nil {
			t.Errorf("ValidateID(%q) = %v", s, err)
		}
		if q, err := QuoteID(s); err != nil || q != "'"+s+"'" {
			t.Errorf("QuoteID(%q) = %s, %v", s, q, err)
		}
	}
	for _, s := range []string{"", "0AT5g000000AbC", "0AT5g000000AbCdE", "0AT5g000000AbCdEAAA", "0AT5g000000AbC'", "0AT5g000000AbCdE/A", "../../../limits"} {
		if err := ValidateID(s); !errors.Is(err, ErrInvalidSOQLValue) {
			t.Errorf("ValidateID(%q) = %v, want ErrInvalidSOQLValue", s, err)
		}
		if _, err := QuoteID(s); err == nil {
			t.Errorf("QuoteID(%q) accepted", s)
		}
	}
}

// TestParseDateTimeBytesAgrees: the fast reading of the forms Salesforce answers gives what
// ParseDateTime gives, for valid dates and for every kind of invalid one (a day or month out of
// range, February 29th of a common year, other signs and zones, other lengths).
func TestParseDateTimeBytesAgrees(t *testing.T) {
	inputs := []string{
		"2026-06-30T01:00:00.000+0000", "2026-06-30T01:00:00.000Z", "2024-02-29T23:59:59.999+0000",
		"2026-02-29T00:00:00.000+0000", "2026-04-31T00:00:00.000Z", "2026-13-01T00:00:00.000Z",
		"2026-00-10T00:00:00.000Z", "2026-01-00T00:00:00.000Z", "2026-01-01T24:00:00.000Z",
		"2026-01-01T00:60:00.000Z", "2026-01-01T00:00:60.000+0000", "2026-01-01T00:00:00.000-0000",
		"2026-01-01T00:00:00.000+0100", "2026-01-01T00:00:00.000z", "2026-01-01 00:00:00.000Z",
		"2026-01-01T00:00:00,000Z", "2026-01-01T00:00:00.00+0000", "+026-01-01T00:00:00.000Z",
		"2026-1a-01T00:00:00.000+0000", "1900-02-29T00:00:00.000Z", "2000-02-29T00:00:00.000Z",
		"0000-01-01T00:00:00.000Z", "", "2026-06-30",
	}
	rnd := rand.New(rand.NewPCG(7, 22))
	for range 20000 {
		b := []byte("2026-06-30T01:00:00.000+0000")
		if rnd.IntN(2) == 0 {
			b = append(b[:23], 'Z')
		}
		for _, at := range []int{0, 1, 2, 3, 5, 6, 8, 9, 11, 12, 14, 15, 17, 18, 20, 21, 22} {
			if rnd.IntN(3) == 0 {
				b[at] = byte('0' + rnd.IntN(10))
			}
		}
		if rnd.IntN(50) == 0 {
			b[rnd.IntN(len(b))] = byte(rnd.IntN(128))
		}
		inputs = append(inputs, string(b))
	}
	// The last days of every month around the leap-year rules and the ends of the range, which
	// the fast path counts from the Unix epoch itself.
	for _, y := range []int{1, 4, 100, 400, 1600, 1700, 1900, 1969, 1970, 2000, 2024, 2100, 2400, 9999} {
		for m := 1; m <= 12; m++ {
			for _, d := range []int{1, 28, 29, 30, 31} {
				for _, in := range []string{fmt.Sprintf("%04d-%02d-%02dT23:59:59.999+0000", y, m, d), fmt.Sprintf("%04d-%02d-%02dT00:00:00.000Z", y, m, d)} {
					want, err := ParseDateTime(in)
					if got, ok := parseMillisUTC([]byte(in)); ok != (err == nil) || got != want {
						t.Fatalf("parseMillisUTC(%q) = %v, %v; ParseDateTime gives %v, %v", in, got, ok, want, err)
					}
					inputs = append(inputs, in)
				}
			}
		}
	}
	for _, in := range inputs[:3] {
		if _, ok := parseMillisUTC([]byte(in)); !ok {
			t.Fatalf("%s is not read by the fast path", in)
		}
	}
	for _, in := range inputs {
		want, wantErr := ParseDateTime(in)
		got, err := ParseDateTimeBytes([]byte(in))
		if (err != nil) != (wantErr != nil) || got != want {
			t.Fatalf("ParseDateTimeBytes(%q) = %v, %v; ParseDateTime gives %v, %v", in, got, err, want, wantErr)
		}
	}
}
