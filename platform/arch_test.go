package platform

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// Regression tests for defects that showed only on 32-bit router
// architectures (make test-cross runs them on mips, mipsle and arm).

// atoiBytes agrees with strconv.Atoi on the host's int size: a decimal that
// does not fit int is left to strconv (a range error), never wrapped. On
// 32-bit targets it used to accept up to 18 digits and turn
// "999999999999999999" into -1486618625.
func TestAtoiBytesRange(t *testing.T) {
	tests := []string{
		"0", "-0", "+7", "999999999", "-999999999",
		"2147483647", "2147483648", "-2147483648", "-2147483649", "4294967296",
		"999999999999999999", "-999999999999999999", "9223372036854775807",
		"9223372036854775808", "18446744073709551615",
	}
	for _, s := range tests {
		t.Run(s, func(t *testing.T) {
			want, werr := strconv.Atoi(s)
			got, ok := atoiBytes([]byte(s))
			if ok && (werr != nil || got != want) {
				t.Fatalf("atoiBytes(%q) = %d, strconv.Atoi = %d, %v", s, got, want, werr)
			}
			digits := len(s)
			if s[0] == '-' || s[0] == '+' {
				digits--
			}
			if !ok && werr == nil && digits <= atoiMaxDigits {
				t.Errorf("atoiBytes(%q) not parsed, want %d", s, want)
			}
		})
	}
}

// reader.num of a value beyond int reports strconv's range error with the
// file's name instead of returning a wrapped number.
func TestNumRange(t *testing.T) {
	tests := []struct {
		text    string
		want    int64
		fitsInt bool
	}{
		{"2147483647\n", 2147483647, true},
		{"2147483648\n", 2147483648, strconv.IntSize == 64},
		{"999999999999999999\n", 999999999999999999, strconv.IntSize == 64},
		{"-4294967296\n", -4294967296, strconv.IntSize == 64},
		{"99999999999999999999\n", 0, false},
	}
	dir := t.TempDir()
	for _, tt := range tests {
		if err := os.WriteFile(filepath.Join(dir, "n"), []byte(tt.text), 0o644); err != nil {
			t.Fatal(err)
		}
		r := testReader(t, dir)
		got, err := r.num(r.dir, "n")
		r.close()
		if tt.fitsInt {
			if err != nil || int64(got) != tt.want {
				t.Errorf("num(%q) = %d, %v; want %d", tt.text, got, err, tt.want)
			}
			continue
		}
		if !errors.Is(err, strconv.ErrRange) {
			t.Errorf("num(%q) = %d, %v; want a range error", tt.text, got, err)
		}
	}
}
