// Package table aligns tab-separated columns as text/tabwriter does, for
// the few settings the commands use, without its cost in the router binary.
package table

import (
	"bytes"
	"io"
	"strings"
	"unicode/utf8"
)

// Table aligns tab-separated columns the way text/tabwriter does with
// minwidth 0, padding 2 and padchar ' ' (left-aligned, or right-aligned
// with AlignRight; with Bars a '|' after each cell, as tabwriter.Debug): a
// cell ends at a tab, the text after a line's last tab is no column's, and
// a column's width is set per block of consecutive lines that have a cell
// in it. text/tabwriter costs the mipsle router binary about 8 KB for the
// few tables the commands print; the tests check this against it.
type Table struct {
	w          io.Writer
	alignRight bool
	bars       bool
	buf        bytes.Buffer
}

// Flags of New.
const (
	AlignRight = 1 << iota // right-align the cells
	Bars                   // a '|' after each cell (tabwriter.Debug)
)

// tablePadding is the space between columns.
const tablePadding = 2

// New returns a table writing to w on Flush; flags is AlignRight, Bars,
// both or 0 (left-aligned).
func New(w io.Writer, flags int) *Table {
	return &Table{w: w, alignRight: flags&AlignRight != 0, bars: flags&Bars != 0}
}

// Write buffers p until Flush.
func (t *Table) Write(p []byte) (int, error) { return t.buf.Write(p) }

// Flush writes the buffered text, aligned, and empties the buffer.
func (t *Table) Flush() error {
	text := t.buf.String()
	t.buf.Reset()
	rows := strings.Split(text, "\n")
	lines := make([][]string, len(rows))
	for i, r := range rows {
		lines[i] = strings.Split(r, "\t")
	}
	var out bytes.Buffer
	t.format(&out, lines, 0, len(lines), nil)
	_, err := t.w.Write(out.Bytes())
	return err
}

// format writes lines[line0:line1], whose columns before len(widths) have
// those widths, finding the widths of the further columns block by block.
func (t *Table) format(out *bytes.Buffer, lines [][]string, line0, line1 int, widths []int) {
	column := len(widths)
	for this := line0; this < line1; this++ {
		if column >= len(lines[this])-1 {
			continue
		}
		t.writeLines(out, lines, line0, this, widths)
		line0 = this
		width := 0
		for ; this < line1 && column < len(lines[this])-1; this++ {
			if w := utf8.RuneCountInString(lines[this][column]) + tablePadding; w > width {
				width = w
			}
		}
		t.format(out, lines, line0, this, append(widths, width))
		line0 = this
	}
	t.writeLines(out, lines, line0, line1, widths)
}

// writeLines writes lines[line0:line1] with the column widths, each but the
// last line of the text followed by a newline.
func (t *Table) writeLines(out *bytes.Buffer, lines [][]string, line0, line1 int, widths []int) {
	for i := line0; i < line1; i++ {
		for j, c := range lines[i] {
			pad := 0
			if j < len(widths) {
				pad = widths[j] - utf8.RuneCountInString(c)
			}
			if t.alignRight {
				out.WriteString(strings.Repeat(" ", pad))
				out.WriteString(c)
			} else {
				out.WriteString(c)
				out.WriteString(strings.Repeat(" ", pad))
			}
			if t.bars && j < len(lines[i])-1 {
				out.WriteByte('|')
			}
		}
		if i+1 < len(lines) {
			out.WriteByte('\n')
		}
	}
}
