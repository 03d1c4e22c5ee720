package schema

// scratch is the reusable memory of one check-mode walk: the buffer for
// strings with escapes and the set of member names seen, so that checking
// a document allocates nothing.
type scratch struct {
	buf   []byte
	slots []keySlot // open addressing, len a power of two
	gen   uint32    // slots of other generations are empty
	count int       // keys in slots of this generation
}

// maxPooledSlots bounds the name set a pooled scratch keeps (1,024 names,
// 32 KiB); documents within the store's size limit rarely need more.
const maxPooledSlots = 2048

type keySlot struct {
	h   uint64
	gen uint32
}

// reset empties the set in O(1) by moving to the next generation.
func (s *scratch) reset() {
	s.gen++
	s.count = 0
	if s.gen == 0 || s.slots == nil {
		s.gen = 1
		if s.slots == nil {
			s.slots = make([]keySlot, 512)
		} else {
			clear(s.slots)
		}
	}
}

// trim drops memory that one huge document needed, before s goes back to
// a pool.
func (s *scratch) trim() {
	if len(s.slots) > maxPooledSlots {
		s.slots = nil
	}
}

// insert adds h to the set and reports whether it was new. A false answer
// may also be a hash collision; either way the caller is not sure.
func (s *scratch) insert(h uint64) bool {
	if 2*(s.count+1) > len(s.slots) {
		s.grow()
	}
	mask := uint64(len(s.slots) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		sl := &s.slots[i]
		if sl.gen != s.gen {
			*sl = keySlot{h: h, gen: s.gen}
			s.count++
			return true
		}
		if sl.h == h {
			return false
		}
	}
}

func (s *scratch) grow() {
	old := s.slots
	s.slots = make([]keySlot, 2*len(old))
	mask := uint64(len(s.slots) - 1)
	for _, sl := range old {
		if sl.gen != s.gen {
			continue
		}
		i := sl.h & mask
		for s.slots[i].gen == s.gen {
			i = (i + 1) & mask
		}
		s.slots[i] = sl
	}
}

// keyHash hashes a member name for the set of names seen. Equal names hash
// equally; unequal ones may collide, which only makes the caller unsure.
// It is maphash's job done inline, eight bytes at a time: names are short,
// and a call per name showed in profiles. Up to 24 bytes there is no loop,
// whose end would be mispredicted as often as not.
func keyHash(k string, seed uint64) uint64 {
	h := seed ^ uint64(len(k))*0x9e3779b97f4a7c15
	switch n := len(k); {
	case n > 24:
		for s := k; len(s) > 8; s = s[8:] {
			h = hashMix(h ^ load64(s))
		}
		h ^= load64(k[n-8:]) // overlapping the word before if need be
	case n >= 8:
		// Three words that together cover every byte.
		h = hashMix(hashMix(h^load64(k))^load64(k[(n-8)/2:])) ^ load64(k[n-8:])
	case n >= 4:
		s := k[n-4:]
		h ^= uint64(k[0]) | uint64(k[1])<<8 | uint64(k[2])<<16 | uint64(k[3])<<24 |
			uint64(s[0])<<32 | uint64(s[1])<<40 | uint64(s[2])<<48 | uint64(s[3])<<56
	case n > 0:
		h ^= uint64(k[0]) | uint64(k[n/2])<<8 | uint64(k[n-1])<<16
	}
	return hashMix(hashMix(h))
}

// hashMix spreads every bit of h over the higher ones and folds the high
// bits back down (splitmix64's multiplier), so that the low bits the name
// set indexes by depend on the whole name.
func hashMix(h uint64) uint64 {
	h *= 0xbf58476d1ce4e5b9
	return h ^ h>>31
}
