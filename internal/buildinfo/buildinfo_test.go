package buildinfo_test

import (
	"runtime/debug"
	"testing"

	"github.com/keeppeek/statestore/internal/buildinfo"
)

func TestFromFillsWhatTheBuildDidNotRecord(t *testing.T) {
	t.Parallel()
	stamped := &debug.BuildInfo{Main: debug.Module{Path: "github.com/keeppeek/statestore", Version: "v1.2.3"},
		Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "fc5b03c"}, {Key: "vcs.modified", Value: "true"}, {Key: "GOOS", Value: "linux"}}}
	cases := []struct {
		name string
		bi   *debug.BuildInfo
		ok   bool
		want string
	}{
		{"stamped", stamped, true, "github.com/keeppeek/statestore v1.2.3 revision=fc5b03c modified=true"},
		{"no VCS stamp", &debug.BuildInfo{Main: debug.Module{Path: "github.com/keeppeek/statestore", Version: "(devel)"}}, true,
			"github.com/keeppeek/statestore (devel) revision=unknown modified=unknown"},
		{"empty main module", &debug.BuildInfo{}, true, "unknown (devel) revision=unknown modified=unknown"},
		{"empty VCS values", &debug.BuildInfo{Main: debug.Module{Path: "m"}, Settings: []debug.BuildSetting{{Key: "vcs.revision"}, {Key: "vcs.modified"}}}, true,
			"m (devel) revision=unknown modified=unknown"},
		{"no build information", nil, false, "unknown (devel) revision=unknown modified=unknown"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			if got := buildinfo.From(c.bi, c.ok).String(); got != c.want {
				t.Errorf("From = %q, want %q", got, c.want)
			}
		})
	}
}

// The test binary is built from this module, so Read names it.
func TestReadNamesThisModule(t *testing.T) {
	t.Parallel()
	if got := buildinfo.Read(); got.Path != "github.com/keeppeek/statestore" {
		t.Errorf("Read().Path = %q, want the module path (%+v)", got.Path, got)
	}
}
