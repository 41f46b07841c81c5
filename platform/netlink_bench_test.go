package platform

import (
	"context"
	"testing"
)

// BenchmarkNetlinkAsk is what one Read's netlink requests cost on the
// running kernel (socket, family lookup, queue-get and napi-get dumps of
// every device), without qstats-get as a decision read asks.
func BenchmarkNetlinkAsk(b *testing.B) {
	ctx := context.Background()
	b.ReportAllocs()
	for range b.N {
		d := kernelNetlink(ctx, false)
		if len(d.gaps.list) != 0 {
			b.Fatalf("netlink: %v", d.gaps.list)
		}
	}
}

// BenchmarkReadDecisionRoot{Netlink,NoNetlink}: a decision read of the
// running machine with and without the netlink requests.
func BenchmarkReadDecisionRootNetlink(b *testing.B)   { benchDecisionRoot(b, true) }
func BenchmarkReadDecisionRootNoNetlink(b *testing.B) { benchDecisionRoot(b, false) }

func benchDecisionRoot(b *testing.B, netlink bool) {
	f, err := NewFS("/")
	if err != nil {
		b.Fatal(err)
	}
	if !netlink {
		f.netlink = nil
	}
	ctx := context.Background()
	b.ReportAllocs()
	for range b.N {
		if _, err := f.readWith(ctx, nil, readDecision, nil, nil, nil); err != nil {
			b.Fatal(err)
		}
	}
}
