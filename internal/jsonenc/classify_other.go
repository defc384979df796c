//go:build !amd64 || purego

package jsonenc

func classify64(b []byte) (quote, other uint64) { return classify64Generic(b) }
