//go:build !purego

#include "textflag.h"

// CHUNK classifies the sixteen bytes at off(SI) and ORs their masks, shifted by sh, into R8
// (quotes) and R9 (others). X8, X9 and X10 hold '"', '\\' and 0x1f in every byte.
#define CHUNK(off, sh) \
	MOVOU   off(SI), X0 \
	MOVO    X0, X1 \
	PCMPEQB X8, X1 \
	MOVO    X0, X2 \
	PCMPEQB X9, X2 \
	PCMPGTB X10, X0 \
	PMOVMSKB X1, AX \
	PMOVMSKB X2, BX \
	PMOVMSKB X0, CX \
	XORL    $0xffff, CX \
	ORL     BX, CX \
	SHLQ    $sh, AX \
	SHLQ    $sh, CX \
	ORQ     AX, R8 \
	ORQ     CX, R9

// func classify64SSE2(p *byte) (quote, other uint64)
//
// A byte signed-greater than 0x1f is 0x20-0x7f: printable ASCII. Everything else (control
// characters, and non-ASCII bytes, negative as signed) needs attention, as does '\\'.
TEXT ·classify64SSE2(SB), NOSPLIT, $0-24
	MOVQ p+0(FP), SI
	MOVQ $0x2222222222222222, AX
	MOVQ AX, X8
	PUNPCKLQDQ X8, X8
	MOVQ $0x5c5c5c5c5c5c5c5c, AX
	MOVQ AX, X9
	PUNPCKLQDQ X9, X9
	MOVQ $0x1f1f1f1f1f1f1f1f, AX
	MOVQ AX, X10
	PUNPCKLQDQ X10, X10
	XORQ R8, R8
	XORQ R9, R9
	CHUNK(0, 0)
	CHUNK(16, 16)
	CHUNK(32, 32)
	CHUNK(48, 48)
	MOVQ R8, quote+8(FP)
	MOVQ R9, other+16(FP)
	RET
