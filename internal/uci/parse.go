package uci

import (
	"bytes"
	"fmt"
	"io"

	"github.com/packet-steering/packet-steering/internal/outline"
)

// Limits on one config file, far above any real config (a busy router's
// /etc/config/network is a few KiB and some dozen sections) and far below
// what would hurt a router with 64 MiB of RAM: parsing an 8 MiB file of
// 200,000 sections takes seconds and over 150 MiB. A file beyond a limit is
// refused with a *LimitError and changes nothing.
const (
	// MaxFileSize is the largest config file read, in bytes; the size is
	// checked before a byte is parsed.
	MaxFileSize = 1 << 20
	// MaxSections is the most sections a config file may hold; the parser
	// stops at the first section beyond it.
	MaxSections = 10000
)

// LimitError reports a config file refused because it is beyond
// MaxFileSize or MaxSections (or is not a regular file). It is not a syntax
// error: libuci may well read the file, but this package will not.
type LimitError struct {
	_ outline.NoCompare
	// File is the package name or the path of the file.
	File string
	// Msg says which limit, with the file's figure and the limit.
	Msg string
}

// Error implements error: "uci: FILE: MSG".
func (e *LimitError) Error() string { return fmt.Sprintf("uci: %s: %s", e.File, e.Msg) }

// sizeLimitError is the LimitError for a file of size bytes.
func sizeLimitError(file string, size int64) *LimitError {
	return &LimitError{File: file, Msg: fmt.Sprintf("%d bytes, over the limit of %d bytes per config file", size, MaxFileSize)}
}

// Parse reads one config file in UCI syntax. name becomes Package.Name and
// the File of a *ParseError.
//
// The grammar is libuci's (file.c), in strict mode, as uci(1) uses it:
//
//	package NAME                 accepted, NAME checked, otherwise ignored
//	config TYPE ['NAME']         opens a section; NAME absent or '' = anonymous;
//	                             an existing NAME reopens that section (its TYPE
//	                             must match)
//	option NAME 'VALUE'          sets a plain option (an empty VALUE deletes it)
//	list NAME 'VALUE'            appends to a list (a plain option of that name
//	                             becomes the list's first item)
//
// The keywords may be abbreviated to p, c, o and l. A word is unquoted,
// 'single quoted' (no escapes, may span lines), "double quoted" (backslash
// escapes, may span lines), or adjacent pieces of those, concatenated. A
// backslash outside single quotes takes the next character literally; at
// the end of a line it joins the next line. Outside quotes, # starts a
// comment to the end of the line and ; ends a command (another may follow
// on the same line). Blank lines, spaces, tabs and CRLF line ends are fine.
// Section and option names are [A-Za-z0-9_]+, types are printable ASCII.
//
// Anonymous sections are named "cfg" + two or more hex digits of the
// section's 1-based allocation number in the package + four hex digits of
// the DJB hash of its type, as libuci's uci_fixup_section does at parse time
// (so the third section of /etc/config/network, an anonymous `device`, is
// "cfg030f15" as `uci show network` prints it).
//
// Anything else (an unknown keyword, a missing or invalid name, too many
// arguments, an unterminated quote, option before the first section, a NUL
// byte) returns a *ParseError with the line number; libuci in strict mode
// rejects the same inputs. Read errors are returned wrapped.
func Parse(name string, r io.Reader) (*Package, error) {
	data, err := io.ReadAll(io.LimitReader(r, MaxFileSize+1))
	if err != nil {
		return nil, outline.Errorf("uci: reading %s: %w", name, err)
	}
	if len(data) > MaxFileSize {
		return nil, &LimitError{File: name, Msg: fmt.Sprintf("more than %d bytes, over the limit per config file", MaxFileSize)}
	}
	ps := &parser{buf: data, file: name, pkg: &Package{Name: name}, byName: map[string]*Section{}}
	if i := bytes.IndexByte(data, 0); i >= 0 {
		return nil, ps.errAt(i, "NUL byte")
	}
	for ps.pos < len(ps.buf) {
		if err := ps.line(); err != nil {
			return nil, err
		}
	}
	return ps.pkg, nil
}

type parser struct {
	buf  []byte
	pos  int
	file string
	pkg  *Package
	sec  *Section
	// byName indexes sections by name for reopening.
	byName map[string]*Section
}

// eof is returned by cur at the end of input; Parse rejects NUL bytes, so it
// cannot be confused with input.
const eof = 0

func (ps *parser) cur() byte {
	if ps.pos < len(ps.buf) {
		return ps.buf[ps.pos]
	}
	return eof
}

func (ps *parser) errAt(pos int, msg string) *ParseError {
	if pos > len(ps.buf) {
		pos = len(ps.buf)
	}
	return &ParseError{File: ps.file, Line: bytes.Count(ps.buf[:pos], []byte("\n")) + 1, Msg: msg}
}

// isBlank is C isspace without '\n', which ends a command line here.
func isBlank(c byte) bool {
	return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f'
}

//go:noinline
func (ps *parser) skipBlank() {
	for ps.pos < len(ps.buf) && isBlank(ps.buf[ps.pos]) {
		ps.pos++
	}
}

func (ps *parser) skipComment() {
	for ps.pos < len(ps.buf) && ps.buf[ps.pos] != '\n' {
		ps.pos++
	}
}

// line parses the commands of one line (several when separated by ';') and
// consumes its '\n'.
func (ps *parser) line() error {
	ps.skipBlank()
	for {
		switch ps.cur() {
		case eof:
			return nil
		case '\n':
			ps.pos++
			return nil
		case '#':
			ps.skipComment()
			continue
		}
		start := ps.pos
		for c := ps.cur(); c != eof && c != ' ' && c != '\t' && c != '\n'; c = ps.cur() {
			ps.pos++
		}
		var err error
		switch kw := string(ps.buf[start:ps.pos]); kw {
		case "p", "package":
			err = ps.cmdPackage()
		case "c", "config":
			err = ps.cmdConfig()
		case "o", "option":
			err = ps.cmdOption(false)
		case "l", "list":
			err = ps.cmdOption(true)
		default:
			err = ps.errAt(start, fmt.Sprintf("invalid command %q", kw))
		}
		if err != nil {
			return err
		}
		ps.skipBlank()
	}
}

func (ps *parser) cmdPackage() error {
	name, err := ps.nextArg(true)
	if err != nil {
		return err
	}
	if !ValidPackageName(name) {
		return ps.errAt(ps.pos, "invalid character in name field")
	}
	return ps.assertEOL()
}

func (ps *parser) cmdConfig() error {
	typ, err := ps.nextArg(true)
	if err != nil {
		return err
	}
	if !ValidType(typ) {
		return ps.errAt(ps.pos, "invalid character in type field")
	}
	name, err := ps.nextArg(false)
	if err != nil {
		return err
	}
	if name != "" && !ValidName(name) {
		return ps.errAt(ps.pos, "invalid character in name field")
	}
	if err := ps.assertEOL(); err != nil {
		return err
	}
	if name != "" {
		if s := ps.byName[name]; s != nil {
			if s.Type != typ {
				return ps.errAt(ps.pos, "section of different type overwrites prior section with same name")
			}
			ps.sec = s
			return nil
		}
	}
	if len(ps.pkg.Sections) >= MaxSections {
		return &LimitError{File: ps.file, Msg: fmt.Sprintf("more than %d sections (line %d), over the limit per config file",
			MaxSections, bytes.Count(ps.buf[:ps.pos], []byte("\n"))+1)}
	}
	ps.sec = ps.pkg.newSection(typ, name)
	if ps.byName[ps.sec.Name] == nil { // the first of a name wins, as in libuci
		ps.byName[ps.sec.Name] = ps.sec
	}
	return nil
}

func (ps *parser) cmdOption(list bool) error {
	if ps.sec == nil {
		return ps.errAt(ps.pos, "option/list command found before the first section")
	}
	name, err := ps.nextArg(true)
	if err != nil {
		return err
	}
	if !ValidName(name) {
		return ps.errAt(ps.pos, "invalid character in name field")
	}
	value, err := ps.nextArg(false)
	if err != nil {
		return err
	}
	if err := ps.assertEOL(); err != nil {
		return err
	}
	if list {
		ps.sec.addListItem(name, value)
	} else {
		ps.sec.setOption(name, value)
	}
	return nil
}

// assertEOL rejects a further argument (libuci strict mode: "too many
// arguments").
func (ps *parser) assertEOL() error {
	start := ps.pos
	v, err := ps.nextArg(false)
	if err != nil {
		return err
	}
	if v != "" {
		return ps.errAt(start, "too many arguments")
	}
	return nil
}

// nextArg reads one word; "" means none (an empty quoted word counts as
// none, as in libuci).
func (ps *parser) nextArg(required bool) (string, error) {
	ps.skipBlank()
	var v string
	switch ps.cur() {
	case ';':
		ps.pos++
	case '\n', eof:
	default:
		var err error
		if v, err = ps.word(); err != nil {
			return "", err
		}
	}
	if v == "" && required {
		return "", ps.errAt(ps.pos, "insufficient arguments")
	}
	return v, nil
}

// word reads adjacent unquoted, single- and double-quoted pieces up to a
// blank, a line end, a comment or a ';'.
func (ps *parser) word() (string, error) {
	var b []byte
	next := true
loop:
	for {
		switch c := ps.cur(); c {
		case '\'':
			var err error
			if b, err = ps.single(b); err != nil {
				return "", err
			}
		case '"':
			var err error
			if b, err = ps.double(b); err != nil {
				return "", err
			}
		case '#':
			ps.skipComment()
			break loop
		case eof:
			break loop
		case ';':
			next = false
			break loop
		case '\\':
			if ps.backslash() {
				b = append(b, ps.cur())
				ps.pos++
			}
		default:
			b = append(b, c)
			ps.pos++
		}
		if c := ps.cur(); c == eof || c == '\n' || isBlank(c) {
			break
		}
	}
	if next && isBlank(ps.cur()) {
		ps.pos++
	}
	return string(b), nil
}

// backslash skips a backslash; it reports whether the character now at pos
// is to be taken literally (false: end of input, or a line continuation,
// whose line end it has skipped).
//
//go:noinline
func (ps *parser) backslash() bool {
	ps.pos++
	switch {
	case ps.pos >= len(ps.buf):
		return false
	case ps.buf[ps.pos] == '\n':
		ps.pos++
		return false
	case ps.buf[ps.pos] == '\r' && ps.pos+1 < len(ps.buf) && ps.buf[ps.pos+1] == '\n':
		ps.pos += 2
		return false
	}
	return true
}

func (ps *parser) single(b []byte) ([]byte, error) {
	start := ps.pos
	ps.pos++
	for {
		switch c := ps.cur(); c {
		case eof:
			return nil, ps.errAt(start, "EOF with unterminated '")
		case '\'':
			ps.pos++
			return b, nil
		default:
			b = append(b, c)
			ps.pos++
		}
	}
}

func (ps *parser) double(b []byte) ([]byte, error) {
	start := ps.pos
	ps.pos++
	for {
		switch c := ps.cur(); c {
		case eof:
			return nil, ps.errAt(start, "EOF with unterminated \"")
		case '"':
			ps.pos++
			return b, nil
		case '\\':
			if ps.backslash() {
				b = append(b, ps.cur())
				ps.pos++
			}
		default:
			b = append(b, c)
			ps.pos++
		}
	}
}

// djbHash is libuci's djbhash over one string, starting from 5381.
func djbHash(s string) uint32 {
	h := uint32(5381)
	for i := 0; i < len(s); i++ {
		h = h*33 + uint32(s[i])
	}
	return h & 0x7fffffff
}

// newSection appends a section; an empty name makes it anonymous with a
// generated name.
func (p *Package) newSection(typ, name string) *Section {
	p.allocated++
	s := &Section{Name: name, Type: typ}
	if name == "" {
		s.Anonymous = true
		s.Name = fmt.Sprintf("cfg%02x%04x", p.allocated, djbHash(typ)%(1<<16))
	}
	p.Sections = append(p.Sections, s)
	return s
}

// setOption is libuci's uci_set on an option: an empty value deletes it, an
// equal plain value is kept in place, anything else replaces the option and
// moves it to the end of the section.
func (s *Section) setOption(name, value string) {
	i := s.optionIndex(name)
	if i >= 0 {
		o := s.Options[i]
		if value != "" && !o.IsList && len(o.Values) == 1 && o.Values[0] == value {
			return
		}
		s.Options = append(s.Options[:i:i], s.Options[i+1:]...)
	}
	if value == "" {
		return
	}
	s.Options = append(s.Options, &Option{Name: name, Values: []string{value}})
}

// addListItem is libuci's uci_add_list: append to a list; a plain option of
// that name becomes a list (moved to the end) holding its value first.
func (s *Section) addListItem(name, value string) {
	i := s.optionIndex(name)
	if i >= 0 {
		o := s.Options[i]
		if o.IsList {
			o.Values = append(o.Values, value)
			return
		}
		s.Options = append(s.Options[:i:i], s.Options[i+1:]...)
		s.Options = append(s.Options, &Option{Name: name, Values: append(o.Values[:len(o.Values):len(o.Values)], value), IsList: true})
		return
	}
	s.Options = append(s.Options, &Option{Name: name, Values: []string{value}, IsList: true})
}
