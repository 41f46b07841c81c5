package ubus_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/packet-steering/packet-steering/internal/ubus"
)

// refAttrsFromJSON is AttrsFromJSON as it was written on encoding/json's
// tokenizer, the reference the hand-written scanner must match. dup
// reports a repeated key anywhere (encoding/json's Unmarshal treats those
// differently from json-c).
func refAttrsFromJSON(data []byte) (attrs []ubus.Attr, dup bool, err error) {
	if len(data) > ubus.MaxMessageLen {
		return nil, false, fmt.Errorf("too long")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return nil, false, err
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, false, fmt.Errorf("top level must be an object")
	}
	attrs, err = refObject(dec, 0, &dup)
	if err != nil {
		return nil, false, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, false, fmt.Errorf("trailing data")
	}
	return attrs, dup, nil
}

func refObject(dec *json.Decoder, depth int, dup *bool) ([]ubus.Attr, error) {
	attrs := []ubus.Attr{}
	index := map[string]int{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		name, _ := tok.(string)
		a, err := refValue(dec, name, depth, dup)
		if err != nil {
			return nil, err
		}
		if i, ok := index[name]; ok {
			*dup = true
			attrs[i] = a
			continue
		}
		for n := range index {
			if strings.EqualFold(n, name) {
				*dup = true
			}
		}
		index[name] = len(attrs)
		attrs = append(attrs, a)
	}
	_, err := dec.Token()
	return attrs, err
}

func refValue(dec *json.Decoder, name string, depth int, dup *bool) (ubus.Attr, error) {
	tok, err := dec.Token()
	if err != nil {
		return ubus.Attr{}, err
	}
	switch v := tok.(type) {
	case json.Delim:
		if depth >= ubus.MaxDepth {
			return ubus.Attr{}, fmt.Errorf("nesting deeper than %d", ubus.MaxDepth)
		}
		if v == '{' {
			c, err := refObject(dec, depth+1, dup)
			return ubus.Table(name, c...), err
		}
		c := []ubus.Attr{}
		for dec.More() {
			a, err := refValue(dec, "", depth+1, dup)
			if err != nil {
				return ubus.Attr{}, err
			}
			c = append(c, a)
		}
		_, err := dec.Token()
		return ubus.Array(name, c...), err
	case string:
		return ubus.String(name, v), nil
	case bool:
		return ubus.Bool(name, v), nil
	case nil:
		return ubus.Attr{Name: name, Type: ubus.TypeUnspec}, nil
	case json.Number:
		s := string(v)
		if !strings.ContainsAny(s, ".eE") {
			i, err := strconv.ParseInt(s, 10, 64)
			if err != nil {
				return ubus.Attr{}, fmt.Errorf("%q: integer %s out of range", name, s)
			}
			if i >= math.MinInt32 && i <= math.MaxInt32 {
				return ubus.Int32(name, int32(i)), nil
			}
			return ubus.Int64(name, i), nil
		}
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return ubus.Attr{}, fmt.Errorf("%q: number %s out of range", name, s)
		}
		return ubus.Double(name, f), nil
	}
	return ubus.Attr{}, fmt.Errorf("unexpected token %v", tok)
}

// jsonRoute is what AttrsFromValue must give: the value as encoding/json
// text, read by AttrsFromJSON.
func jsonRoute(v any) ([]ubus.Attr, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return ubus.AttrsFromJSON(data)
}

// checkJSONText compares AttrsFromJSON with the reference on data.
func checkJSONText(t *testing.T, data []byte) {
	t.Helper()
	got, err := ubus.AttrsFromJSON(data)
	want, _, werr := refAttrsFromJSON(data)
	if (err == nil) != (werr == nil) {
		t.Fatalf("%q: error %v, reference error %v", data, err, werr)
	}
	if err != nil {
		if json.Valid(data) && bytes.HasPrefix(bytes.TrimLeft(data, " \t\r\n"), []byte("{")) &&
			!strings.Contains(err.Error(), "out of range") && !strings.Contains(err.Error(), "nesting deeper") &&
			len(data) <= ubus.MaxMessageLen {
			t.Fatalf("%q: valid JSON object refused: %v", data, err)
		}
		return
	}
	if !json.Valid(data) {
		t.Fatalf("%q: invalid JSON accepted", data)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%q: values differ\n got %#v\nwant %#v", data, got, want)
	}
}

var jsonTexts = []string{
	`{}`, ` { } `, `{"a":1}`, `{"a":-2147483648,"b":2147483648,"c":-9223372036854775808}`,
	`{"a":9223372036854775808}`, `{"a":1.5,"b":1e3,"c":-0,"d":-0.0,"e":1E+2,"f":2e-400,"g":1e400}`,
	`{"s":"a\"b\\c\/d\b\f\n\r\t\u0041\u00e9\u20ac"}`, `{"s":"\ud83d\ude00"}`, `{"s":"\ud83d"}`,
	`{"s":"\ude00\ud83d x"}`, `{"s":"\ud83d\u0041"}`, `{"s":"\ud83d\ud83d\ude00"}`, "{\"s\":\"\xff\xfe ok \xe2\x82\"}",
	"{\"s\":\"\xed\xa0\x80\"}", `{"s":"\u00"}`, `{"s":"\x"}`, "{\"s\":\"a\nb\"}", `{"s":"abc`, `{"s":"\`,
	`{"t":true,"f":false,"n":null}`, `{"t":tru}`, `{"t":truex}`, `{"a":01}`, `{"a":-}`, `{"a":1.}`, `{"a":.5}`,
	`{"a":1e}`, `{"a":+1}`, `{"a":[1,"x",[true,null],{"b":{}}]}`, `{"a":[1,]}`, `{"a":[,1]}`, `{"a":1,}`,
	`{"a" 1}`, `{a:1}`, `{"a":1}x`, `{"a":1}{}`, `{"a":1} `, `[1]`, `"x"`, `1`, ``, ` `, `{`, `{"a":`,
	`{"a":1,"a":2,"b":3,"a":{"x":1}}`, `{"":1}`, "\ufeff{}", `{"a":[]}`, `{"a":[[[]]]}`,
	`{"a":` + strings.Repeat("[", ubus.MaxDepth) + strings.Repeat("]", ubus.MaxDepth) + `}`,
	`{"a":` + strings.Repeat("[", ubus.MaxDepth+1) + strings.Repeat("]", ubus.MaxDepth+1) + `}`,
	`{"a":` + strings.Repeat(`{"b":`, ubus.MaxDepth) + `1` + strings.Repeat("}", ubus.MaxDepth) + `}`,
	`{"a":` + strings.Repeat(`{"b":`, ubus.MaxDepth+1) + `1` + strings.Repeat("}", ubus.MaxDepth+1) + `}`,
}

// The scanner accepts what encoding/json accepts (within the documented
// limits) and gives the values the encoding/json-based reading gave.
func TestAttrsFromJSONMatchesEncodingJSON(t *testing.T) {
	for _, text := range jsonTexts {
		checkJSONText(t, []byte(text))
	}
	big := []byte(`{"a":"` + strings.Repeat("x", ubus.MaxMessageLen) + `"}`)
	if _, err := ubus.AttrsFromJSON(big); err == nil {
		t.Error("input over MaxMessageLen accepted")
	}
}

// FuzzAttrsFromJSON: valid JSON objects (per encoding/json) are accepted,
// apart from the documented range and depth limits, invalid JSON is
// refused, and the values are those of the encoding/json-based reading.
func FuzzAttrsFromJSON(f *testing.F) {
	for _, text := range jsonTexts {
		f.Add([]byte(text))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkJSONText(t, data)
	})
}

type textPtr struct{ v string }

func (p *textPtr) MarshalText() ([]byte, error) { return []byte("ptr:" + p.v), nil }

type jsonOnly struct{}

func (jsonOnly) MarshalJSON() ([]byte, error) { return []byte(`1`), nil }

type Inner struct {
	A int    `json:"a"`
	B string `json:"b,omitempty"`
	C bool
}

type inner2 struct {
	C int
	D int `json:"d"`
}

type inner4 struct {
	Z int `json:"C"`
}

type valueSample struct {
	Inner
	*inner2
	E    string `json:"e"`
	Skip int    `json:"-"`
	//lint:ignore SA5008 "-," names the member "-": the case encoding/json documents, tested here
	Dash   int                `json:"-,"`
	F32    float32            `json:"f32"`
	F64    float64            `json:"f64"`
	Whole  float64            `json:"whole"`
	Tiny   float64            `json:"tiny"`
	Huge   float64            `json:"huge"`
	I8     int8               `json:"i8"`
	U      uint               `json:"u"`
	U64    uint64             `json:"u64"`
	Bytes  []byte             `json:"bytes"`
	NilB   []byte             `json:"nil_b"`
	Arr    [3]uint8           `json:"arr"`
	T      time.Time          `json:"t"`
	TP     *time.Time         `json:"tp"`
	TNil   *time.Time         `json:"tnil"`
	Text   textPtr            `json:"text"`
	MI     map[int]string     `json:"mi"`
	MU     map[uint8][]int    `json:"mu"`
	MS     map[string]any     `json:"ms"`
	Bad    string             `json:"bad"`
	Esc    string             `json:"esc"`
	Omit   map[string]int     `json:"omit,omitempty"`
	OmitP  *int               `json:"omit_p,omitempty"`
	Empty  []string           `json:"empty"`
	Any    any                `json:"any"`
	Nested []map[string][]int `json:"nested"`
	//lint:ignore U1000 an unexported field, which the codec must skip
	private int
}

func sampleValue() valueSample {
	tm := time.Date(2026, 11, 30, 3, 4, 5, 6, time.FixedZone("x", 3600))
	return valueSample{
		Inner: Inner{A: 1, C: true}, inner2: &inner2{C: 2, D: 3}, E: "e", Skip: 1, Dash: 2,
		F32: 0.1, F64: 2.5, Whole: -3, Tiny: 1e-9, Huge: 1.5e300, I8: -8, U: math.MaxUint32, U64: 1 << 40,
		Bytes: []byte{0, 1, 254, 255}, Arr: [3]uint8{1, 2, 3}, T: tm, TP: &tm, Text: textPtr{"t"},
		MI: map[int]string{10: "ten", -2: "minus", 3: "three"}, MU: map[uint8][]int{7: {1}},
		MS:  map[string]any{"z": 1.0, "a": []any{"x", 2.5, nil, true}, "\xff": 1, "m": map[string]any{}},
		Bad: "a\xffb\xed\xa0\x80c", Esc: "<a href=\"/\">&\u2028\u2029\x00\x1f\b\f\n\r\t\\</a>",
		Empty: []string{}, Any: &Inner{A: 5}, Nested: []map[string][]int{{"k": {1, 2}}, nil},
	}
}

// AttrsFromValue gives what encoding/json text read by AttrsFromJSON gives,
// and AttrsToStdJSON prints what encoding/json's MarshalIndent prints.
func TestAttrsFromValueMatchesEncodingJSON(t *testing.T) {
	s := sampleValue()
	values := map[string]any{
		"sample":         s,
		"pointer":        &s,
		"map":            map[string]int{"b": 1, "a": 2},
		"empty":          struct{}{},
		"whole f32":      struct{ F float32 }{F: 16777216},
		"neg zero":       struct{ F float64 }{F: math.Copysign(0, -1)},
		"e21":            struct{ F float64 }{F: 1e21},
		"small":          struct{ F float64 }{F: 1e-7},
		"big uint":       struct{ U uint64 }{U: math.MaxInt64},
		"any nested":     map[string]any{"a": map[string]any{"b": []any{map[string]any{}}}},
		"colliding keys": map[string]int{"\xff": 1, "\xfe": 2, "\uFFFD": 3, "a": 4},
		"big whole":      struct{ F, G float64 }{F: 1 << 60, G: -(1 << 62)},
		"conflict": struct {
			Inner
			inner2
		}{Inner{A: 1, C: true}, inner2{C: 2, D: 3}},
		"tagged wins": struct {
			Inner
			inner4
		}{Inner{C: true}, inner4{Z: 9}},
		"shallow wins": struct {
			X int `json:"b"`
			Inner
		}{X: 9, Inner: Inner{B: "deep"}},
	}
	for name, v := range values {
		t.Run(name, func(t *testing.T) {
			want, err := jsonRoute(v)
			if err != nil {
				t.Fatal(err)
			}
			got, err := ubus.AttrsFromValue(v)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("differs from the JSON route\n got %#v\nwant %#v", got, want)
			}
			switch name {
			case "colliding keys":
				return // encoding/json writes the key U+FFFD three times
			case "neg zero":
				return // -0 reads as the integer 0, printed "0"
			}
			for _, indent := range []string{"", "  ", "\t"} {
				std := ubus.AttrsToStdJSON(got, indent)
				var wantText []byte
				if indent == "" {
					wantText, _ = json.Marshal(v)
				} else {
					wantText, _ = json.MarshalIndent(v, "", indent)
				}
				if !bytes.Equal(std, rawFFFD(wantText)) {
					t.Fatalf("indent %q: text differs\n got %s\nwant %s", indent, std, wantText)
				}
			}
		})
	}
}

// rawFFFD replaces the escapes \ufffd in JSON text with the character:
// encoding/json writes an invalid UTF-8 byte as that escape, while
// AttrsFromValue has already made it U+FFFD, which it writes as itself (the
// same JSON value).
func rawFFFD(text []byte) []byte {
	var out []byte
	for i := 0; i < len(text); i++ {
		if text[i] != '\\' || i+1 >= len(text) {
			out = append(out, text[i])
			continue
		}
		if bytes.HasPrefix(text[i+1:], []byte("ufffd")) {
			out = append(out, "\uFFFD"...)
			i += 5
			continue
		}
		out = append(out, text[i], text[i+1])
		i++
	}
	return out
}

func TestAttrsFromValueRefuses(t *testing.T) {
	deep := map[string]any{}
	for i := 0; i < ubus.MaxDepth+1; i++ {
		deep = map[string]any{"d": deep}
	}
	cases := map[string]any{
		"nil":         nil,
		"nil pointer": (*Inner)(nil),
		"slice":       []int{1},
		"string":      "x",
		"nan":         struct{ F float64 }{F: math.NaN()},
		"inf":         struct{ F float32 }{F: float32(math.Inf(1))},
		"whole 2^63":  struct{ F float64 }{F: 1 << 63},
		"whole -2^63": struct{ F float64 }{F: -(1 << 63)},
		"1e20":        struct{ F float64 }{F: 1e20},
		"uint over":   struct{ U uint64 }{U: math.MaxInt64 + 1},
		"json only":   struct{ J jsonOnly }{},
		"string opt": struct {
			I int `json:"i,string"`
		}{},
		"chan":         struct{ C chan int }{C: make(chan int)},
		"bool map key": map[bool]int{true: 1},
		"deep":         deep,
	}
	for name, v := range cases {
		if got, err := ubus.AttrsFromValue(v); err == nil {
			t.Errorf("%s: accepted: %v", name, got)
		}
	}
}

// FuzzAttrsFromValue: for any strings, numbers and bytes, AttrsFromValue
// agrees with the JSON route (both fail or both give the same values) and
// AttrsToStdJSON prints what encoding/json prints.
func FuzzAttrsFromValue(f *testing.F) {
	f.Add("a\xff<>&\u2028", 1.5, float32(0.1), int64(-1), uint64(1), []byte("x"))
	f.Add("", 1e21, float32(1e-7), int64(math.MinInt64), uint64(math.MaxUint64), []byte(nil))
	f.Fuzz(func(t *testing.T, s string, f64 float64, f32 float32, i int64, u uint64, b []byte) {
		if f64 == 0 {
			f64 = 0 // not -0, which reads as the integer 0 and prints as "0"
		}
		if f32 == 0 {
			f32 = 0
		}
		v := struct {
			S   string            `json:"s"`
			F64 float64           `json:"f64"`
			F32 float32           `json:"f32"`
			I   int64             `json:"i"`
			U   uint64            `json:"u"`
			B   []byte            `json:"b"`
			M   map[string]string `json:"m"`
		}{s, f64, f32, i, u, b, map[string]string{s: s, "k": s}}
		want, werr := jsonRoute(v)
		got, err := ubus.AttrsFromValue(v)
		if (err == nil) != (werr == nil) {
			t.Fatalf("error %v, JSON route error %v", err, werr)
		}
		if err != nil {
			return
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("differs from the JSON route\n got %#v\nwant %#v", got, want)
		}
		text, _ := json.MarshalIndent(v, "", "  ")
		if std := ubus.AttrsToStdJSON(got, "  "); !bytes.Equal(std, rawFFFD(text)) {
			t.Fatalf("text differs\n got %s\nwant %s", std, text)
		}
	})
}

type decInner struct {
	X int    `json:"x"`
	Y string `json:"y"`
}

type decSample struct {
	decInner
	S     string             `json:"s"`
	I     int8               `json:"i"`
	U     uint16             `json:"u"`
	I64   int64              `json:"i64"`
	F     float64            `json:"f"`
	F32   float32            `json:"f32"`
	B     bool               `json:"b"`
	P     *int               `json:"p"`
	L     []string           `json:"l"`
	A     [2]int             `json:"a"`
	M     map[string]float64 `json:"m"`
	MI    map[int8]bool      `json:"mi"`
	Any   any                `json:"any"`
	Bytes []byte             `json:"bytes"`
	N     *decSample         `json:"n"`
	Skip  int                `json:"-"`
	Named int
}

// checkDecode compares AttrsToValue with encoding/json's Unmarshal on data.
func checkDecode(t *testing.T, data []byte) {
	t.Helper()
	_, dup, err := refAttrsFromJSON(data)
	if err != nil || dup {
		return // not an object the CLI reads, or json-c's and Go's rules for repeated keys differ
	}
	attrs, err := ubus.AttrsFromJSON(data)
	if err != nil {
		t.Fatalf("%q: reference accepted, AttrsFromJSON: %v", data, err)
	}
	var got, want decSample
	err = ubus.AttrsToValue(attrs, &got)
	werr := json.Unmarshal(wireText(t, data), &want)
	if (err == nil) != (werr == nil) {
		t.Fatalf("%q: error %v, encoding/json error %v", data, err, werr)
	}
	if err == nil && !reflect.DeepEqual(got, want) {
		t.Fatalf("%q: values differ\n got %+v\nwant %+v", data, got, want)
	}
}

// wireText is data as the daemon receives it: blobmsg has no negative
// integer zero, so an integer written -0 arrives as 0 (for a uint field
// encoding/json would refuse the text -0, AttrsToValue sees only 0).
func wireText(t *testing.T, data []byte) []byte {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("%q: reference accepted it, decoding again: %v", data, err)
	}
	out, err := json.Marshal(negZeroToZero(v))
	if err != nil {
		t.Fatalf("%q: encoding again: %v", data, err)
	}
	return out
}

func negZeroToZero(v any) any {
	switch v := v.(type) {
	case json.Number:
		if v == "-0" {
			return json.Number("0")
		}
	case map[string]any:
		for k, e := range v {
			v[k] = negZeroToZero(e)
		}
	case []any:
		for i, e := range v {
			v[i] = negZeroToZero(e)
		}
	}
	return v
}

var decodeTexts = []string{
	`{}`, `{"s":"x","i":-128,"u":65535,"i64":-9223372036854775808,"f":1.5,"f32":3,"b":true,"p":7}`,
	`{"l":["a",null,"b"],"a":[1],"m":{"k":1,"j":2.5},"mi":{"-1":true,"7":false},"any":{"a":[1,"x",null,false]}}`,
	`{"bytes":"AAH+/w==","n":{"s":"inner","n":{"i":1}},"x":5,"y":"promoted","named":3,"Skip":9,"unknown":{"z":1}}`,
	`{"S":"case","I":1,"NAMED":2}`, `{"p":null,"l":null,"m":null,"any":null,"s":null,"i":null,"n":null}`,
	`{"l":[]}`, `{"a":[1,2,3]}`, `{"i":128}`, `{"i":-129}`, `{"u":-1}`, `{"u":65536}`, `{"i":1.5}`, `{"i":1e2}`,
	`{"f32":1e39}`, `{"f32":3.4028235e38}`, `{"s":1}`, `{"b":1}`, `{"i":"1"}`, `{"l":"x"}`, `{"m":[]}`,
	`{"mi":{"x":true}}`, `{"mi":{"300":true}}`, `{"bytes":"!"}`, `{"n":[]}`, `{"x":{}}`, `{"any":1e300}`,
	`{"any":9007199254740993}`, `{"u":-0}`, `{"i":-0,"f":-0,"any":[-0],"m":{"z":-0}}`, `{"u":-0.0}`,
}

// AttrsToValue stores what encoding/json's Unmarshal stores, and fails
// where it fails.
func TestAttrsToValueMatchesEncodingJSON(t *testing.T) {
	for _, text := range decodeTexts {
		checkDecode(t, []byte(text))
	}
}

// FuzzAttrsToValue: for any JSON object without repeated keys, AttrsToValue
// after AttrsFromJSON agrees with encoding/json's Unmarshal.
func FuzzAttrsToValue(f *testing.F) {
	for _, text := range decodeTexts {
		f.Add([]byte(text))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkDecode(t, data)
	})
}

// Values written by AttrsFromValue read back with AttrsToValue, through
// attributes and through the JSON text, including time.Time and a
// TextUnmarshaler with a pointer receiver.
func TestAttrsToValueRoundTrip(t *testing.T) {
	type rt struct {
		T    time.Time         `json:"t"`
		TP   *time.Time        `json:"tp"`
		D    map[string][]bool `json:"d"`
		E    []int             `json:"e"`
		Nil  []int             `json:"nil"`
		F32  float32           `json:"f32"`
		Arr  [2]string         `json:"arr"`
		Omit string            `json:"omit,omitempty"`
	}
	tm := time.Date(2026, 11, 30, 3, 4, 5, 123456789, time.UTC)
	in := rt{T: tm, TP: &tm, D: map[string][]bool{"a": {true}}, E: []int{}, F32: 0.1, Arr: [2]string{"x", "y"}}
	attrs, err := ubus.AttrsFromValue(in)
	if err != nil {
		t.Fatal(err)
	}
	var out rt
	if err := ubus.AttrsToValue(attrs, &out); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(out, in) {
		t.Fatalf("round trip through attributes\n got %+v\nwant %+v", out, in)
	}
	back, err := ubus.AttrsFromJSON(ubus.AttrsToStdJSON(attrs, "  "))
	if err != nil {
		t.Fatal(err)
	}
	var out2 rt
	if err := ubus.AttrsToValue(back, &out2); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(out2, in) {
		t.Fatalf("round trip through text\n got %+v\nwant %+v", out2, in)
	}
	for _, bad := range []any{nil, out, (*rt)(nil)} {
		if err := ubus.AttrsToValue(attrs, bad); err == nil {
			t.Errorf("AttrsToValue(%T) accepted", bad)
		}
	}
	if err := ubus.AttrsToValue([]ubus.Attr{ubus.String("t", "yesterday")}, &out); err == nil {
		t.Error("bad time accepted")
	}
	if err := ubus.AttrsToValue([]ubus.Attr{ubus.Int32("t", 1)}, &out); err == nil {
		t.Error("number into time accepted")
	}
}
