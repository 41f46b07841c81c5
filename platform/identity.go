package platform

import (
	"errors"
	"io"
	"io/fs"
	"strings"

	"github.com/packet-steering/packet-steering/internal/kfs"
	"github.com/packet-steering/packet-steering/internal/outline"
)

// Identity files:
//
//	tmp/sysinfo/board_name, model    written at boot by OpenWrt's
//	                                 base-files (lib/preinit/.. board detect)
//	etc/openwrt_release              shell assignments, DISTRIB_TARGET='a/b'
//	proc/device-tree/compatible      NUL-separated strings, most specific first
//
// x86 has no device tree; its absence is not a gap.
const (
	boardNamePath  = "tmp/sysinfo/board_name"
	modelPath      = "tmp/sysinfo/model"
	releasePath    = "etc/openwrt_release"
	compatiblePath = "proc/device-tree/compatible"
	deviceTreeDir  = "proc/device-tree"
)

func (f *reader) readIdentity(g *gaps) Identity {
	var id Identity
	var err error
	if id.Board, err = f.str(f.dir, boardNamePath); err != nil {
		g.add(boardNamePath, err)
	}
	if f.decisionOnly {
		// the model is shown, never matched
	} else if id.Model, err = f.str(f.dir, modelPath); err != nil {
		g.add(modelPath, err)
	}
	if b, err := f.File(f.dir, releasePath); err != nil {
		g.add(releasePath, err)
	} else {
		vars, perr := parseShellText(string(b))
		if perr != nil {
			g.add(releasePath, perr)
		}
		id.Target = vars["DISTRIB_TARGET"]
	}
	b, err := f.File(f.dir, compatiblePath)
	switch {
	case err == nil:
		id.Compatible = parseCompatible(b)
	case errors.Is(err, fs.ErrNotExist) && !f.Exists(f.dir, deviceTreeDir):
		// no device tree (x86)
	default:
		g.add(compatiblePath, err)
	}
	return id
}

// parseCompatible splits a device-tree string list (NUL-terminated strings).
func parseCompatible(b []byte) []string {
	var out []string
	for _, s := range strings.Split(string(b), "\x00") {
		if s != "" {
			out = append(out, s)
		}
	}
	return out
}

// parseShellAssignments reads NAME=value lines as /bin/sh would for the
// simple forms etc/openwrt_release uses: unquoted words, '...' (no escapes),
// "..." (backslash escapes \" \\ \$ \`), and concatenations such as
// a'b'"c" (parts concatenate). Comments and blank lines are skipped; a line that is not an
// assignment or has an unterminated quote is an error (other lines are
// still returned).
func parseShellAssignments(r io.Reader) (map[string]string, error) {
	b, err := io.ReadAll(io.LimitReader(r, kfs.MaxFile))
	if err != nil {
		return map[string]string{}, err
	}
	return parseShellText(string(b))
}

// parseShellText is parseShellAssignments on the file's contents.
func parseShellText(text string) (map[string]string, error) {
	vars := map[string]string{}
	var errs []error
	for n := 1; ; n++ {
		line, rest, ok := nextLine(text)
		if !ok {
			break
		}
		text = rest
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' {
			continue
		}
		line = strings.TrimPrefix(line, "export ")
		name, val, ok := strings.Cut(line, "=")
		if !ok || !validShellName(name) {
			errs = append(errs, outline.Errorf("line %d: not an assignment", n))
			continue
		}
		v, err := unquoteShell(val)
		if err != nil {
			errs = append(errs, outline.Errorf("line %d: %w", n, err))
			continue
		}
		vars[name] = v
	}
	return vars, outline.JoinErrors(errs...)
}

func validShellName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '_' && !(c >= 'A' && c <= 'Z') && !(c >= 'a' && c <= 'z') && !(i > 0 && isDigit(c)) {
			return false
		}
	}
	return true
}

// unquoteShell decodes one shell word (up to an unquoted blank or '#').
func unquoteShell(s string) (string, error) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '\'':
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return "", errors.New("unterminated '")
			}
			b.WriteString(s[i+1 : i+1+j])
			i += j + 1
		case '"':
			i++
			for ; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' && i+1 < len(s) && strings.IndexByte("\"\\$`", s[i+1]) >= 0 {
					i++
				}
				b.WriteByte(s[i])
			}
			if i >= len(s) {
				return "", errors.New("unterminated \"")
			}
		case '\\':
			if i+1 < len(s) {
				i++
				b.WriteByte(s[i])
			}
		case ' ', '\t':
			return b.String(), nil
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), nil
}
