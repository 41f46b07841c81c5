package testenv

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
)

// Diff compares want and got and returns "" when they are deeply equal,
// else a line diff of their indented JSON forms (struct fields by their
// json names), in the style of go-cmp's Diff: "-" lines are only in want,
// "+" lines only in got, and unchanged lines around a change are kept for
// context. A test prints it instead of two whole values:
//
//	if d := testenv.Diff(want, got); d != "" {
//		t.Errorf("snapshot (-want +got):\n%s", d)
//	}
func Diff(want, got any) string {
	if reflect.DeepEqual(want, got) {
		return ""
	}
	a, b := render(want), render(got)
	if a == b {
		// Equal as JSON (unexported fields, nil against empty): compare
		// Go syntax instead.
		a, b = fmt.Sprintf("%#v", want), fmt.Sprintf("%#v", got)
		if a == b {
			return "(values differ only in ways neither JSON nor %#v shows)\n"
		}
	}
	return lineDiff(strings.Split(a, "\n"), strings.Split(b, "\n"))
}

func render(v any) string {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Sprintf("%#v", v)
	}
	return string(b)
}

// contextLines is how many unchanged lines are shown around a change.
const contextLines = 3

// maxCells bounds the LCS table; larger inputs are compared line by line.
const maxCells = 4 << 20

// lineDiff prints the edit script from a to b with context.
func lineDiff(a, b []string) string {
	type op struct {
		kind byte // ' ', '-', '+'
		line string
	}
	var ops []op
	if (len(a)+1)*(len(b)+1) > maxCells {
		for i := 0; i < max(len(a), len(b)); i++ {
			switch {
			case i < len(a) && i < len(b) && a[i] == b[i]:
				ops = append(ops, op{' ', a[i]})
			default:
				if i < len(a) {
					ops = append(ops, op{'-', a[i]})
				}
				if i < len(b) {
					ops = append(ops, op{'+', b[i]})
				}
			}
		}
	} else {
		// lcs[i][j] is the length of the longest common subsequence of
		// a[i:] and b[j:].
		lcs := make([][]int32, len(a)+1)
		for i := range lcs {
			lcs[i] = make([]int32, len(b)+1)
		}
		for i := len(a) - 1; i >= 0; i-- {
			for j := len(b) - 1; j >= 0; j-- {
				if a[i] == b[j] {
					lcs[i][j] = lcs[i+1][j+1] + 1
				} else {
					lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
				}
			}
		}
		i, j := 0, 0
		for i < len(a) || j < len(b) {
			switch {
			case i < len(a) && j < len(b) && a[i] == b[j]:
				ops = append(ops, op{' ', a[i]})
				i++
				j++
			case i < len(a) && (j == len(b) || lcs[i+1][j] >= lcs[i][j+1]):
				ops = append(ops, op{'-', a[i]})
				i++
			default:
				ops = append(ops, op{'+', b[j]})
				j++
			}
		}
	}
	var out strings.Builder
	skipped := false
	for k, o := range ops {
		near := false
		for d := -contextLines; d <= contextLines && !near; d++ {
			near = k+d >= 0 && k+d < len(ops) && ops[k+d].kind != ' '
		}
		if !near {
			skipped = true
			continue
		}
		if skipped {
			out.WriteString("  ...\n")
			skipped = false
		}
		out.WriteByte(o.kind)
		out.WriteByte(' ')
		out.WriteString(o.line)
		out.WriteByte('\n')
	}
	return out.String()
}
