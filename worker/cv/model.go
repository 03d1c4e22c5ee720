package cv

import (
	"fmt"
	"sync"
)

// Model is a computer-vision model the worker runs for one profile.
// Analyze is called for every frame of every analysis of that profile,
// from those analyses' goroutines at once, so it must be safe for
// concurrent use. What it returns is only a candidate: the worker
// validates each event built from it before anything is published.
type Model interface {
	Analyze(f Frame) []Detection
}

// Detection is one thing a model saw in a frame.
type Detection struct {
	Label      string
	Confidence float64 // 0 to 1
	// Box is where, normalised to the frame (X, Y, W, H in [0, 1]); nil
	// for a whole-frame classification.
	Box *Box
}

// Box is a region of a frame, normalised to its width and height.
type Box struct {
	X float64 `json:"x"`
	Y float64 `json:"y"`
	W float64 `json:"w"`
	H float64 `json:"h"`
}

// SimModel is a deterministic simulated model: one detection of Label
// with Confidence on every frame whose sequence number is a multiple of
// Every, in a fixed box, and nothing on the others. The same frames give
// the same detections on every run, so tests count events exactly.
// Corrupt makes it misbehave once, as a buggy model would.
type SimModel struct {
	every      uint64
	label      string
	confidence float64

	mu      sync.Mutex
	corrupt []func(*Detection) // applied to the next detections, in order
}

// NewSimModel returns a model detecting label with confidence on every
// every-th frame.
func NewSimModel(every uint64, label string, confidence float64) (*SimModel, error) {
	if every == 0 {
		return nil, fmt.Errorf("cv: sim model: every must be at least 1")
	}
	return &SimModel{every: every, label: label, confidence: confidence}, nil
}

// simBox is where SimModel always sees its label.
var simBox = Box{X: 0.25, Y: 0.25, W: 0.5, H: 0.5}

// Analyze implements Model.
func (m *SimModel) Analyze(f Frame) []Detection {
	if f.Seq == 0 || f.Seq%m.every != 0 {
		return nil
	}
	b := simBox
	d := Detection{Label: m.label, Confidence: m.confidence, Box: &b}
	m.mu.Lock()
	if len(m.corrupt) > 0 {
		m.corrupt[0](&d)
		m.corrupt = m.corrupt[1:]
	}
	m.mu.Unlock()
	return []Detection{d}
}

// Corrupt passes the next detection through f before it is returned: a
// confidence above 1, a label carrying image data, whatever a broken model
// might produce. Each call affects one detection.
func (m *SimModel) Corrupt(f func(*Detection)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.corrupt = append(m.corrupt, f)
}
