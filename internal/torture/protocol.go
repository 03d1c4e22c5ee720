package torture

import (
	"fmt"
	"strconv"
	"strings"
)

// The child's stdout is one event per line. The first word says what:
//
//	READY                                  the store is open
//	C <op> get <key>                       a read is about to be issued
//	C <op> put <key> <expect> <value>      a write; expect is "-" (blind), 0 (create only) or a revision
//	C <op> del <key> <expect>              a delete with expected revision
//	R <op> ok <rev> [<value>]              the store answered success (a read or write's revision)
//	R <op> notfound                        NOT_FOUND
//	R <op> conflict <current revision>     CONFLICT
//	L <key> <rev> <expires ms>             a lease claim or renewal was acknowledged
//	B <path>                               a backup file is complete and durable
//	K                                      an explicit checkpoint succeeded
//	U                                      the watcher verified one update
//	V <text>                               the child saw a violation
const (
	lineReady = "READY"
	evCall    = "C"
	evReturn  = "R"
	evLease   = "L"
	evBackup  = "B"
	evCkpt    = "K"
	evUpdate  = "U"
	evViolate = "V"
)

// formatCall renders a C line.
func formatCall(op uint64, c call) string {
	switch c.Kind {
	case opGet:
		return fmt.Sprintf("C %d get %s", op, c.Key)
	case opDel:
		return fmt.Sprintf("C %d del %s %d", op, c.Key, c.Expect)
	}
	x := "-"
	if c.Expect != blind {
		x = strconv.FormatInt(c.Expect, 10)
	}
	return fmt.Sprintf("C %d put %s %s %s", op, c.Key, x, c.Value)
}

// formatResult renders an R line.
func formatResult(op uint64, r result) string {
	switch r.Code {
	case codeNotFound:
		return fmt.Sprintf("R %d notfound", op)
	case codeConflict:
		return fmt.Sprintf("R %d conflict %d", op, r.Rev)
	}
	if r.Value != "" {
		return fmt.Sprintf("R %d ok %d %s", op, r.Rev, r.Value)
	}
	return fmt.Sprintf("R %d ok %d", op, r.Rev)
}

// parseCall parses the fields of a C line after the "C".
func parseCall(f []string) (uint64, call, error) {
	if len(f) < 3 {
		return 0, call{}, fmt.Errorf("short call line")
	}
	op, err := strconv.ParseUint(f[0], 10, 64)
	if err != nil {
		return 0, call{}, err
	}
	c := call{Key: f[2], Expect: blind}
	switch {
	case f[1] == "get" && len(f) == 3:
		c.Kind = opGet
	case f[1] == "del" && len(f) == 4:
		c.Kind = opDel
		if c.Expect, err = strconv.ParseInt(f[3], 10, 64); err != nil {
			return 0, call{}, err
		}
	case f[1] == "put" && len(f) == 5:
		c.Kind, c.Value = opPut, f[4]
		if f[3] != "-" {
			if c.Expect, err = strconv.ParseInt(f[3], 10, 64); err != nil {
				return 0, call{}, err
			}
		}
	default:
		return 0, call{}, fmt.Errorf("bad call %q", strings.Join(f, " "))
	}
	return op, c, nil
}

// parseResult parses the fields of an R line after the "R".
func parseResult(f []string) (uint64, result, error) {
	if len(f) < 2 {
		return 0, result{}, fmt.Errorf("short result line")
	}
	op, err := strconv.ParseUint(f[0], 10, 64)
	if err != nil {
		return 0, result{}, err
	}
	var r result
	switch {
	case f[1] == "notfound" && len(f) == 2:
		r.Code = codeNotFound
	case f[1] == "conflict" && len(f) == 3:
		r.Code = codeConflict
		r.Rev, err = strconv.ParseUint(f[2], 10, 64)
	case f[1] == "ok" && (len(f) == 3 || len(f) == 4):
		r.Rev, err = strconv.ParseUint(f[2], 10, 64)
		if len(f) == 4 {
			r.Value = f[3]
		}
	default:
		return 0, result{}, fmt.Errorf("bad result %q", strings.Join(f, " "))
	}
	return op, r, err
}
