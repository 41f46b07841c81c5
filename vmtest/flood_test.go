package vmtest

import (
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/packet-steering/packet-steering/internal/netnstest"
)

// The adaptive check's traffic: UDP datagrams from the host side of the
// multi-queue tap (198.18.0.1) to the guest (198.18.0.2), one flow per
// queue pair, flow i between port floodPort+i on both sides. The guest
// keeps each flow's entry in the tap's flow table fresh (`vmguest
// keepalive` from the CPU whose XPS picks tx-i), so the tap sends flow i
// into rx-i. The guest asks for the flood on its console: "=== FLOOD
// start" and "=== FLOOD stop".
const (
	floodPort = 9100
	// floodPPS is each flow's rate: enough for the loop to see traffic
	// (the guest's idle_pps is far below), little enough for emulated
	// CPUs to keep up without a hog.
	floodPPS = 300
)

// flooder sends the flows while started.
type flooder struct {
	ns    *netnstest.NS
	flows int

	mu    sync.Mutex
	conns []*net.UDPConn
	stop  chan struct{}
	done  chan struct{}
	sent  uint64
	err   error
}

// line handles one console line.
func (f *flooder) line(l string) {
	switch strings.TrimSpace(l) {
	case "=== FLOOD start":
		f.start()
	case "=== FLOOD stop":
		f.halt()
	}
}

func (f *flooder) start() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.stop != nil {
		return
	}
	if f.conns == nil {
		// The tap's address exists by now (the guest has echoed through
		// it): the sockets are bound in the test's namespace.
		err := f.ns.Do(func() error {
			for i := 0; i < f.flows; i++ {
				c, err := net.DialUDP("udp4", &net.UDPAddr{IP: net.IPv4(198, 18, 0, 1), Port: floodPort + i},
					&net.UDPAddr{IP: net.IPv4(198, 18, 0, 2), Port: floodPort + i})
				if err != nil {
					return fmt.Errorf("flood flow %d: %w", i, err)
				}
				f.conns = append(f.conns, c)
			}
			return nil
		})
		if err != nil {
			f.err = err
			return
		}
	}
	f.stop, f.done = make(chan struct{}), make(chan struct{})
	go f.run(f.conns, f.stop, f.done)
}

// run sends each flow's datagrams in ticks of 10 ms until stop.
func (f *flooder) run(conns []*net.UDPConn, stop, done chan struct{}) {
	defer close(done)
	buf := make([]byte, 64)
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	per := max(1, floodPPS/100)
	var n uint64
	defer func() {
		f.mu.Lock()
		f.sent += n
		f.mu.Unlock()
	}()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		for _, c := range conns {
			for range per {
				// Refused (no listener yet, ICMP) or dropped: the guest's
				// receive work is what counts, not delivery.
				if _, err := c.Write(buf); err == nil {
					n++
				}
			}
		}
	}
}

func (f *flooder) halt() {
	f.mu.Lock()
	stop, done := f.stop, f.done
	f.stop, f.done = nil, nil
	f.mu.Unlock()
	if stop != nil {
		close(stop)
		<-done
	}
}

// close stops the flood and closes the sockets; it returns the number of
// datagrams sent and the error of a start, if any.
func (f *flooder) close() (uint64, error) {
	f.halt()
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range f.conns {
		c.Close()
	}
	f.conns = nil
	return f.sent, f.err
}
