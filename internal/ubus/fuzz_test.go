package ubus_test

import (
	"bytes"
	"reflect"
	"testing"

	"github.com/packet-steering/packet-steering/internal/ubus"
)

// FuzzDecodeMessage: any input either fails to decode or decodes to a
// message that encodes, and whose encoding decodes to the same message
// (the bytes may differ only in padding, which the encoder always writes
// as zeros; the golden tests check exact bytes of real traffic). Decoding
// never panics and ReadMessage refuses bodies beyond MaxMessageLen before
// allocating.
func FuzzDecodeMessage(f *testing.F) {
	for _, name := range captureNames(f) {
		for _, cm := range loadCapture(f, name) {
			f.Add(cm.raw)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := ubus.ReadMessage(bytes.NewReader(data), 0)
		if err != nil {
			return
		}
		got, err := m.MarshalBinary()
		if err != nil {
			t.Fatalf("decoded message does not encode: %v", err)
		}
		again, err := ubus.ReadMessage(bytes.NewReader(got), 0)
		if err != nil {
			t.Fatalf("re-encoded message does not decode: %v", err)
		}
		if !reflect.DeepEqual(again, m) {
			t.Fatalf("re-decoded message differs:\n got %+v\nwant %+v", again, m)
		}
		for _, a := range m.Attrs {
			if a.ID == ubus.AttrData || a.ID == ubus.AttrSignature {
				_, _ = a.Blobmsg()
			}
			_, _ = a.U32()
			_, _ = a.String()
		}
	})
}

// FuzzDecodeAttrs: a blobmsg list that decodes re-encodes to a list that
// decodes to the same values (bytes may differ only where the input held
// names inside arrays, unspec payloads or non-zero padding, which are
// dropped), and formatting it as JSON never fails.
//
// An array's payload is re-encoded as it is, not wrapped in an array: the
// decoder and the encoder both count MaxDepth levels below the list they
// are given, and a wrapper would add a level the decoder never saw (a
// payload nested exactly MaxDepth deep, testdata/fuzz/FuzzDecodeAttrs/
// array-at-depth-limit, would then not encode). Array members have empty
// names, so a table list of them encodes to the same bytes as the array's
// payload.
func FuzzDecodeAttrs(f *testing.F) {
	for _, name := range captureNames(f) {
		for _, cm := range loadCapture(f, name) {
			var m ubus.Message
			if err := m.UnmarshalBinary(cm.raw); err != nil {
				continue
			}
			for _, a := range m.Attrs {
				if a.ID == ubus.AttrData || a.ID == ubus.AttrSignature {
					f.Add(a.Data, false)
				}
			}
		}
	}
	f.Fuzz(func(t *testing.T, data []byte, isArray bool) {
		attrs, err := ubus.DecodeAttrs(data, isArray)
		if err != nil {
			return
		}
		enc, err := ubus.EncodeAttrs(attrs)
		if err != nil {
			t.Fatalf("decoded attrs do not encode: %v", err)
		}
		back, err := ubus.DecodeAttrs(enc, isArray)
		if err != nil {
			t.Fatalf("re-encoded attrs do not decode: %v", err)
		}
		if len(back) == 0 {
			back = []ubus.Attr{}
		}
		if len(attrs) == 0 {
			attrs = []ubus.Attr{}
		}
		if !reflect.DeepEqual(normalize(back), normalize(attrs)) {
			t.Fatalf("values differ after re-encoding:\n got %+v\nwant %+v", back, attrs)
		}
		if _, err := ubus.AttrsToJSON(attrs, "\t"); err != nil {
			t.Fatalf("json: %v", err)
		}
	})
}

// normalize makes nil and empty child lists compare equal and NaN doubles
// comparable.
func normalize(attrs []ubus.Attr) []ubus.Attr {
	out := make([]ubus.Attr, len(attrs))
	for i, a := range attrs {
		if a.Type == ubus.TypeTable || a.Type == ubus.TypeArray {
			a.Children = normalize(a.Children)
		}
		if a.Float != a.Float {
			a.Float = 0
			a.Str = "NaN"
		}
		out[i] = a
	}
	return out
}
