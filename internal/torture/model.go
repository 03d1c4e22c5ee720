package torture

import (
	"time"

	"github.com/keeppeek/statestore/internal/regcheck"
)

// The history's model and its windowed check are package regcheck's,
// which internal/nemesis shares; these names keep this package's code
// reading as before.
type (
	call    = regcheck.Call
	result  = regcheck.Result
	checker = regcheck.Checker
	origin  = regcheck.Origin
	// Linearizability is the outcome of the history check
	// (regcheck.Linearizability).
	Linearizability = regcheck.Linearizability
)

const (
	opGet        = regcheck.Get
	opPut        = regcheck.Put
	opDel        = regcheck.Del
	codeOK       = regcheck.OK
	codeNotFound = regcheck.NotFound
	codeConflict = regcheck.Conflict
	blind        = regcheck.Blind
)

// newChecker is the run's history checker, its messages naming cycles
// and reopens.
func newChecker(timeout time.Duration) *checker {
	return regcheck.NewChecker(timeout)
}
