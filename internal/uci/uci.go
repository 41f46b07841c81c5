// Package uci reads and writes OpenWrt UCI configuration files
// (/etc/config/NAME) the way libuci does.
//
// It is for programs that must share /etc/config with uci(1), LuCI and
// netifd: it parses the same grammar as libuci's file backend in strict mode,
// addresses sections the same way ("name", "@type[N]", "@type[-1]"), names
// anonymous sections the same way (cfgNNHHHH), and writes files in the form
// `uci commit` leaves them, under the same locks (shared flock for readers,
// exclusive flock on the config file for writers, a temp file in the same
// directory, fsync and rename).
//
// It must never leave a torn or half-written config file, never overwrite a
// file that does not parse (that file is reported with a *ParseError and left
// as it is) or that is beyond MaxFileSize or MaxSections (*LimitError), and
// never touch a file other than the one package it commits and its temp
// file. It does not implement libuci's delta (/tmp/.uci) staging: changes
// made here are committed directly.
//
// Commit protocol, and racing the stock uci. libuci's uci_file_commit takes
// an exclusive flock on the config file, re-reads it through that
// descriptor, replays its own changes on it, writes and fsyncs a temp file
// .NAME.uci-XXXXXX, then closes the config file (releasing the lock) and
// renames the temp file over the config. Update does the same (it re-reads
// under the lock and fn changes only its own options), and closes the two
// windows libuci leaves when one side is this package:
//
//   - libuci releases the lock before its rename; a writer that takes the
//     lock in between would read the content about to be replaced. Update
//     and Commit see libuci's temp file while they hold the lock and wait
//     for the rename (a temp file older than 2 s is a dead writer's).
//   - libuci never checks that the file it locked is still the one at the
//     path, so a uci that waited for the lock during a commit here reads the
//     replaced file. After its rename, Update writes the new content into
//     the replaced file too (in one write of at most one page, padded so no
//     old byte survives), so that uci builds on it.
//
// Two stock uci processes still race each other as libuci allows, and a
// config file larger than a page committed here can still be undone by a
// uci that waited for the lock during that commit.
//
// References (openwrt/uci): file.c (parser: parse_str, parse_single_quote,
// parse_double_quote, parse_backslash, uci_parse_line; writer: uci_escape,
// uci_export_package, uci_file_commit) and list.c (uci_fixup_section,
// uci_lookup_ext_section, uci_set, uci_add_list).
package uci

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/packet-steering/packet-steering/internal/outline"
)

// ErrNotFound is returned (wrapped) by writers when the section or option
// they are told to change does not exist.
var ErrNotFound = errors.New("uci: entry not found")

// ErrExists is returned (wrapped) by AddSection when a section of that name
// already exists.
var ErrExists = errors.New("uci: entry exists")

// ErrInvalid is returned (wrapped) for a name, type or value that libuci would
// reject (see ValidName, ValidType, ValidPackageName).
var ErrInvalid = errors.New("uci: invalid argument")

// Package is one configuration file: /etc/config/<Name>. It is a plain
// in-memory value: reading it from several goroutines is fine, changing it
// while others read it is not (Update gives each caller its own copy).
type Package struct {
	// Name is the config name, which is also the file name in the config dir.
	Name string
	// Sections in file order.
	Sections []*Section

	// allocated counts the sections ever created in this package (parsed or
	// added); it numbers generated anonymous section names as libuci does.
	allocated int
}

// Section is one `config TYPE ['NAME']` block.
type Section struct {
	// Name is the section name; for an anonymous section the generated
	// cfgNNHHHH name (see AddSection).
	Name string
	// Type is the section type (the word after `config`).
	Type string
	// Anonymous is true when the file gave no name; Export then writes none.
	Anonymous bool
	// Options in file order.
	Options []*Option
}

// Option is one `option` or a run of `list` lines of the same name.
type Option struct {
	// Name of the option.
	Name string
	// Values holds one value for a plain option, the items for a list.
	Values []string
	// IsList is true for a `list` option (exported as one `list` line per
	// value), false for a plain `option`.
	IsList bool
}

// ParseError reports input that libuci (in strict mode) would reject.
type ParseError struct {
	_ outline.NoCompare
	// File is the package name or the path the input came from.
	File string
	// Line is the 1-based line on which the error was found.
	Line int
	// Msg says what is wrong, in libuci's words where it has them.
	Msg string
}

// Error implements error: "FILE:LINE: MSG".
func (e *ParseError) Error() string {
	return fmt.Sprintf("uci: parse error in %s:%d: %s", e.File, e.Line, e.Msg)
}

// ValidName reports whether s may be a section or option name: non-empty,
// only ASCII letters, digits and '_' (libuci uci_validate_name).
//
//go:noinline
func ValidName(s string) bool { return validStr(s, true, false) }

// ValidPackageName reports whether s may be a config (file) name: non-empty,
// only ASCII letters, digits, '_' and '-' (libuci uci_validate_package).
//
//go:noinline
func ValidPackageName(s string) bool { return validStr(s, true, true) }

// ValidType reports whether s may be a section type: non-empty, only
// printable ASCII without space (libuci uci_validate_type).
//
//go:noinline
func ValidType(s string) bool { return validStr(s, false, false) }

//go:noinline
func validStr(s string, name, pkg bool) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '_':
			continue
		case c == '-' && pkg:
			continue
		case name || c < 33 || c > 126:
			return false
		}
	}
	return true
}

// Section returns the section ref names, or nil. ref is a section name, or
// "@TYPE[N]" for the N-th (0-based) section of type TYPE in file order, with
// a negative N counting from the end ("@TYPE[-1]" is the last); "@[N]" counts
// sections of any type. A malformed ref returns nil.
func (p *Package) Section(ref string) *Section {
	if p == nil {
		return nil
	}
	if !strings.HasPrefix(ref, "@") {
		for _, s := range p.Sections {
			if s.Name == ref {
				return s
			}
		}
		return nil
	}
	typ, rest, ok := strings.Cut(ref[1:], "[")
	if !ok || !strings.HasSuffix(rest, "]") {
		return nil
	}
	idx, err := strconv.Atoi(rest[:len(rest)-1])
	if err != nil {
		return nil
	}
	if typ != "" && !ValidType(typ) {
		return nil
	}
	var match []*Section
	for _, s := range p.Sections {
		if typ == "" || s.Type == typ {
			match = append(match, s)
		}
	}
	if idx < 0 {
		idx += len(match)
	}
	if idx < 0 || idx >= len(match) {
		return nil
	}
	return match[idx]
}

// SectionsOfType returns the sections of type typ in file order (nil if none).
//
//go:noinline
func (p *Package) SectionsOfType(typ string) []*Section {
	if p == nil {
		return nil
	}
	var out []*Section
	for _, s := range p.Sections {
		if s.Type == typ {
			out = append(out, s)
		}
	}
	return out
}

// Get returns the value of a plain option in the section ref names (see
// Section for refs). It reports false when the section or option is absent
// or the option is a list (use List for those).
func (p *Package) Get(sectionRef, option string) (string, bool) {
	s := p.Section(sectionRef)
	if s == nil {
		return "", false
	}
	return s.Get(option)
}

// Get returns the value of the plain option named option. It reports false
// when the option is absent or is a list: a list has no single value, and
// taking its first item would hide the others (use List).
//
//go:noinline
func (s *Section) Get(option string) (string, bool) {
	o := s.option(option)
	if o == nil || o.IsList || len(o.Values) == 0 {
		return "", false
	}
	return o.Values[0], true
}

// List returns a copy of the items of the list option named option. For a
// plain option it returns its one value (as the shell's config_list_foreach
// does), and nil when the option is absent.
func (s *Section) List(option string) []string {
	o := s.option(option)
	if o == nil || len(o.Values) == 0 {
		return nil
	}
	return append([]string(nil), o.Values...)
}

//
//go:noinline
func (s *Section) option(name string) *Option {
	if s == nil {
		return nil
	}
	for _, o := range s.Options {
		if o.Name == name {
			return o
		}
	}
	return nil
}

func (s *Section) optionIndex(name string) int {
	for i, o := range s.Options {
		if o.Name == name {
			return i
		}
	}
	return -1
}
