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
	var last time.Time
	for i := 0; i < 5; i++ {
		// Taken before the poke, which arms the timer: the trim can come
		// no earlier than 100ms after this (after the poke returns, a
		// slow machine may already be some way into the wait).
		last = time.Now()
		it.poke()
		time.Sleep(20 * time.Millisecond)
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
