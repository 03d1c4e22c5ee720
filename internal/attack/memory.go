package attack

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/keeppeek/statestore"
	"github.com/keeppeek/statestore/internal/testdoc"
	"github.com/keeppeek/statestore/quota"
	"github.com/keeppeek/statestore/schema"
	pb "github.com/keeppeek/statestore/wire/proto/keeppeek/statestore/v1"
)

func configureStalled(c *Config, sc Scale) {
	c.MaxQueuedBytes = sc.MaxQueuedBytes
	c.SendBuffer = sc.SendBuffer
	if sc.Memory {
		c.MemoryLimit = sc.MemoryLimit
	}
	c.MaxSessionsPerPrincipal = sc.StalledSessions + 1
}

// stalledDocBytes is the document the stalled sessions ask for: issue 31's
// 16 KB, under the 16,384-byte document bound.
const stalledDocBytes = 16000

// answerWorstCase is what the dispatcher reserves for one answer (a
// document at the bound and its names, plus the envelope): the budget may be
// exceeded by one per session.
var answerWorstCase = int64(4<<10 + quota.DefaultDocumentBytes + quota.DefaultNamespaceBytes + quota.DefaultKeyBytes + quota.SchemaNameBytes + quota.OwnerBytes)

// stalledSessions is issue 31's second attack: sessions that send GetState
// for a 16 KB document and never read. The bytes queued to clients over
// every session stay within the budget (plus one answer per session and
// the watch closures), and the stalled session's watch is closed
// BUFFER_OVERFLOW while it does not read.
func stalledSessions(ctx context.Context, e *Env) error {
	sc := e.Scale
	admin := e.S.Principal(Admin)
	doc := testdoc.MediaIntent(stalledDocBytes, 1)
	if _, err := e.S.Store.Put(ctx, admin, statestore.PutRequest{Namespace: "user/" + Alice, Key: "doc", Schema: schema.MediaIntentV1, Document: doc}); err != nil {
		return err
	}
	if asked := int64(sc.StalledSessions) * int64(sc.StalledRequests) * stalledDocBytes; asked < 4*sc.MaxQueuedBytes {
		return fmt.Errorf("the attack asks for %d bytes, under four times the %d-byte budget: it would prove nothing", asked, sc.MaxQueuedBytes)
	}
	var before map[string]int64
	if sc.Memory {
		runtime.GC()
		// An earlier attack's peak must not stand for this one's.
		if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
			return fmt.Errorf("resetting VmHWM: %w", err)
		}
		var err error
		if before, err = procStatus("VmRSS", "VmHWM"); err != nil {
			return err
		}
	}
	conns := make([]*RawConn, sc.StalledSessions)
	defer func() {
		for _, c := range conns {
			if c != nil {
				c.Close()
			}
		}
	}()
	for i := range conns {
		// A small receive buffer: the server feels the stall after a few
		// kilobytes, not after the kernel's autotuned megabytes.
		c, err := DialRaw(ctx, e.S.Addr, 4096)
		if err != nil {
			return err
		}
		conns[i] = c
		if err := c.Upgrade("127.0.0.1", UpgradeHeader(e.S.Token(Alice))); err != nil {
			return fmt.Errorf("stalled session %d: %w", i, err)
		}
	}
	// Session 0 also watches: its updates find no room, or pass the
	// per-watch bound unacknowledged; either way BUFFER_OVERFLOW.
	if err := conns[0].Send(WatchMsg(1, "w", "user/"+Alice, "w/")); err != nil {
		return err
	}
	var maxQueued atomic.Int64
	saturated := make(chan struct{})
	sampled := make(chan struct{})
	stop := make(chan struct{})
	go func() {
		defer close(sampled)
		sat := saturated
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for {
			b, _ := e.S.Dispatcher().QueuedBytes()
			if b > maxQueued.Load() {
				maxQueued.Store(b)
			}
			if b >= sc.MaxQueuedBytes/2 && sat != nil {
				close(sat)
				sat = nil
			}
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()
	defer func() {
		close(stop)
		<-sampled
	}()
	began := time.Now()
	for _, c := range conns {
		for id := uint64(2); id < uint64(2+sc.StalledRequests); id++ {
			// Small requests: the kernel's buffers take them all, while
			// the server stops reading a session over its share.
			if err := c.Send(GetMsg(id, "user/"+Alice, "doc")); err != nil {
				return err
			}
		}
	}
	for i := range 2 * quota.Default().MaxUnackedUpdates {
		if _, err := e.S.Store.Put(ctx, admin, statestore.PutRequest{Namespace: "user/" + Alice, Key: "w/k", Schema: schema.MediaIntentV1,
			Document: testdoc.MediaIntent(300, i)}); err != nil {
			return err
		}
	}
	select {
	case <-saturated:
	case <-time.After(HangGuard):
		return fmt.Errorf("the stalled sessions never filled half the %d-byte budget (%d bytes at most): the attack did not stall them", sc.MaxQueuedBytes, maxQueued.Load())
	}
	e.Record("half the budget queued", "%v after the first request", time.Since(began).Round(time.Millisecond))
	bound := sc.MaxQueuedBytes + int64(sc.StalledSessions+1)*answerWorstCase + int64(quota.DefaultSnapshotBytes)
	e.Record("stalled sessions", "%d × %d GetState of %d bytes (%s asked)", sc.StalledSessions, sc.StalledRequests, stalledDocBytes,
		mb(int64(sc.StalledSessions)*int64(sc.StalledRequests)*stalledDocBytes))
	if sc.Memory {
		after, err := procStatus("VmRSS", "VmHWM")
		if err != nil {
			return err
		}
		grew := after["VmHWM"] - before["VmRSS"]
		e.Record("VmHWM", "%s (VmRSS %s before the attack: %s more; both ends in one process, memory limit %s)", mb(after["VmHWM"]),
			mb(before["VmRSS"]), mb(grew), mb(sc.MemoryLimit))
		if grew > sc.MaxQueuedBytes+sc.MemoryHeadroom {
			return fmt.Errorf("resident memory peaked %d bytes over its start, more than the %d-byte budget plus %d", grew, sc.MaxQueuedBytes, sc.MemoryHeadroom)
		}
	}
	// Now session 0 reads: among what was queued, its watch's closure.
	for {
		m, err := conns[0].Recv(HangGuard)
		if err != nil {
			return fmt.Errorf("stalled session 0 reading its queue: %w, want its watch closed BUFFER_OVERFLOW", err)
		}
		if wc := m.GetWatchClosed(); wc != nil {
			if wc.GetWatchId() != "w" || wc.GetReason() != pb.StateStoreWatchCloseReason_STATE_STORE_WATCH_CLOSE_REASON_BUFFER_OVERFLOW {
				return fmt.Errorf("the stalled watch closed %v, want watch w BUFFER_OVERFLOW", wc)
			}
			e.Record("stalled watch", "closed %v: %s", wc.GetReason(), wc.GetMessage())
			// The queue's high-water mark, session 0's draining
			// included.
			e.Record("queued at most", "%s (budget %s, bound with one answer per session %s)", mb(maxQueued.Load()), mb(sc.MaxQueuedBytes), mb(bound))
			if m := maxQueued.Load(); m > bound {
				return fmt.Errorf("%d bytes queued to clients, over the %d-byte budget plus one answer per session (%d)", m, sc.MaxQueuedBytes, bound)
			}
			return nil
		}
	}
}

func configureIdleSessions(c *Config, sc Scale) {
	c.SessionIdleTimeout = sc.SessionIdleTimeout
	c.MessageTimeout = messageTimeout
	c.MaxSessionsPerPrincipal = sc.IdleSessions
}

// messageTimeout bounds a begun message in the idle-sessions attack.
const messageTimeout = 300 * time.Millisecond

// idleSessions: authenticated sessions that send nothing end after the
// session idle timeout (1001 naming it), measured for their memory at the
// full scale; a frame header announcing 2^62 bytes then silence ends its
// session within the message timeout; the same header followed by more
// bytes than the message bound is closed 1009.
func idleSessions(ctx context.Context, e *Env) error {
	sc := e.Scale
	var before map[string]int64
	if sc.Memory {
		runtime.GC()
		var err error
		if before, err = procStatus("VmRSS"); err != nil {
			return err
		}
	}
	base := e.S.Inspector.Transport().Sessions()
	conns := make([]*RawConn, sc.IdleSessions)
	defer func() {
		for _, c := range conns {
			if c != nil {
				c.Close()
			}
		}
	}()
	opened := time.Now()
	upgraded := make([]time.Time, len(conns))
	for i := range conns {
		c, err := DialRaw(ctx, e.S.Addr, 0)
		if err != nil {
			return err
		}
		conns[i] = c
		// Before the handshake: the session's idle clock starts after it.
		upgraded[i] = time.Now()
		if err := c.Upgrade("127.0.0.1", UpgradeHeader(e.S.Token([]string{Alice, Bob}[i%2]))); err != nil {
			return fmt.Errorf("idle session %d: %w", i, err)
		}
	}
	held := e.S.Inspector.Transport().Sessions() - base
	if sc.Memory {
		runtime.GC()
		after, err := procStatus("VmRSS")
		if err != nil {
			return err
		}
		if held != sc.IdleSessions {
			return fmt.Errorf("%d of %d idle sessions open when measured: the %v idle timeout is too short for the scale", held, sc.IdleSessions, sc.SessionIdleTimeout)
		}
		e.Record("idle session memory", "%.1f KB each (VmRSS %s to %s over %d sessions, both ends in one process)",
			float64(after["VmRSS"]-before["VmRSS"])/float64(sc.IdleSessions)/1e3, mb(before["VmRSS"]), mb(after["VmRSS"]), sc.IdleSessions)
	}
	e.Record("idle sessions", "%d opened in %v, %d open at once", sc.IdleSessions, time.Since(opened).Round(time.Millisecond), held)
	errs := make([]error, len(conns))
	var wg sync.WaitGroup
	for i, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cf, err := c.AwaitClosed(2*sc.SessionIdleTimeout+HangGuard, true)
			if d := time.Since(upgraded[i]); err == nil && d < sc.SessionIdleTimeout {
				errs[i] = fmt.Errorf("idle session %d closed %v after its handshake, before the %v idle timeout", i, d, sc.SessionIdleTimeout)
			} else if err != nil {
				errs[i] = fmt.Errorf("idle session %d: %w", i, err)
			} else if cf == nil || cf.Status != StatusGoingAway || !strings.Contains(cf.Reason, "idle for "+sc.SessionIdleTimeout.String()) {
				errs[i] = fmt.Errorf("idle session %d closed with %v, want 1001 naming the %v idle timeout", i, cf, sc.SessionIdleTimeout)
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	e.Record("idle sessions closed", "all %d within %v of the first handshake", sc.IdleSessions, time.Since(opened).Round(time.Millisecond))

	// A header announcing 2^62 bytes, then silence.
	c, err := DialRaw(ctx, e.S.Addr, 0)
	if err != nil {
		return err
	}
	defer c.Close()
	if err := c.Upgrade("127.0.0.1", UpgradeHeader(e.S.Token(Alice))); err != nil {
		return err
	}
	h, _ := FrameHeader(OpBinary, 1<<62)
	if _, err := c.Write(h); err != nil {
		return err
	}
	sent := time.Now()
	cf, err := c.AwaitClosed(messageTimeout+HangGuard, true)
	took := time.Since(sent)
	if err != nil {
		return fmt.Errorf("a 2^62-byte header then silence: %w", err)
	}
	if took < messageTimeout {
		return fmt.Errorf("a 2^62-byte header then silence closed after %v, before the %v message timeout", took, messageTimeout)
	}
	e.Record("2^62 header then silence", "closed after %v (message timeout %v, close %v)", took.Round(time.Millisecond), messageTimeout, cf)

	// The same header, then more than the message bound.
	c2, err := DialRaw(ctx, e.S.Addr, 0)
	if err != nil {
		return err
	}
	defer c2.Close()
	if err := c2.Upgrade("127.0.0.1", UpgradeHeader(e.S.Token(Alice))); err != nil {
		return err
	}
	h, _ = FrameHeader(OpBinary, 1<<62)
	go func() {
		c2.SetWriteDeadline(time.Now().Add(HangGuard))
		if _, err := c2.Write(h); err != nil {
			return
		}
		chunk := make([]byte, 32<<10)
		for range 2 * (defaultMaxMessageBytes / len(chunk)) {
			if _, err := c2.Write(chunk); err != nil {
				return
			}
		}
	}()
	cf, err = c2.AwaitClosed(HangGuard, false)
	if err != nil || cf == nil || cf.Status != StatusMessageTooBig {
		return fmt.Errorf("a 2^62-byte header then its bytes: closed %v (%v), want 1009", cf, err)
	}
	e.Record("2^62 header then bytes", "closed %d %q", cf.Status, cf.Reason)
	return nil
}
