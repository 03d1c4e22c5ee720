package schema

import (
	"fmt"
	"strings"

	"github.com/keeppeek/statestore/quota"
)

// maxNameLen keeps schema names within the bound records hold them to, so
// a name can be echoed in messages and stored next to entries without a
// size check of its own.
const maxNameLen = quota.SchemaNameBytes

const namePrefix = "keeppeek."

// CheckName reports whether name has the form keeppeek.<name>.v<N>: <name> is
// one or more dot-separated parts of [a-z0-9-], and N is a positive integer
// without leading zeros, so every version has exactly one spelling. The
// returned *Error has Path "schema".
func CheckName(name string) error {
	reason := nameProblem(name)
	if reason == "" {
		return nil
	}
	shown := name
	if len(shown) > 64 {
		shown = shown[:64] + "..."
	}
	return &Error{
		Path:   "schema",
		Reason: fmt.Sprintf("invalid schema name %q: %s (want keeppeek.<name>.v<N>)", shown, reason),
	}
}

func nameProblem(name string) string {
	switch {
	case name == "":
		return "empty"
	case len(name) > maxNameLen:
		return fmt.Sprintf("longer than %d bytes", maxNameLen)
	case !strings.HasPrefix(name, namePrefix):
		return "does not start with " + namePrefix
	}
	rest := name[len(namePrefix):]
	dot := strings.LastIndexByte(rest, '.')
	if dot < 0 {
		return "no version suffix"
	}
	mid, ver := rest[:dot], rest[dot+1:]
	if len(ver) < 2 || ver[0] != 'v' {
		return "version must be v<N>"
	}
	if ver[1] == '0' {
		return "version must be a positive integer without leading zeros"
	}
	for i := 1; i < len(ver); i++ {
		if ver[i] < '0' || ver[i] > '9' {
			return "version must be v<N>"
		}
	}
	if mid == "" {
		return "empty name part"
	}
	partLen := 0
	for i := 0; i < len(mid); i++ {
		c := mid[i]
		switch {
		case c == '.':
			if partLen == 0 {
				return "empty name part"
			}
			partLen = 0
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '-':
			partLen++
		default:
			return "name parts allow only [a-z0-9-]"
		}
	}
	if partLen == 0 {
		return "empty name part"
	}
	return ""
}
