package platform

import (
	"context"
	"testing"

	"github.com/packet-steering/packet-steering/platform/fixture/fixturetest"
)

// Targets (issue): a 4-CPU router fixture in under 2 ms, the 48-CPU server
// in under 20 ms.
func BenchmarkReadIPQ807x(b *testing.B)  { benchRead(b, "ipq807x") }
func BenchmarkReadMT7621(b *testing.B)   { benchRead(b, "mt7621") }
func BenchmarkReadServer48(b *testing.B) { benchRead(b, "server-48") }

// BenchmarkReaderIPQ807x is what a daemon's status call reads: a Reader
// kept across calls.
func BenchmarkReaderIPQ807x(b *testing.B) {
	root := fixturetest.Root(b, "ipq807x", nil)
	ctx := context.Background()
	r := NewReader()
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		s, err := r.Read(ctx, root)
		if err != nil || len(s.Gaps) != 0 {
			b.Fatalf("read: %v %v", err, s.Gaps)
		}
	}
}

func benchRead(b *testing.B, preset string) {
	root := fixturetest.Root(b, preset, nil)
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		s, err := Read(ctx, root)
		if err != nil || len(s.Gaps) != 0 {
			b.Fatalf("read: %v %v", err, s.Gaps)
		}
	}
}
