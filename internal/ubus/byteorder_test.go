package ubus_test

import (
	"bytes"
	"testing"

	"github.com/packet-steering/packet-steering/internal/ubus"
)

// Blob headers and blobmsg numbers are big-endian on the wire whatever the
// host's byte order (libubox blob.h, blobmsg.h): these bytes are written
// out by hand, and make test-cross checks them on little- and big-endian
// hosts alike.
func TestWireByteOrder(t *testing.T) {
	tests := []struct {
		name string
		attr ubus.Attr
		want []byte
	}{
		{"int32", ubus.Int32("a", -2), []byte{
			0x85, 0, 0, 12, 0, 1, 'a', 0, 0xff, 0xff, 0xff, 0xfe}},
		{"int16", ubus.Int16("b", 0x1234), []byte{
			0x86, 0, 0, 10, 0, 1, 'b', 0, 0x12, 0x34, 0, 0}},
		{"int64", ubus.Int64("c", 0x0102030405060708), []byte{
			0x84, 0, 0, 16, 0, 1, 'c', 0, 1, 2, 3, 4, 5, 6, 7, 8}},
		{"double", ubus.Double("d", 1), []byte{
			0x88, 0, 0, 16, 0, 1, 'd', 0, 0x3f, 0xf0, 0, 0, 0, 0, 0, 0}},
		{"table", ubus.Table("t", ubus.Bool("x", true)), []byte{
			0x82, 0, 0, 20, 0, 1, 't', 0, 0x87, 0, 0, 9, 0, 1, 'x', 0, 1, 0, 0, 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ubus.EncodeAttrs([]ubus.Attr{tt.attr})
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, tt.want) {
				t.Fatalf("EncodeAttrs = % x\nwant          % x", got, tt.want)
			}
			back, err := ubus.DecodeAttrs(got, false)
			if err != nil || len(back) != 1 {
				t.Fatalf("DecodeAttrs = %+v, %v", back, err)
			}
			if back[0].Int != tt.attr.Int || back[0].Float != tt.attr.Float {
				t.Errorf("decoded %+v, want %+v", back[0], tt.attr)
			}
		})
	}
}
