package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/schema"
)

const settingsNS = "group/living-room"

// settingsStore is a store with a config.toml declaring settingsNS, two
// settings entries (one deleted again, so the counter is ahead of the
// entries) and journal records in other namespaces. Closed on return.
func settingsStore(t *testing.T) (*testStore, string) {
	t.Helper()
	config := filepath.Join(t.TempDir(), "config.toml")
	os.WriteFile(config, []byte("# media server\n[server]\nx = 1\n\n[state_store]\nnamespaces = ['"+settingsNS+"']\n"), 0o644)
	ts := newTestStore(t, func(o *statestore.Options) { o.Settings = config })
	ts.fill(10)
	for _, key := range []string{"layout", "audio"} {
		if _, err := ts.s.Put(ctx, admin, statestore.PutRequest{Namespace: settingsNS, Key: key, Schema: schema.MediaIntentV1, Document: doc(7)}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := ts.s.Delete(ctx, admin, statestore.DeleteRequest{Namespace: settingsNS, Key: "audio"}); err != nil {
		t.Fatal(err)
	}
	ts.close()
	return ts, config
}

func TestSettingsStatShowsSettingsNamespaces(t *testing.T) {
	t.Parallel()
	ts, config := settingsStore(t)
	var st statDoc
	code, errs := kpJSON(t, &st, "stat", "--dir", ts.dir, "--config", config)
	if code != exitOK {
		t.Fatalf("stat: exit %d: %s", code, errs)
	}
	if st.Settings == nil || len(st.Settings.Namespaces) != 1 {
		t.Fatalf("stat settings %+v", st.Settings)
	}
	if n := st.Settings.Namespaces[0]; n.Namespace != settingsNS || n.Backing != "settings" || n.Revision != 3 || n.Entries != 1 || n.Bytes != int64(len(doc(7))) {
		t.Fatalf("settings namespace %+v", n)
	}
	// The journal totals do not count it.
	if st.Totals.Entries > 10 {
		t.Fatalf("journal totals %+v include settings entries", st.Totals)
	}
	code, out, _ := kp(t, "stat", "--dir", ts.dir, "--config", config)
	if code != exitOK || !strings.Contains(out, "settings-backed namespaces") || !strings.Contains(out, settingsNS+"  settings") {
		t.Fatalf("stat table (exit %d):\n%s", code, out)
	}
	// Without --config nothing about settings is claimed.
	if _, out, _ := kp(t, "stat", "--dir", ts.dir); strings.Contains(out, "settings") {
		t.Fatalf("stat without --config mentions settings:\n%s", out)
	}
}

func TestSettingsDumpShowsSettingsEntries(t *testing.T) {
	t.Parallel()
	ts, config := settingsStore(t)
	var d struct {
		Records  []dumpRecord `json:"records"`
		Settings settingsDoc  `json:"settings"`
	}
	code, errs := kpJSON(t, &d, "dump", "--dir", ts.dir, "--config", config, "--documents")
	if code != exitOK {
		t.Fatalf("dump: exit %d: %s", code, errs)
	}
	for _, r := range d.Records {
		if r.Namespace == settingsNS {
			t.Fatalf("journal holds a settings record %+v", r)
		}
	}
	if len(d.Settings.Entries) != 1 {
		t.Fatalf("settings entries %+v", d.Settings.Entries)
	}
	if e := d.Settings.Entries[0]; e.Backing != "settings" || e.Key != "layout" || e.Revision != 1 || string(e.Document) != string(doc(7)) {
		t.Fatalf("settings entry %+v", e)
	}
	code, out, _ := kp(t, "dump", "--dir", ts.dir, "--config", config)
	if code != exitOK || !strings.Contains(out, "settings  "+settingsNS+"  layout") {
		t.Fatalf("dump table (exit %d):\n%s", code, out)
	}
}

func TestSettingsBadConfigIsAProblem(t *testing.T) {
	t.Parallel()
	ts, config := settingsStore(t)
	raw, _ := os.ReadFile(config)
	os.WriteFile(config, []byte(strings.Replace(string(raw), "owner = 'ops'", "owner = ''", 1)), 0o644)
	for _, cmd := range []string{"stat", "dump"} {
		code, out, errs := kp(t, cmd, "--dir", ts.dir, "--config", config)
		if code != exitProblems || !strings.Contains(out+errs, "entries[0]") {
			t.Fatalf("%s with a bad config.toml: exit %d\n%s\n%s", cmd, code, out, errs)
		}
	}
}
