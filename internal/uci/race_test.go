package uci

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/packet-steering/packet-steering/internal/testenv"
	"golang.org/x/sys/unix"
)

// stockCommit changes one option the way `uci set` + `uci commit` does,
// following libuci's uci_file_commit (openwrt/uci file.c) step by step:
// open the config file read-write (creating it), flock it exclusively,
// read it through that descriptor (libuci never checks that the locked
// file is still the one at the path), apply the change, write and fsync
// a temp file .NAME.uci-XXXXXX in the config directory, close the config
// file (releasing the lock), then chmod and rename the temp file over the
// config. gap is the time between the unlock and the rename (a slow
// router).
func stockCommit(dir, name, option, value string, gap time.Duration) error {
	path := filepath.Join(dir, name)
	f1, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	if err := unix.Flock(int(f1.Fd()), unix.LOCK_EX); err != nil {
		f1.Close()
		return err
	}
	old, err := io.ReadAll(f1)
	if err != nil {
		f1.Close()
		return err
	}
	p, err := Parse(name, bytes.NewReader(old))
	if err != nil {
		f1.Close()
		return err
	}
	if p.Section("c") == nil {
		if _, err := p.AddSection("counter", "c"); err != nil {
			f1.Close()
			return err
		}
	}
	if err := p.Set("c", option, value); err != nil {
		f1.Close()
		return err
	}
	tmp, err := os.CreateTemp(dir, "."+name+".uci-")
	if err != nil {
		f1.Close()
		return err
	}
	werr := p.Export(tmp)
	if werr == nil {
		werr = tmp.Sync()
	}
	tmp.Close()
	f1.Close() // the lock goes here, before the rename
	if werr != nil {
		os.Remove(tmp.Name())
		return werr
	}
	time.Sleep(gap)
	if err := os.Chmod(tmp.Name(), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// updateCommit changes one option with Update.
func updateCommit(dir, name, option, value string) error {
	return Update(dir, name, func(p *Package) error {
		if p.Section("c") == nil {
			if _, err := p.AddSection("counter", "c"); err != nil {
				return err
			}
		}
		return p.Set("c", option, value)
	})
}

// writer is one side of a race: it sets option to value in dir/counter.
type writer func(dir, option, value string) error

// race runs rounds of two writers started together, each setting its own
// option to the round number, and returns how many rounds lost a change.
func race(t *testing.T, rounds int, a, b writer) int {
	t.Helper()
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "counter"), "\nconfig counter 'c'\n\toption note 'x'\n", 0o600)
	lost := 0
	for i := range rounds {
		v := strconv.Itoa(i)
		var wg sync.WaitGroup
		start := make(chan struct{})
		errs := make([]error, 2)
		for k, w := range []writer{a, b} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				errs[k] = w(dir, fmt.Sprintf("w%d", k), v)
			}()
		}
		close(start)
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				t.Fatalf("round %d: %v", i, err)
			}
		}
		p, err := Load(dir, "counter")
		if err != nil {
			t.Fatalf("round %d: %v", i, err)
		}
		w0, _ := p.Get("c", "w0")
		w1, _ := p.Get("c", "w1")
		if w0 != v || w1 != v {
			lost++
		}
	}
	return lost
}

// TestRaceWithStockProtocol: Update racing libuci's commit protocol (the
// model above, with and without a pause between its unlock and its rename)
// never loses either side's change, while two libuci commits racing each
// other with the pause do (so the model does reproduce libuci's window and
// the test can see a lost update).
func TestRaceWithStockProtocol(t *testing.T) {
	stock := func(gap time.Duration) writer {
		return func(dir, option, value string) error { return stockCommit(dir, "counter", option, value, gap) }
	}
	ours := writer(func(dir, option, value string) error { return updateCommit(dir, "counter", option, value) })
	tests := []struct {
		name     string
		a, b     writer
		wantLoss bool
	}{
		{"Update vs stock", ours, stock(0), false},
		{"stock vs Update", stock(0), ours, false},
		{"Update vs slow stock", ours, stock(3 * time.Millisecond), false},
		{"slow stock vs Update", stock(3 * time.Millisecond), ours, false},
		{"Update vs Update", ours, ours, false},
		{"slow stock vs slow stock", stock(3 * time.Millisecond), stock(3 * time.Millisecond), true},
	}
	const rounds = 40
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			lost := race(t, rounds, tc.a, tc.b)
			t.Logf("%d of %d rounds lost a change", lost, rounds)
			if tc.wantLoss && lost == 0 {
				t.Errorf("no round lost a change: the model of libuci's window is not exercised")
			}
			if !tc.wantLoss && lost > 0 {
				t.Errorf("%d of %d rounds lost a change", lost, rounds)
			}
		})
	}
}

// TestRaceWithStockUCI: Update racing the stock `uci set` + `uci commit`
// loses no change; the rounds two stock processes lose racing each other
// are logged for comparison. Opt-in: it runs with the stock uci named by
// PACKET_STEERING_STOCK_UCI (testenv.StockUCI).
func TestRaceWithStockUCI(t *testing.T) {
	bin := testenv.StockUCI(t)
	savedir := t.TempDir()
	stockCLI := writer(func(dir, option, value string) error {
		for _, args := range [][]string{
			{"-c", dir, "-t", savedir + "/" + option, "set", "counter.c." + option + "=" + value},
			{"-c", dir, "-t", savedir + "/" + option, "commit", "counter"},
		} {
			if out, err := exec.Command(bin, args...).CombinedOutput(); err != nil {
				return fmt.Errorf("uci %v: %v: %s", args, err, out)
			}
		}
		return nil
	})
	// The uci named must be libuci's CLI (not, say, the shell tests'
	// stand-in).
	probe := t.TempDir()
	writeFile(t, filepath.Join(probe, "counter"), "config counter 'c'\n", 0o600)
	if err := stockCLI(probe, "w0", "1"); err != nil {
		t.Fatalf("%s does not work as the stock CLI: %v", bin, err)
	}
	if p, err := Load(probe, "counter"); err != nil {
		t.Fatalf("%s does not work as the stock CLI: %v", bin, err)
	} else if v, _ := p.Get("c", "w0"); v != "1" {
		t.Fatalf("%s did not commit", bin)
	}
	ours := writer(func(dir, option, value string) error { return updateCommit(dir, "counter", option, value) })
	const rounds = 100
	lost := race(t, rounds, ours, stockCLI)
	t.Logf("Update vs stock uci: %d of %d rounds lost a change", lost, rounds)
	if lost > 0 {
		t.Errorf("Update vs stock uci: %d of %d rounds lost a change", lost, rounds)
	}
	stockLost := race(t, rounds, stockCLI, stockCLI)
	t.Logf("stock uci vs stock uci: %d of %d rounds lost a change (libuci's own window)", stockLost, rounds)
}
