package ubus_test

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/packet-steering/packet-steering/internal/ubus"
)

// capMsg is one message of a captured session (testdata/captures, recorded
// between the stock ubus CLI / libubus and the stock ubusd).
type capMsg struct {
	conn     int
	toBroker bool // client->ubusd
	raw      []byte
}

// loadCapture cuts the byte streams of a capture into messages, in the order
// they completed, as the capture's README describes.
func loadCapture(t testing.TB, name string) []capMsg {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", "captures", name+".jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	type key struct {
		conn int
		dir  string
	}
	bufs := map[key][]byte{}
	var out []capMsg
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var rec struct {
			Conn int    `json:"conn"`
			Dir  string `json:"dir"`
			Hex  string `json:"hex"`
		}
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		b, err := hex.DecodeString(rec.Hex)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		k := key{rec.Conn, rec.Dir}
		buf := append(bufs[k], b...)
		for len(buf) >= 12 {
			l := 8 + int(uint32(buf[9])<<16|uint32(buf[10])<<8|uint32(buf[11]))
			if len(buf) < l {
				break
			}
			out = append(out, capMsg{conn: rec.Conn, toBroker: rec.Dir == "client->ubusd", raw: append([]byte(nil), buf[:l]...)})
			buf = buf[l:]
		}
		bufs[k] = buf
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	for k, b := range bufs {
		if len(b) != 0 {
			t.Fatalf("%s: %d bytes left over on %v", name, len(b), k)
		}
	}
	return out
}

func captureNames(t testing.TB) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "captures", "*.jsonl"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no captures: %v", err)
	}
	var names []string
	for _, f := range files {
		names = append(names, filepath.Base(f[:len(f)-len(".jsonl")]))
	}
	sort.Strings(names)
	return names
}

// TestGoldenRoundTrip: every message of every capture decodes, and encodes
// back to the same bytes; so does every blobmsg payload in it.
func TestGoldenRoundTrip(t *testing.T) {
	total := 0
	for _, name := range captureNames(t) {
		t.Run(name, func(t *testing.T) {
			msgs := loadCapture(t, name)
			if len(msgs) == 0 {
				t.Fatal("no messages")
			}
			for i, cm := range msgs {
				total++
				var m ubus.Message
				if err := m.UnmarshalBinary(cm.raw); err != nil {
					t.Fatalf("message %d: %v", i, err)
				}
				got, err := m.MarshalBinary()
				if err != nil {
					t.Fatalf("message %d (%s): %v", i, m.String(), err)
				}
				if !bytes.Equal(got, cm.raw) {
					t.Fatalf("message %d (%s) re-encodes differently:\n got %x\nwant %x", i, m.String(), got, cm.raw)
				}
				for _, a := range m.Attrs {
					if a.ID != ubus.AttrData && a.ID != ubus.AttrSignature {
						continue
					}
					attrs, err := ubus.DecodeAttrs(a.Data, false)
					if err != nil {
						t.Fatalf("message %d attr %d: %v", i, a.ID, err)
					}
					enc, err := ubus.EncodeAttrs(attrs)
					if err != nil {
						t.Fatal(err)
					}
					if !bytes.Equal(enc, a.Data) {
						t.Fatalf("message %d attr %d re-encodes differently:\n got %x\nwant %x", i, a.ID, enc, a.Data)
					}
				}
			}
		})
	}
	if total < 50 {
		t.Errorf("only %d messages in the captures", total)
	}
}

// firstMsg returns the first captured message of type typ in direction.
func firstMsg(t testing.TB, name string, toBroker bool, typ ubus.MsgType, method string) *ubus.Message {
	t.Helper()
	for _, cm := range loadCapture(t, name) {
		var m ubus.Message
		if err := m.UnmarshalBinary(cm.raw); err != nil {
			t.Fatal(err)
		}
		if cm.toBroker != toBroker || m.Type != typ {
			continue
		}
		if s, _ := m.Str(ubus.AttrMethod); method == "" || s == method {
			return &m
		}
	}
	t.Fatalf("%s: no %s %q", name, typ, method)
	return nil
}

func dataOf(t testing.TB, m *ubus.Message) []byte {
	t.Helper()
	a, ok := m.Get(ubus.AttrData)
	if !ok {
		t.Fatalf("%s has no DATA", m.String())
	}
	return a.Data
}

// TestJSONToBlobmsgAsStockCLI: JSON given to the stock `ubus call` became the
// DATA of the captured INVOKE; AttrsFromJSON must give the same bytes.
func TestJSONToBlobmsgAsStockCLI(t *testing.T) {
	tests := []struct {
		capture, method, json string
	}{
		{"client_call_echo", "echo", `{"mode":"auto","force":true,"n":7}`},
		{"client_call_json_to_blobmsg", "alltypes", `{"s":"x","b":false,"i32":-5,"i64":5000000000,"d":1.5,"t":{"k":"v"},"a":[1,"two",true]}`},
		{"client_call_types_reply", "types", `{}`},
		{"client_send_event", "send", `{"id":"network.interface","data":{"action":"ifup","interface":"lan"}}`},
	}
	for _, tc := range tests {
		t.Run(tc.capture, func(t *testing.T) {
			want := dataOf(t, firstMsg(t, tc.capture, true, ubus.MsgInvoke, tc.method))
			attrs, err := ubus.AttrsFromJSON([]byte(tc.json))
			if err != nil {
				t.Fatal(err)
			}
			got, err := ubus.EncodeAttrs(attrs)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("got  %x\nwant %x", got, want)
			}
		})
	}
}

// TestTypesReplyAsStockCLI: the reply holding every type prints as
// blobmsg_format_json_indent prints it for `ubus call`.
func TestTypesReplyAsStockCLI(t *testing.T) {
	m := firstMsg(t, "client_call_types_reply", false, ubus.MsgData, "")
	for _, cm := range loadCapture(t, "client_call_types_reply") {
		var x ubus.Message
		if err := x.UnmarshalBinary(cm.raw); err == nil && x.Type == ubus.MsgData {
			if _, ok := x.Get(ubus.AttrData); ok {
				m = &x
			}
		}
	}
	attrs, err := ubus.DecodeAttrs(dataOf(t, m), false)
	if err != nil {
		t.Fatal(err)
	}
	want := "{\n\t\"mode\": \"auto\",\n\t\"enabled\": true,\n\t\"u16\": 513,\n\t\"cpus\": 4,\n" +
		"\t\"bytes\": 1234567890123,\n\t\"load\": 0.750000,\n\t\"unnamed-at-top\",\n" +
		"\t\"queue\": {\n\t\t\"device\": \"eth0\",\n\t\t\"rps_cpus\": \"e\"\n\t},\n" +
		"\t\"cpulist\": [\n\t\t0,\n\t\t1,\n\t\t\"two\",\n\t\t{\n\t\t\t\"x\": false\n\t\t}\n\t],\n" +
		"\t\"empty_array\": [\n\t\t\n\t],\n\t\"empty_table\": {\n\t\t\n\t}\n}"
	got, err := ubus.AttrsToJSON(attrs, "\t")
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Fatalf("got:\n%s\nwant:\n%s", got, want)
	}
	compact, err := ubus.AttrsToJSON(attrs, "")
	if err != nil {
		t.Fatal(err)
	}
	wantCompact := `{"mode":"auto","enabled":true,"u16":513,"cpus":4,"bytes":1234567890123,"load":0.750000,"unnamed-at-top",` +
		`"queue":{"device":"eth0","rps_cpus":"e"},"cpulist":[0,1,"two",{"x":false}],"empty_array":[],"empty_table":{}}`
	if string(compact) != wantCompact {
		t.Fatalf("compact:\n%s\nwant:\n%s", compact, wantCompact)
	}
	v := ubus.AttrsValue(attrs)
	if v["bytes"] != int64(1234567890123) || v["load"] != 0.75 || v["enabled"] != true ||
		fmt.Sprint(v["cpulist"]) != "[0 1 two map[x:false]]" {
		t.Fatalf("values: %v", v)
	}
}
