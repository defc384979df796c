package salesforce

const base62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

// makeID builds an 18-character Salesforce id from a 3-character key prefix
// and a sequence number. Digits are base62 in ASCII order, so ids sort in the
// order they were allocated, like real ids of one org.
func makeID(prefix string, n uint64) string {
	var b [18]byte
	copy(b[:3], prefix)
	b[3], b[4] = '0', '0'
	for i := 14; i >= 5; i-- {
		b[i] = base62[n%62]
		n /= 62
	}
	idSuffix(b[:15], b[15:])
	return string(b[:])
}

// idSuffix writes the 3-character case-safety suffix of a 15-character id.
func idSuffix(id15 []byte, out []byte) {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZ012345"
	for chunk := 0; chunk < 3; chunk++ {
		flags := 0
		for j := 0; j < 5; j++ {
			c := id15[chunk*5+j]
			if c >= 'A' && c <= 'Z' {
				flags |= 1 << j
			}
		}
		out[chunk] = alphabet[flags]
	}
}

// normalizeID validates a 15- or 18-character id and returns its canonical
// 18-character form (the suffix recomputed from the first 15 characters).
func normalizeID(s string) (string, bool) {
	if len(s) != 15 && len(s) != 18 {
		return "", false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !isAlnum(c) {
			return "", false
		}
	}
	var b [18]byte
	copy(b[:15], s[:15])
	idSuffix(b[:15], b[15:])
	return string(b[:]), true
}

// to15 returns the case-sensitive 15-character form used for comparisons.
func to15(id string) string {
	if len(id) >= 15 {
		return id[:15]
	}
	return id
}

// splitmix64 is the mixing function behind every deterministic choice.
func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// hashString folds a string into a 64-bit value (FNV-1a then mixed).
func hashString(s string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	return splitmix64(h)
}

// rng is a small deterministic generator (splitmix64 stream).
type rng struct{ state uint64 }

func newRNG(seed uint64) *rng { return &rng{state: seed} }

func (r *rng) next() uint64 {
	r.state += 0x9e3779b97f4a7c15
	z := r.state
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// intn returns a value in [0, n).
func (r *rng) intn(n int) int {
	if n <= 0 {
		return 0
	}
	return int(r.next() % uint64(n))
}

// pick returns a random element of list.
func pick[T any](r *rng, list []T) T { return list[r.intn(len(list))] }

func isAlnum(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z'
}
