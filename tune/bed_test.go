package tune

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/packet-steering/packet-steering/internal/netnstest"
	"golang.org/x/sys/unix"
)

// bedNet is the three-namespace test bed that TestTestbed and the
// adaptive comparison share: client - router - server, joined by veth
// pairs with 4 queues and threaded NAPI, forwarding on the router,
// addresses from 198.18.0.0/15 only.
type bedNet struct {
	client, router, server *netnstest.NS
	// routerIn and routerOut are the router's ends (towards the client
	// and towards the server); clientDev is the client's end.
	routerIn, routerOut, clientDev string
}

// bedAddrs are one bed's addresses: the client link's /30 and the
// server link's /30.
type bedAddrs struct {
	routerClient, client, routerServer, server string
}

// newBed builds the namespaces and links. prefix (two letters) names
// the namespaces and devices, so beds of different tests do not collide.
func newBed(t *testing.T, prefix string, a bedAddrs) *bedNet {
	t.Helper()
	id := os.Getpid() % 100000
	b := &bedNet{
		routerIn:  fmt.Sprintf("%sr%da", prefix, id),
		routerOut: fmt.Sprintf("%sr%db", prefix, id),
		clientDev: fmt.Sprintf("%sc%d", prefix, id),
		client:    netnstest.New(t, prefix+"c"),
		router:    netnstest.New(t, prefix+"r"),
		server:    netnstest.New(t, prefix+"s"),
	}
	b.router.AddVeth(t, netnstest.Veth{Name: b.routerIn, Peer: b.clientDev, PeerNS: b.client,
		Queues: 4, Threaded: true, Addr: a.routerClient + "/30", PeerAddr: a.client + "/30"})
	b.router.AddVeth(t, netnstest.Veth{Name: b.routerOut, Peer: fmt.Sprintf("%ss%d", prefix, id), PeerNS: b.server,
		Queues: 4, Threaded: true, Addr: a.routerServer + "/30", PeerAddr: a.server + "/30"})
	b.client.MustExec(t, "ip", "route", "add", "default", "via", a.routerClient)
	b.server.MustExec(t, "ip", "route", "add", "default", "via", a.routerServer)
	b.router.MustExec(t, "sysctl", "-qw", "net.ipv4.ip_forward=1")
	return b
}

// startIperfServers starts one iperf3 server per port in the server
// namespace, bound to addr, stops them when the test ends, and waits
// until all of them listen.
func (b *bedNet) startIperfServers(t *testing.T, addr string, ports ...string) {
	t.Helper()
	var out bytes.Buffer
	for _, p := range ports {
		srv := exec.Command("ip", "netns", "exec", b.server.Name, "iperf3", "-s", "-p", p, "-B", addr)
		srv.Stdout, srv.Stderr = &out, &out
		if err := srv.Start(); err != nil {
			t.Fatalf("start iperf3 -s -p %s: %v", p, err)
		}
		t.Cleanup(func() {
			_ = srv.Process.Signal(unix.SIGTERM)
			done := make(chan error, 1)
			go func() { done <- srv.Wait() }()
			select {
			case <-done:
			case <-time.After(5 * time.Second):
				_ = srv.Process.Kill()
				<-done
			}
		})
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		ss, _ := b.server.Exec("ss", "-Hltn")
		n := 0
		for _, p := range ports {
			if strings.Contains(ss, ":"+p+" ") {
				n++
			}
		}
		if n == len(ports) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("iperf3 servers not listening on %v: %s", ports, out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}
