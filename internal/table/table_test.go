package table

import (
	"bytes"
	"testing"
	"text/tabwriter"
)

// TestTableMatchesTabwriter: the table prints what text/tabwriter prints
// with the settings the commands use (minwidth 0, padding 2, padchar ' ',
// left- or right-aligned, with or without Debug's bars), for blocks of columns that start and end,
// lines without tabs, empty cells, multi-byte text and no final newline.
func TestTableMatchesTabwriter(t *testing.T) {
	inputs := []struct{ name, text string }{
		{"empty", ""},
		{"one line", "mode\tauto\n"},
		{"key value", "mode\tauto (default, flows 0)\npolicy\t-\nlast apply\t2026-01-01, boot: 3 changed (12 µs)\n"},
		{"header and rows", "  DEVICE\tQUEUES\tTHREAD\tCPUS\n  eth0\trx-0\tnapi/eth0-0 [12]\t0-1\n  wlan0\ttx-0..15\tnapi/x [7]\t3\n"},
		{"trailing tabs", "cpu\tprocessed\tdropped\t\n0\t123456\t0\t\n1\t7\t99999999\t\n"},
		{"blocks", "a\tb\tc\nlong cell\tx\nno tabs here\nz\tyy\tzzz\tw\n\tempty first\n"},
		{"ragged", "a\tb\tc\td\ne\nf\tg\nh\ti\tj\n"},
		{"no final newline", "a\tbb\nccc\td"},
		{"empty cells", "\t\t\n\tx\t\ny\t\t\n"},
	}
	for _, in := range inputs {
		for _, flags := range []int{0, AlignRight, Bars, AlignRight | Bars} {
			var twFlags uint
			if flags&AlignRight != 0 {
				twFlags |= tabwriter.AlignRight
			}
			if flags&Bars != 0 {
				twFlags |= tabwriter.Debug
			}
			var want, got bytes.Buffer
			tw := tabwriter.NewWriter(&want, 0, 4, 2, ' ', twFlags)
			tw.Write([]byte(in.text))
			if err := tw.Flush(); err != nil {
				t.Fatal(err)
			}
			tb := New(&got, flags)
			tb.Write([]byte(in.text))
			if err := tb.Flush(); err != nil {
				t.Fatal(err)
			}
			if got.String() != want.String() {
				t.Errorf("%s (flags %d):\ngot\n%q\nwant\n%q", in.name, flags, got.String(), want.String())
			}
		}
	}
}
