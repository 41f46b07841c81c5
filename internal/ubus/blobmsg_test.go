package ubus_test

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"io"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/packet-steering/packet-steering/internal/ubus"
)

func mustHex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestEncodeAttrsLayout(t *testing.T) {
	tests := []struct {
		name  string
		attrs []ubus.Attr
		hex   string
	}{
		// Byte layouts as in the captures: header, namelen, name, NUL, pad, value, pad.
		{"string", []ubus.Attr{ubus.String("mode", "auto")}, "83000011 0004 6d6f646500 00 6175746f00 000000"},
		{"bool", []ubus.Attr{ubus.Bool("force", true)}, "8700000d 0005 666f72636500 01 000000"},
		{"int32", []ubus.Attr{ubus.Int32("n", 7)}, "8500000c 0001 6e00 00000007"},
		{"int16", []ubus.Attr{ubus.Int16("u16", 513)}, "8600000e 0003 75313600 0000 0201 0000"},
		{"int64", []ubus.Attr{ubus.Int64("i64", 5000000000)}, "84000014 0003 69363400 0000 000000012a05f200"},
		{"double", []ubus.Attr{ubus.Double("d", 1.5)}, "88000010 0001 6400 3ff8000000000000"},
		{"unspec", []ubus.Attr{{Name: "u", Type: ubus.TypeUnspec}}, "80000008 0001 7500"},
		{"unnamed", []ubus.Attr{ubus.String("", "two")}, "8300000c 0000 0000 74776f00"},
		{"empty table", []ubus.Attr{ubus.Table("t")}, "82000008 0001 7400"},
		{"array drops names", []ubus.Attr{ubus.Array("a", ubus.Int32("ignored", 1))},
			"81000014 0001 6100 8500000c 0000 0000 00000001"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ubus.EncodeAttrs(tc.attrs)
			if err != nil {
				t.Fatal(err)
			}
			want := mustHex(t, tc.hex)
			if !bytes.Equal(got, want) {
				t.Fatalf("got  %x\nwant %x", got, want)
			}
			back, err := ubus.DecodeAttrs(got, false)
			if err != nil {
				t.Fatal(err)
			}
			again, _ := ubus.EncodeAttrs(back)
			if !bytes.Equal(again, want) {
				t.Fatalf("round trip %x", again)
			}
		})
	}
}

func TestDecodeAttrsRejects(t *testing.T) {
	deep := []ubus.Attr{ubus.Int32("x", 1)}
	for range ubus.MaxDepth + 1 {
		deep = []ubus.Attr{ubus.Table("t", deep...)}
	}
	// Build the over-deep encoding by hand: EncodeAttrs refuses it.
	var deepBytes []byte
	{
		inner := mustHex(t, "8500000c 0001 7800 00000001")
		for range ubus.MaxDepth + 2 {
			h := make([]byte, 8)
			binary.BigEndian.PutUint32(h, 1<<31|2<<24|uint32(8+len(inner)))
			copy(h[4:], []byte{0, 1, 't', 0})
			inner = append(h, inner...)
		}
		deepBytes = inner
	}
	tests := []struct {
		name string
		hex  string
		raw  []byte
	}{
		{"truncated header", "8300", nil},
		{"length beyond input", "830000ff 0001 6100", nil},
		{"length below header", "83000002", nil},
		{"not extended", "0300000c 0001 6100 61620000", nil},
		{"unknown type", "8900000c 0001 6100 00000000", nil},
		{"name overruns", "8300000c 00ff 6100 61620000", nil},
		{"name not terminated", "8300000c 0001 6161 61620000", nil},
		{"string not terminated", "8300000a 0001 6100 6162 0000", nil},
		{"int32 too short", "8500000a 0001 6100 0000 0000", nil},
		{"int8 too long", "8700000a 0001 6100 0101 0000", nil},
		{"trailing bytes", "8500000c 0001 6100 00000001 0000", nil},
		{"too deep", "", deepBytes},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := tc.raw
			if b == nil {
				b = mustHex(t, tc.hex)
			}
			if _, err := ubus.DecodeAttrs(b, false); !errors.Is(err, ubus.ErrMalformed) {
				t.Fatalf("err = %v, want ErrMalformed", err)
			}
		})
	}
	if _, err := ubus.EncodeAttrs(deep); err == nil {
		t.Fatal("encoding beyond MaxDepth succeeded")
	}
	big := []ubus.Attr{ubus.String("s", strings.Repeat("x", ubus.MaxMessageLen))}
	if _, err := ubus.EncodeAttrs(big); err == nil {
		t.Fatal("encoding beyond MaxMessageLen succeeded")
	}
}

func TestMessageFraming(t *testing.T) {
	m := &ubus.Message{Type: ubus.MsgStatus, Seq: 2, Peer: 0xbeef9cb9, Attrs: []ubus.MsgAttr{
		ubus.U32Attr(ubus.AttrStatus, 0), ubus.U32Attr(ubus.AttrObjID, 0xbeef9cb9)}}
	got, err := m.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	want := mustHex(t, "00010002beef9cb900000014010000080000000003000008beef9cb9") // client_call_echo
	if !bytes.Equal(got, want) {
		t.Fatalf("got  %x\nwant %x", got, want)
	}
	tests := []struct {
		name string
		hex  string
	}{
		{"short", "0001000200000000"},
		{"body length below 4", "000100020000000000000002"},
		{"body longer than data", "000100020000000000000010"},
		{"body header with id", "000100020000000001000004"},
		{"extended attribute", "00010002000000000000000c81000008 00000000"},
		{"attribute beyond body", "00010002000000000000000c01000010 00000000"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var m ubus.Message
			if err := m.UnmarshalBinary(mustHex(t, tc.hex)); !errors.Is(err, ubus.ErrMalformed) {
				t.Fatalf("err = %v, want ErrMalformed", err)
			}
		})
	}
}

// countingReader counts how much ReadMessage asks for.
type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

func TestReadMessageLimits(t *testing.T) {
	// A header announcing 16 MiB - 1 must be refused after 12 bytes.
	hostile := append(mustHex(t, "0002000100000000 00ffffff"), make([]byte, 64)...)
	cr := &countingReader{r: bytes.NewReader(hostile)}
	if _, err := ubus.ReadMessage(cr, 0); !errors.Is(err, ubus.ErrMalformed) || cr.n != 12 {
		t.Fatalf("err %v after %d bytes", err, cr.n)
	}
	small := mustHex(t, "000200010000000000000018 02000011636170747572652e6563686f00000000")
	readers := map[string]func([]byte) io.Reader{
		"plain": func(b []byte) io.Reader { return bytes.NewReader(b) },
		"bufio": func(b []byte) io.Reader { return bufio.NewReader(bytes.NewReader(b)) },
	}
	for name, wrap := range readers {
		t.Run(name, func(t *testing.T) {
			if _, err := ubus.ReadMessage(wrap(hostile), 0); !errors.Is(err, ubus.ErrMalformed) {
				t.Fatalf("hostile length: %v", err)
			}
			if _, err := ubus.ReadMessage(wrap(small), 16); !errors.Is(err, ubus.ErrMalformed) {
				t.Fatalf("maxLen not applied: %v", err)
			}
			r := wrap(append(append([]byte{}, small...), small...))
			for range 2 {
				m, err := ubus.ReadMessage(r, 0)
				if err != nil {
					t.Fatal(err)
				}
				if p, _ := m.Str(ubus.AttrObjPath); p != "capture.echo" {
					t.Fatalf("path %q", p)
				}
			}
			if _, err := ubus.ReadMessage(r, 0); err != io.EOF {
				t.Fatalf("end of stream: %v", err)
			}
			for _, cut := range []int{5, 20} {
				if _, err := ubus.ReadMessage(wrap(small[:cut]), 0); !errors.Is(err, io.ErrUnexpectedEOF) {
					t.Fatalf("truncated at %d: %v", cut, err)
				}
			}
		})
	}
}

func TestAttrsFromJSON(t *testing.T) {
	tests := []struct {
		json string
		want []ubus.Attr
		err  bool
	}{
		{`{"a":2147483647,"b":-2147483648,"c":2147483648,"d":-2147483649}`, []ubus.Attr{
			ubus.Int32("a", math.MaxInt32), ubus.Int32("b", math.MinInt32),
			ubus.Int64("c", math.MaxInt32+1), ubus.Int64("d", math.MinInt32-1)}, false},
		{`{"f":1.0,"e":1e3,"t":true,"n":null}`, []ubus.Attr{ubus.Double("f", 1), ubus.Double("e", 1000),
			ubus.Bool("t", true), {Name: "n", Type: ubus.TypeUnspec}}, false},
		{`{"k":1,"x":"y","k":2}`, []ubus.Attr{ubus.Int32("k", 2), ubus.String("x", "y")}, false},
		{`{"o":{},"a":[[]]}`, []ubus.Attr{ubus.Table("o"), ubus.Array("a", ubus.Array(""))}, false},
		{`{}`, []ubus.Attr{}, false},
		{`[1]`, nil, true},
		{`"s"`, nil, true},
		{`{"a":1} x`, nil, true},
		{`{"a":99999999999999999999}`, nil, true},
		{`{"a":`, nil, true},
		{strings.Repeat(`{"a":`, ubus.MaxDepth+2) + "1" + strings.Repeat("}", ubus.MaxDepth+2), nil, true},
	}
	for _, tc := range tests {
		got, err := ubus.AttrsFromJSON([]byte(tc.json))
		if (err != nil) != tc.err {
			t.Errorf("%s: err %v", tc.json, err)
			continue
		}
		if !tc.err && !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s:\n got %+v\nwant %+v", tc.json, got, tc.want)
		}
	}
}

func TestAttrsToJSONEscapes(t *testing.T) {
	got, err := ubus.AttrsToJSON([]ubus.Attr{ubus.String("a/b", "q\"\\\b\n\t\r\x01é"), ubus.Double("nan", math.NaN()),
		ubus.Int16("i16", 65535), ubus.Int32("neg", -5)}, "")
	if err != nil {
		t.Fatal(err)
	}
	want := `{"a\/b":"q\"\\\b\n\t\r\u0001é","nan":null,"i16":65535,"neg":-5}`
	if string(got) != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}

func TestAttrsFromValue(t *testing.T) {
	type inner struct {
		Device string `json:"device"`
	}
	v := struct {
		Mode  string  `json:"mode"`
		Flows int     `json:"flows"`
		Big   int64   `json:"big"`
		Load  float64 `json:"load"`
		On    bool    `json:"on"`
		In    inner   `json:"in"`
		List  []int   `json:"list"`
		Skip  string  `json:"-"`
	}{"auto", 4096, 1 << 40, 0.5, true, inner{"eth0"}, []int{1}, "x"}
	got, err := ubus.AttrsFromValue(v)
	if err != nil {
		t.Fatal(err)
	}
	want := []ubus.Attr{ubus.String("mode", "auto"), ubus.Int32("flows", 4096), ubus.Int64("big", 1<<40),
		ubus.Double("load", 0.5), ubus.Bool("on", true), ubus.Table("in", ubus.String("device", "eth0")),
		ubus.Array("list", ubus.Int32("", 1))}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v\nwant %+v", got, want)
	}
	if _, err := ubus.AttrsFromValue([]int{1}); err == nil {
		t.Fatal("a top-level array was accepted")
	}
}

func TestStatusErrors(t *testing.T) {
	tests := []struct {
		err  error
		want ubus.Status
	}{
		{nil, ubus.StatusOK},
		{ubus.StatusNotFound, ubus.StatusNotFound},
		{errors.Join(errors.New("ctx"), ubus.StatusInvalidArgument), ubus.StatusInvalidArgument},
		{errors.New("other"), ubus.StatusUnknownError},
	}
	for _, tc := range tests {
		if got := ubus.StatusOf(tc.err); got != tc.want {
			t.Errorf("StatusOf(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
	if s := ubus.StatusInvalidArgument.Error(); s != "Invalid argument" {
		t.Errorf("Error() = %q", s)
	}
	if s := ubus.Status(99).String(); !strings.Contains(s, "99") {
		t.Errorf("String() = %q", s)
	}
}

// TestDepthLimitAgrees: the decoder and the encoder accept the same nesting
// (MaxDepth tables and arrays below the list they are given, for a table's
// and an array's payload alike), so whatever decodes also encodes.
func TestDepthLimitAgrees(t *testing.T) {
	nest := func(levels int, array bool) []ubus.Attr {
		a := ubus.Int32("", 1)
		for i := range levels {
			if array && i%2 == 0 {
				a = ubus.Array("", a)
			} else {
				a = ubus.Table("", a)
			}
		}
		return []ubus.Attr{a}
	}
	tests := []struct {
		name    string
		levels  int
		array   bool
		isArray bool
		ok      bool
	}{
		{"tables at the limit, table payload", ubus.MaxDepth, false, false, true},
		{"tables at the limit, array payload", ubus.MaxDepth, false, true, true},
		{"mixed at the limit, array payload", ubus.MaxDepth, true, true, true},
		{"tables one beyond, table payload", ubus.MaxDepth + 1, false, false, false},
		{"mixed one beyond, array payload", ubus.MaxDepth + 1, true, true, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			attrs := nest(tc.levels, tc.array)
			enc, encErr := ubus.EncodeAttrs(attrs)
			if (encErr == nil) != tc.ok {
				t.Fatalf("encode: err = %v, want ok = %v", encErr, tc.ok)
			}
			if encErr != nil {
				return
			}
			back, err := ubus.DecodeAttrs(enc, tc.isArray)
			if err != nil {
				t.Fatalf("decode: %v", err)
			}
			if _, err := ubus.EncodeAttrs(back); err != nil {
				t.Fatalf("decoded list does not encode again: %v", err)
			}
		})
	}
}
