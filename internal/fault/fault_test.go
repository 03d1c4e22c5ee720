package fault

import (
	"errors"
	"sync"
	"testing"
)

// seams are the three seams, each as its setter and its runner.
var seams = []struct {
	name string
	set  func(h *Hooks, fn SyncHook) func()
	run  func(h *Hooks, path string) error
}{
	{"Sync", (*Hooks).SetSync, (*Hooks).Sync},
	{"PrewriteSync", (*Hooks).SetPrewriteSync, (*Hooks).PrewriteSync},
	{"DiskSync", (*Hooks).SetDiskSync, (*Hooks).DiskSync},
}

var errA, errB = errors.New("a"), errors.New("b")

func fail(err error) SyncHook { return func(string) error { return err } }

// TestHooksInstallAndRestore: a hook runs with the path until its restore
// function runs, which brings back the hook it replaced (nested restores
// unwind in order); a nil or zero Hooks, and a nil hook, inject nothing.
func TestHooksInstallAndRestore(t *testing.T) {
	t.Parallel()
	for _, s := range seams {
		t.Run(s.name, func(t *testing.T) {
			t.Parallel()
			if err := s.run(nil, "p"); err != nil {
				t.Fatalf("nil Hooks: %v", err)
			}
			h := &Hooks{}
			if err := s.run(h, "p"); err != nil {
				t.Fatalf("zero Hooks: %v", err)
			}
			var seen string
			restoreA := s.set(h, func(path string) error { seen = path; return errA })
			if err := s.run(h, "/x/y"); !errors.Is(err, errA) || seen != "/x/y" {
				t.Fatalf("installed hook: %v, saw %q; want errA and /x/y", err, seen)
			}
			restoreB := s.set(h, fail(errB))
			if err := s.run(h, "p"); !errors.Is(err, errB) {
				t.Fatalf("replacing hook: %v, want errB", err)
			}
			restoreNil := s.set(h, nil)
			if err := s.run(h, "p"); err != nil {
				t.Fatalf("nil hook installed: %v", err)
			}
			restoreNil()
			if err := s.run(h, "p"); !errors.Is(err, errB) {
				t.Fatalf("after removing the nil hook: %v, want errB back", err)
			}
			restoreB()
			if err := s.run(h, "p"); !errors.Is(err, errA) {
				t.Fatalf("after the second restore: %v, want errA back", err)
			}
			restoreA()
			if err := s.run(h, "p"); err != nil {
				t.Fatalf("after every restore: %v", err)
			}
		})
	}
}

// TestHooksAreIndependent: a hook fails only its own seam of its own
// Hooks, so tests that inject failures into their own stores never see
// each other's.
func TestHooksAreIndependent(t *testing.T) {
	t.Parallel()
	for i, s := range seams {
		t.Run(s.name, func(t *testing.T) {
			t.Parallel()
			mine, other := &Hooks{}, &Hooks{}
			defer s.set(mine, fail(errA))()
			for j, o := range seams {
				if err := o.run(other, "p"); err != nil {
					t.Errorf("another Hooks' %s: %v", o.name, err)
				}
				if err := o.run(mine, "p"); (err != nil) != (i == j) {
					t.Errorf("%s of the Hooks with only %s set: %v", o.name, s.name, err)
				}
			}
		})
	}
}

// TestHooksSetWhileRunning: installing and restoring hooks while other
// goroutines run them is race-free (go test -race), and a runner sees
// either hook, never anything else.
func TestHooksSetWhileRunning(t *testing.T) {
	t.Parallel()
	h := &Hooks{}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				for _, s := range seams {
					if err := s.run(h, "p"); err != nil && !errors.Is(err, errA) {
						t.Errorf("%s returned %v, from no hook installed", s.name, err)
						return
					}
				}
			}
		})
	}
	for range 1000 {
		for _, s := range seams {
			s.set(h, fail(errA))()
		}
	}
	close(stop)
	wg.Wait()
}

// TestStallNextSync: the first sync after the call blocks until release,
// the next one does not, and restore puts the earlier hook back.
func TestStallNextSync(t *testing.T) {
	t.Parallel()
	h := &Hooks{}
	boom := errors.New("boom")
	h.SetSync(func(string) error { return boom })
	entered, release, restore := h.StallNextSync()
	done := make(chan error, 1)
	go func() { done <- h.Sync("a") }()
	<-entered
	select {
	case err := <-done:
		t.Fatalf("the stalled sync returned %v before release", err)
	default:
	}
	release()
	if err := <-done; err != nil {
		t.Fatalf("the stalled sync returned %v, want nil", err)
	}
	if err := h.Sync("b"); err != nil {
		t.Fatalf("a later sync returned %v, want nil (no second stall)", err)
	}
	release()
	restore()
	if err := h.Sync("c"); !errors.Is(err, boom) {
		t.Fatalf("after restore Sync returned %v, want the earlier hook's error", err)
	}
}
