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
	rest, prefixed := strings.CutPrefix(name, namePrefix)
	switch {
	case name == "":
		return "empty"
	case len(name) > maxNameLen:
		return fmt.Sprintf("longer than %d bytes", maxNameLen)
	case !prefixed:
		return "does not start with " + namePrefix
	}
	dot := strings.LastIndexByte(rest, '.')
	if dot < 0 {
		return "no version suffix"
	}
	digits, v := strings.CutPrefix(rest[dot+1:], "v")
	switch {
	case !v || digits == "":
		return "version must be v<N>"
	case digits[0] == '0':
		return "version must be a positive integer without leading zeros"
	case strings.Trim(digits, "0123456789") != "":
		return "version must be v<N>"
	}
	for part := range strings.SplitSeq(rest[:dot], ".") {
		if part == "" {
			return "empty name part"
		}
		if strings.Trim(part, "abcdefghijklmnopqrstuvwxyz0123456789-") != "" {
			return "name parts allow only [a-z0-9-]"
		}
	}
	return ""
}
