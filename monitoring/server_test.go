package monitoring_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestPrometheusScrapes runs a real Prometheus server (Debian's) that
// scrapes the Lua exporter over 127.0.0.1 every second, and asks its HTTP
// API for packet_steering_up and one softnet counter: the values the daemon
// and the fixture have. Bounded: it gives up after 60 s.
func TestPrometheusScrapes(t *testing.T) {
	requireMonitoring(t, "lua5.1", "prometheus", "unshare")
	w := newWorld(t, "", preset)
	w.startDaemon(t)
	path := ubusStandIn(t, w.sock)
	exporter := filepath.Join(shared(t), "tools/prometheus-node-exporter/prometheus-node-exporter-lua/files/usr/bin/prometheus-node-exporter-lua")
	ePort, pPort := freePort(t), freePort(t)
	srv := luaExporter(t, w, path, "lua5.1", filepath.Join(top(t), "monitoring/test/serve.lua"), strconv.Itoa(ePort), "lua5.1", exporter)
	var srvOut bytes.Buffer
	srv.Stdout, srv.Stderr = &srvOut, &srvOut
	srv.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(-srv.Process.Pid, syscall.SIGKILL); srv.Wait() })

	dir := t.TempDir()
	cfg := fmt.Sprintf(`global:
  scrape_interval: 1s
  scrape_timeout: 1s
scrape_configs:
  - job_name: router
    static_configs:
      - targets: ["127.0.0.1:%d"]
`, ePort)
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	prom := exec.Command("prometheus", "--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "data"), "--web.listen-address=127.0.0.1:"+strconv.Itoa(pPort))
	var promOut bytes.Buffer
	prom.Stdout, prom.Stderr = &promOut, &promOut
	if err := prom.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { prom.Process.Kill(); prom.Wait() })

	st := w.mustCall(t, "status")
	wantProcessed := st["cpus"].([]any)[0].(map[string]any)["processed"].(float64)
	start := time.Now()
	var last string
	for time.Since(start) < 60*time.Second {
		time.Sleep(500 * time.Millisecond)
		up, err1 := promQuery(pPort, `packet_steering_up{job="router"}`)
		proc, err2 := promQuery(pPort, `node_softnet_processed_total{job="router",cpu="0"}`)
		mode, err3 := promQuery(pPort, `count(packet_steering_info{mode="`+st["mode"].(string)+`"})`)
		if err1 != nil || err2 != nil || err3 != nil {
			last = fmt.Sprint(err1, err2, err3)
			continue
		}
		if up == "1" && proc == strconv.FormatFloat(wantProcessed, 'f', -1, 64) && mode == "1" {
			t.Logf("Prometheus answered after %v: packet_steering_up 1, node_softnet_processed_total{cpu=\"0\"} %s", time.Since(start).Round(time.Millisecond), proc)
			return
		}
		last = fmt.Sprintf("up %q processed %q (want %v) info %q", up, proc, wantProcessed, mode)
	}
	t.Fatalf("Prometheus did not answer within 60 s: %s\nprometheus:\n%s\nexporter:\n%s", last, tail(promOut.String()), tail(srvOut.String()))
}

// promQuery asks Prometheus' HTTP API for an instant query with one result
// and returns its value ("" when there is none yet).
func promQuery(port int, q string) (string, error) {
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/api/v1/query?query=%s", port, url.QueryEscape(q)))
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return "", err
	}
	var r struct {
		Status string `json:"status"`
		Data   struct {
			Result []struct {
				Value []any `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return "", fmt.Errorf("%v: %s", err, body)
	}
	if r.Status != "success" {
		return "", fmt.Errorf("query %s: %s", q, body)
	}
	if len(r.Data.Result) != 1 || len(r.Data.Result[0].Value) != 2 {
		return "", nil
	}
	s, _ := r.Data.Result[0].Value[1].(string)
	return s, nil
}

func tail(s string) string {
	if len(s) > 3000 {
		return "..." + s[len(s)-3000:]
	}
	return strings.TrimSpace(s)
}
