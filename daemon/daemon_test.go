package daemon

import (
	"context"
	"testing"
	"time"

	"github.com/packet-steering/packet-steering/internal/ubus"
)

// dialTest connects a caller to the broker.
func dialTest(t testing.TB, sock string) *ubus.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := ubus.Dial(ctx, sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// A series of pokes trims once, after the last one; nothing runs while idle.
func TestIdleTrimmer(t *testing.T) {
	trims := make(chan time.Time, 10)
	it := &idleTrimmer{after: 100 * time.Millisecond, trim: func() { trims <- time.Now() }}
	defer it.stop()
	// Five pokes 20ms apart postpone the trim to 100ms after the last. A
	// loaded machine may stretch a gap past 100ms, which lets a trim fire
	// in between as it should: such a round proves nothing and is repeated.
	var last time.Time
	for round := 0; ; round++ {
		if round == 5 {
			t.Skip("every round had a gap of 100ms or more between pokes (machine too loaded)")
		}
		stretched := false
		for i := 0; i < 5; i++ {
			// Taken before the poke, which arms the timer: the trim can
			// come no earlier than 100ms after this.
			now := time.Now()
			if i > 0 && now.Sub(last) >= 90*time.Millisecond {
				stretched = true
			}
			last = now
			it.poke()
			time.Sleep(20 * time.Millisecond)
		}
		if !stretched {
			break
		}
		<-trims // the round's trim (at least one came; more are drained below)
		for drained := false; !drained; {
			select {
			case <-trims:
			case <-time.After(300 * time.Millisecond):
				drained = true
			}
		}
	}
	select {
	case at := <-trims:
		if d := at.Sub(last); d < 100*time.Millisecond {
			t.Errorf("trimmed %v after the last poke, want >= 100ms", d)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("no trim after the pokes")
	}
	select {
	case <-trims:
		t.Fatal("a second trim without a poke")
	case <-time.After(300 * time.Millisecond):
	}
	// A poke after a trim arms it again; stop cancels it.
	it.poke()
	<-trims
	it.poke()
	it.stop()
	select {
	case <-trims:
		t.Fatal("trim after stop")
	case <-time.After(300 * time.Millisecond):
	}
}
