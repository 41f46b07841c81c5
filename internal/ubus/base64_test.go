package ubus

import (
	"bytes"
	"encoding/base64"
	"testing"
)

// b64Cases are inputs where b64Decode must agree with encoding/base64.
var b64Cases = []string{
	"", "QQ==", "QUI=", "QUJD", "QUJDRA==", "QR==", "QQ", "QQ=", "Q===", "QQ=A",
	"QQ==QQ==", "QU\nJD", "QUJD\r\n", "QQ=\n=", "QUJ!", "====", "QUJDRA==\n", "QUJDRA==x",
	"/+8=", "-_8=",
}

func TestBase64AgreesWithEncodingBase64(t *testing.T) {
	for _, s := range b64Cases {
		checkB64(t, s)
	}
	for n := 0; n < 10; n++ {
		b := bytes.Repeat([]byte{0xfb, 0x0f, 0x3e}, 4)[:n]
		if got, want := b64Encode(b), base64.StdEncoding.EncodeToString(b); got != want {
			t.Errorf("b64Encode(%x) = %q, want %q", b, got, want)
		}
	}
}

func checkB64(t *testing.T, s string) {
	t.Helper()
	got, err := b64Decode(s)
	want, werr := base64.StdEncoding.DecodeString(s)
	if (err == nil) != (werr == nil) {
		t.Fatalf("b64Decode(%q): err %v, encoding/base64 err %v", s, err, werr)
	}
	if err == nil && !bytes.Equal(got, want) {
		t.Fatalf("b64Decode(%q) = %x, encoding/base64 %x", s, got, want)
	}
	if err == nil {
		if enc := b64Encode(got); enc != base64.StdEncoding.EncodeToString(got) {
			t.Fatalf("b64Encode(%x) = %q", got, enc)
		}
	}
}

// FuzzBase64: decoding any string agrees with encoding/base64, and
// encoding what decoded agrees too.
func FuzzBase64(f *testing.F) {
	for _, s := range b64Cases {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) { checkB64(t, s) })
}
